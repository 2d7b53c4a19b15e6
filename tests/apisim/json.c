/* SPDX-License-Identifier: Apache-2.0 */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

jv *jv_new(enum jt t)
{
  jv *v = sim_xcalloc(1, sizeof *v);
  v->t = t;
  return v;
}

jv *jv_strn_new(const char *s, size_t n)
{
  jv *v = jv_new(J_STR);
  v->u.s = sim_xstrndup(s, n);
  v->n = n;
  return v;
}

jv *jv_str_new(const char *s) { return jv_strn_new(s, strlen(s)); }

jv *jv_int_new(int64_t i)
{
  jv *v = jv_new(J_NUM);
  v->u.s = sim_xasprintf("%lld", (long long)i);
  v->n = strlen(v->u.s);
  return v;
}

jv *jv_bool_new(bool b) { return jv_new(b ? J_TRUE : J_FALSE); }

void jv_free(jv *v)
{
  if (!v) return;
  switch (v->t) {
  case J_STR:
  case J_NUM: free(v->u.s); break;
  case J_ARR:
    for (size_t i = 0; i < v->n; i++) jv_free(v->u.a[i]);
    free(v->u.a);
    break;
  case J_OBJ:
    for (size_t i = 0; i < v->n; i++) {
      free(v->u.o[i].k);
      jv_free(v->u.o[i].v);
    }
    free(v->u.o);
    break;
  default: break;
  }
  free(v);
}

jv *jv_copy(const jv *v)
{
  if (!v) return NULL;
  jv *c = jv_new(v->t);
  switch (v->t) {
  case J_STR:
  case J_NUM:
    c->u.s = sim_xstrndup(v->u.s, v->n);
    c->n = v->n;
    break;
  case J_ARR:
    c->u.a = sim_xmalloc(sizeof(jv *) * (v->n ? v->n : 1));
    c->n = c->cap = v->n;
    for (size_t i = 0; i < v->n; i++) c->u.a[i] = jv_copy(v->u.a[i]);
    break;
  case J_OBJ:
    c->u.o = sim_xmalloc(sizeof(struct jkv) * (v->n ? v->n : 1));
    c->n = c->cap = v->n;
    for (size_t i = 0; i < v->n; i++) {
      c->u.o[i].k = sim_xstrdup(v->u.o[i].k);
      c->u.o[i].v = jv_copy(v->u.o[i].v);
    }
    break;
  default: break;
  }
  return c;
}

bool jv_equal(const jv *a, const jv *b)
{
  if (!a || !b) return a == b;
  if (a->t != b->t) return false;
  switch (a->t) {
  case J_STR: return a->n == b->n && memcmp(a->u.s, b->u.s, a->n) == 0;
  case J_NUM:
    if (a->n == b->n && memcmp(a->u.s, b->u.s, a->n) == 0) return true;
    return strtod(a->u.s, NULL) == strtod(b->u.s, NULL);
  case J_ARR:
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++)
      if (!jv_equal(a->u.a[i], b->u.a[i])) return false;
    return true;
  case J_OBJ:
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++) {
      jv *o = jv_get(b, a->u.o[i].k);
      if (!o || !jv_equal(a->u.o[i].v, o)) return false;
    }
    return true;
  default: return true;
  }
}

jv *jv_get(const jv *obj, const char *key)
{
  if (!obj || obj->t != J_OBJ) return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp(obj->u.o[i].k, key) == 0) return obj->u.o[i].v;
  return NULL;
}

jv *jv_geta(const jv *obj, ...)
{
  va_list ap;
  va_start(ap, obj);
  const char *k;
  const jv *v = obj;
  while (v && (k = va_arg(ap, const char *))) v = jv_get(v, k);
  va_end(ap);
  return (jv *)v;
}

const char *jv_str(const jv *v) { return v && v->t == J_STR ? v->u.s : NULL; }
const char *jv_gets(const jv *obj, const char *key) { return jv_str(jv_get(obj, key)); }

