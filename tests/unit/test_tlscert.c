/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/base/tlscert: the self-signed certificate, loading a
 * PEM pair, reloading it when the files change, keeping the previous pair
 * when the new one does not load or its key does not match, and the one
 * active store per process. (The handshakes themselves: test_httpserver.) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/tlscert.h"
#include "testutil.h"

typedef struct paths {
  char dir[64], cert[128], key[128];
} paths;

static void make_paths(paths *p) {
  snprintf(p->dir, sizeof p->dir, "/tmp/kc-tlscert-XXXXXX");
  assert_non_null(mkdtemp(p->dir));
  snprintf(p->cert, sizeof p->cert, "%s/tls.crt", p->dir);
  snprintf(p->key, sizeof p->key, "%s/tls.key", p->dir);
}

static void remove_paths(paths *p) {
  unlink(p->cert);
  unlink(p->key);
  rmdir(p->dir);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_self_signed(void **state) {
  (void)state;
  kc_tlscert *a = NULL, *b = NULL;
  assert_int_equal(kc_tlscert_new(NULL, NULL, 0, &a), 0);
  assert_int_equal(kc_tlscert_generation(a), 1);
  assert_int_equal(kc_tlscert_new(NULL, NULL, 0, &b), 0);
  /* One active store per process: the retrieve callback has no user pointer. */
  assert_int_equal(kc_tlscert_activate(a), 0);
  assert_int_equal(kc_tlscert_activate(a), 0);
  assert_int_equal(kc_tlscert_activate(b), -EBUSY);
  kc_tlscert_deactivate(b); /* not the active one: no effect */
  assert_int_equal(kc_tlscert_activate(b), -EBUSY);
  kc_tlscert_deactivate(a);
  assert_int_equal(kc_tlscert_activate(b), 0);
  kc_tlscert_free(b); /* deactivates */
  assert_int_equal(kc_tlscert_activate(a), 0);
  kc_tlscert_free(a);
  /* The self-signed one needs no files; one file alone is an error. */
  assert_int_equal(kc_tlscert_new("/nonexistent/tls.crt", NULL, 0, &a), -EINVAL);
  assert_null(a);
}

static void test_files_and_reload(void **state) {
  (void)state;
  paths p;
  make_paths(&p);
  kc_tlscert *c = NULL;
  assert_int_equal(kc_tlscert_new(p.cert, p.key, 0, &c), -ENOENT);
  assert_null(c);
  tu_write_cert_pair(p.cert, p.key, "one");
  assert_int_equal(kc_tlscert_new(p.cert, p.key, 0, &c), 0);
  assert_int_equal(kc_tlscert_generation(c), 1);
  kc_tlscert_check_now(c); /* unchanged: not read again */
  assert_int_equal(kc_tlscert_generation(c), 1);

  tu_write_cert_pair(p.cert, p.key, "two");
  kc_tlscert_check_now(c);
  assert_int_equal(kc_tlscert_generation(c), 2);

  /* Half a rotation: a new certificate with the previous key. The pair in
   * use stays; once the key follows, the new pair is taken. */
  paths q;
  make_paths(&q);
  tu_write_cert_pair(q.cert, q.key, "three");
  char *crt = tu_read_file(q.cert, NULL), *key = tu_read_file(q.key, NULL);
  assert_non_null(crt);
  assert_non_null(key);
  write_text(p.cert, crt);
  tu_stderr_begin();
  kc_tlscert_check_now(c);
  char *err = tu_stderr_end();
  assert_int_equal(kc_tlscert_generation(c), 2);
  assert_non_null(strstr(err, "does not match"));
  free(err);
  write_text(p.key, key);
  kc_tlscert_check_now(c);
  assert_int_equal(kc_tlscert_generation(c), 3);

  /* Not PEM at all: kept, logged. */
  write_text(p.cert, "not a certificate\n");
  tu_stderr_begin();
  kc_tlscert_check_now(c);
  err = tu_stderr_end();
  assert_int_equal(kc_tlscert_generation(c), 3);
  assert_non_null(strstr(err, "no PEM certificate"));
  free(err);
  kc_tlscert_free(c);

  /* At start the same files are an error. */
  tu_stderr_begin();
  assert_int_equal(kc_tlscert_new(p.cert, p.key, 0, &c), -EINVAL);
  free(tu_stderr_end());
  free(crt);
  free(key);
  remove_paths(&q);
  remove_paths(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_self_signed),
      cmocka_unit_test(test_files_and_reload),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
