/* SPDX-License-Identifier: Apache-2.0 */
#include "fieldset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FS_MAX_DEPTH 512

struct sim_fset *sim_fset_new(void) { return sim_xcalloc(1, sizeof(struct sim_fset)); }

void sim_fset_free(struct sim_fset *s)
{
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) sim_fset_free(s->kid[i]);
  free(s->kid);
  free(s->pe);
  free(s);
}

struct sim_fset *sim_fset_copy(const struct sim_fset *s)
{
  struct sim_fset *c = sim_fset_new();
  c->pe = s->pe ? sim_xstrdup(s->pe) : NULL;
  c->member = s->member;
  if (s->n) {
    c->kid = sim_xmalloc(s->n * sizeof *c->kid);
    c->cap = c->n = s->n;
    for (size_t i = 0; i < s->n; i++) c->kid[i] = sim_fset_copy(s->kid[i]);
  }
  return c;
}

bool sim_fset_empty(const struct sim_fset *s)
{
  if (!s) return true;
  if (s->member) return false;
  for (size_t i = 0; i < s->n; i++)
    if (!sim_fset_empty(s->kid[i])) return false;
  return true;
}

size_t sim_fset_count(const struct sim_fset *s)
{
  if (!s) return 0;
  size_t c = s->member ? 1 : 0;
  for (size_t i = 0; i < s->n; i++) c += sim_fset_count(s->kid[i]);
  return c;
}

bool sim_fset_equal(const struct sim_fset *a, const struct sim_fset *b)
{
  struct sim_fset *x = sim_fset_copy(a), *y = sim_fset_copy(b);
  sim_fset_subtract(x, b);
  sim_fset_subtract(y, a);
  bool eq = sim_fset_empty(x) && sim_fset_empty(y);
  sim_fset_free(x);
  sim_fset_free(y);
  return eq;
}

static int pe_rank(const char *pe)
{
  switch (pe[0]) {
  case 'f': return 0;
  case 'k': return 1;
  case 'v': return 2;
  case 'i': return 3;
  default: return 4;
  }
}

int sim_fset_pe_cmp(const char *a, const char *b)
{
  int ra = pe_rank(a), rb = pe_rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  if (ra == 3) { /* indexes numerically */
    long x = strtol(a + 2, NULL, 10), y = strtol(b + 2, NULL, 10);
    if (x != y) return x < y ? -1 : 1;
  }
  return strcmp(a, b);
}

/* Index of pe among s's children, or where it would go (*found false). */
static size_t find_kid(const struct sim_fset *s, const char *pe, bool *found)
{
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = sim_fset_pe_cmp(s->kid[mid]->pe, pe);
    if (c == 0) { *found = true; return mid; }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

static struct sim_fset *kid_get(const struct sim_fset *s, const char *pe)
{
  bool f;
  size_t i = find_kid(s, pe, &f);
  return f ? s->kid[i] : NULL;
}

static struct sim_fset *kid_ensure(struct sim_fset *s, const char *pe)
{
  bool f;
  size_t i = find_kid(s, pe, &f);
  if (f) return s->kid[i];
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 4;
    s->kid = sim_xrealloc(s->kid, s->cap * sizeof *s->kid);
  }
  memmove(&s->kid[i + 1], &s->kid[i], (s->n - i) * sizeof *s->kid);
  struct sim_fset *k = sim_fset_new();
  k->pe = sim_xstrdup(pe);
  s->kid[i] = k;
  s->n++;
  return k;
}

/* Drops children that are neither members nor have members below. */
static void compact(struct sim_fset *s)
{
  size_t w = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (sim_fset_empty(s->kid[i])) sim_fset_free(s->kid[i]);
    else s->kid[w++] = s->kid[i];
  }
  s->n = w;
}

void sim_fset_insert(struct sim_fset *s, char *const *pe, size_t n)
{
  for (size_t i = 0; i < n; i++) s = kid_ensure(s, pe[i]);
  s->member = true;
}