bool jv_int(const jv *v, int64_t *out)
{
  if (!v || v->t != J_NUM) return false;
  char *end;
  long long x = strtoll(v->u.s, &end, 10);
  if (*end) {
    double d = strtod(v->u.s, &end);
    if (*end || d != (double)(long long)d) return false;
    x = (long long)d;
  }
  *out = x;
  return true;
}

static void obj_append(jv *obj, char *key, jv *val)
{
  if (obj->n == obj->cap) {
    obj->cap = obj->cap ? obj->cap * 2 : 4;
    obj->u.o = sim_xrealloc(obj->u.o, obj->cap * sizeof(struct jkv));
  }
  obj->u.o[obj->n].k = key;
  obj->u.o[obj->n].v = val;
  obj->n++;
}

void jv_set(jv *obj, const char *key, jv *val)
{
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp(obj->u.o[i].k, key) == 0) {
      jv_free(obj->u.o[i].v);
      obj->u.o[i].v = val;
      return;
    }
  obj_append(obj, sim_xstrdup(key), val);
}

void jv_set_str(jv *obj, const char *key, const char *s) { jv_set(obj, key, jv_str_new(s)); }

bool jv_del(jv *obj, const char *key)
{
  if (!obj || obj->t != J_OBJ) return false;
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp(obj->u.o[i].k, key) == 0) {
      free(obj->u.o[i].k);
      jv_free(obj->u.o[i].v);
      memmove(&obj->u.o[i], &obj->u.o[i + 1], (obj->n - i - 1) * sizeof(struct jkv));
      obj->n--;
      return true;
    }
  return false;
}

jv *jv_obj_ensure(jv *obj, const char *key)
{
  jv *v = jv_get(obj, key);
  if (v && v->t == J_OBJ) return v;
  v = jv_new(J_OBJ);
  jv_set(obj, key, v);
  return v;
}

void jv_push(jv *arr, jv *val) { jv_arr_insert(arr, arr->n, val); }

void jv_arr_insert(jv *arr, size_t i, jv *val)
{
  if (arr->n == arr->cap) {
    arr->cap = arr->cap ? arr->cap * 2 : 4;
    arr->u.a = sim_xrealloc(arr->u.a, arr->cap * sizeof(jv *));
  }
  memmove(&arr->u.a[i + 1], &arr->u.a[i], (arr->n - i) * sizeof(jv *));
  arr->u.a[i] = val;
  arr->n++;
}

void jv_arr_remove(jv *arr, size_t i)
{
  jv_free(arr->u.a[i]);
  memmove(&arr->u.a[i], &arr->u.a[i + 1], (arr->n - i - 1) * sizeof(jv *));
  arr->n--;
}

/* ---- parser ---- */

struct pctx {
  jv *root;
  jv **stack;
  size_t depth, cap;
  char *key; /* pending object key */
};

static int add_value(struct pctx *c, jv *v)
{
  if (c->depth == 0) {
    if (c->root) { jv_free(v); return 0; }
    c->root = v;
  } else {
    jv *top = c->stack[c->depth - 1];
    if (top->t == J_ARR) {
      jv_push(top, v);
    } else {
      if (!c->key) { jv_free(v); return 0; }
      /* Duplicate keys: the last one wins, as in Go. */
      bool dup = false;
      for (size_t i = 0; i < top->n; i++)
        if (strcmp(top->u.o[i].k, c->key) == 0) {
          jv_free(top->u.o[i].v);
          top->u.o[i].v = v;
          free(c->key);
          dup = true;
          break;
        }
      if (!dup) obj_append(top, c->key, v);
      c->key = NULL;
    }
  }
  if (v->t == J_ARR || v->t == J_OBJ) {
    if (c->depth == c->cap) {
      c->cap = c->cap ? c->cap * 2 : 16;
      c->stack = sim_xrealloc(c->stack, c->cap * sizeof(jv *));
    }
    if (c->depth >= 10000) return 0; /* nesting bomb */
    c->stack[c->depth++] = v;
  }
  return 1;
}

