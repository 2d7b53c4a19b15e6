/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/jsonpath's path grammar: kc_path_parse's segments,
 * kc_path_problem's reasons (config.c shows them), and the lookups on a
 * bare JSON text (kc_json_doc_get_each); the scanner itself is exercised
 * through kc_obj_get in test_kobj.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "json/jsonpath.h"

static void test_parse(void **state) {
  (void)state;
  kc_path_seg sg[8];
  int n = kc_path_parse("a.b[3][\"c.d\"][].e", sg, 8, true);
  assert_int_equal(n, 6);
  assert_int_equal(sg[0].type, KC_PATH_KEY);
  assert_int_equal(sg[0].len, 1);
  assert_memory_equal(sg[1].key, "b", 1);
  assert_int_equal(sg[2].type, KC_PATH_INDEX);
  assert_int_equal(sg[2].index, 3);
  assert_int_equal(sg[3].type, KC_PATH_KEY);
  assert_int_equal(sg[3].len, 3);
  assert_memory_equal(sg[3].key, "c.d", 3);
  assert_int_equal(sg[4].type, KC_PATH_EACH);
  assert_memory_equal(sg[5].key, "e", 1);
  assert_int_equal(kc_path_parse("a[]", sg, 8, false), -EINVAL);
  assert_int_equal(kc_path_parse("a.b.c", sg, 2, false), -E2BIG);
  assert_int_equal(kc_path_parse("[0]", sg, 8, false), 1);
  assert_int_equal(kc_path_parse("[\"\"]", sg, 8, false), 1);
  assert_int_equal(sg[0].len, 0);
  assert_int_equal(kc_path_parse(NULL, sg, 8, false), -EINVAL);
}

static void test_problems(void **state) {
  (void)state;
  const struct {
    const char *path, *why;
  } cases[] = {
      {"spec.nodeName", NULL},
      {"metadata.annotations[\"a.b/c\"]", NULL},
      {"a[0][1].b", NULL},
      {"[\"a\"].b", NULL},
      {"", "empty path"},
      {".a", "empty path segment"},
      {"a..b", "empty path segment"},
      {"a.[0]", "empty path segment"},
      {"a.", "path ends with '.'"},
      {"a[", "expected [N], [] or [\"key\"]"},
      {"a[x]", "expected [N], [] or [\"key\"]"},
      {"a[\"b", "unterminated [\"...\"]"},
      {"a[\"b\"", "missing ]"},
      {"a[1", "missing ]"},
      {"a[0]b", "expected '.' or '[' after ]"},
      {"a]b", "unexpected character in key"},
      {"a\"b", "unexpected character in key"},
      {"a[99999999999999999999999]", "index too large"},
      {"a[].b", "[] (every element) is not allowed here"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *why = kc_path_problem(cases[i].path, false);
    if (!cases[i].why) {
      if (why) fail_msg("%s: %s", cases[i].path, why);
      continue;
    }
    if (!why || strcmp(why, cases[i].why) != 0)
      fail_msg("%s: got %s, want %s", cases[i].path, why ? why : "(valid)", cases[i].why);
  }
  assert_null(kc_path_problem("a[].b", true));
}

static bool count_cb(const kc_json_value *v, void *ud) {
  (void)v;
  (*(int *)ud)++;
  return true;
}

static void test_each_on_text(void **state) {
  (void)state;
  const char js[] = "{\"a\":[{\"b\":1},{\"c\":2},{\"b\":\"x\"}]}";
  const kc_json_doc text = {{js, sizeof js - 1}, NULL, NULL}, none = {{NULL, 0}, NULL, NULL};
  int n = 0;
  assert_int_equal(kc_json_doc_get_each(&text, "a[].b", count_cb, &n), 2);
  assert_int_equal(n, 2);
  assert_int_equal(kc_json_doc_get_each(&none, "a[].b", count_cb, &n), 0);
  assert_int_equal(kc_json_doc_get_each(&text, "a..b", count_cb, &n), -EINVAL);
  int64_t v;
  assert_true(kc_json_parse_i64("-9223372036854775808", 20, &v));
  assert_true(v == INT64_MIN);
  assert_false(kc_json_parse_i64("9223372036854775808", 19, &v));
  assert_false(kc_json_parse_i64("+1", 2, &v));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_problems),
      cmocka_unit_test(test_each_on_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
