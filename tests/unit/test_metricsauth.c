/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/ops/authcache and daemon/ops/metricsauth: the
 * decision cache (TTLs by outcome on the manual clock, the size bound and
 * what it drops, keys), the filter's answers (401 without a bearer token,
 * 403, allowed, 500 on a failed review, which is not cached) with a fake
 * review, the same from several threads at once (run under TSan), and the
 * TokenReview / SubjectAccessReview documents. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/clock.h"
#include "ops/authcache.h"
#include "ops/metricsauth.h"
#include "testutil.h"

#define MS 1000000ull

static void key(const char *token, unsigned char k[KC_AUTHCACHE_KEY_LEN]) {
  kc_authcache_key(token, "get", "/metrics", k);
}

static void test_cache_ttls(void **state) {
  (void)state;
  kc_clock_set_manual(1000 * MS);
  kc_authcache *c;
  kc_authcache_options o = {.allow_ttl_ms = 60000, .deny_ttl_ms = 10000, .max_entries = 8};
  assert_int_equal(kc_authcache_new(&o, &c), 0);
  unsigned char a[KC_AUTHCACHE_KEY_LEN], b[KC_AUTHCACHE_KEY_LEN], x[KC_AUTHCACHE_KEY_LEN];
  key("alice", a);
  key("bob", b);
  kc_authcache_entry e = {.status = 200}, got;
  snprintf(e.reason, sizeof e.reason, "user alice");
  kc_authcache_put(c, a, &e);
  e.status = 403;
  snprintf(e.reason, sizeof e.reason, "user bob may not");
  kc_authcache_put(c, b, &e);
  assert_true(kc_authcache_get(c, a, &got));
  assert_int_equal(got.status, 200);
  assert_string_equal(got.reason, "user alice");
  assert_true(kc_authcache_get(c, b, &got));
  assert_int_equal(got.status, 403);
  /* The key covers the verb and the path too. */
  kc_authcache_key("alice", "get", "/debug/informers", x);
  assert_false(kc_authcache_get(c, x, &got));
  kc_authcache_key("alice", "head", "/metrics", x);
  assert_false(kc_authcache_get(c, x, &got));
  /* A refusal lives deny_ttl, an allowance allow_ttl. */
  kc_clock_advance(9999 * MS);
  assert_true(kc_authcache_get(c, b, &got));
  kc_clock_advance(1 * MS);
  assert_false(kc_authcache_get(c, b, &got));
  assert_true(kc_authcache_get(c, a, &got));
  kc_clock_advance(50000 * MS);
  assert_false(kc_authcache_get(c, a, &got));
  /* A new decision replaces the old one in place. */
  e.status = 200;
  kc_authcache_put(c, b, &e);
  assert_true(kc_authcache_get(c, b, &got));
  assert_int_equal(got.status, 200);
  assert_int_equal(kc_authcache_size(c), 2);
  kc_authcache_free(c);
  kc_clock_set_real();
}

static void test_cache_bound(void **state) {
  (void)state;
  kc_clock_set_manual(1000 * MS);
  kc_authcache *c;
  kc_authcache_options o = {.allow_ttl_ms = 60000, .deny_ttl_ms = 10000, .max_entries = 4};
  assert_int_equal(kc_authcache_new(&o, &c), 0);
  unsigned char k[8][KC_AUTHCACHE_KEY_LEN];
  char tok[16];
  for (int i = 0; i < 8; i++) {
    snprintf(tok, sizeof tok, "t%d", i);
    key(tok, k[i]);
  }
  kc_authcache_entry allow = {.status = 200}, deny = {.status = 401}, got;
  /* t0 allowed (expires at +60 s), t1 refused (+10 s), t2, t3 allowed later. */
  kc_authcache_put(c, k[0], &allow);
  kc_authcache_put(c, k[1], &deny);
  kc_clock_advance(1000 * MS);
  kc_authcache_put(c, k[2], &allow);
  kc_authcache_put(c, k[3], &allow);
  assert_int_equal(kc_authcache_size(c), 4);
  /* Full, nothing expired: the one that expires first (t1) goes. */
  kc_authcache_put(c, k[4], &allow);
  assert_int_equal(kc_authcache_size(c), 4);
  assert_false(kc_authcache_get(c, k[1], &got));
  for (int i = 0; i < 5; i++)
    if (i != 1) assert_true(kc_authcache_get(c, k[i], &got));
  /* t0 expired: it goes before any live one. */
  kc_clock_advance(59500 * MS);
  kc_authcache_put(c, k[5], &deny);
  assert_int_equal(kc_authcache_size(c), 4);
  assert_false(kc_authcache_get(c, k[0], &got));
  for (int i = 2; i < 6; i++) assert_true(kc_authcache_get(c, k[i], &got));
  kc_authcache_free(c);
  kc_clock_set_real();
}

