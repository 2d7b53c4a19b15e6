/* SPDX-License-Identifier: Apache-2.0 */
/* testutil: see testutil.h. */
#include "testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

char *tu_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (ferror(f)) {
      free(buf);
      buf = NULL;
      errno = EIO;
      break;
    }
    if (feof(f)) break;
    char *bigger = realloc(buf, cap * 2);
    if (!bigger) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = bigger;
    cap *= 2;
  }
  fclose(f);
  if (!buf) return NULL;
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

char *tu_fixture(const char *name, size_t *len) {
  char path[4096];
  snprintf(path, sizeof path, KC_FIXTURES_DIR "/%s", name);
  char *text = tu_read_file(path, len);
  if (!text) fail_msg("fixture %s: %s", path, strerror(errno));
  return text;
}

kc_obj *tu_fixture_obj(const char *name, const kc_transform *t) {
  char path[512], err[256];
  snprintf(path, sizeof path, "objects/%s", name);
  size_t len;
  char *text = tu_fixture(path, &len);
  kc_obj *o = kc_obj_parse(text, len, t, err, sizeof err);
  free(text);
  if (!o) fail_msg("fixture %s: %s", name, err);
  return o;
}

kc_obj *tu_parse(const char *json, size_t len) {
  char err[256];
  kc_obj *o = kc_obj_parse(json, len, NULL, err, sizeof err);
  if (!o) fail_msg("%.*s: %s", (int)len, json, err);
  return o;
}

void tu_str_at(const kc_obj *o, const char *path, const char *want) {
  kc_json_value v;
  char buf[1024];
  if (kc_obj_get(o, path, &v) < 0 || kc_json_string(&v, buf, sizeof buf) < 0)
    fail_msg("%s: not a string", path);
  if (strcmp(buf, want) != 0) fail_msg("%s: \"%s\", want \"%s\"", path, buf, want);
}

void tu_true_at(const kc_obj *o, const char *path) {
  kc_json_value v;
  if (kc_obj_get(o, path, &v) < 0 || !kc_json_true(&v)) fail_msg("%s: not true", path);
}

static int saved_stderr = -1;
static char capture_path[64];

void tu_stderr_begin(void) {
  snprintf(capture_path, sizeof capture_path, "/tmp/kctrld-stderr.XXXXXX");
  int fd = mkstemp(capture_path);
  assert_true(fd >= 0);
  fflush(stderr);
  saved_stderr = dup(2);
  assert_true(saved_stderr >= 0);
  assert_int_equal(dup2(fd, 2), 2);
  close(fd);
}

char *tu_stderr_end(void) {
  fflush(stderr);
  assert_true(saved_stderr >= 0);
  assert_int_equal(dup2(saved_stderr, 2), 2);
  close(saved_stderr);
  saved_stderr = -1;
  char *text = tu_read_file(capture_path, NULL);
  unlink(capture_path);
  assert_non_null(text);
  return text;
}
