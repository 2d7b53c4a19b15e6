/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the pure helpers of kube-apisim's kubectl support:
 * tests/apisim/table's sim_human_duration (the Age cell, apimachinery's
 * duration.HumanDuration at each boundary) and tests/apisim/openapi's
 * sim_openapi_hash (the ?hash= of group-version documents, FNV-1a 64).
 * The Table and OpenAPI answers themselves are covered over HTTP by
 * tests/integration/test_apisim_kubectl.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../apisim/openapi.h"
#include "../apisim/table.h"

static void check(int64_t secs, const char *want)
{
  char out[32];
  sim_human_duration(secs, out, sizeof out);
  if (strcmp(out, want) != 0) fail_msg("%lld s: got %s, want %s", (long long)secs, out, want);
}

static void test_human_duration(void **state)
{
  (void)state;
  check(-5, "<invalid>");
  check(-1, "0s");
  check(0, "0s");
  check(119, "119s");
  check(120, "2m");
  check(185, "3m5s");
  check(599, "9m59s");
  check(600, "10m");
  check(3 * 3600 - 1, "179m");
  check(3 * 3600, "3h");
  check(3 * 3600 + 60 * 25, "3h25m");
  check(8 * 3600, "8h");
  check(47 * 3600 + 3599, "47h");
  check(48 * 3600, "2d");
  check(50 * 3600, "2d2h");
  check(8 * 86400, "8d");
  check(2 * 365 * 86400 - 1, "729d");
  check(2 * 365 * 86400, "2y");
  check(2 * 365 * 86400 + 3 * 86400, "2y3d");
  check(9 * 365 * 86400, "9y");
}

static void test_openapi_hash(void **state)
{
  (void)state;
  assert_true(sim_openapi_hash("", 0) == 0xcbf29ce484222325ull);
  assert_true(sim_openapi_hash("a", 1) == 0xaf63dc4c8601ec8cull);
  assert_true(sim_openapi_hash("foobar", 6) == 0x85944171f73967e8ull);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_human_duration),
    cmocka_unit_test(test_openapi_hash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
