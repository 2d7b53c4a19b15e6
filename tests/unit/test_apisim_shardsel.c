/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for tests/apisim/shardsel (kube-apisim's KEP-5866
 * shardSelector): the FNV-1a 64 test vectors, accepted selectors (one and
 * several ranges, 2^64 upper bound, spacing, parentheses, double quotes),
 * matching on uid and namespace, and each of the API server's validation
 * messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../apisim/json.h"
#include "../apisim/shardsel.h"

static void test_fnv_vectors(void **state)
{
  (void)state;
  assert_true(sim_fnv1a64("", 0) == 0xcbf29ce484222325ULL);
  assert_true(sim_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL);
  assert_true(sim_fnv1a64("foobar", 6) == 0x85944171f73967e8ULL);
  assert_true(sim_fnv1a64("\x80", 1) == ((0xcbf29ce484222325ULL ^ 0x80ULL) * 0x100000001b3ULL));
}

static void test_parse_ok(void **state)
{
  (void)state;
  struct sim_shardsel s;
  char *err = NULL;
  assert_int_equal(sim_shardsel_parse("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')", &s, &err), 0);
  assert_null(err);
  assert_string_equal(s.field, "metadata.uid");
  assert_int_equal(s.n, 1);
  assert_true(s.r[0].start == 0 && s.r[0].end == 0x8000000000000000ULL && !s.r[0].end_max);
  sim_shardsel_free(&s);

  const char *two = " ( shardRange(object.metadata.namespace,\"0x0000000000000010\",'0x0000000000000020') )||"
                    "shardRange( object . metadata . namespace , '0xc000000000000000' , '0x10000000000000000' ) ";
  assert_int_equal(sim_shardsel_parse(two, &s, &err), 0);
  assert_string_equal(s.field, "metadata.namespace");
  assert_string_equal(s.text, two); /* echoed as given */
  assert_int_equal(s.n, 2);
  assert_true(s.r[0].start == 0x10 && s.r[0].end == 0x20);
  assert_true(s.r[1].start == 0xc000000000000000ULL && s.r[1].end_max);
  sim_shardsel_free(&s);
}

static void test_match(void **state)
{
  (void)state;
  /* fnv1a64("a") = 0xaf63dc4c8601ec8c: in the upper half */
  struct sim_shardsel lo, hi, ns;
  char *err = NULL;
  assert_int_equal(sim_shardsel_parse("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')", &lo, &err), 0);
  assert_int_equal(sim_shardsel_parse("shardRange(object.metadata.uid, '0xaf63dc4c8601ec8c', '0xaf63dc4c8601ec8d')", &hi, &err), 0);
  assert_int_equal(sim_shardsel_parse("shardRange(object.metadata.namespace, '0xaf63dc4c8601ec8c', '0x10000000000000000')", &ns, &err), 0);
  const char obj[] = "{\"metadata\":{\"name\":\"x\",\"namespace\":\"a\",\"uid\":\"a\"}}";
  jv *d = jv_parse(obj, sizeof obj - 1, NULL, 0);
  assert_non_null(d);
  assert_false(sim_shardsel_match(&lo, d));
  assert_true(sim_shardsel_match(&hi, d)); /* start inclusive */
  assert_true(sim_shardsel_match(&ns, d));
  const char obj2[] = "{\"metadata\":{\"name\":\"x\"}}"; /* no uid, no namespace: hash of "" */
  jv *d2 = jv_parse(obj2, sizeof obj2 - 1, NULL, 0);
  assert_non_null(d2);
  assert_true(sim_shardsel_match(&ns, d2) == (0xcbf29ce484222325ULL >= 0xaf63dc4c8601ec8cULL));
  assert_false(sim_shardsel_match(&hi, d2));
  jv_free(d);
  jv_free(d2);
  sim_shardsel_free(&lo);
  sim_shardsel_free(&hi);
  sim_shardsel_free(&ns);
}

