/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/json/jsontree.c: the nesting pre-scan (limit, strings,
 * escapes, NUL, comments) and the parse behind it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json/jsontree.h"

static int check(const char *s, unsigned max, char *err, size_t errlen) {
  return kc_jsontree_check(s, strlen(s), max, err, errlen);
}

static void test_check(void **state) {
  (void)state;
  char err[128];
  assert_int_equal(check("{\"a\":[1,{\"b\":[]}]}", 4, err, sizeof err), 0);
  assert_int_equal(check("{\"a\":[1,{\"b\":[]}]}", 3, err, sizeof err), -E2BIG);
  assert_string_equal(err, "offset 13: nesting deeper than KC_OBJ_MAX_DEPTH (3) levels");
  /* siblings do not add up */
  assert_int_equal(check("[[],[],[[]],{}]", 3, err, sizeof err), 0);
  assert_int_equal(check("[[],[],[[[]]],{}]", 3, err, sizeof err), -E2BIG);
  /* brackets in strings, escaped quotes, an escaped backslash before the quote */
  assert_int_equal(check("[\"[[[\\\"[[\",\"\\\\\",\"{{\"]", 1, err, sizeof err), 0);
  assert_int_equal(check("[\"\\\\\",[]]", 1, err, sizeof err), -E2BIG);
  /* a string that never ends hides nothing yajl would build */
  assert_int_equal(check("[\"[[[[", 1, NULL, 0), 0);
  /* a trailing backslash in an open string */
  assert_int_equal(check("[\"\\", 1, err, sizeof err), 0);
  /* unbalanced closers do not buy depth */
  assert_int_equal(check("]]]][[", 1, err, sizeof err), -E2BIG);
  /* '/' is fine inside strings, refused outside */
  assert_int_equal(check("{\"a/b\":\"//\"}", 1, err, sizeof err), 0);
  assert_int_equal(check("[1,// \"\n[[]]]", 8, err, sizeof err), -EBADMSG);
  assert_string_equal(err, "offset 3: comments are not JSON");
  static const char nul[] = "[\"a\\\0\"]";
  assert_int_equal(kc_jsontree_check(nul, sizeof nul - 1, 8, err, sizeof err), -EBADMSG);
  assert_string_equal(err, "offset 4: NUL byte");
  assert_int_equal(kc_jsontree_check("", 0, 0, err, sizeof err), 0);
}

static void test_parse(void **state) {
  (void)state;
  char err[128];
  yajl_val v;
  static const char doc[] = "{\"kind\":\"Status\",\"code\":409}trailing";
  assert_int_equal(kc_jsontree_parse(doc, 28, &v, err, sizeof err), 0); /* not NUL-terminated */
  static const char *code_path[] = {"code", NULL};
  yajl_val c = yajl_tree_get(v, code_path, yajl_t_number);
  assert_non_null(c);
  assert_int_equal(YAJL_GET_INTEGER(c), 409);
  yajl_tree_free(v);

  assert_int_equal(kc_jsontree_parse(doc, sizeof doc - 1, &v, err, sizeof err), -EBADMSG);
  assert_null(v);
  assert_non_null(strstr(err, "invalid JSON: "));
  assert_null(strchr(err, '\n')); /* yajl's quote of the text is cut */

  /* KC_JSONTREE_MAX_DEPTH open containers parse, one more does not, and a
   * million are refused without building anything. */
  size_t levels[] = {KC_JSONTREE_MAX_DEPTH, KC_JSONTREE_MAX_DEPTH + 1, 1000000};
  int want[] = {0, -E2BIG, -E2BIG};
  for (size_t k = 0; k < 3; k++) {
    char *s = malloc(2 * levels[k]);
    assert_non_null(s);
    memset(s, '[', levels[k]);
    memset(s + levels[k], ']', levels[k]);
    assert_int_equal(kc_jsontree_parse(s, 2 * levels[k], &v, err, sizeof err), want[k]);
    free(s);
    if (want[k] == 0)
      assert_non_null(v);
    else
      assert_string_equal(err, "offset 256: nesting deeper than KC_OBJ_MAX_DEPTH (256) levels");
    yajl_tree_free(v);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_check),
      cmocka_unit_test(test_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
