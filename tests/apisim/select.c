/* SPDX-License-Identifier: Apache-2.0 */
#include "select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- label selector lexer ---- */

enum tok { T_ID, T_NOT, T_EQ, T_DEQ, T_NEQ, T_IN, T_NOTIN, T_GT, T_LT, T_OPEN, T_CLOSE,
           T_COMMA, T_END, T_ERR };

struct lexer {
  const char *s;
  size_t pos;
};

struct token {
  enum tok t;
  char lit[320];
};

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
static bool is_special(char c) { return c && strchr("=!(),><", c) != NULL; }

static void lex(struct lexer *l, struct token *t)
{
  while (is_ws(l->s[l->pos])) l->pos++;
  const char *p = l->s + l->pos;
  t->lit[0] = 0;
  if (!*p) { t->t = T_END; return; }
  if (is_special(*p)) {
    static const struct { const char *s; enum tok t; } sym[] = {
      {"!=", T_NEQ}, {"==", T_DEQ}, {"!", T_NOT}, {"(", T_OPEN}, {")", T_CLOSE},
      {",", T_COMMA}, {"=", T_EQ}, {">", T_GT}, {"<", T_LT},
    };
    for (size_t i = 0; i < sizeof sym / sizeof sym[0]; i++) {
      size_t n = strlen(sym[i].s);
      if (strncmp(p, sym[i].s, n) == 0) {
        t->t = sym[i].t;
        snprintf(t->lit, sizeof t->lit, "%s", sym[i].s);
        l->pos += n;
        return;
      }
    }
  }
  size_t n = 0;
  while (p[n] && !is_ws(p[n]) && !is_special(p[n])) n++;
  snprintf(t->lit, sizeof t->lit, "%.*s", (int)(n < 300 ? n : 300), p);
  l->pos += n;
  if (strcmp(t->lit, "in") == 0) t->t = T_IN;
  else if (strcmp(t->lit, "notin") == 0) t->t = T_NOTIN;
  else t->t = T_ID;
}

/* In value context the keywords are plain identifiers. */
static void consume(struct lexer *l, struct token *t, bool values)
{
  lex(l, t);
  if (values && (t->t == T_IN || t->t == T_NOTIN)) t->t = T_ID;
}

static void peek(struct lexer *l, struct token *t, bool values)
{
  size_t save = l->pos;
  consume(l, t, values);
  l->pos = save;
}

static bool alnum(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])? of at most 63 chars */
static bool qualified_part(const char *s, size_t n)
{
  if (n == 0 || n > 63 || !alnum(s[0]) || !alnum(s[n - 1])) return false;
  for (size_t i = 0; i < n; i++)
    if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return false;
  return true;
}

static bool dns_subdomain(const char *s, size_t n)
{
  if (n == 0 || n > 253) return false;
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && s[j] != '.') j++;
    if (j == i) return false;
    for (size_t k = i; k < j; k++) {
      char c = s[k];
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && k != i && k + 1 != j);
      if (!ok) return false;
    }
    i = j + 1;
    if (j < n && i == n) return false;
  }
  return true;
}

static char *validate_key(const char *k)
{
  const char *slash = strchr(k, '/');
  const char *name = k;
  if (slash) {
    if (strchr(slash + 1, '/'))
      return sim_xasprintf("key: Invalid value: \"%s\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')", k);
    if (!dns_subdomain(k, (size_t)(slash - k)))
      return sim_xasprintf("key: Invalid value: \"%s\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')", k);
    name = slash + 1;
  }
  size_t n = strlen(name);
  if (n == 0)
    return sim_xasprintf("key: Invalid value: \"%s\": name part must be non-empty", k);
  if (n > 63)
    return sim_xasprintf("key: Invalid value: \"%s\": name part must be no more than 63 characters", k);
  if (!qualified_part(name, n))
    return sim_xasprintf("key: Invalid value: \"%s\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')", k);
  return NULL;
}

static char *validate_value(const char *key, size_t i, const char *v)
{
  size_t n = strlen(v);
  if (n == 0) return NULL;
  if (n > 63)
    return sim_xasprintf("values[%zu][%s]: Invalid value: \"%s\": must be no more than 63 characters", i, key, v);
  if (!qualified_part(v, n))
    return sim_xasprintf("values[%zu][%s]: Invalid value: \"%s\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')", i, key, v);
  return NULL;
}

static void add_val(struct sim_lreq *r, const char *v)
{
  /* A set: no duplicates. */
  for (size_t i = 0; i < r->nvals; i++)
    if (strcmp(r->vals[i], v) == 0) return;
  r->vals = sim_xrealloc(r->vals, (r->nvals + 1) * sizeof(char *));
  r->vals[r->nvals++] = sim_xstrdup(v);
}

static void req_free(struct sim_lreq *r)
{
  free(r->key);
  for (size_t i = 0; i < r->nvals; i++) free(r->vals[i]);
  free(r->vals);
}

