/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/ops/healthcheck: the registry (names, order,
 * groups, removal) and the probe text (ok, verbose, failure listing,
 * exclude with groups and unknown names, per-check paths). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ops/healthcheck.h"

static void one(void *ud, kc_health_results *out) {
  const bool *ok = ud;
  kc_health_report(out, NULL, *ok, "waiting for %d things", 3);
}

static void group(void *ud, kc_health_results *out) {
  (void)ud;
  kc_health_report(out, "teams", false, "hook not answering: timed out");
  kc_health_report(out, "apps", true, NULL);
}

static void silent(void *ud, kc_health_results *out) {
  (void)ud;
  (void)out;
}

static void test_registry(void **state) {
  (void)state;
  kc_health *h;
  assert_int_equal(kc_health_new(&h), 0);
  bool ok = false;
  assert_int_equal(kc_health_add(h, "informers", one, &ok), 0);
  assert_int_equal(kc_health_add(h, "informers", one, &ok), -EEXIST);
  assert_int_equal(kc_health_add(h, "controller", group, NULL), 0);
  assert_int_equal(kc_health_add(h, "quiet", silent, NULL), 0);
  assert_int_equal(kc_health_add(h, "Bad Name", one, &ok), -EINVAL);
  assert_int_equal(kc_health_add(h, "a//b", one, &ok), -EINVAL);
  assert_int_equal(kc_health_add(h, "a/", one, &ok), -EINVAL);
  assert_int_equal(kc_health_add(h, "", one, &ok), -EINVAL);
  assert_int_equal(kc_health_add(h, "x", NULL, NULL), -EINVAL);
  assert_true(kc_health_name_ok("poststart/selector-check.v1"));

  kc_health_results r = {0};
  assert_int_equal(kc_health_run(h, &r), 0);
  assert_int_equal(r.n, 3); /* a check that reports nothing has no line */
  assert_string_equal(r.v[0].name, "informers");
  assert_false(r.v[0].ok);
  assert_string_equal(r.v[0].why, "waiting for 3 things");
  assert_string_equal(r.v[1].name, "controller/teams");
  assert_string_equal(r.v[2].name, "controller/apps");
  assert_true(r.v[2].ok);
  assert_string_equal(r.v[2].why, "");
  assert_false(kc_health_results_ok(&r));

  assert_int_equal(kc_health_remove(h, "controller"), 0);
  assert_int_equal(kc_health_remove(h, "controller"), -ENOENT);
  ok = true;
  kc_health_results_reset(&r);
  assert_int_equal(kc_health_run(h, &r), 0);
  assert_int_equal(r.n, 1);
  assert_true(kc_health_results_ok(&r));
  kc_health_results c = {0};
  assert_int_equal(kc_health_results_copy(&c, &r), 0);
  assert_int_equal(c.n, 1);
  assert_string_equal(c.v[0].name, "informers");
  kc_health_results_free(&c);
  kc_health_results_free(&r);
  kc_health_free(h);
}

static void fill(kc_health_results *r) {
  kc_health_append(r, "ping", true, NULL);
  kc_health_append(r, "informers", true, NULL);
  kc_health_append(r, "controller/teams", false, "hook not answering: timed out");
  kc_health_append(r, "controller/apps", true, NULL);
}

static void test_render(void **state) {
  (void)state;
  kc_health_results r = {0};
  fill(&r);
  kc_buf b = {0};
  /* A failure lists every check with the reason, whatever verbose says. */
  assert_int_equal(kc_health_render(&r, "readyz", NULL, NULL, 503, &b), 503);
  assert_string_equal(b.p, "[+]ping ok\n[+]informers ok\n"
                           "[-]controller/teams failed: hook not answering: timed out\n"
                           "[+]controller/apps ok\nreadyz check failed\n");
  /* exclude by exact name or by group; unknown names are named back. */
  const char *ex1[] = {"controller/teams"};
  kc_health_query q = {.exclude = ex1, .nexclude = 1};
  assert_int_equal(kc_health_render(&r, "readyz", NULL, &q, 503, &b), 200);
  assert_string_equal(b.p, "ok\n");
  q.verbose = true;
  assert_int_equal(kc_health_render(&r, "readyz", NULL, &q, 503, &b), 200);
  assert_string_equal(b.p, "[+]ping ok\n[+]informers ok\n[+]controller/teams excluded: ok\n"
                           "[+]controller/apps ok\nreadyz check passed\n");
  const char *ex2[] = {"controller", "nope", "contr"};
  q = (kc_health_query){.verbose = true, .exclude = ex2, .nexclude = 3};
  assert_int_equal(kc_health_render(&r, "readyz", NULL, &q, 503, &b), 200);
  assert_string_equal(b.p, "[+]ping ok\n[+]informers ok\n[+]controller/teams excluded: ok\n"
                           "[+]controller/apps excluded: ok\n"
                           "warn: some health checks cannot be excluded: no matches for \"nope\",\"contr\"\n"
                           "readyz check passed\n");
  /* Per-check paths. */
  assert_int_equal(kc_health_render(&r, "readyz", "controller/apps", NULL, 503, &b), 200);
  assert_string_equal(b.p, "ok\n");
  assert_int_equal(kc_health_render(&r, "readyz", "controller/teams", NULL, 503, &b), 503);
  assert_string_equal(b.p, "controller/teams failed: hook not answering: timed out\n");
  assert_int_equal(kc_health_render(&r, "readyz", "controller", NULL, 503, &b), 404);
  /* Everything passing: "ok", or the listing when verbose. */
  r.v[2].ok = true;
  assert_int_equal(kc_health_render(&r, "livez", NULL, NULL, 500, &b), 200);
  assert_string_equal(b.p, "ok\n");
  q = (kc_health_query){.verbose = true};
  assert_int_equal(kc_health_render(&r, "livez", NULL, &q, 500, &b), 200);
  assert_string_equal(b.p, "[+]ping ok\n[+]informers ok\n[+]controller/teams ok\n[+]controller/apps ok\n"
                           "livez check passed\n");
  kc_buf_free(&b);
  kc_health_results_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_render),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
