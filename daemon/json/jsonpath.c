/* SPDX-License-Identifier: Apache-2.0 */
/* jsonpath: see jsonpath.h. Two parts: the path grammar and the scanner. */
#include "json/jsonpath.h"

#include <errno.h>
#include <string.h>

/* ---- paths: a.b, a["k.with.dots"], a[3], a[] ---- */

#define BAD(reason) (why ? (void)(*why = (reason)) : (void)0, -EINVAL)

int kc_path_next(const char **pp, kc_path_seg *s, bool first, const char **why) {
  const char *p = *pp;
  if (*p == '\0') return first ? BAD("empty path") : 0;
  if (!first) {
    if (*p == '.') {
      p++;
      if (*p == '\0') return BAD("path ends with '.'");
      if (*p == '.' || *p == '[') return BAD("empty path segment");
    } else if (*p != '[') {
      return BAD("expected '.' or '[' after ]");
    }
  } else if (*p == '.') {
    return BAD("empty path segment");
  }
  if (*p == '[') {
    p++;
    if (*p == ']') {
      s->type = KC_PATH_EACH;
      *pp = p + 1;
      return 1;
    }
    if (*p == '"') {
      const char *start = ++p;
      while (*p && *p != '"') p++;
      if (*p != '"') return BAD("unterminated [\"...\"]");
      if (p[1] != ']') return BAD("missing ]");
      s->type = KC_PATH_KEY;
      s->key = start;
      s->len = (size_t)(p - start);
      *pp = p + 2;
      return 1;
    }
    if (*p < '0' || *p > '9') return BAD("expected [N], [] or [\"key\"]");
    size_t n = 0;
    while (*p >= '0' && *p <= '9') {
      if (n > (SIZE_MAX - 9) / 10) return BAD("index too large");
      n = n * 10 + (size_t)(*p - '0');
      p++;
    }
    if (*p != ']') return BAD("missing ]");
    s->type = KC_PATH_INDEX;
    s->index = n;
    *pp = p + 1;
    return 1;
  }
  const char *start = p;
  while (*p && *p != '.' && *p != '[') {
    if (*p == ']' || *p == '"') return BAD("unexpected character in key");
    p++;
  }
  if (p == start) return BAD("empty path segment"); /* cannot happen: checked above */
  s->type = KC_PATH_KEY;
  s->key = start;
  s->len = (size_t)(p - start);
  *pp = p;
  return 1;
}

#undef BAD

int kc_path_parse(const char *path, kc_path_seg *segs, size_t max, bool allow_each) {
  if (!path) return -EINVAL;
  size_t n = 0;
  kc_path_seg sg;
  int rc;
  while ((rc = kc_path_next(&path, &sg, n == 0, NULL)) == 1) {
    if (sg.type == KC_PATH_EACH && !allow_each) return -EINVAL;
    if (n == max) return -E2BIG;
    segs[n++] = sg;
  }
  if (rc < 0) return rc;
  return n > INT32_MAX ? -E2BIG : (int)n;
}

const char *kc_path_problem(const char *path, bool allow_each) {
  if (!path) return "no path";
  const char *why = NULL;
  kc_path_seg sg;
  int rc;
  bool first = true;
  while ((rc = kc_path_next(&path, &sg, first, &why)) == 1) {
    first = false;
    if (sg.type == KC_PATH_EACH && !allow_each) return "[] (every element) is not allowed here";
  }
  return rc < 0 ? why : NULL;
}