static int str_cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *parse_values(struct lexer *l, struct sim_lreq *r)
{
  struct token t, t2;
  consume(l, &t, true);
  if (t.t != T_OPEN) return sim_xasprintf("found '%s' expected: '('", t.lit);
  peek(l, &t, true);
  if (t.t == T_CLOSE) {
    consume(l, &t, true);
    add_val(r, "");
    return NULL;
  }
  if (t.t != T_ID && t.t != T_COMMA)
    return sim_xasprintf("found '%s', expected: ',', ')' or identifier", t.lit);
  for (;;) {
    consume(l, &t, true);
    if (t.t == T_ID) {
      add_val(r, t.lit);
      peek(l, &t2, true);
      if (t2.t == T_COMMA) continue;
      if (t2.t == T_CLOSE) break;
      return sim_xasprintf("found '%s', expected: ',' or ')'", t2.lit);
    } else if (t.t == T_COMMA) {
      if (r->nvals == 0) add_val(r, "");
      peek(l, &t2, true);
      if (t2.t == T_CLOSE) { add_val(r, ""); break; }
      if (t2.t == T_COMMA) { consume(l, &t2, true); add_val(r, ""); }
    } else {
      return sim_xasprintf("found '%s', expected: ',', or identifier", t.lit);
    }
  }
  consume(l, &t, true);
  if (t.t != T_CLOSE) return sim_xasprintf("found '%s', expected: ')'", t.lit);
  return NULL;
}

static char *parse_requirement(struct lexer *l, struct sim_lreq *r)
{
  struct token t;
  bool negated = false;
  consume(l, &t, true);
  if (t.t == T_NOT) {
    negated = true;
    consume(l, &t, true);
  }
  if (t.t != T_ID) return sim_xasprintf("found '%s', expected: identifier", t.lit);
  char *e = validate_key(t.lit);
  if (e) return e;
  r->key = sim_xstrdup(t.lit);
  peek(l, &t, true);
  if (negated || t.t == T_END || t.t == T_COMMA) {
    r->op = negated ? L_NOTEXISTS : L_EXISTS;
    return NULL;
  }
  consume(l, &t, false);
  switch (t.t) {
  case T_IN: r->op = L_IN; break;
  case T_NOTIN: r->op = L_NOTIN; break;
  case T_EQ: case T_DEQ: r->op = L_EQ; break;
  case T_NEQ: r->op = L_NEQ; break;
  case T_GT: r->op = L_GT; break;
  case T_LT: r->op = L_LT; break;
  default:
    return sim_xasprintf("found '%s', expected: %s", t.lit,
                         *t.lit ? "in, notin, =, ==, !=, gt, lt" : "in, notin, =, ==, !=, gt, lt");
  }
  if (r->op == L_IN || r->op == L_NOTIN) {
    if ((e = parse_values(l, r))) return e;
  } else {
    peek(l, &t, true);
    if (t.t == T_END || t.t == T_COMMA) {
      add_val(r, "");
    } else {
      consume(l, &t, true);
      if (t.t != T_ID) return sim_xasprintf("found '%s', expected: identifier", t.lit);
      add_val(r, t.lit);
    }
  }
  if (r->op == L_GT || r->op == L_LT) {
    char *end;
    errno = 0;
    r->num = strtoll(r->vals[0], &end, 10);
    if (!*r->vals[0] || *end || errno)
      return sim_xasprintf("values[0][%s]: Invalid value: \"%s\": for 'Gt', 'Lt' operators, the value must be an integer", r->key, r->vals[0]);
    return NULL;
  }
  qsort(r->vals, r->nvals, sizeof(char *), str_cmp);
  for (size_t i = 0; i < r->nvals; i++)
    if ((e = validate_value(r->key, i, r->vals[i]))) return e;
  return NULL;
}

static int req_cmp(const void *a, const void *b)
{
  return strcmp(((const struct sim_lreq *)a)->key, ((const struct sim_lreq *)b)->key);
}

int sim_lsel_parse(const char *s, struct sim_lsel *out, char **err)
{
  struct lexer l = {s, 0};
  struct token t;
  memset(out, 0, sizeof *out);
  *err = NULL;
  for (;;) {
    peek(&l, &t, true);
    if (t.t == T_END) break;
    if (t.t != T_ID && t.t != T_NOT) {
      *err = sim_xasprintf("found '%s', expected: !, identifier, or 'end of string'", t.lit);
      goto fail;
    }
    struct sim_lreq r = {0};
    char *e = parse_requirement(&l, &r);
    if (e) {
      req_free(&r);
      *err = sim_xasprintf("unable to parse requirement: %s", e);
      free(e);
      goto fail;
    }
    out->r = sim_xrealloc(out->r, (out->n + 1) * sizeof r);
    out->r[out->n++] = r;
    consume(&l, &t, true);
    if (t.t == T_END) break;
    if (t.t != T_COMMA) {
      *err = sim_xasprintf("found '%s', expected: ',' or 'end of string'", t.lit);
      goto fail;
    }
    peek(&l, &t, true);
    if (t.t != T_ID && t.t != T_NOT) {
      *err = sim_xasprintf("found '%s', expected: identifier after ','", t.lit);
      goto fail;
    }
  }
  if (out->n > 1) qsort(out->r, out->n, sizeof *out->r, req_cmp);
  return 0;
fail:
  sim_lsel_free(out);
  return -EINVAL;
}