static const struct sim_fset *walk(const struct sim_fset *s, char *const *pe, size_t n)
{
  for (size_t i = 0; s && i < n; i++) s = kid_get(s, pe[i]);
  return s;
}

bool sim_fset_has(const struct sim_fset *s, char *const *pe, size_t n)
{
  const struct sim_fset *t = walk(s, pe, n);
  return t && t->member;
}

bool sim_fset_has_at_or_under(const struct sim_fset *s, char *const *pe, size_t n)
{
  const struct sim_fset *t = walk(s, pe, n);
  return t && !sim_fset_empty(t);
}

void sim_fset_remove_tree(struct sim_fset *s, char *const *pe, size_t n)
{
  if (n == 0) {
    for (size_t i = 0; i < s->n; i++) sim_fset_free(s->kid[i]);
    s->n = 0;
    s->member = false;
    return;
  }
  struct sim_fset *k = kid_get(s, pe[0]);
  if (!k) return;
  sim_fset_remove_tree(k, pe + 1, n - 1);
  compact(s);
}

void sim_fset_union(struct sim_fset *dst, const struct sim_fset *src)
{
  if (src->member) dst->member = true;
  for (size_t i = 0; i < src->n; i++) sim_fset_union(kid_ensure(dst, src->kid[i]->pe), src->kid[i]);
}

void sim_fset_subtract(struct sim_fset *dst, const struct sim_fset *src)
{
  if (src->member) dst->member = false;
  for (size_t i = 0; i < src->n; i++) {
    struct sim_fset *k = kid_get(dst, src->kid[i]->pe);
    if (k) sim_fset_subtract(k, src->kid[i]);
  }
  compact(dst);
}

struct sim_fset *sim_fset_intersect(const struct sim_fset *a, const struct sim_fset *b)
{
  struct sim_fset *r = sim_fset_new();
  r->pe = a->pe ? sim_xstrdup(a->pe) : NULL;
  r->member = a->member && b->member;
  for (size_t i = 0; i < a->n; i++) {
    const struct sim_fset *k = kid_get(b, a->kid[i]->pe);
    if (!k) continue;
    struct sim_fset *x = sim_fset_intersect(a->kid[i], k);
    if (sim_fset_empty(x)) {
      sim_fset_free(x);
      continue;
    }
    if (r->n == r->cap) {
      r->cap = r->cap ? r->cap * 2 : 4;
      r->kid = sim_xrealloc(r->kid, r->cap * sizeof *r->kid);
    }
    r->kid[r->n++] = x; /* a's order is sorted already */
  }
  return r;
}

struct each_ctx {
  char **pe;
  size_t n, cap;
  sim_fset_fn fn;
  void *ud;
};

static void each_rec(const struct sim_fset *s, struct each_ctx *c)
{
  if (s->member) c->fn(c->pe, c->n, c->ud);
  for (size_t i = 0; i < s->n; i++) {
    if (c->n == c->cap) {
      c->cap = c->cap ? c->cap * 2 : 16;
      c->pe = sim_xrealloc(c->pe, c->cap * sizeof *c->pe);
    }
    c->pe[c->n++] = s->kid[i]->pe;
    each_rec(s->kid[i], c);
    c->n--;
  }
}

void sim_fset_each(const struct sim_fset *s, sim_fset_fn fn, void *ud)
{
  struct each_ctx c = {.fn = fn, .ud = ud};
  each_rec(s, &c);
  free(c.pe);
}

/* ---- fieldsV1 ---- */

static jv *to_v1(const struct sim_fset *s, bool root)
{
  jv *o = jv_new(J_OBJ);
  if (s->member && s->n && !root) jv_set(o, ".", jv_new(J_OBJ));
  for (size_t i = 0; i < s->n; i++)
    if (!sim_fset_empty(s->kid[i])) jv_set(o, s->kid[i]->pe, to_v1(s->kid[i], false));
  return o;
}

jv *sim_fset_to_v1(const struct sim_fset *s) { return to_v1(s, true); }

