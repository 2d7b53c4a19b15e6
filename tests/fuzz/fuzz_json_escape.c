/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for buf.c's writers: whatever bytes go in,
 *   - kc_buf_json's output is one JSON string that yajl (validating UTF-8)
 *     parses back to the input with every byte that does not start a valid
 *     UTF-8 sequence replaced by U+FFFD (buf.h "JSON strings"); the expected
 *     text is computed here independently, from Unicode's table of
 *     well-formed byte sequences (Unicode 15, table 3-7);
 *   - the output has no raw byte below 0x20, and is a fixed point: writing
 *     the string yajl read back gives the same text;
 *   - kc_buf_url's output is only unreserved characters and %XX, and
 *     percent-decodes back to the input.
 * Input = the bytes to write. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "base/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Length of the well-formed sequence at s (table 3-7), 0 if none. */
static size_t well_formed(const uint8_t *s, size_t n) {
  static const struct {
    uint8_t lo[4], hi[4];
    size_t len;
  } rows[] = {
      {{0x00}, {0x7f}, 1},
      {{0xc2, 0x80}, {0xdf, 0xbf}, 2},
      {{0xe0, 0xa0, 0x80}, {0xe0, 0xbf, 0xbf}, 3},
      {{0xe1, 0x80, 0x80}, {0xec, 0xbf, 0xbf}, 3},
      {{0xed, 0x80, 0x80}, {0xed, 0x9f, 0xbf}, 3},
      {{0xee, 0x80, 0x80}, {0xef, 0xbf, 0xbf}, 3},
      {{0xf0, 0x90, 0x80, 0x80}, {0xf0, 0xbf, 0xbf, 0xbf}, 4},
      {{0xf1, 0x80, 0x80, 0x80}, {0xf3, 0xbf, 0xbf, 0xbf}, 4},
      {{0xf4, 0x80, 0x80, 0x80}, {0xf4, 0x8f, 0xbf, 0xbf}, 4},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    if (rows[r].len > n) continue;
    size_t i = 0;
    while (i < rows[r].len && s[i] >= rows[r].lo[i] && s[i] <= rows[r].hi[i]) i++;
    if (i == rows[r].len) return i;
  }
  return 0;
}

typedef struct got {
  const uint8_t *s;
  size_t n;
  int count;
} got;

static int on_string(void *ud, const unsigned char *s, size_t n) {
  got *g = ud;
  g->count++;
  g->s = malloc(n ? n : 1);
  if (!g->s) abort();
  memcpy((void *)g->s, s, n);
  g->n = n;
  return 1;
}

static int hexv(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy, so reads past the end are caught by ASan. */
  char *in = malloc(size ? size : 1);
  if (!in) return 0;
  memcpy(in, data, size);

  kc_buf want = {0};
  for (size_t i = 0; i < size;) {
    size_t l = well_formed(data + i, size - i);
    if (l) {
      kc_buf_add(&want, in + i, l);
      i += l;
    } else {
      kc_buf_add(&want, "\xef\xbf\xbd", 3);
      i++;
    }
  }
  kc_buf b = {0};
  kc_buf_json(&b, in, size);
  if (b.err || want.err) abort();
  for (size_t i = 0; i < b.len; i++)
    if ((unsigned char)b.p[i] < 0x20) abort();

  static const yajl_callbacks cbs = {.yajl_string = on_string};
  got g = {0};
  yajl_handle h = yajl_alloc(&cbs, NULL, &g);
  if (!h) abort();
  yajl_status st = yajl_parse(h, (const unsigned char *)b.p, b.len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  if (st != yajl_status_ok || g.count != 1) abort();
  if (g.n != want.len || (g.n && memcmp(g.s, want.p, g.n) != 0)) abort();
  yajl_free(h);
  kc_buf again = {0};
  kc_buf_json(&again, (const char *)g.s, g.n);
  if (again.err || again.len != b.len || memcmp(again.p, b.p, b.len) != 0) abort();
  kc_buf_free(&again);
  free((void *)g.s);

  kc_buf u = {0};
  kc_buf_url(&u, in, size);
  if (u.err) abort();
  size_t k = 0;
  for (size_t i = 0; i < u.len; k++) {
    char c = u.p[i];
    if (c == '%') {
      if (u.len - i < 3) abort();
      int hi = hexv(u.p[i + 1]), lo = hexv(u.p[i + 2]);
      if (hi < 0 || lo < 0 || k >= size || (uint8_t)(hi * 16 + lo) != data[k]) abort();
      i += 3;
    } else {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~'))
        abort();
      if (k >= size || (uint8_t)c != data[k]) abort();
      i++;
    }
  }
  if (k != size) abort();

  kc_buf_free(&u);
  kc_buf_free(&b);
  kc_buf_free(&want);
  free(in);
  return 0;
}
