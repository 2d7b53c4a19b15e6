/* testutil: see testutil.h. */
#include "testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  char path[512];
  snprintf(path, sizeof path, TU_FIXTURES "%s", name);
  char *text = tu_read_file(path, len);
  if (!text)
    fail_msg("fixture %s: %s (run the tests from the repository root)", path, strerror(errno));
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