/* --- the filter with a fake review ---------------------------------------- */

typedef struct fake {
  atomic_int calls;
  atomic_bool fail;
} fake;

/* "reader": allowed on /metrics only; "nobody": authenticated, refused;
 * anything else: not authenticated. */
static int fake_review(void *ud, const char *token, const char *verb, const char *path, kc_authcache_entry *out) {
  fake *f = ud;
  atomic_fetch_add(&f->calls, 1);
  if (atomic_load(&f->fail)) return -EIO;
  if (strcmp(token, "reader") == 0 && strcmp(path, "/metrics") == 0 && strcmp(verb, "get") == 0) {
    out->status = 200;
    snprintf(out->reason, sizeof out->reason, "user reader");
  } else if (strcmp(token, "reader") == 0 || strcmp(token, "nobody") == 0) {
    out->status = 403;
    snprintf(out->reason, sizeof out->reason, "user \"%s\" may not %s %s", token, verb, path);
  } else {
    out->status = 401;
    snprintf(out->reason, sizeof out->reason, "token not authenticated");
  }
  return 0;
}

static unsigned check(kc_metricsauth *m, const char *authz, const char *method, const char *path, char *msg) {
  return kc_metricsauth_authorize(m, authz, method, path, msg, 256);
}

static void test_filter(void **state) {
  (void)state;
  kc_clock_set_manual(1000 * MS);
  fake f = {0};
  kc_metricsauth_options o = {.review = fake_review, .review_ud = &f};
  kc_metricsauth *m;
  assert_int_equal(kc_metricsauth_new(NULL, &o, &m), 0);
  char msg[256];
  /* No bearer token: 401 without asking the API server. */
  assert_int_equal(check(m, NULL, "GET", "/metrics", msg), 401);
  assert_string_equal(msg, "Unauthorized: a bearer token is required");
  assert_int_equal(check(m, "Basic YWxpY2U6eA==", "GET", "/metrics", msg), 401);
  assert_int_equal(check(m, "Bearer ", "GET", "/metrics", msg), 401);
  assert_int_equal(atomic_load(&f.calls), 0);

  assert_int_equal(check(m, "Bearer reader", "GET", "/metrics", msg), 0);
  assert_int_equal(check(m, "bearer reader", "GET", "/metrics", msg), 0); /* the scheme is case-blind */
  assert_int_equal(atomic_load(&f.calls), 1);                             /* cached */
  assert_int_equal(check(m, "Bearer reader", "GET", "/debug/informers", msg), 403);
  assert_string_equal(msg, "Forbidden: user \"reader\" may not get /debug/informers");
  assert_int_equal(check(m, "Bearer nobody", "HEAD", "/metrics", msg), 403);
  assert_string_equal(msg, "Forbidden: user \"nobody\" may not head /metrics");
  assert_int_equal(check(m, "Bearer forged", "GET", "/metrics", msg), 401);
  assert_string_equal(msg, "Unauthorized: token not authenticated");
  assert_int_equal(atomic_load(&f.calls), 4);
  assert_int_equal(check(m, "Bearer forged", "GET", "/metrics", msg), 401);
  assert_int_equal(atomic_load(&f.calls), 4);

  /* A review that fails: 500, not cached; the next request asks again. */
  atomic_store(&f.fail, true);
  tu_stderr_begin();
  assert_int_equal(check(m, "Bearer other", "GET", "/metrics", msg), 500);
  assert_int_equal(check(m, "Bearer other", "GET", "/metrics", msg), 500);
  free(tu_stderr_end());
  assert_int_equal(atomic_load(&f.calls), 6);
  /* Cached decisions still answer while the API server does not. */
  assert_int_equal(check(m, "Bearer reader", "GET", "/metrics", msg), 0);
  /* ...until they expire: a refusal after 10 s, an allowance after 60 s. */
  kc_clock_advance(10000 * MS);
  tu_stderr_begin();
  assert_int_equal(check(m, "Bearer forged", "GET", "/metrics", msg), 500);
  assert_int_equal(check(m, "Bearer reader", "GET", "/metrics", msg), 0);
  kc_clock_advance(50000 * MS);
  assert_int_equal(check(m, "Bearer reader", "GET", "/metrics", msg), 500);
  free(tu_stderr_end());
  atomic_store(&f.fail, false);
  assert_int_equal(check(m, "Bearer reader", "GET", "/metrics", msg), 0);
  kc_metricsauth_free(m);
  kc_clock_set_real();
}

typedef struct worker_arg {
  kc_metricsauth *m;
  int id;
  int wrong;
} worker_arg;

