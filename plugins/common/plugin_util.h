/* plugin_util.h: small helpers shared by the example plugins (header only,
 * static functions, no daemon headers: plugins build against
 * kctrld/plugin.h alone).
 *
 *  - pu_buf: a growable text buffer (libc malloc; never crosses the ABI);
 *  - JSON text helpers: string escaping, skipping a value, visiting the
 *    members of an object given as raw JSON text (what object_get returns);
 *  - key splitting ("namespace/name").
 * Context: any thread; nothing here has shared state.
 * Errors: buffers remember an allocation failure (pu_buf.oom) so callers
 * check once; parsers return NULL / -EINVAL on malformed text.
 */
#ifndef KCTRLD_PLUGIN_UTIL_H
#define KCTRLD_PLUGIN_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kctrld/plugin.h"

typedef struct pu_buf {
  char *p;
  size_t n, cap;
  bool oom;
} pu_buf;

static inline void pu_buf_free(pu_buf *b) {
  free(b->p);
  *b = (pu_buf){0};
}

static inline void pu_add(pu_buf *b, const char *s, size_t len) {
  if (b->oom) return;
  if (b->n + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + len + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  if (len) memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}

static inline void pu_str(pu_buf *b, const char *s) { pu_add(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static inline void pu_printf(pu_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) {
    b->oom = true; /* only short fragments go through here */
    return;
  }
  pu_add(b, tmp, (size_t)n);
}

/* Appends s[0..len) as a JSON string literal. */
static inline void pu_json_str(pu_buf *b, const char *s, size_t len) {
  pu_add(b, "\"", 1);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      pu_add(b, e, 2);
    } else if (c < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", c);
      pu_add(b, e, 6);
    } else {
      pu_add(b, s + i, 1);
    }
  }
  pu_add(b, "\"", 1);
}

static inline const char *pu_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* Returns the end of the JSON value starting at p (after leading
 * whitespace), or NULL when malformed. Strings, numbers, literals, nested
 * objects and arrays; no full validation (the text comes from the daemon's
 * cache, already validated). */
static inline const char *pu_json_skip(const char *p, const char *end) {
  p = pu_ws(p, end);
  if (p >= end) return NULL;
  if (*p == '"') {
    for (p++; p < end; p++) {
      if (*p == '\\') {
        p++;
      } else if (*p == '"') {
        return p + 1;
      }
    }
    return NULL;
  }
  if (*p == '{' || *p == '[') {
    int depth = 0;
    for (; p < end; p++) {
      if (*p == '"') {
        p = pu_json_skip(p, end);
        if (!p) return NULL;
        p--;
      } else if (*p == '{' || *p == '[') {
        depth++;
      } else if (*p == '}' || *p == ']') {
        if (--depth == 0) return p + 1;
      }
    }
    return NULL;
  }
  const char *s = p;
  while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\t' &&
         *p != '\r')
    p++;
  return p > s ? p : NULL;
}

/* Calls cb(key, value) for every member of the JSON object text `obj`;
 * key is the raw key literal with its quotes, value the raw value text.
 * cb returns false to stop. Returns the number of members visited, or
 * -EINVAL when obj is not an object. */
static inline int pu_json_members(kctrld_str obj, bool (*cb)(kctrld_str key, kctrld_str value, void *ud),
                                  void *ud) {
  if (!obj.ptr) return -EINVAL;
  const char *p = obj.ptr, *end = obj.ptr + obj.len;
  p = pu_ws(p, end);
  if (p >= end || *p != '{') return -EINVAL;
  p = pu_ws(p + 1, end);
  int n = 0;
  if (p < end && *p == '}') return 0;
  while (p < end) {
    if (*p != '"') return -EINVAL;
    const char *k = p;
    p = pu_json_skip(p, end);
    if (!p) return -EINVAL;
    kctrld_str key = {k, (size_t)(p - k)};
    p = pu_ws(p, end);
    if (p >= end || *p != ':') return -EINVAL;
    const char *v = pu_ws(p + 1, end);
    p = pu_json_skip(v, end);
    if (!p) return -EINVAL;
    kctrld_str val = {v, (size_t)(p - v)};
    n++;
    if (!cb(key, val, ud)) return n;
    p = pu_ws(p, end);
    if (p < end && *p == ',') {
      p = pu_ws(p + 1, end);
      continue;
    }
    if (p < end && *p == '}') return n;
    return -EINVAL;
  }
  return -EINVAL;
}

/* True when the raw JSON string literal `lit` (with quotes) is exactly s.
 * Escaped literals never match (keys we compare need no escapes). */
static inline bool pu_lit_eq(kctrld_str lit, const char *s) {
  size_t n = strlen(s);
  return lit.len == n + 2 && lit.ptr[0] == '"' && memcmp(lit.ptr + 1, s, n) == 0;
}

static inline bool pu_str_eq(kctrld_str a, const char *s) {
  size_t n = strlen(s);
  return a.len == n && (n == 0 || memcmp(a.ptr, s, n) == 0);
}

/* Splits "namespace/name" (or "name") into buffers. Returns 0 or -EINVAL. */
static inline int pu_split_key(const char *key, char *ns, size_t nscap, char *name, size_t namecap) {
  const char *slash = strchr(key, '/');
  size_t nslen = slash ? (size_t)(slash - key) : 0;
  const char *nm = slash ? slash + 1 : key;
  if (nslen >= nscap || strlen(nm) >= namecap || !*nm || strchr(nm, '/')) return -EINVAL;
  memcpy(ns, key, nslen);
  ns[nslen] = '\0';
  strcpy(name, nm);
  return 0;
}

/* Copies a slice into a C buffer; false when it does not fit. */
static inline bool pu_copy(kctrld_str s, char *buf, size_t cap) {
  if (s.len >= cap) return false;
  if (s.len) memcpy(buf, s.ptr, s.len);
  buf[s.len] = '\0';
  return true;
}

#endif
