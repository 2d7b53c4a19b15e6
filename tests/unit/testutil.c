/* SPDX-License-Identifier: Apache-2.0 */
/* testutil: see testutil.h. */
#include "testutil.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

uint64_t tu_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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

static void write_atomically(const char *path, const gnutls_datum_t *d) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f || fwrite(d->data, 1, d->size, f) != d->size || fclose(f) != 0 || rename(tmp, path) != 0)
    fail_msg("cannot write %s: %s", path, strerror(errno));
}

void tu_write_cert_pair(const char *cert_path, const char *key_path, const char *cn) {
  gnutls_x509_privkey_t key;
  gnutls_x509_crt_t crt;
  unsigned char serial[8] = {1, 2, 3, 4, 5, 6, 7, (unsigned char)cn[0]};
  time_t now = time(NULL);
  gnutls_datum_t cpem = {0}, kpem = {0};
  int g = gnutls_x509_privkey_init(&key);
  if (g >= 0) g = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
  if (g >= 0) g = gnutls_x509_crt_init(&crt);
  if (g >= 0) g = gnutls_x509_crt_set_version(crt, 3);
  if (g >= 0) g = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
  if (g >= 0) g = gnutls_x509_crt_set_activation_time(crt, now - 60);
  if (g >= 0) g = gnutls_x509_crt_set_expiration_time(crt, now + 3600);
  if (g >= 0) g = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, (unsigned)strlen(cn));
  if (g >= 0) g = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9, GNUTLS_FSAN_APPEND);
  if (g >= 0) g = gnutls_x509_crt_set_key(crt, key);
  if (g >= 0) g = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
  if (g >= 0) g = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cpem);
  if (g >= 0) g = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &kpem);
  if (g < 0) fail_msg("cannot make a certificate: %s", gnutls_strerror(g));
  write_atomically(key_path, &kpem);
  write_atomically(cert_path, &cpem);
  gnutls_free(cpem.data);
  gnutls_free(kpem.data);
  gnutls_x509_crt_deinit(crt);
  gnutls_x509_privkey_deinit(key);
}

char *tu_logfmt_plain(char *log) {
  if (!log) return NULL;
  char *w = log;
  for (const char *r = log; *r; r++) {
    if (r[0] == '\\' && (r[1] == '"' || r[1] == '\\')) r++;
    *w++ = *r;
  }
  *w = '\0';
  return log;
}
