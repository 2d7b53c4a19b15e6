/* SPDX-License-Identifier: Apache-2.0 */
/* metricsauth: who may read the secure metrics endpoint, decided by the API
 * server as controller-runtime's WithAuthenticationAndAuthorization filter
 * does: the request's bearer token goes into a TokenReview
 * (authentication.k8s.io/v1); the user it names, with its uid, groups and
 * extra, into a SubjectAccessReview (authorization.k8s.io/v1) on the
 * non-resource URL of the request (its path, e.g. /metrics) with the
 * request's method in lower case as the verb ("get").
 *
 * Answers: no bearer token, or one the TokenReview does not authenticate:
 * 401; authenticated but not allowed: 403; allowed: 0 (serve). A review
 * the API server does not answer (transport error, 5xx, a malformed body):
 * 500, not cached, logged. Decisions are cached (authcache.h: allowed 60 s,
 * refused 10 s, 256 entries).
 *
 * Threads: the check runs on the HTTP server's threads. The reviews go
 * through the daemon's API client on a kc_api_worker (apiclient.h: any
 * thread, its own curl handle, the client's credentials, token file and
 * exec plugin included), never through the loop: a wedged loop does not
 * block a scrape, and the check touches no loop-owned state. One worker,
 * behind a mutex: reviews of uncached tokens run one at a time, each
 * bounded by timeout_ms.
 *
 * Context: kc_metricsauth_new/free: loop thread (free after the server's
 * threads are joined and before kc_api_close); kc_metricsauth_authorize and
 * the parsers: any thread. Errors: 0 or a negative errno.
 */
#ifndef KC_METRICSAUTH_H
#define KC_METRICSAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "client/apiclient.h"
#include "ops/authcache.h"

typedef struct kc_metricsauth kc_metricsauth;

/* Replaces the two API requests (tests): fills out (200, 401 or 403 with a
 * reason) and returns 0, or returns a negative errno (then 500). */
typedef int (*kc_metricsauth_review_fn)(void *ud, const char *token, const char *verb, const char *path,
                                        kc_authcache_entry *out);

typedef struct kc_metricsauth_options {
  kc_authcache_options cache;
  uint64_t timeout_ms;             /* per review request; 0: 10000 */
  kc_metricsauth_review_fn review; /* NULL: TokenReview + SubjectAccessReview through api */
  void *review_ud;
} kc_metricsauth_options;

/* api may be NULL only with o->review set. */
int kc_metricsauth_new(kc_api *api, const kc_metricsauth_options *o, kc_metricsauth **out);
void kc_metricsauth_free(kc_metricsauth *m);

/* The httpserver's authorize hook (httpserver.h): ud is the kc_metricsauth. */
unsigned kc_metricsauth_authorize(void *ud, const char *authorization, const char *method, const char *path,
                                  char *msg, size_t cap);

/* --- the review documents (exposed for the fuzz target and unit tests) --- */

/* Reads a TokenReview response. Returns 1 when status.authenticated is true
 * (user_fields then holds the SubjectAccessReview spec's user members:
 * "user":...,"uid":...,"groups":[...],"extra":{...}, and name the user
 * name), 0 when not (why gets status.error or "token not authenticated"),
 * -EBADMSG for a body that is not a TokenReview, -ENOMEM. */
int kc_metricsauth_parse_token_review(const char *body, size_t len, kc_buf *user_fields, char *name,
                                      size_t namecap, char *why, size_t whycap);
/* The SubjectAccessReview request for user_fields on (path, verb). */
void kc_metricsauth_sar_body(kc_buf *out, const char *user_fields, const char *verb, const char *path);
/* Reads a SubjectAccessReview response: 1 allowed, 0 not (why gets
 * status.reason when there is one), -EBADMSG, -ENOMEM. */
int kc_metricsauth_parse_sar(const char *body, size_t len, char *why, size_t whycap);

#endif