bool kc_json_parse_i64(const char *s, size_t len, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (i < len && s[i] == '-') {
    neg = true;
    i++;
  }
  if (i == len) return false;
  uint64_t v = 0;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return false;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

/* ---- lookups: the text walked with jsonlex's scanners (jsonlex.h) ---- */

static inline const char *ws(const char *p, const char *end) { return kc_json_skip_ws(p, end); }

/* Where the value at p ends, or NULL (not JSON). Place holders of a text
 * with holes (kc_json_doc) count as values. */
static inline const char *skip_value(const kc_json_doc *d, const char *p, const char *end) {
  return kc_json_scan_value(p, end, d->hole ? (unsigned char)KC_JSON_HOLE : -1);
}

static enum kc_json_type type_of(char c) {
  switch (c) {
  case '{': return KC_JSON_OBJECT;
  case '[': return KC_JSON_ARRAY;
  case '"': return KC_JSON_STRING;
  case 'n': return KC_JSON_NULL;
  case 't': case 'f': return KC_JSON_BOOL;
  default: return KC_JSON_NUMBER;
  }
}

/* Past the member or element value at p and the ',' after it: the start of
 * the next one, or NULL at the end of the container (or a malformed text). */
static const char *next_item(const kc_json_doc *d, const char *p, const char *end) {
  if (!(p = skip_value(d, p, end))) return NULL;
  p = ws(p, end);
  return p < end && *p == ',' ? ws(p + 1, end) : NULL;
}

/* Where the value at p really is: a hole's text (kc_json_doc), else p. */
static const char *deref(const kc_json_doc *d, const char *p, const char **end) {
  if (!d->hole || p >= *end || *p != KC_JSON_HOLE) return p;
  kc_str t = d->hole(d->ud, p);
  if (!t.ptr || !t.len) return NULL;
  *end = t.ptr + t.len;
  return t.ptr;
}

/* Steps from the value at p into the member/element named by s. Returns the
 * start of the child value, or NULL when absent. */
static const char *step(const kc_json_doc *d, const char *p, const char *end,
                        const kc_path_seg *s) {
  if (s->type == KC_PATH_KEY) {
    if (*p != '{') return NULL;
    p = ws(p + 1, end);
    if (p < end && *p == '}') return NULL;
    while (p < end && *p == '"') {
      const char *k = p + 1;
      const char *ke = kc_json_scan_string(p, end);
      if (!ke) return NULL;
      bool hit = kc_json_unescaped_eq(k, (size_t)(ke - 1 - k), s->key, s->len);
      p = ws(ke, end);
      if (p >= end || *p != ':') return NULL;
      p = ws(p + 1, end);
      if (p >= end) return NULL;
      if (hit) return p;
      if (!(p = next_item(d, p, end))) return NULL;
    }
    return NULL;
  }
  if (*p != '[') return NULL;
  p = ws(p + 1, end);
  if (p < end && *p == ']') return NULL;
  for (size_t i = 0; p < end; i++) {
    if (i == s->index) return p;
    if (!(p = next_item(d, p, end))) return NULL;
  }
  return NULL;
}

static void make_value(const kc_json_doc *d, const char *p, const char *end, kc_json_value *out) {
  const char *e = skip_value(d, p, end);
  if (!e) {
    *out = (kc_json_value){KC_JSON_ABSENT, {NULL, 0}};
    return;
  }
  out->type = type_of(*p);
  out->raw = (kc_str){p, (size_t)(e - p)};
}

static int validate_path(const char *path, bool allow_each) {
  if (!path) return -EINVAL;
  kc_path_seg s;
  int rc;
  bool first = true;
  while ((rc = kc_path_next(&path, &s, first, NULL)) == 1) {
    first = false;
    if (s.type == KC_PATH_EACH && !allow_each) return -EINVAL;
  }
  return rc;
}

int kc_json_doc_get(const kc_json_doc *d, const char *path, kc_json_value *out) {
  int rc = validate_path(path, false);
  if (rc < 0) return rc;
  *out = (kc_json_value){KC_JSON_ABSENT, {NULL, 0}};
  if (!d->text.ptr) return 0;
  const char *end = d->text.ptr + d->text.len;
  const char *p = ws(d->text.ptr, end);
  kc_path_seg s;
  bool first = true;
  while (p && p < end && kc_path_next(&path, &s, first, NULL) == 1) {
    first = false;
    p = step(d, p, end, &s);
    if (p) p = deref(d, p, &end);
  }
  if (p && p < end) make_value(d, p, end, out);
  return 0;
}

int kc_json_get(kc_str json, const char *path, kc_json_value *out) {
  kc_json_doc d = {json, NULL, NULL};
  return kc_json_doc_get(&d, path, out);
}

typedef struct each_ctx {
  const kc_json_doc *doc;
  bool (*cb)(const kc_json_value *v, void *ud);
  void *ud;
  int count;
  bool stop;
} each_ctx;

static void each_walk(const char *p, const char *end, const char *path, bool first,
                      each_ctx *c) {
  kc_path_seg s;
  while (!c->stop) {
    p = ws(p, end);
    if (p >= end) return;
    if (!(p = deref(c->doc, p, &end))) return;
    if (kc_path_next(&path, &s, first, NULL) != 1) {
      kc_json_value v;
      make_value(c->doc, p, end, &v);
      if (v.type == KC_JSON_ABSENT) return;
      c->count++;
      if (!c->cb(&v, c->ud)) c->stop = true;
      return;
    }
    first = false;
    if (s.type != KC_PATH_EACH) {
      p = step(c->doc, p, end, &s);
      if (!p) return;
      continue;
    }
    if (*p != '[') return;
    p = ws(p + 1, end);
    if (p < end && *p == ']') return;
    while (p < end && !c->stop) {
      each_walk(p, end, path, false, c);
      if (!(p = next_item(c->doc, p, end))) return;
    }
    return;
  }
}

int kc_json_doc_get_each(const kc_json_doc *d, const char *path,
                         bool (*cb)(const kc_json_value *v, void *ud), void *ud) {
  int rc = validate_path(path, true);
  if (rc < 0) return rc;
  each_ctx c = {d, cb, ud, 0, false};
  if (d->text.ptr) each_walk(d->text.ptr, d->text.ptr + d->text.len, path, true, &c);
  return c.count;
}

int kc_json_string(const kc_json_value *v, char *buf, size_t cap) {
  if (v->type != KC_JSON_STRING || v->raw.len < 2) return -EINVAL;
  if (cap < 1) return -ENOSPC;
  size_t n;
  int rc = kc_json_unescape(v->raw.ptr + 1, v->raw.len - 2, buf, cap - 1, &n);
  if (rc) return rc;
  if (n > INT32_MAX) return -ENOSPC;
  buf[n] = '\0';
  return (int)n;
}

int kc_json_int64(const kc_json_value *v, int64_t *out) {
  if (v->type != KC_JSON_NUMBER) return -EINVAL;
  const char *s = v->raw.ptr;
  size_t n = v->raw.len, i = 0;
  if (i < n && s[i] == '-') i++;
  if (i == n) return -EINVAL;
  for (size_t j = i; j < n; j++)
    if (s[j] < '0' || s[j] > '9') return -EINVAL;
  int64_t r;
  if (!kc_json_parse_i64(s, n, &r)) return -ERANGE;
  *out = r;
  return 0;
}

bool kc_json_true(const kc_json_value *v) {
  return v->type == KC_JSON_BOOL && v->raw.len == 4 && memcmp(v->raw.ptr, "true", 4) == 0;
}

int kc_json_scalar_text(const kc_json_value *v, char *buf, size_t cap) {
  switch (v->type) {
  case KC_JSON_ABSENT:
  case KC_JSON_NULL:
    if (cap < 1) return -ENOSPC;
    buf[0] = '\0';
    return 0;
  case KC_JSON_STRING: return kc_json_string(v, buf, cap);
  case KC_JSON_NUMBER:
  case KC_JSON_BOOL:
    if (v->raw.len + 1 > cap || v->raw.len > INT32_MAX) return -ENOSPC;
    memcpy(buf, v->raw.ptr, v->raw.len);
    buf[v->raw.len] = '\0';
    return (int)v->raw.len;
  default: return -EINVAL;
  }
}
