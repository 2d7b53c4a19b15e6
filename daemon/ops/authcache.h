/* SPDX-License-Identifier: Apache-2.0 */
/* authcache: remembered access decisions of the secure metrics endpoint
 * (metricsauth.h), so a scraper's every request does not cost a
 * TokenReview and a SubjectAccessReview.
 *
 * Keyed by a 32-byte digest of (token, verb, path): the token itself is not
 * kept. A decision is an HTTP status (200 allowed, 401, 403) with a short
 * reason; allowed ones live allow_ttl_ms, refused ones deny_ttl_ms (a
 * granted right shows up within that time). Bounded: at most max_entries;
 * a full cache drops an expired entry, else the one that expires first.
 * Lookups are a linear scan (the bound is small: a metrics endpoint has a
 * handful of scrapers).
 *
 * Context: any thread (one mutex); time from kc_clock_now_ms (the manual
 * clock drives expiry in tests). Errors: 0 or a negative errno.
 */
#ifndef KC_AUTHCACHE_H
#define KC_AUTHCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KC_AUTHCACHE_KEY_LEN 32
#define KC_AUTHCACHE_REASON_MAX 160

typedef struct kc_authcache kc_authcache;

typedef struct kc_authcache_options {
  uint64_t allow_ttl_ms; /* 0: 60000 */
  uint64_t deny_ttl_ms;  /* 0: 10000 */
  size_t max_entries;    /* 0: 256 */
} kc_authcache_options;

typedef struct kc_authcache_entry {
  unsigned status; /* 200, 401, 403 */
  char reason[KC_AUTHCACHE_REASON_MAX];
} kc_authcache_entry;

int kc_authcache_new(const kc_authcache_options *o, kc_authcache **out);
void kc_authcache_free(kc_authcache *c);

/* The digest a (token, verb, path) is stored under. */
void kc_authcache_key(const char *token, const char *verb, const char *path,
                      unsigned char key[KC_AUTHCACHE_KEY_LEN]);
/* true and *out when an unexpired decision is held for key. */
bool kc_authcache_get(kc_authcache *c, const unsigned char key[KC_AUTHCACHE_KEY_LEN], kc_authcache_entry *out);
/* Stores (or replaces) the decision for key; its TTL follows its status. */
void kc_authcache_put(kc_authcache *c, const unsigned char key[KC_AUTHCACHE_KEY_LEN],
                      const kc_authcache_entry *e);
/* Entries held, expired ones included. */
size_t kc_authcache_size(kc_authcache *c);

#endif