static void *hammer(void *p) {
  worker_arg *a = p;
  static const char *const tokens[] = {"Bearer reader", "Bearer nobody", "Bearer forged", NULL};
  static const unsigned want[] = {0, 403, 401, 401};
  char msg[256];
  for (int i = 0; i < 400; i++) {
    int t = (i + a->id) % 4;
    if (kc_metricsauth_authorize(a->m, tokens[t], "GET", "/metrics", msg, sizeof msg) != want[t]) a->wrong++;
  }
  return NULL;
}

/* Server threads check at once: one cache, one review at a time. */
static void test_filter_threads(void **state) {
  (void)state;
  fake f = {0};
  kc_metricsauth_options o = {.review = fake_review, .review_ud = &f};
  kc_metricsauth *m;
  assert_int_equal(kc_metricsauth_new(NULL, &o, &m), 0);
  pthread_t th[4];
  worker_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (worker_arg){.m = m, .id = i};
    assert_int_equal(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(args[i].wrong, 0);
  }
  /* Three tokens: a few concurrent misses may each ask, never one per request. */
  assert_true(atomic_load(&f.calls) >= 3 && atomic_load(&f.calls) <= 12);
  kc_metricsauth_free(m);
}

/* --- the documents ---------------------------------------------------------- */

static void test_documents(void **state) {
  (void)state;
  kc_buf user = {0};
  char name[64], why[128];
  const char *tr = "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\",\"status\":{"
                   "\"authenticated\":true,\"user\":{\"username\":\"system:serviceaccount:mon:prom\","
                   "\"uid\":\"u-1\",\"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],"
                   "\"extra\":{\"authentication.kubernetes.io/pod-name\":[\"prom-0\"]}}}}";
  assert_int_equal(kc_metricsauth_parse_token_review(tr, strlen(tr), &user, name, sizeof name, why, sizeof why), 1);
  assert_string_equal(name, "system:serviceaccount:mon:prom");
  assert_string_equal(user.p, "\"user\":\"system:serviceaccount:mon:prom\",\"uid\":\"u-1\","
                              "\"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],"
                              "\"extra\":{\"authentication.kubernetes.io/pod-name\":[\"prom-0\"]}");
  kc_buf sar = {0};
  kc_metricsauth_sar_body(&sar, user.p, "get", "/metrics");
  assert_string_equal(sar.p, "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\","
                             "\"spec\":{\"user\":\"system:serviceaccount:mon:prom\",\"uid\":\"u-1\","
                             "\"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],"
                             "\"extra\":{\"authentication.kubernetes.io/pod-name\":[\"prom-0\"]},"
                             "\"nonResourceAttributes\":{\"path\":\"/metrics\",\"verb\":\"get\"}}}");
  kc_buf_free(&sar);

  const char *no = "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":false,\"error\":\"invalid bearer token\"}}";
  assert_int_equal(kc_metricsauth_parse_token_review(no, strlen(no), &user, name, sizeof name, why, sizeof why), 0);
  assert_string_equal(why, "invalid bearer token");
  const char *empty = "{\"kind\":\"TokenReview\",\"status\":{}}";
  assert_int_equal(kc_metricsauth_parse_token_review(empty, strlen(empty), &user, name, sizeof name, why, sizeof why), 0);
  assert_string_equal(why, "token not authenticated");
  const char *noname = "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":true,\"user\":{}}}";
  assert_int_equal(kc_metricsauth_parse_token_review(noname, strlen(noname), &user, name, sizeof name, why, sizeof why), 0);
  const char *status = "{\"kind\":\"Status\",\"status\":\"Failure\",\"code\":403}";
  assert_int_equal(kc_metricsauth_parse_token_review(status, strlen(status), &user, name, sizeof name, why, sizeof why),
                   -EBADMSG);
  assert_int_equal(kc_metricsauth_parse_token_review("{", 1, &user, name, sizeof name, why, sizeof why), -EBADMSG);
  kc_buf_free(&user);

  const char *allowed = "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":true,\"reason\":\"RBAC: allowed\"}}";
  assert_int_equal(kc_metricsauth_parse_sar(allowed, strlen(allowed), why, sizeof why), 1);
  const char *denied = "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":false}}";
  assert_int_equal(kc_metricsauth_parse_sar(denied, strlen(denied), why, sizeof why), 0);
  assert_string_equal(why, "");
  /* denied wins over allowed, as the API server's union authorizer has it. */
  const char *both = "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":true,\"denied\":true,\"reason\":\"no\"}}";
  assert_int_equal(kc_metricsauth_parse_sar(both, strlen(both), why, sizeof why), 0);
  assert_string_equal(why, "no");
  assert_int_equal(kc_metricsauth_parse_sar(status, strlen(status), why, sizeof why), -EBADMSG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cache_ttls),     cmocka_unit_test(test_cache_bound),
      cmocka_unit_test(test_filter),         cmocka_unit_test(test_filter_threads),
      cmocka_unit_test(test_documents),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
