/* SPDX-License-Identifier: Apache-2.0 */
/* x509validity: see x509validity.h. */
#include "base/x509validity.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

/* One DER element: its tag, and its contents [p, p + len). */
typedef struct der_item {
  unsigned tag;
  const unsigned char *p;
  size_t len;
} der_item;

/* Reads the element at *cur (before end) and moves *cur past it. */
static bool der_next(const unsigned char **cur, const unsigned char *end, der_item *it) {
  const unsigned char *p = *cur;
  if (end - p < 2) return false;
  it->tag = *p++;
  if ((it->tag & 0x1f) == 0x1f) return false; /* multi-byte tags: not in these fields */
  size_t len = *p++;
  if (len & 0x80) {
    size_t nb = len & 0x7f;
    if (nb == 0 || nb > 4 || (size_t)(end - p) < nb) return false;
    len = 0;
    for (size_t i = 0; i < nb; i++) len = len << 8 | *p++;
  }
  if (len > (size_t)(end - p)) return false;
  it->p = p;
  it->len = len;
  *cur = p + len;
  return true;
}

static bool digits(const unsigned char *p, size_t n, int *out) {
  int v = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return false;
    v = v * 10 + (p[i] - '0');
  }
  *out = v;
  return true;
}

/* UTCTime (0x17) YYMMDDHHMMSSZ or GeneralizedTime (0x18) YYYYMMDDHHMMSSZ. */
static bool der_time(const der_item *it, int64_t *out) {
  size_t ylen = it->tag == 0x17 ? 2 : it->tag == 0x18 ? 4 : 0;
  if (!ylen || it->len != ylen + 11 || it->p[it->len - 1] != 'Z') return false;
  int y, mo, d, h, mi, s;
  const unsigned char *p = it->p;
  if (!digits(p, ylen, &y) || !digits(p + ylen, 2, &mo) || !digits(p + ylen + 2, 2, &d) ||
      !digits(p + ylen + 4, 2, &h) || !digits(p + ylen + 6, 2, &mi) || !digits(p + ylen + 8, 2, &s))
    return false;
  if (ylen == 2) y += y < 50 ? 2000 : 1900;
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || s > 60) return false;
  *out = kc_clock_civil_to_unix(y, (unsigned)mo, (unsigned)d, (unsigned)h, (unsigned)mi, (unsigned)s);
  return true;
}

int kc_x509_der_validity(const unsigned char *der, size_t len, int64_t *not_before, int64_t *not_after) {
  const unsigned char *cur = der, *end = der + len;
  der_item cert, tbs, f;
  if (!der_next(&cur, end, &cert) || cert.tag != 0x30) return -EINVAL;
  cur = cert.p;
  end = cert.p + cert.len;
  if (!der_next(&cur, end, &tbs) || tbs.tag != 0x30) return -EINVAL;
  cur = tbs.p;
  end = tbs.p + tbs.len;
  if (!der_next(&cur, end, &f)) return -EINVAL;
  if (f.tag == 0xa0 && !der_next(&cur, end, &f)) return -EINVAL; /* version, then serial */
  if (f.tag != 0x02) return -EINVAL;
  if (!der_next(&cur, end, &f) || f.tag != 0x30) return -EINVAL; /* signature algorithm */
  if (!der_next(&cur, end, &f) || f.tag != 0x30) return -EINVAL; /* issuer */
  der_item validity, t1, t2;
  if (!der_next(&cur, end, &validity) || validity.tag != 0x30) return -EINVAL;
  cur = validity.p;
  end = validity.p + validity.len;
  int64_t nb, na;
  if (!der_next(&cur, end, &t1) || !der_next(&cur, end, &t2) || !der_time(&t1, &nb) ||
      !der_time(&t2, &na))
    return -EINVAL;
  *not_before = nb;
  *not_after = na;
  return 0;
}

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

static const char *find(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0) return hay + i;
  return NULL;
}

int kc_x509_pem_validity(const char *pem, size_t len, int64_t *not_before, int64_t *not_after) {
  static const char begin[] = "-----BEGIN CERTIFICATE-----", endm[] = "-----END CERTIFICATE-----";
  const char *b = find(pem, len, begin);
  if (!b) return -EINVAL;
  b += sizeof begin - 1;
  const char *e = find(b, len - (size_t)(b - pem), endm);
  if (!e) return -EINVAL;
  size_t n = (size_t)(e - b);
  unsigned char *der = malloc(n / 4 * 3 + 3);
  if (!der) return -ENOMEM;
  size_t out = 0;
  unsigned acc = 0;
  int bits = 0;
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)b[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (c == '=') break;
    int v = b64_value(c);
    if (v < 0) {
      rc = -EINVAL;
      break;
    }
    acc = (acc << 6 | (unsigned)v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      der[out++] = (unsigned char)(acc >> bits);
    }
  }
  if (rc == 0) rc = kc_x509_der_validity(der, out, not_before, not_after);
  free(der);
  return rc;
}
