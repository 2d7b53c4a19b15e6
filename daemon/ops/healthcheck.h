/* SPDX-License-Identifier: Apache-2.0 */
/* healthcheck: the named readiness checks behind /readyz (a registry that
 * components add checks to) and the kube-apiserver style text of the probe
 * endpoints /livez, /readyz and /healthz (httpserver.h serves them).
 *
 * A check is a function run on the loop thread when a probe asks; it
 * reports one result under its registered name, or several under
 * "NAME/SUB" (one per controller: "controller/teams"). A check that reports
 * nothing counts as passing. Names are [a-z0-9._-] words joined by '/', so
 * each result has its path: /readyz/controller/teams.
 *
 * Rendering (kc_health_render), for GET /PROBE[/CHECK][?verbose][&exclude=NAME...]:
 *  - /PROBE, every check passing, not verbose: "ok";
 *  - /PROBE?verbose, or any check failing: one line per result,
 *    "[+]NAME ok", "[-]NAME failed: REASON", "[+]NAME excluded: ok", then a
 *    warning naming exclude values that matched nothing, then "PROBE check
 *    passed" or "PROBE check failed". Reasons are shown (the endpoints serve
 *    operators on a probe port, not the public);
 *  - exclude=NAME skips NAME and every NAME/SUB (exclude=controller skips
 *    every controller); repeatable;
 *  - /PROBE/CHECK: "ok", or the reason with the failure status; 404 for a
 *    name that is not a result.
 *
 * Context: kc_health_new/free/add/remove/run: loop thread. Results and
 * kc_health_render: any thread (plain data).
 * Errors: 0 or a negative errno (-EINVAL bad name, -EEXIST name taken,
 * -ENOENT not registered, -ENOMEM).
 * Ownership: add copies the name; ud is borrowed until remove or free.
 */
#ifndef KC_HEALTHCHECK_H
#define KC_HEALTHCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

#define KC_HEALTH_NAME_MAX 128
#define KC_HEALTH_WHY_MAX 600

typedef struct kc_health_result {
  char name[KC_HEALTH_NAME_MAX];
  bool ok;
  char why[KC_HEALTH_WHY_MAX]; /* "" when ok */
} kc_health_result;

typedef struct kc_health_results {
  kc_health_result *v;
  size_t n, cap;
  int err;             /* -ENOMEM once a result could not be recorded */
  const char *current; /* the check being run (kc_health_run sets it) */
} kc_health_results;

/* A check's function: reports through kc_health_report. Loop thread. */
typedef void (*kc_health_fn)(void *ud, kc_health_results *out);

/* Records a result of the running check: named by the check (sub NULL) or
 * "CHECK/SUB". ok false needs a reason (printf format; NULL: "failed"). */
__attribute__((format(printf, 4, 5))) void kc_health_report(kc_health_results *out, const char *sub,
                                                             bool ok, const char *fmt, ...);
/* Appends a result named `name` as is (the server's own ping). */
void kc_health_append(kc_health_results *out, const char *name, bool ok, const char *why);
void kc_health_results_reset(kc_health_results *r);
void kc_health_results_free(kc_health_results *r);
/* dst = src (dst's memory reused). 0 or -ENOMEM. */
int kc_health_results_copy(kc_health_results *dst, const kc_health_results *src);
/* true when every result passes. */
bool kc_health_results_ok(const kc_health_results *r);

typedef struct kc_health kc_health;

int kc_health_new(kc_health **out);
void kc_health_free(kc_health *h); /* NULL: no-op */
/* Adds a check, run after those added before it. */
int kc_health_add(kc_health *h, const char *name, kc_health_fn fn, void *ud);
int kc_health_remove(kc_health *h, const char *name);
/* Appends every check's results to out (not reset first). 0 or -ENOMEM. */
int kc_health_run(const kc_health *h, kc_health_results *out);
/* A valid check name (see above)? */
bool kc_health_name_ok(const char *name);

typedef struct kc_health_query {
  bool verbose;
  const char *const *exclude; /* exclude= values */
  size_t nexclude;
} kc_health_query;

/* Renders the answer to /PROBE (check NULL) or /PROBE/CHECK into out (reset
 * first) and returns its HTTP status: 200, fail_status, or 404. */
unsigned kc_health_render(const kc_health_results *r, const char *probe, const char *check,
                          const kc_health_query *q, unsigned fail_status, kc_buf *out);

#endif
