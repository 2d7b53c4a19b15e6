/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/runtime/pausedset: the file's format (names, a
 * null list, refusals with a reason), a pause written 0600 and read back
 * by a new set, resume of the last pause removing the file, a corrupt file
 * ignored, and names the config lost dropped and written. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/pausedset.h"

static int parse(const char *text, size_t *n, char *why) {
  char **names = NULL;
  int rc = kc_paused_set_parse(text, strlen(text), &names, n, why, 256);
  kc_paused_set_names_free(names, *n);
  return rc;
}

static void test_parse(void **state) {
  (void)state;
  size_t n;
  char why[256];
  assert_int_equal(parse("# c\npaused:\n  - \"web\"\n  - teams\n", &n, why), 0);
  assert_int_equal(n, 2);
  assert_int_equal(parse("", &n, why), 0);
  assert_int_equal(n, 0);
  assert_int_equal(parse("paused:\n", &n, why), 0);
  assert_int_equal(n, 0);
  assert_int_equal(parse("paused: [web, web]\n", &n, why), -EINVAL);
  assert_string_equal(why, "line 1: \"web\" is listed twice");
  assert_int_equal(parse("paused: [\"a b\"]\n", &n, why), -EINVAL);
  assert_non_null(strstr(why, "not a controller name"));
  assert_int_equal(parse("- web\n", &n, why), -EINVAL);
  assert_string_equal(why, "expected a mapping with the one key \"paused\"");
  assert_int_equal(parse("paused: web\n", &n, why), -EINVAL);
  assert_int_equal(parse("paused: [web\n", &n, why), -EINVAL);
  assert_true(why[0] != '\0');
}

static bool only_web(const char *name, void *ud) {
  (void)ud;
  return strcmp(name, "web") == 0;
}

static void test_kept_in_the_directory(void **state) {
  (void)state;
  char dir[] = "/tmp/kc-pausedset-XXXXXX", path[128];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/%s", dir, KC_PAUSEDSET_FILE);
  kc_paused_set *p = kc_paused_set_new(dir);
  assert_int_equal(kc_paused_set_load(p), 0); /* no file: nothing paused */
  assert_int_equal(kc_paused_set_count(p), 0);
  char why[256];
  assert_int_equal(kc_paused_set_put(p, "web", true, why, sizeof why), 0);
  assert_int_equal(kc_paused_set_put(p, "teams", true, why, sizeof why), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  kc_paused_set_free(p);

  p = kc_paused_set_new(dir);
  assert_int_equal(kc_paused_set_load(p), 0);
  assert_true(kc_paused_set_has(p, "web") && kc_paused_set_has(p, "teams"));
  kc_paused_set_retain(p, only_web, NULL); /* teams left the config */
  assert_false(kc_paused_set_has(p, "teams"));
  kc_paused_set_free(p);
  p = kc_paused_set_new(dir);
  assert_int_equal(kc_paused_set_load(p), 0);
  assert_int_equal(kc_paused_set_count(p), 1);
  assert_int_equal(kc_paused_set_put(p, "web", false, why, sizeof why), 0);
  assert_int_equal(access(path, F_OK), -1); /* the last resume removes the file */
  kc_paused_set_free(p);

  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("paused: {web: 1}\n", f);
  fclose(f);
  p = kc_paused_set_new(dir);
  assert_int_equal(kc_paused_set_load(p), -EINVAL); /* ignored, with a warning */
  assert_int_equal(kc_paused_set_count(p), 0);
  kc_paused_set_free(p);
  unlink(path);
  rmdir(dir);
}

static void test_in_memory(void **state) {
  (void)state;
  kc_paused_set *p = kc_paused_set_new(NULL);
  char why[256];
  assert_int_equal(kc_paused_set_load(p), 0);
  assert_int_equal(kc_paused_set_put(p, "web", true, why, sizeof why), 0);
  assert_true(kc_paused_set_has(p, "web"));
  assert_int_equal(kc_paused_set_put(p, "bad name", true, why, sizeof why), -EINVAL);
  kc_paused_set_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_kept_in_the_directory),
      cmocka_unit_test(test_in_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
