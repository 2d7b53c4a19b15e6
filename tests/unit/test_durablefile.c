/* SPDX-License-Identifier: Apache-2.0 */
/* Specification of daemon/base/durablefile.{c,h}. What it pins down:
 *  - a file written is whole, has the mode asked for, and no temporary
 *    file is left; writing again replaces it;
 *  - a temporary file left by a crashed process of the same pid does not
 *    stop the next write;
 *  - abort, and a commit whose rename fails (the name is a directory),
 *    leave no temporary file and the old content in place, with the failed
 *    step named;
 *  - a directory that does not exist: an error naming the temporary file;
 *  - remove: an absent file is fine, a present one is gone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

#include "base/durablefile.h"

static char dir[64];

static int setup(void **state) {
  snprintf(dir, sizeof dir, "/tmp/kctrld-durable-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static unsigned entries(void) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  unsigned n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void expect_content(const char *name, const char *want) {
  char path[128], got[64] = "";
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(got, 1, sizeof got - 1, f);
  fclose(f);
  got[n] = 0;
  assert_string_equal(got, want);
}

static void test_write_replace_mode(void **state) {
  char why[256] = "";
  assert_int_equal(kc_durable_write_file(dir, "f", 0600, "one", 3, why, sizeof why), 0);
  expect_content("f", "one");
  assert_int_equal(kc_durable_write_file(dir, "f", 0600, "two!", 4, why, sizeof why), 0);
  expect_content("f", "two!");
  char path[128];
  snprintf(path, sizeof path, "%s/f", dir);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(entries(), 1);
}

static void test_stale_temporary_of_same_pid(void **state) {
  char tmp[128], why[256] = "";
  snprintf(tmp, sizeof tmp, "%s/.f.tmp.%ld", dir, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(kc_durable_write_file(dir, "f", 0600, "x", 1, why, sizeof why), 0);
  expect_content("f", "x");
  assert_int_equal(entries(), 1);
}

static void test_abort_and_failed_rename(void **state) {
  char why[256] = "";
  assert_int_equal(kc_durable_write_file(dir, "f", 0600, "old", 3, why, sizeof why), 0);
  kc_durable_file f;
  assert_int_equal(kc_durable_create(&f, dir, "f", 0600, why, sizeof why), 0);
  assert_int_equal(kc_durable_write(&f, "new", 3, why, sizeof why), 0);
  kc_durable_abort(&f);
  expect_content("f", "old");
  assert_int_equal(entries(), 1);
  /* A directory in the way: rename(2) refuses to replace it with a file. */
  char sub[128];
  snprintf(sub, sizeof sub, "%s/d", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  int rc = kc_durable_write_file(dir, "d", 0600, "x", 1, why, sizeof why);
  assert_true(rc == -EISDIR);
  assert_non_null(strstr(why, "rename: "));
  assert_int_equal(entries(), 2); /* f and d */
}

static void test_missing_directory(void **state) {
  char why[256] = "", missing[128];
  snprintf(missing, sizeof missing, "%s/none", dir);
  kc_durable_file f;
  assert_int_equal(kc_durable_create(&f, missing, "f", 0600, why, sizeof why), -ENOENT);
  assert_non_null(strstr(why, "cannot create the temporary file"));
  assert_non_null(strstr(why, missing));
  kc_durable_abort(&f); /* safe after a failed create */
  assert_int_equal(kc_durable_remove(missing, "f", why, sizeof why), -ENOENT);
}

static void test_remove(void **state) {
  char why[256] = "";
  assert_int_equal(kc_durable_remove(dir, "f", why, sizeof why), 0);
  assert_int_equal(kc_durable_write_file(dir, "f", 0600, "x", 1, why, sizeof why), 0);
  assert_int_equal(kc_durable_remove(dir, "f", why, sizeof why), 0);
  assert_int_equal(entries(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_write_replace_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stale_temporary_of_same_pid, setup, teardown),
      cmocka_unit_test_setup_teardown(test_abort_and_failed_rename, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