static void expect_err(const char *sel, const char *msg)
{
  struct sim_shardsel s;
  char *err = NULL;
  int rc = sim_shardsel_parse(sel, &s, &err);
  if (rc == 0) fail_msg("accepted: %s", sel);
  assert_non_null(err);
  if (strncmp(err, msg, strlen(msg)) != 0) fail_msg("%s\n got: %s\nwant: %s", sel, err, msg);
  free(err);
}

#define R0 "'0x0000000000000000'"
#define RH "'0x8000000000000000'"

static void test_errors(void **state)
{
  (void)state;
  expect_err("", "empty shard selector is not allowed; omit the parameter for unfiltered lists");
  expect_err(" \t", "empty shard selector is not allowed");
  expect_err("shardRange(object.metadata.uid, " R0, "CEL parse error: Syntax error: mismatched input '<EOF>'");
  expect_err("shardRange(object.metadata.uid, " R0 ", " RH ") |", "CEL parse error: Syntax error:");
  expect_err("shardRange(object.metadata.uid, '0x0000000000000000, " RH ")", "CEL parse error: Syntax error:");
  expect_err("shardRange(object.metadata.uid, " R0 ", " RH ") && shardRange(object.metadata.uid, " R0 ", " RH ")",
             "unsupported function \"_&&_\"; only shardRange() and || are allowed");
  expect_err("hashRange(object.metadata.uid, " R0 ", " RH ")", "unsupported function \"hashRange\"; only shardRange() and || are allowed");
  expect_err("object.metadata.uid", "unexpected expression kind 7; expected shardRange() call or || operator");
  expect_err("'x'", "unexpected expression kind 5; expected shardRange() call or || operator");
  expect_err("shardRange(object.metadata.uid, " R0 ")", "shardRange() requires exactly 3 arguments, got 2");
  expect_err("shardRange('x', " R0 ", " RH ")",
             "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 5");
  expect_err("shardRange(object.metadata.name, " R0 ", " RH ")",
             "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace");
  expect_err("shardRange(metadata.uid, " R0 ", " RH ")", "unsupported field path \"metadata.uid\"");
  expect_err("shardRange(object.metadata.uid, x, " RH ")", "hexStart must be a string literal (e.g. '0xff'), got expression kind 3");
  expect_err("shardRange(object.metadata.uid, 0, " RH ")", "hexStart must be a string literal, got int64");
  expect_err("shardRange(object.metadata.uid, " R0 ", 1u)", "hexEnd must be a string literal, got uint64");
  expect_err("shardRange(object.metadata.uid, '8000000000000000', " RH ")", "hexStart must have '0x' prefix, got \"8000000000000000\"");
  expect_err("shardRange(object.metadata.uid, '', " RH ")", "hexStart must have '0x' prefix, got \"\"");
  expect_err("shardRange(object.metadata.uid, '0x', " RH ")", "hexStart: hex value is required after '0x'");
  expect_err("shardRange(object.metadata.uid, '0x000000000000000000', " RH ")",
             "hexStart: hex value too long (18 chars, max 17): \"000000000000000000\"");
  expect_err("shardRange(object.metadata.uid, '0x800000000000000A', '0x10000000000000000')",
             "hexStart: invalid hex character \"A\" in \"0x800000000000000A\"");
  expect_err("shardRange(object.metadata.uid, " R0 ", '0x20000000000000000')",
             "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x20000000000000000\"");
  expect_err("shardRange(object.metadata.uid, '0x0', " RH ")",
             "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)");
  expect_err("shardRange(object.metadata.uid, " RH ", " RH ")",
             "shard range start 0x8000000000000000 must be less than end 0x8000000000000000");
  expect_err("shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')",
             "shard range start 0x10000000000000000 must be less than end 0x10000000000000000");
  expect_err("shardRange(object.metadata.uid, " R0 ", " RH ") || shardRange(object.metadata.namespace, " R0 ", " RH ")",
             "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\"");
  /* deep nesting is refused, not a stack overflow */
  char deep[400];
  memset(deep, '(', sizeof deep - 1);
  deep[sizeof deep - 1] = 0;
  expect_err(deep, "CEL parse error: Syntax error: expression nested too deeply");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fnv_vectors),
      cmocka_unit_test(test_parse_ok),
      cmocka_unit_test(test_match),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
