/* SPDX-License-Identifier: Apache-2.0 */
/* selector: label and field selector strings. See selector.h. */
#include "kube/selector.h"

#include "base/buf.h"
#include "kube/kname.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------ */

/* Go's %q (strconv.Quote), close enough: valid multi-byte UTF-8 is kept. */
static void sb_goquote(kc_buf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  kc_buf_puts(b, "\"");
  for (size_t i = 0; i < n;) {
    unsigned c = u[i];
    if (c >= 0x80) {
      size_t l = kc_utf8_len(u + i, n - i);
      if (l) {
        kc_buf_add(b, s + i, l);
        i += l;
      } else {
        kc_buf_printf(b, "\\x%02x", c);
        i++;
      }
      continue;
    }
    switch (c) {
      case '"': kc_buf_puts(b, "\\\""); break;
      case '\\': kc_buf_puts(b, "\\\\"); break;
      case '\a': kc_buf_puts(b, "\\a"); break;
      case '\b': kc_buf_puts(b, "\\b"); break;
      case '\f': kc_buf_puts(b, "\\f"); break;
      case '\n': kc_buf_puts(b, "\\n"); break;
      case '\r': kc_buf_puts(b, "\\r"); break;
      case '\t': kc_buf_puts(b, "\\t"); break;
      case '\v': kc_buf_puts(b, "\\v"); break;
      default:
        if (c < 0x20 || c == 0x7f) kc_buf_printf(b, "\\x%02x", c);
        else kc_buf_add(b, s + i, 1);
    }
    i++;
  }
  kc_buf_puts(b, "\"");
}

