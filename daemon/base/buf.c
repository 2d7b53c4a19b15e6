/* SPDX-License-Identifier: Apache-2.0 */
/* buf: see buf.h. */
#include "base/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_MIN 256

static int fail(kc_buf *b, int err) {
  if (!b->err) b->err = err;
  b->room = b->len; /* every later reserve takes the slow path and fails */
  return b->err;
}

static void set_room(kc_buf *b) {
  b->room = b->cap;
  if (b->max && b->room && b->max < b->room - 1) b->room = b->max + 1;
  if (b->room < b->len) b->room = b->len;
}

kc_buf kc_buf_fixed(char *mem, size_t cap) {
  kc_buf b = {.p = mem, .cap = cap, .room = cap, .fixed = true};
  if (cap) mem[0] = '\0';
  else b.err = -ENOSPC;
  return b;
}

void kc_buf_set_max(kc_buf *b, size_t max) {
  b->max = max;
  if (!b->err) set_room(b);
}

int kc_buf_grow_(kc_buf *b, size_t more) {
  if (b->err) return b->err;
  if (more > SIZE_MAX - 1 - b->len) return fail(b, -ENOMEM);
  size_t need = b->len + more + 1;
  if (b->max && need - 1 > b->max) return fail(b, -E2BIG);
  if (need <= b->cap) { /* only the limit's room was short: cannot happen, kept safe */
    set_room(b);
    return 0;
  }
  if (b->fixed) return fail(b, -ENOSPC);
  size_t cap = b->cap ? b->cap : BUF_MIN;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) {
      cap = need;
      break;
    }
    cap *= 2;
  }
  if (b->max && cap > b->max + 1) cap = b->max + 1;
  char *p = realloc(b->p, cap);
  if (!p) return fail(b, -ENOMEM);
  if (!b->p) p[0] = '\0';
  b->p = p;
  b->cap = cap;
  set_room(b);
  return 0;
}

void kc_buf_add(kc_buf *b, const char *s, size_t n) {
  if (kc_buf_reserve(b, n)) {
    if (b->fixed && b->err == -ENOSPC && b->cap > b->len + 1) { /* a fixed buffer keeps what fits */
      size_t fit = b->cap - 1 - b->len;
      memcpy(b->p + b->len, s, fit);
      b->len += fit;
      b->p[b->len] = '\0';
      b->room = b->len;
    }
    return;
  }
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void kc_buf_puts(kc_buf *b, const char *s) { kc_buf_add(b, s, strlen(s)); }

void kc_buf_putc(kc_buf *b, char c) { kc_buf_add(b, &c, 1); }

void kc_buf_set(kc_buf *b, const char *s, size_t n) {
  kc_buf_reset(b);
  kc_buf_add(b, s, n);
}

static void kc_buf_vprintf(kc_buf *b, const char *fmt, va_list ap) {
  if (b->err) return;
  va_list again;
  va_copy(again, ap);
  size_t avail = b->room > b->len ? b->room - b->len : 0;
  int n = vsnprintf(avail ? b->p + b->len : NULL, avail, fmt, ap);
  if (n < 0) {
    if (avail) b->p[b->len] = '\0';
    fail(b, -EINVAL);
  } else if ((size_t)n < avail) {
    b->len += (size_t)n;
  } else if (b->fixed) {
    if (avail) b->len += avail - 1; /* vsnprintf wrote what fits */
    fail(b, -ENOSPC);
  } else {
    if (avail) b->p[b->len] = '\0';
    if (kc_buf_reserve(b, (size_t)n) == 0) {
      vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
      b->len += (size_t)n;
    }
  }
  va_end(again);
}

void kc_buf_printf(kc_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kc_buf_vprintf(b, fmt, ap);
  va_end(ap);
}

void kc_errf(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  kc_buf b = kc_buf_fixed(err, errlen);
  va_list ap;
  va_start(ap, fmt);
  kc_buf_vprintf(&b, fmt, ap);
  va_end(ap);
}

size_t kc_utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t need;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) need = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) need = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) need = 4, min = 0x10000;
  else return 0;
  if (n < need) return 0;
  unsigned cp = c & (need == 2 ? 0x1f : need == 3 ? 0x0f : 0x07);
  for (size_t i = 1; i < need; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return need;
}

/* 0: written as is; 1: escaped; 2: the start of a multi-byte sequence
 * (or an invalid byte), checked by kc_utf8_len. */
static const unsigned char json_class[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    ['"'] = 1, ['\\'] = 1,
    [0x80] = 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};

void kc_buf_json_body(kc_buf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  if (!n) return;
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, run = 0;
  while (i < n) {
    unsigned cls = json_class[u[i]];
    if (cls == 0) {
      i++;
      continue;
    }
    if (cls == 2) {
      size_t l = kc_utf8_len(u + i, n - i);
      if (l) {
        i += l;
        continue;
      }
    }
    kc_buf_add(b, s + run, i - run);
    unsigned char c = u[i++];
    run = i;
    char e = 0;
    switch (c) {
    case '"': e = '"'; break;
    case '\\': e = '\\'; break;
    case '\b': e = 'b'; break;
    case '\f': e = 'f'; break;
    case '\n': e = 'n'; break;
    case '\r': e = 'r'; break;
    case '\t': e = 't'; break;
    default: break;
    }
    if (e) {
      char esc[2] = {'\\', e};
      kc_buf_add(b, esc, 2);
    } else if (cls == 2) {
      kc_buf_add(b, "\xef\xbf\xbd", 3); /* U+FFFD */
    } else {
      char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      kc_buf_add(b, esc, 6);
    }
  }
  kc_buf_add(b, s + run, n - run);
}

void kc_buf_json(kc_buf *b, const char *s, size_t n) {
  kc_buf_putc(b, '"');
  kc_buf_json_body(b, s, n);
  kc_buf_putc(b, '"');
}

void kc_buf_json_c(kc_buf *b, const char *s) { kc_buf_json(b, s ? s : "", s ? strlen(s) : 0); }

void kc_buf_url(kc_buf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  if (!n) return;
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~')
      continue;
    kc_buf_add(b, s + run, i - run);
    char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
    kc_buf_add(b, esc, 3);
    run = i + 1;
  }
  kc_buf_add(b, s + run, n - run);
}

void kc_buf_reset(kc_buf *b) {
  b->len = 0;
  b->err = 0;
  if (b->p && b->cap) b->p[0] = '\0';
  set_room(b);
}

void kc_buf_free(kc_buf *b) {
  if (!b->fixed) {
    free(b->p);
    b->p = NULL;
    b->cap = 0;
  }
  b->len = 0;
  b->err = 0;
  set_room(b);
}

char *kc_buf_take(kc_buf *b) {
  char *p = b->err || b->fixed ? NULL : b->p;
  if (p) {
    b->p = NULL;
    b->cap = 0;
  }
  kc_buf_free(b);
  return p;
}

int kc_array_reserve(void *arrp, size_t *cap, size_t need, size_t elem, size_t first) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : first ? first : 1;
  while (nc < need) {
    if (nc > SIZE_MAX / 2) return -ENOMEM;
    nc *= 2;
  }
  if (nc > SIZE_MAX / elem) return -ENOMEM;
  void *old, *p;
  memcpy(&old, arrp, sizeof old); /* arrp points at a T *: no aliasing through void ** */
  if (!(p = realloc(old, nc * elem))) return -ENOMEM;
  memcpy(arrp, &p, sizeof p);
  *cap = nc;
  return 0;
}
