/* SPDX-License-Identifier: Apache-2.0 */
/* isolate_wire: see isolate_wire.h. */
#include "hooks/isolate_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kc_iso_begin(kc_buf *b, const char *name) {
  kc_buf_puts(b, name);
}

/* The body of a field: p escaped, no separator. */
static void put_body(kc_buf *b, const char *p, size_t len) {
  size_t start = 0;
  for (size_t i = 0; p && i < len; i++) {
    char e = p[i] == '\\' ? '\\' : p[i] == '\t' ? 't' : p[i] == '\n' ? 'n' : 0;
    if (!e) continue;
    kc_buf_add(b, p + start, i - start);
    kc_buf_putc(b, '\\');
    kc_buf_putc(b, e);
    start = i + 1;
  }
  if (p) kc_buf_add(b, p + start, len - start);
}

void kc_iso_put(kc_buf *b, const char *p, size_t len) {
  kc_buf_putc(b, '\t');
  put_body(b, p, len);
}

static int put_span(void *ud, const char *p, size_t n) {
  put_body(ud, p, n);
  return 0;
}

void kc_iso_put_obj(kc_buf *b, const kc_obj *o) {
  kc_buf_putc(b, '\t');
  kc_obj_text_each(o, put_span, b);
}

void kc_iso_puts(kc_buf *b, const char *s) {
  kc_iso_put(b, s, s ? strlen(s) : 0);
}

void kc_iso_puti(kc_buf *b, int64_t v) {
  char t[24];
  int n = snprintf(t, sizeof t, "%" PRId64, v);
  kc_iso_put(b, t, (size_t)n);
}

void kc_iso_end(kc_buf *b) {
  kc_buf_putc(b, '\n');
}

void kc_iso_msg_free(kc_iso_msg *m) {
  free(m->f);
  memset(m, 0, sizeof *m);
}

static int push(kc_iso_msg *m, char *p, size_t len) {
  if (m->n == m->cap && m->cap >= KC_ISO_MAX_FIELDS) return -E2BIG;
  if (KC_ARRAY_ROOM(m->f, m->cap, m->n, 8) < 0) return -ENOMEM;
  m->f[m->n++] = (kc_str){p, len};
  return 0;
}

int kc_iso_parse(char *line, size_t len, kc_iso_msg *m) {
  m->n = 0;
  char *w = line, *field = line;
  for (size_t i = 0; i <= len; i++) {
    char c = i < len ? line[i] : '\t';
    if (c == '\n') return -EPROTO;
    if (c == '\t') {
      *w = '\0';
      int rc = push(m, field, (size_t)(w - field));
      if (rc < 0) return rc;
      field = ++w;
      continue;
    }
    if (c == '\\') {
      if (++i >= len) return -EPROTO;
      char e = line[i];
      c = e == '\\' ? '\\' : e == 't' ? '\t' : e == 'n' ? '\n' : 0;
      if (!c) return -EPROTO;
    }
    *w++ = c;
  }
  return m->n && m->f[0].len ? 0 : -EPROTO;
}

bool kc_iso_is(const kc_iso_msg *m, size_t i, const char *s) {
  return i < m->n && strcmp(m->f[i].ptr, s) == 0;
}

int kc_iso_int(const kc_iso_msg *m, size_t i, int64_t *out) {
  if (i >= m->n || !m->f[i].len) return -EPROTO;
  const char *p = m->f[i].ptr;
  bool neg = *p == '-';
  if (neg) p++;
  if (!*p) return -EPROTO;
  uint64_t v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return -EPROTO;
    if (v > (UINT64_MAX - 9) / 10) return -EPROTO;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return -EPROTO;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

const char *kc_iso_str(const kc_iso_msg *m, size_t i) {
  return i < m->n ? m->f[i].ptr : "";
}