static int cb_null(void *ctx) { return add_value(ctx, jv_new(J_NULL)); }
static int cb_bool(void *ctx, int b) { return add_value(ctx, jv_new(b ? J_TRUE : J_FALSE)); }
static int cb_number(void *ctx, const char *s, size_t n)
{
  jv *v = jv_new(J_NUM);
  v->u.s = sim_xstrndup(s, n);
  v->n = n;
  return add_value(ctx, v);
}
static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
  return add_value(ctx, jv_strn_new((const char *)s, n));
}
static int cb_start_map(void *ctx) { return add_value(ctx, jv_new(J_OBJ)); }
static int cb_map_key(void *ctx, const unsigned char *s, size_t n)
{
  struct pctx *c = ctx;
  free(c->key);
  c->key = sim_xstrndup((const char *)s, n);
  return 1;
}
static int cb_end(void *ctx)
{
  struct pctx *c = ctx;
  if (c->depth) c->depth--;
  return 1;
}
static int cb_start_array(void *ctx) { return add_value(ctx, jv_new(J_ARR)); }

static const yajl_callbacks cbs = {
  cb_null, cb_bool, NULL, NULL, cb_number, cb_string, cb_start_map, cb_map_key, cb_end,
  cb_start_array, cb_end,
};

jv *jv_parse(const char *buf, size_t len, char *err, size_t errlen)
{
  struct pctx c = {0};
  yajl_handle h = yajl_alloc(&cbs, NULL, &c);
  if (!h) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  yajl_status st = yajl_parse(h, (const unsigned char *)buf, len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  if (st != yajl_status_ok) {
    unsigned char *m = yajl_get_error(h, 0, (const unsigned char *)buf, len);
    if (err) snprintf(err, errlen, "%s", m ? (char *)m : "invalid JSON");
    if (m) yajl_free_error(h, m);
    yajl_free(h);
    free(c.key);
    free(c.stack);
    jv_free(c.root);
    return NULL;
  }
  yajl_free(h);
  free(c.key);
  free(c.stack);
  if (!c.root && err) snprintf(err, errlen, "empty document");
  return c.root;
}

/* ---- writer ---- */

static void write_v(struct sim_buf *b, const jv *v, bool skip_type)
{
  switch (v->t) {
  case J_NULL: sim_buf_put(b, "null", 4); break;
  case J_TRUE: sim_buf_put(b, "true", 4); break;
  case J_FALSE: sim_buf_put(b, "false", 5); break;
  case J_NUM: sim_buf_put(b, v->u.s, v->n); break;
  case J_STR: sim_buf_put_jstr(b, v->u.s, v->n); break;
  case J_ARR:
    sim_buf_putc(b, '[');
    for (size_t i = 0; i < v->n; i++) {
      if (i) sim_buf_putc(b, ',');
      write_v(b, v->u.a[i], false);
    }
    sim_buf_putc(b, ']');
    break;
  case J_OBJ: {
    sim_buf_putc(b, '{');
    bool first = true;
    for (size_t i = 0; i < v->n; i++) {
      const char *k = v->u.o[i].k;
      if (skip_type && (strcmp(k, "kind") == 0 || strcmp(k, "apiVersion") == 0)) continue;
      if (!first) sim_buf_putc(b, ',');
      first = false;
      sim_buf_put_jstr(b, k, strlen(k));
      sim_buf_putc(b, ':');
      write_v(b, v->u.o[i].v, false);
    }
    sim_buf_putc(b, '}');
    break;
  }
  }
}

void jv_write(struct sim_buf *b, const jv *v) { write_v(b, v, false); }
void jv_write_skip_type(struct sim_buf *b, const jv *v) { write_v(b, v, true); }

char *jv_dump(const jv *v, size_t *len)
{
  struct sim_buf b = {0};
  write_v(&b, v, false);
  return sim_buf_steal(&b, len);
}