static bool pe_valid(const char *k, char *why, size_t whylen)
{
  char perr[128];
  if (strncmp(k, "f:", 2) == 0) return true;
  if (strncmp(k, "k:", 2) == 0 || strncmp(k, "v:", 2) == 0) {
    jv *v = jv_parse(k + 2, strlen(k + 2), perr, sizeof perr);
    bool ok = v && (k[0] == 'v' || v->t == J_OBJ);
    if (ok && k[0] == 'k' && v->n == 0) ok = false;
    jv_free(v);
    if (!ok) snprintf(why, whylen, "invalid %s element", k[0] == 'k' ? "key" : "value");
    return ok;
  }
  if (strncmp(k, "i:", 2) == 0) {
    const char *d = k + 2;
    if (!*d) goto bad_index;
    for (; *d; d++)
      if (*d < '0' || *d > '9') goto bad_index;
    return true;
  bad_index:
    snprintf(why, whylen, "invalid index element");
    return false;
  }
  snprintf(why, whylen, "unknown path element prefix");
  return false;
}

static int from_v1(const jv *v, struct sim_fset *s, int depth, char **err)
{
  if (!v || v->t != J_OBJ) {
    *err = sim_xstrdup("expected an object");
    return -EINVAL;
  }
  if (depth > FS_MAX_DEPTH) {
    *err = sim_xstrdup("too deeply nested");
    return -EINVAL;
  }
  if (v->n == 0 && s->pe) s->member = true;
  for (size_t i = 0; i < v->n; i++) {
    const char *k = v->u.o[i].k;
    const jv *c = v->u.o[i].v;
    if (strcmp(k, ".") == 0) {
      if (c->t != J_OBJ || c->n != 0 || !s->pe) {
        *err = sim_xstrdup("\".\" must be an empty object below a path element");
        return -EINVAL;
      }
      s->member = true;
      continue;
    }
    char why[64];
    if (!pe_valid(k, why, sizeof why)) {
      *err = sim_xasprintf("%s: %s", k, why);
      return -EINVAL;
    }
    int rc = from_v1(c, kid_ensure(s, k), depth + 1, err);
    if (rc < 0) {
      char *e = sim_xasprintf("%s: %s", k, *err);
      free(*err);
      *err = e;
      return rc;
    }
  }
  return 0;
}

int sim_fset_from_v1(const jv *v, struct sim_fset **out, char **err)
{
  *err = NULL;
  *out = NULL;
  struct sim_fset *s = sim_fset_new();
  int rc = from_v1(v, s, 0, err);
  if (rc < 0) {
    sim_fset_free(s);
    return rc;
  }
  compact(s);
  *out = s;
  return 0;
}

char *sim_fset_path_string(char *const *pe, size_t n)
{
  struct sim_buf b = {0};
  char perr[64];
  for (size_t i = 0; i < n; i++) {
    const char *e = pe[i];
    if (e[0] == 'f' && e[1] == ':') {
      sim_buf_putc(&b, '.');
      sim_buf_puts(&b, e + 2);
    } else if (e[0] == 'k' && e[1] == ':') {
      jv *k = jv_parse(e + 2, strlen(e + 2), perr, sizeof perr);
      sim_buf_putc(&b, '[');
      for (size_t j = 0; k && k->t == J_OBJ && j < k->n; j++) {
        if (j) sim_buf_putc(&b, ',');
        sim_buf_puts(&b, k->u.o[j].k);
        sim_buf_putc(&b, '=');
        jv_write(&b, k->u.o[j].v);
      }
      sim_buf_putc(&b, ']');
      jv_free(k);
    } else if (e[0] == 'v' && e[1] == ':') {
      sim_buf_puts(&b, "[=");
      sim_buf_puts(&b, e + 2);
      sim_buf_putc(&b, ']');
    } else if (e[0] == 'i' && e[1] == ':') {
      sim_buf_printf(&b, "[%s]", e + 2);
    } else {
      sim_buf_puts(&b, e);
    }
  }
  if (!b.len) sim_buf_putc(&b, '.');
  return sim_buf_steal(&b, NULL);
}