void sim_lsel_free(struct sim_lsel *sel)
{
  for (size_t i = 0; i < sel->n; i++) req_free(&sel->r[i]);
  free(sel->r);
  sel->r = NULL;
  sel->n = 0;
}

bool sim_lsel_match(const struct sim_lsel *sel, const jv *labels)
{
  for (size_t i = 0; i < sel->n; i++) {
    const struct sim_lreq *r = &sel->r[i];
    const char *v = jv_gets(labels, r->key);
    bool ok = false;
    switch (r->op) {
    case L_EXISTS: ok = v != NULL; break;
    case L_NOTEXISTS: ok = v == NULL; break;
    case L_EQ:
    case L_IN:
    case L_NEQ:
    case L_NOTIN: {
      bool in = false;
      for (size_t j = 0; v && j < r->nvals && !in; j++) in = strcmp(v, r->vals[j]) == 0;
      ok = (r->op == L_EQ || r->op == L_IN) ? in : !in;
      break;
    }
    case L_GT:
    case L_LT: {
      if (!v) break;
      char *end;
      errno = 0;
      long long x = strtoll(v, &end, 10);
      if (!*v || *end || errno) break;
      ok = r->op == L_GT ? x > r->num : x < r->num;
      break;
    }
    }
    if (!ok) return false;
  }
  return true;
}

/* ---- field selectors ---- */

static char *unescape_value(const char *s, size_t n, bool *bad)
{
  struct sim_buf b = {0};
  *bad = false;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\') {
      if (i + 1 >= n || !strchr("\\,=", s[i + 1])) { *bad = true; break; }
      sim_buf_putc(&b, s[++i]);
    } else if (s[i] == ',' || s[i] == '=') {
      *bad = true;
      break;
    } else {
      sim_buf_putc(&b, s[i]);
    }
  }
  return sim_buf_steal(&b, NULL);
}

int sim_fsel_parse(const char *s, struct sim_fsel *out, char **err)
{
  memset(out, 0, sizeof *out);
  *err = NULL;
  size_t n = strlen(s), start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] == '\\') { i++; continue; }
    if (i < n && s[i] != ',') continue;
    size_t tl = i - start;
    const char *term = s + start;
    start = i + 1;
    if (tl == 0) continue;
    size_t j;
    size_t oplen = 0;
    bool neq = false;
    for (j = 0; j < tl; j++) {
      if (j + 1 < tl && term[j] == '!' && term[j + 1] == '=') { oplen = 2; neq = true; break; }
      if (j + 1 < tl && term[j] == '=' && term[j + 1] == '=') { oplen = 2; break; }
      if (term[j] == '=') { oplen = 1; break; }
    }
    bool bad = oplen == 0;
    char *val = NULL;
    if (!bad) val = unescape_value(term + j + oplen, tl - j - oplen, &bad);
    if (bad) {
      free(val);
      *err = sim_xasprintf("invalid selector: '%s'; can't understand '%.*s'", s, (int)tl, term);
      sim_fsel_free(out);
      return -EINVAL;
    }
    out->r = sim_xrealloc(out->r, (out->n + 1) * sizeof *out->r);
    out->r[out->n].field = sim_xstrndup(term, j);
    out->r[out->n].value = val;
    out->r[out->n].neq = neq;
    out->n++;
  }
  return 0;
}

void sim_fsel_free(struct sim_fsel *sel)
{
  for (size_t i = 0; i < sel->n; i++) {
    free(sel->r[i].field);
    free(sel->r[i].value);
  }
  free(sel->r);
  sel->r = NULL;
  sel->n = 0;
}

char *sim_field_value(const jv *dom, const char *field)
{
  const jv *v = dom;
  char part[256];
  const char *p = field;
  while (v && *p) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (n >= sizeof part) return sim_xstrdup("");
    memcpy(part, p, n);
    part[n] = 0;
    v = jv_get(v, part);
    p = dot ? dot + 1 : p + n;
  }
  if (strcmp(field, "status.podIPs") == 0 && v && v->t == J_ARR) {
    v = v->n ? jv_get(v->u.a[0], "ip") : NULL;
  }
  if (strcmp(field, "source") == 0) v = jv_get(v, "component");
  if (!v || v->t == J_NULL) {
    if (strcmp(field, "spec.hostNetwork") == 0 || strcmp(field, "spec.unschedulable") == 0)
      return sim_xstrdup("false");
    return sim_xstrdup("");
  }
  switch (v->t) {
  case J_STR: return sim_xstrndup(v->u.s, v->n);
  case J_NUM: return sim_xstrndup(v->u.s, v->n);
  case J_TRUE: return sim_xstrdup("true");
  case J_FALSE: return sim_xstrdup("false");
  default: return sim_xstrdup("");
  }
}