static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen) {
  size_t n = alen < blen ? alen : blen;
  int c = n ? memcmp(a, b, n) : 0;
  if (c) return c;
  return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int str_cmp(kc_str a, kc_str b) { return bytes_cmp(a.ptr, a.len, b.ptr, b.len); }

/* Strict strconv.ParseInt(s, 10, 64). */
static bool parse_int64(const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (n > 0 && (s[0] == '+' || s[0] == '-')) neg = s[0] == '-', i = 1;
  if (i == n) return false;
  uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (lim - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

/* ---- label selector lexer (mirrors apimachinery's byte-wise lexer) ------- */

enum tok {
  T_ERROR = 0,
  T_EOS,
  T_CPAR,
  T_COMMA,
  T_NOT,
  T_DEQ,
  T_EQ,
  T_GT,
  T_ID,
  T_IN,
  T_LT,
  T_NEQ,
  T_NOTIN,
  T_OPAR,
};

typedef struct token {
  enum tok t;
  size_t pos;
  size_t len;
} token;

typedef struct lexer {
  const char *s;
  size_t n;
  size_t pos;
  token cur; /* next unconsumed token */
} lexer;

/* Like the Go lexer, a NUL byte reads as end of input (and is consumed). */
static unsigned char lread(lexer *l) {
  if (l->pos < l->n) return (unsigned char)l->s[l->pos++];
  l->pos++; /* so that unread() stays symmetric */
  return 0;
}

static bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
static bool is_special(unsigned char c) {
  return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

static enum tok special_tok(const char *s, size_t n) {
  if (n == 1) switch (s[0]) {
      case ')': return T_CPAR;
      case ',': return T_COMMA;
      case '!': return T_NOT;
      case '=': return T_EQ;
      case '>': return T_GT;
      case '<': return T_LT;
      case '(': return T_OPAR;
      default: return T_ERROR;
    }
  if (n == 2 && s[1] == '=') {
    if (s[0] == '=') return T_DEQ;
    if (s[0] == '!') return T_NEQ;
  }
  return T_ERROR;
}

static token lex(lexer *l) {
  token t = {T_EOS, 0, 0};
  unsigned char c;
  do c = lread(l);
  while (is_ws(c));
  if (c == 0) {
    t.pos = l->pos > l->n ? l->n : l->pos - 1;
    return t;
  }
  l->pos--;
  t.pos = l->pos;
  if (is_special(c)) {
    /* Longest run of specials that still forms a token ("!=", "=="). */
    size_t blen = 0;
    enum tok last = T_ERROR;
    size_t lastlen = 0;
    for (;;) {
      unsigned char ch = lread(l);
      if (ch == 0) break;
      if (!is_special(ch)) {
        l->pos--;
        break;
      }
      blen++;
      enum tok tk = special_tok(l->s + t.pos, blen);
      if (tk != T_ERROR) {
        last = tk;
        lastlen = blen;
      } else if (last != T_ERROR) {
        l->pos--;
        break;
      }
    }
    t.t = last; /* every single special is a token, so never T_ERROR */
    t.len = lastlen;
    return t;
  }
  for (;;) {
    unsigned char ch = lread(l);
    if (ch == 0) break;
    if (is_special(ch) || is_ws(ch)) {
      l->pos--;
      break;
    }
    t.len++;
  }
  t.t = T_ID;
  if (t.len == 2 && memcmp(l->s + t.pos, "in", 2) == 0) t.t = T_IN;
  else if (t.len == 5 && memcmp(l->s + t.pos, "notin", 5) == 0) t.t = T_NOTIN;
  return t;
}

/* In the Values context, "in" and "notin" are plain identifiers. */
static enum tok in_values(enum tok t) { return t == T_IN || t == T_NOTIN ? T_ID : t; }

static token peek(lexer *l) { return l->cur; }

static token consume(lexer *l) {
  token t = l->cur;
  if (t.t != T_EOS) l->cur = lex(l);
  return t;
}

/* ---- label selector parser ---------------------------------------------- */

typedef struct preq {
  enum kc_label_op op;
  size_t kpos, klen;
  size_t vfirst, nvals; /* range in the parser's value list */
  int64_t num;
} preq;

typedef struct pval {
  size_t pos, len;
} pval;

typedef struct parser {
  lexer lx;
  preq *reqs;
  size_t nreqs, capreqs;
  pval *vals;
  size_t nvals, capvals;
  kc_sel_error *err;
  kc_buf msg;
  bool oom;
} parser;

static void perr_start(parser *p, size_t pos) {
  kc_buf_reset(&p->msg);
  if (p->err) p->err->pos = pos;
}

static void perr_found(parser *p, token t, const char *fmt_after) {
  /* "found '<lit>', expected: ..." with the token's literal text. */
  perr_start(p, t.pos);
  kc_buf_puts(&p->msg, "found '");
  kc_buf_add(&p->msg, p->lx.s + t.pos, t.len);
  kc_buf_puts(&p->msg, fmt_after);
}

static int add_val(parser *p, size_t pos, size_t len) {
  if (KC_ARRAY_ROOM(p->vals, p->capvals, p->nvals, 16) < 0) {
    p->oom = true;
    return -ENOMEM;
  }
  p->vals[p->nvals++] = (pval){pos, len};
  return 0;
}

static const char *vptr(parser *p, const pval *v) { return p->lx.s + v->pos; }

/* Sorts and deduplicates the values of one requirement (Go: sets.String).
 * Insertion sort: value lists are short. */
static void sort_vals(parser *p, size_t first, size_t n) {
  pval *v = p->vals + first;
  for (size_t i = 1; i < n; i++) {
    pval x = v[i];
    size_t j = i;
    while (j > 0 && bytes_cmp(vptr(p, &v[j - 1]), v[j - 1].len, vptr(p, &x), x.len) > 0) {
      v[j] = v[j - 1];
      j--;
    }
    v[j] = x;
  }
}

static size_t dedup_vals(parser *p, size_t first, size_t n) {
  pval *v = p->vals + first;
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    if (out > 0 && bytes_cmp(vptr(p, &v[out - 1]), v[out - 1].len, vptr(p, &v[i]), v[i].len) == 0)
      continue;
    v[out++] = v[i];
  }
  return out;
}

/* "(" values ")" ; returns 0 or -EINVAL with the message set. */
static int parse_values(parser *p, size_t first, size_t *nout) {
  token t = consume(&p->lx);
  if (in_values(t.t) != T_OPAR) {
    perr_found(p, t, "' expected: '('");
    return -EINVAL;
  }
  token la = peek(&p->lx);
  size_t empty_pos = la.pos;
  switch (in_values(la.t)) {
    case T_CPAR:
      consume(&p->lx);
      if (add_val(p, empty_pos, 0)) return -ENOMEM;
      *nout = p->nvals - first;
      return 0;
    case T_ID:
    case T_COMMA:
      break;
    default:
      perr_found(p, la, "', expected: ',', ')' or identifier");
      return -EINVAL;
  }
  token lit = la; /* Go reports the first value's literal on a missing ')' */
  for (;;) {
    t = consume(&p->lx);
    enum tok tt = in_values(t.t);
    if (tt == T_ID) {
      if (add_val(p, t.pos, t.len)) return -ENOMEM;
      token t2 = peek(&p->lx);
      enum tok t2t = in_values(t2.t);
      if (t2t == T_COMMA) continue;
      if (t2t == T_CPAR) break;
      perr_found(p, t2, "', expected: ',' or ')'");
      return -EINVAL;
    } else if (tt == T_COMMA) {
      if (p->nvals == first && add_val(p, t.pos, 0)) return -ENOMEM; /* "(," */
      token t2 = peek(&p->lx);
      enum tok t2t = in_values(t2.t);
      if (t2t == T_CPAR) {
        if (add_val(p, t2.pos, 0)) return -ENOMEM; /* ",)" */
        break;
      }
      if (t2t == T_COMMA) {
        consume(&p->lx);
        if (add_val(p, t2.pos, 0)) return -ENOMEM; /* ",," */
      }
    } else {
      perr_found(p, t, "', expected: ',', or identifier");
      return -EINVAL;
    }
  }
  t = consume(&p->lx);
  if (in_values(t.t) != T_CPAR) { /* unreachable: the loop stops on ')' */
    perr_found(p, lit, "', expected: ')'");
    return -EINVAL;
  }
  *nout = p->nvals - first;
  return 0;
}

/* Go's NewRequirement checks on the values; key already validated. */
static int check_values(parser *p, const preq *r, size_t kpos) {
  char tmp[sizeof p->err->msg];
  kc_buf all = kc_buf_fixed(tmp, sizeof tmp);
  tmp[0] = '\0';
  int nerr = 0;
  size_t errpos = kpos;
  /* Go aggregates: one error prints bare, several as "[a, b]"; identical
   * messages collapse. Each message is built in `one` and appended. */
  char onebuf[sizeof p->err->msg];
  char firstbuf[sizeof p->err->msg];
  firstbuf[0] = '\0';
  for (size_t i = 0; i < r->nvals; i++) {
    const pval *v = &p->vals[r->vfirst + i];
    for (int pass = 0; pass < 2; pass++) {
      kc_buf one = kc_buf_fixed(onebuf, sizeof onebuf);
      onebuf[0] = '\0';
      if (pass == 0) {
        int64_t num;
        if (!(r->op == KC_LABEL_GT || r->op == KC_LABEL_LT) || parse_int64(vptr(p, v), v->len, &num))
          continue;
        kc_buf_printf(&one, "values[%zu]: Invalid value: ", i);
        sb_goquote(&one, vptr(p, v), v->len);
        kc_buf_puts(&one, ": for 'Gt', 'Lt' operators, the value must be an integer");
      } else {
        char dbuf[sizeof p->err->msg];
        kc_buf d = kc_buf_fixed(dbuf, sizeof dbuf);
        dbuf[0] = '\0';
        if (kc_name_label_value_errors(&d, vptr(p, v), v->len) == 0) continue;
        kc_buf_printf(&one, "values[%zu][", i);
        kc_buf_add(&one, p->lx.s + r->kpos, r->klen);
        kc_buf_puts(&one, "]: Invalid value: ");
        sb_goquote(&one, vptr(p, v), v->len);
        kc_buf_puts(&one, ": ");
        kc_buf_puts(&one, dbuf);
      }
      if (nerr == 0) {
        memcpy(firstbuf, onebuf, one.len + 1);
        errpos = v->pos;
      } else if (strcmp(firstbuf, onebuf) == 0) {
        continue;
      }
      if (nerr++) kc_buf_puts(&all, ", ");
      kc_buf_puts(&all, onebuf);
    }
  }
  if (nerr == 0) return 0;
  perr_start(p, errpos);
  kc_buf_puts(&p->msg, "unable to parse requirement: ");
  if (nerr > 1) kc_buf_puts(&p->msg, "[");
  kc_buf_puts(&p->msg, tmp);
  if (nerr > 1) kc_buf_puts(&p->msg, "]");
  return -EINVAL;
}

static int wrap_requirement_error(parser *p) {
  /* Errors from inside a requirement get Go's "unable to parse requirement: " prefix. */
  char tmp[sizeof p->err->msg];
  memcpy(tmp, p->msg.p, p->msg.len + 1);
  kc_buf_reset(&p->msg);
  kc_buf_puts(&p->msg, "unable to parse requirement: ");
  kc_buf_puts(&p->msg, tmp);
  return -EINVAL;
}

static int parse_requirement(parser *p) {
  preq r = {0};
  token t = consume(&p->lx);
  bool notexists = false;
  if (t.t == T_NOT) {
    notexists = true;
    t = consume(&p->lx);
  }
  if (in_values(t.t) != T_ID) {
    perr_found(p, t, "', expected: identifier");
    return wrap_requirement_error(p);
  }
  r.kpos = t.pos;
  r.klen = t.len;
  {
    char dbuf[sizeof p->err->msg];
    kc_buf d = kc_buf_fixed(dbuf, sizeof dbuf);
    dbuf[0] = '\0';
    if (kc_name_qualified_errors(&d, p->lx.s + t.pos, t.len)) {
      perr_start(p, t.pos);
      kc_buf_puts(&p->msg, "unable to parse requirement: <nil>: Invalid value: ");
      sb_goquote(&p->msg, p->lx.s + t.pos, t.len);
      kc_buf_puts(&p->msg, ": ");
      kc_buf_puts(&p->msg, dbuf);
      return -EINVAL;
    }
  }
  r.vfirst = p->nvals;
  token la = peek(&p->lx);
  enum tok lat = in_values(la.t);
  if (notexists || lat == T_EOS || lat == T_COMMA) {
    /* "!key" stays DoesNotExist even when an operator follows: the caller
     * then reports the operator as an unexpected token, as Go does. */
    r.op = notexists ? KC_LABEL_NOT_EXISTS : KC_LABEL_EXISTS;
  } else {
    t = consume(&p->lx); /* operator, KeyAndOperator context */
    switch (t.t) {
      case T_IN: r.op = KC_LABEL_IN; break;
      case T_NOTIN: r.op = KC_LABEL_NOTIN; break;
      case T_EQ:
      case T_DEQ: r.op = KC_LABEL_EQ; break;
      case T_NEQ: r.op = KC_LABEL_NEQ; break;
      case T_GT: r.op = KC_LABEL_GT; break;
      case T_LT: r.op = KC_LABEL_LT; break;
      default:
        perr_found(p, t, "', expected: in, notin, =, ==, !=, gt, lt");
        return wrap_requirement_error(p);
    }
    if (r.op == KC_LABEL_IN || r.op == KC_LABEL_NOTIN) {
      int rc = parse_values(p, r.vfirst, &r.nvals);
      if (rc == -ENOMEM) return rc;
      if (rc) return wrap_requirement_error(p);
      sort_vals(p, r.vfirst, r.nvals);
      r.nvals = dedup_vals(p, r.vfirst, r.nvals);
      p->nvals = r.vfirst + r.nvals;
    } else {
      la = peek(&p->lx);
      lat = in_values(la.t);
      if (lat == T_EOS || lat == T_COMMA) {
        if (add_val(p, la.pos, 0)) return -ENOMEM;
      } else {
        t = consume(&p->lx);
        if (in_values(t.t) != T_ID) {
          perr_found(p, t, "', expected: identifier");
          return wrap_requirement_error(p);
        }
        if (add_val(p, t.pos, t.len)) return -ENOMEM;
      }
      r.nvals = 1;
    }
    int rc = check_values(p, &r, r.kpos);
    if (rc) return rc;
    if (r.op == KC_LABEL_GT || r.op == KC_LABEL_LT)
      parse_int64(vptr(p, &p->vals[r.vfirst]), p->vals[r.vfirst].len, &r.num);
  }
  if (KC_ARRAY_ROOM(p->reqs, p->capreqs, p->nreqs, 8) < 0) {
    p->oom = true;
    return -ENOMEM;
  }
  p->reqs[p->nreqs++] = r;
  return 0;
}

static int parse_all(parser *p) {
  for (;;) {
    token la = peek(&p->lx);
    enum tok lat = in_values(la.t);
    if (lat == T_EOS) return 0;
    if (lat != T_ID && lat != T_NOT) {
      perr_found(p, la, "', expected: !, identifier, or 'end of string'");
      return -EINVAL;
    }
    int rc = parse_requirement(p);
    if (rc) return rc;
    token t = consume(&p->lx);
    enum tok tt = in_values(t.t);
    if (tt == T_EOS) return 0;
    if (tt != T_COMMA) {
      perr_found(p, t, "', expected: ',' or 'end of string'");
      return -EINVAL;
    }
    token t2 = peek(&p->lx);
    enum tok t2t = in_values(t2.t);
    if (t2t != T_ID && t2t != T_NOT) {
      perr_found(p, t2, "', expected: identifier after ','");
      return -EINVAL;
    }
  }
}

/* Packed result: [selector][reqs][values][text copy]. */
static int req_cmp(const kc_label_req *a, const kc_label_req *b) {
  int c = str_cmp(a->key, b->key);
  if (c) return c;
  if (a->op != b->op) return a->op < b->op ? -1 : 1;
  for (uint32_t i = 0; i < a->nvalues && i < b->nvalues; i++) {
    c = str_cmp(a->values[i], b->values[i]);
    if (c) return c;
  }
  return a->nvalues < b->nvalues ? -1 : a->nvalues > b->nvalues ? 1 : 0;
}

static int req_qsort_cmp(const void *a, const void *b) { return req_cmp(a, b); }

int kc_label_selector_parse(const char *s, size_t len, kc_label_selector **out,
                            kc_sel_error *err) {
  static const char empty[1] = "";
  if (!out || (!s && len)) return -EINVAL;
  if (!s) s = empty;
  *out = NULL;
  parser p = {0};
  p.lx.s = s;
  p.lx.n = len;
  p.err = err;
  char msgbuf[sizeof err->msg];
  p.msg = kc_buf_fixed(err ? err->msg : msgbuf, sizeof msgbuf);
  if (err) err->pos = 0;
  p.lx.cur = lex(&p.lx);
  int rc = parse_all(&p);
  if (rc) {
    if (rc == -ENOMEM && err) {
      kc_buf_reset(&p.msg);
      kc_buf_puts(&p.msg, "out of memory");
    }
    free(p.reqs);
    free(p.vals);
    return rc;
  }
  size_t sz = sizeof(kc_label_selector) + p.nreqs * sizeof(kc_label_req) +
              p.nvals * sizeof(kc_str) + len + 1;
  kc_label_selector *sel = malloc(sz);
  if (!sel) {
    free(p.reqs);
    free(p.vals);
    if (err) snprintf(err->msg, sizeof err->msg, "out of memory");
    return -ENOMEM;
  }
  kc_label_req *reqs = (kc_label_req *)(sel + 1);
  kc_str *vals = (kc_str *)(reqs + p.nreqs);
  char *text = (char *)(vals + p.nvals);
  memcpy(text, s, len);
  text[len] = '\0';
  for (size_t i = 0; i < p.nvals; i++) vals[i] = (kc_str){text + p.vals[i].pos, p.vals[i].len};
  for (size_t i = 0; i < p.nreqs; i++) {
    const preq *r = &p.reqs[i];
    reqs[i] = (kc_label_req){.op = r->op,
                             .key = {text + r->kpos, r->klen},
                             .nvalues = (uint32_t)r->nvals,
                             .values = r->nvals ? vals + r->vfirst : NULL,
                             .num = r->num};
  }
  qsort(reqs, p.nreqs, sizeof *reqs, req_qsort_cmp);
  size_t n = 0;
  for (size_t i = 0; i < p.nreqs; i++) {
    if (n > 0 && req_cmp(&reqs[n - 1], &reqs[i]) == 0) continue;
    reqs[n++] = reqs[i];
  }
  sel->nreqs = (uint32_t)n;
  sel->reqs = reqs;
  free(p.reqs);
  free(p.vals);
  *out = sel;
  return 0;
}

void kc_label_selector_free(kc_label_selector *sel) { free(sel); }

/* ---- label matching ----------------------------------------------------- */

/* Looks up a key in a sorted label array; returns NULL when absent. */
static const kc_label *kc_labels_find(const kc_label *labels, size_t nlabels, kc_str key) {
  size_t lo = 0, hi = nlabels;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = str_cmp(labels[mid].key, key);
    if (c == 0) return &labels[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

static bool has_value(const kc_label_req *r, kc_str v) {
  /* values are sorted: binary search */
  size_t lo = 0, hi = r->nvalues;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = str_cmp(r->values[mid], v);
    if (c == 0) return true;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

/* v: the value of r's key, ptr NULL when the key is absent. */
static bool kc_label_req_matches(const kc_label_req *r, kc_str v) {
  bool present = v.ptr != NULL;
  switch (r->op) {
    case KC_LABEL_EXISTS: return present;
    case KC_LABEL_NOT_EXISTS: return !present;
    case KC_LABEL_EQ:
    case KC_LABEL_IN: return present && has_value(r, v);
    case KC_LABEL_NEQ:
    case KC_LABEL_NOTIN: return !present || !has_value(r, v);
    case KC_LABEL_GT:
    case KC_LABEL_LT: {
      int64_t n;
      if (!present || !parse_int64(v.ptr, v.len, &n)) return false;
      return r->op == KC_LABEL_GT ? n > r->num : n < r->num;
    }
  }
  return false;
}

bool kc_label_selector_matches(const kc_label_selector *sel, const kc_label *labels,
                               size_t nlabels) {
  if (!sel) return true;
  for (uint32_t i = 0; i < sel->nreqs; i++) {
    const kc_label *l = kc_labels_find(labels, nlabels, sel->reqs[i].key);
    /* a present empty value must not read as absent */
    kc_str v = l ? (kc_str){l->value.ptr ? l->value.ptr : "", l->value.len} : (kc_str){NULL, 0};
    if (!kc_label_req_matches(&sel->reqs[i], v)) return false;
  }
  return true;
}

bool kc_label_selector_matches_obj(const kc_label_selector *sel, const kc_obj *obj) {
  if (!sel) return true;
  for (uint32_t i = 0; i < sel->nreqs; i++)
    if (!kc_label_req_matches(&sel->reqs[i], kc_obj_label(obj, sel->reqs[i].key))) return false;
  return true;
}

/* Bounded output (kc_buf_fixed): -ENOSPC when it did not fit. */
static int ob_finish(const kc_buf *o) {
  if (o->err) return -ENOSPC;
  return o->len > (size_t)INT32_MAX ? -ENOSPC : (int)o->len;
}

int kc_label_selector_string(const kc_label_selector *sel, char *buf, size_t cap) {
  kc_buf o = kc_buf_fixed(buf, cap);
  for (uint32_t i = 0; sel && i < sel->nreqs; i++) {
    const kc_label_req *r = &sel->reqs[i];
    if (i) kc_buf_puts(&o, ",");
    if (r->op == KC_LABEL_NOT_EXISTS) kc_buf_puts(&o, "!");
    kc_buf_add(&o, r->key.ptr, r->key.len);
    switch (r->op) {
      case KC_LABEL_EXISTS:
      case KC_LABEL_NOT_EXISTS: continue;
      case KC_LABEL_EQ: kc_buf_puts(&o, "="); break;
      case KC_LABEL_NEQ: kc_buf_puts(&o, "!="); break;
      case KC_LABEL_IN: kc_buf_puts(&o, " in ("); break;
      case KC_LABEL_NOTIN: kc_buf_puts(&o, " notin ("); break;
      case KC_LABEL_GT: kc_buf_puts(&o, ">"); break;
      case KC_LABEL_LT: kc_buf_puts(&o, "<"); break;
    }
    for (uint32_t j = 0; j < r->nvalues; j++) {
      if (j) kc_buf_puts(&o, ",");
      kc_buf_add(&o, r->values[j].ptr, r->values[j].len);
    }
    if (r->op == KC_LABEL_IN || r->op == KC_LABEL_NOTIN) kc_buf_puts(&o, ")");
  }
  return ob_finish(&o);
}

/* ---- field selectors ---------------------------------------------------- */

typedef struct fterm {
  const char *s; /* raw term text, inside the input */
  size_t len;
  size_t pos;
} fterm;

static int fterm_cmp(const void *a, const void *b) {
  const fterm *x = a, *y = b;
  return bytes_cmp(x->s, x->len, y->s, y->len);
}

static int fr_cmp(const kc_field_req *a, const kc_field_req *b) {
  int c = str_cmp(a->field, b->field);
  if (c) return c;
  if (a->op != b->op) return a->op < b->op ? -1 : 1;
  return str_cmp(a->value, b->value);
}

static int fr_qsort_cmp(const void *a, const void *b) { return fr_cmp(a, b); }

int kc_field_selector_parse(const char *s, size_t len, kc_field_selector **out,
                            kc_sel_error *err) {
  static const char empty[1] = "";
  if (!out || (!s && len)) return -EINVAL;
  if (!s) s = empty;
  *out = NULL;
  char msgbuf[sizeof err->msg];
  kc_buf m = kc_buf_fixed(err ? err->msg : msgbuf, sizeof msgbuf);
  if (err) err->pos = 0;

  /* Split on unescaped commas (a backslash escapes the next byte). */
  size_t nterms = 1;
  bool esc = false;
  for (size_t i = 0; i < len; i++) {
    if (esc) esc = false;
    else if (s[i] == '\\') esc = true;
    else if (s[i] == ',') nterms++;
  }
  fterm *terms = calloc(nterms, sizeof *terms);
  if (!terms) return -ENOMEM;
  size_t nt = 0, start = 0;
  esc = false;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && esc) {
      esc = false;
      continue;
    }
    if (i < len && s[i] == '\\') {
      esc = true;
      continue;
    }
    if (i == len || s[i] == ',') {
      if (i > start) terms[nt++] = (fterm){s + start, i - start, start};
      start = i + 1;
    }
  }
  qsort(terms, nt, sizeof *terms, fterm_cmp);

  /* Each field and value gets a NUL-terminated copy; unescaping only
   * shrinks, so len + 2 per term is enough. */
  size_t sz = sizeof(kc_field_selector) + nt * sizeof(kc_field_req) + len + 2 * nt + 1;
  kc_field_selector *sel = malloc(sz);
  if (!sel) {
    free(terms);
    return -ENOMEM;
  }
  kc_field_req *reqs = (kc_field_req *)(sel + 1);
  char *text = (char *)(reqs + nt);
  size_t tp = 0;
  int rc = 0;
  for (size_t k = 0; k < nt && rc == 0; k++) {
    const fterm *t = &terms[k];
    size_t opi = 0, oplen = 0;
    enum kc_field_op op = KC_FIELD_EQ;
    for (size_t i = 0; i < t->len && !oplen; i++) {
      if (i + 1 < t->len && t->s[i] == '!' && t->s[i + 1] == '=') opi = i, oplen = 2, op = KC_FIELD_NEQ;
      else if (i + 1 < t->len && t->s[i] == '=' && t->s[i + 1] == '=') opi = i, oplen = 2;
      else if (t->s[i] == '=') opi = i, oplen = 1;
    }
    if (!oplen) {
      if (err) err->pos = t->pos;
      kc_buf_puts(&m, "invalid selector: '");
      kc_buf_add(&m, s, len);
      kc_buf_puts(&m, "'; can't understand '");
      kc_buf_add(&m, t->s, t->len);
      kc_buf_puts(&m, "'");
      rc = -EINVAL;
      break;
    }
    kc_field_req *r = &reqs[k];
    r->op = op;
    memcpy(text + tp, t->s, opi);
    r->field = (kc_str){text + tp, opi};
    tp += opi;
    text[tp++] = '\0';
    char *v = text + tp;
    size_t vl = 0;
    const char *rv = t->s + opi + oplen;
    size_t rvl = t->len - opi - oplen;
    esc = false;
    for (size_t i = 0; i < rvl; i++) {
      char c = rv[i];
      if (esc) {
        if (c != '\\' && c != ',' && c != '=') {
          if (err) err->pos = t->pos + opi + oplen + i - 1;
          kc_buf_puts(&m, "invalid field selector: invalid escape sequence: \\");
          /* Go prints the whole rune after the backslash. */
          size_t l = kc_utf8_len((const unsigned char *)rv + i, rvl - i);
          if (l) kc_buf_add(&m, rv + i, l);
          else kc_buf_puts(&m, "\xef\xbf\xbd");
          rc = -EINVAL;
          break;
        }
        v[vl++] = c;
        esc = false;
      } else if (c == '\\') {
        esc = true;
      } else if (c == ',' || c == '=') {
        if (err) err->pos = t->pos + opi + oplen + i;
        kc_buf_printf(&m, "invalid field selector: unescaped character in value: %d", c);
        rc = -EINVAL;
        break;
      } else {
        v[vl++] = c;
      }
    }
    if (rc == 0 && esc) {
      if (err) err->pos = t->pos + t->len - 1;
      kc_buf_puts(&m, "invalid field selector: invalid escape sequence: \\");
      rc = -EINVAL;
    }
    v[vl] = '\0';
    r->value = (kc_str){v, vl};
    tp += vl + 1;
  }
  free(terms);
  if (rc) {
    free(sel);
    return rc;
  }
  qsort(reqs, nt, sizeof *reqs, fr_qsort_cmp);
  size_t n = 0;
  for (size_t i = 0; i < nt; i++) {
    if (n > 0 && fr_cmp(&reqs[n - 1], &reqs[i]) == 0) continue;
    reqs[n++] = reqs[i];
  }
  sel->nreqs = (uint32_t)n;
  sel->reqs = reqs;
  *out = sel;
  return 0;
}

void kc_field_selector_free(kc_field_selector *sel) { free(sel); }

static int put_text(const char *s, size_t n, char *buf, size_t cap) {
  if (n + 1 > cap) return -ENOSPC;
  if (n) memcpy(buf, s, n);
  buf[n] = '\0';
  return (int)n;
}

int kc_field_value_text(const kc_obj *obj, const char *field, char *buf, size_t cap) {
  if (strcmp(field, "metadata.name") == 0)
    return put_text(kc_obj_name(obj).ptr, kc_obj_name(obj).len, buf, cap);
  if (strcmp(field, "metadata.namespace") == 0)
    return put_text(kc_obj_namespace(obj).ptr, kc_obj_namespace(obj).len, buf, cap);
  kc_json_value v;
  if (strcmp(field, "status.podIP") == 0) {
    /* The apiserver derives status.podIP from status.podIPs[0]. */
    if (kc_obj_get(obj, "status.podIPs[0].ip", &v) == 0 && v.type == KC_JSON_STRING)
      return kc_json_scalar_text(&v, buf, cap);
  }
  if (kc_obj_get(obj, field, &v) != 0) return put_text("", 0, buf, cap);
  if ((v.type == KC_JSON_ABSENT || v.type == KC_JSON_NULL) &&
      (strcmp(field, "spec.hostNetwork") == 0 || strcmp(field, "spec.unschedulable") == 0))
    return put_text("false", 5, buf, cap);
  int n = kc_json_scalar_text(&v, buf, cap);
  if (n == -EINVAL) return put_text("", 0, buf, cap); /* objects/arrays never equal a value */
  return n;
}

bool kc_field_selector_matches(const kc_field_selector *sel, const kc_obj *obj) {
  if (!sel) return true;
  char stackbuf[512];
  for (uint32_t i = 0; i < sel->nreqs; i++) {
    const kc_field_req *r = &sel->reqs[i];
    char *buf = stackbuf;
    size_t cap = sizeof stackbuf;
    char *heap = NULL;
    int n = kc_field_value_text(obj, r->field.ptr, buf, cap);
    if (n == -ENOSPC) {
      /* Unescaped text is never longer than the object's JSON. */
      cap = kc_obj_text_len(obj) + 1;
      heap = malloc(cap);
      n = heap ? kc_field_value_text(obj, r->field.ptr, heap, cap) : -ENOMEM;
      buf = heap;
    }
    /* Unreadable values (bad path, out of memory) compare as "". */
    kc_str got = n >= 0 ? (kc_str){buf, (size_t)n} : (kc_str){"", 0};
    bool eq = str_cmp(got, r->value) == 0;
    free(heap);
    if (eq != (r->op == KC_FIELD_EQ)) return false;
  }
  return true;
}

int kc_field_selector_string(const kc_field_selector *sel, char *buf, size_t cap) {
  kc_buf o = kc_buf_fixed(buf, cap);
  for (uint32_t i = 0; sel && i < sel->nreqs; i++) {
    const kc_field_req *r = &sel->reqs[i];
    if (i) kc_buf_puts(&o, ",");
    kc_buf_add(&o, r->field.ptr, r->field.len);
    kc_buf_puts(&o, r->op == KC_FIELD_EQ ? "=" : "!=");
    for (size_t j = 0; j < r->value.len; j++) {
      char c = r->value.ptr[j];
      if (c == '\\' || c == ',' || c == '=') kc_buf_puts(&o, "\\");
      kc_buf_add(&o, &c, 1);
    }
  }
  return ob_finish(&o);
}

static const char *const pod_fields[] = {
    "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
    "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
};

static bool is_core(const char *group) { return !group || !*group; }

/* Built-in API groups: core, the unqualified ones and *.k8s.io. */
static bool is_builtin_group(const char *group) {
  static const char *const plain[] = {"apps", "batch", "policy", "autoscaling", "extensions"};
  if (is_core(group)) return true;
  for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
    if (strcmp(group, plain[i]) == 0) return true;
  size_t n = strlen(group);
  return n >= 7 && strcmp(group + n - 7, ".k8s.io") == 0;
}

bool kc_field_supported(const char *group, const char *resource, bool namespaced,
                        kc_str field) {
  if (field.len == 13 && memcmp(field.ptr, "metadata.name", 13) == 0) return true;
  if (namespaced && field.len == 18 && memcmp(field.ptr, "metadata.namespace", 18) == 0)
    return true;
  if (!resource || !is_core(group)) return false;
  if (strcmp(resource, "pods") == 0) {
    for (size_t i = 0; i < sizeof pod_fields / sizeof *pod_fields; i++)
      if (strlen(pod_fields[i]) == field.len && memcmp(pod_fields[i], field.ptr, field.len) == 0)
        return true;
  } else if (strcmp(resource, "nodes") == 0) {
    return field.len == 18 && memcmp(field.ptr, "spec.unschedulable", 18) == 0;
  }
  return false;
}

int kc_field_selector_check(const kc_field_selector *sel, const char *group,
                            const char *resource, bool namespaced, kc_sel_error *err) {
  for (uint32_t i = 0; sel && i < sel->nreqs; i++) {
    kc_str f = sel->reqs[i].field;
    if (kc_field_supported(group, resource, namespaced, f)) continue;
    if (err) {
      kc_buf m = kc_buf_fixed(err->msg, sizeof err->msg);
      err->msg[0] = '\0';
      err->pos = 0;
      bool own_list = !is_builtin_group(group) ||
                      (resource && is_core(group) &&
                       (strcmp(resource, "pods") == 0 || strcmp(resource, "nodes") == 0));
      if (own_list) {
        kc_buf_puts(&m, "field label not supported: ");
        kc_buf_add(&m, f.ptr, f.len);
      } else {
        sb_goquote(&m, f.ptr, f.len);
        kc_buf_puts(&m, " is not a known field selector: only \"metadata.name\", \"metadata.namespace\"");
      }
    }
    return -EINVAL;
  }
  return 0;
}
