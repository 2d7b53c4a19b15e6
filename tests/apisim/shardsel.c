/* SPDX-License-Identifier: Apache-2.0 */
/* shardsel: see shardsel.h. A small CEL expression parser (tokens, a
 * precedence-climbing tree of calls, idents, selects and literals), then the
 * API server's walk over the tree. */
#include "shardsel.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

uint64_t sim_fnv1a64(const char *s, size_t n)
{
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* ---- tree ---- */

/* cel-go's ast.ExprKind numbering, which the server's messages print (%v). */
enum kind { K_CALL = 1, K_IDENT = 3, K_LITERAL = 5, K_SELECT = 7 };
enum lit { L_STRING, L_INT, L_UINT, L_DOUBLE, L_BOOL, L_NULL, L_BYTES };

struct node {
  enum kind kind;
  char *name;          /* CALL: function ("_||_"), IDENT: name, SELECT: field */
  enum lit lit;        /* LITERAL */
  char *str;           /* L_STRING value */
  struct node **args;  /* CALL */
  size_t nargs;
  struct node *operand; /* SELECT */
};

static void node_free(struct node *n)
{
  if (!n) return;
  for (size_t i = 0; i < n->nargs; i++) node_free(n->args[i]);
  free(n->args);
  node_free(n->operand);
  free(n->name);
  free(n->str);
  free(n);
}

static struct node *node_new(enum kind k)
{
  struct node *n = sim_xcalloc(1, sizeof *n);
  n->kind = k;
  return n;
}

static struct node *call2(const char *fn, struct node *a, struct node *b)
{
  struct node *n = node_new(K_CALL);
  n->name = sim_xstrdup(fn);
  n->args = sim_xmalloc((b ? 2 : 1) * sizeof *n->args);
  n->args[n->nargs++] = a;
  if (b) n->args[n->nargs++] = b;
  return n;
}

/* ---- parser ---- */

struct parser {
  const char *s;
  size_t pos, len;
  char *err; /* first syntax error */
  unsigned depth;
};

/* The first syntax error: "<msg><what>'" ("what" NULL: msg alone). */
static void syntax(struct parser *p, const char *msg, const char *what)
{
  if (p->err) return;
  char full[256];
  if (what) snprintf(full, sizeof full, "%s'%s'", msg, what);
  else snprintf(full, sizeof full, "%s", msg);
  const char *m = full;
  p->err = sim_xasprintf("CEL parse error: Syntax error: %s (column %zu)", m, p->pos + 1);
}

static void skip_ws(struct parser *p)
{
  while (p->pos < p->len && strchr(" \t\r\n\f", p->s[p->pos])) p->pos++;
}

static bool eat(struct parser *p, const char *tok)
{
  skip_ws(p);
  size_t n = strlen(tok);
  if (p->len - p->pos >= n && memcmp(p->s + p->pos, tok, n) == 0) {
    p->pos += n;
    return true;
  }
  return false;
}

static bool peek_is(struct parser *p, const char *tok)
{
  skip_ws(p);
  size_t n = strlen(tok);
  return p->len - p->pos >= n && memcmp(p->s + p->pos, tok, n) == 0;
}

/* At the current position: "mismatched input 'X'" (X the byte there, or
 * <EOF>). */
static void unexpected(struct parser *p)
{
  if (p->pos >= p->len) {
    syntax(p, "mismatched input ", "<EOF>");
    return;
  }
  char t[2] = {p->s[p->pos], 0};
  syntax(p, "mismatched input ", t);
}

static struct node *parse_or(struct parser *p);

static struct node *parse_string(struct parser *p)
{
  char q = p->s[p->pos++];
  struct sim_buf b = {0};
  while (p->pos < p->len && p->s[p->pos] != q) {
    char c = p->s[p->pos++];
    if (c == '\n' || c == '\r') break;
    if (c == '\\') {
      if (p->pos >= p->len) break;
      char e = p->s[p->pos++];
      switch (e) {
      case '\\': case '\'': case '"': case '`': case '?': c = e; break;
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      default:
        sim_buf_free(&b);
        syntax(p, "invalid escape sequence ", (char[3]){'\\', e, 0});
        return NULL;
      }
    }
    sim_buf_putc(&b, c);
  }
  if (p->pos >= p->len || p->s[p->pos] != q) {
    sim_buf_free(&b);
    syntax(p, "unterminated string literal", NULL);
    return NULL;
  }
  p->pos++;
  struct node *n = node_new(K_LITERAL);
  n->lit = L_STRING;
  size_t l;
  n->str = sim_buf_steal(&b, &l);
  return n;
}

static struct node *parse_number(struct parser *p)
{
  size_t st = p->pos;
  bool dbl = false;
  if (p->s[p->pos] == '0' && p->pos + 1 < p->len && (p->s[p->pos + 1] == 'x' || p->s[p->pos + 1] == 'X')) {
    p->pos += 2;
    while (p->pos < p->len && isxdigit((unsigned char)p->s[p->pos])) p->pos++;
  } else {
    while (p->pos < p->len && isdigit((unsigned char)p->s[p->pos])) p->pos++;
    if (p->pos < p->len && p->s[p->pos] == '.') {
      dbl = true;
      p->pos++;
      while (p->pos < p->len && isdigit((unsigned char)p->s[p->pos])) p->pos++;
    }
  }
  struct node *n = node_new(K_LITERAL);
  n->lit = dbl ? L_DOUBLE : L_INT;
  if (!dbl && p->pos < p->len && (p->s[p->pos] == 'u' || p->s[p->pos] == 'U')) {
    n->lit = L_UINT;
    p->pos++;
  }
  (void)st;
  return n;
}

static bool ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

static char *parse_ident_text(struct parser *p)
{
  size_t st = p->pos;
  while (p->pos < p->len && ident_char(p->s[p->pos])) p->pos++;
  return sim_xstrndup(p->s + st, p->pos - st);
}

/* '(' already eaten: arguments up to ')'. */
static bool parse_args(struct parser *p, struct node *call)
{
  if (eat(p, ")")) return true;
  for (;;) {
    struct node *a = parse_or(p);
    if (!a) return false;
    call->args = sim_xrealloc(call->args, (call->nargs + 1) * sizeof *call->args);
    call->args[call->nargs++] = a;
    if (eat(p, ")")) return true;
    if (!eat(p, ",")) {
      unexpected(p);
      return false;
    }
  }
}

static struct node *parse_primary(struct parser *p)
{
  skip_ws(p);
  if (p->pos >= p->len) {
    unexpected(p);
    return NULL;
  }
  char c = p->s[p->pos];
  if (c == '(') {
    p->pos++;
    struct node *n = parse_or(p);
    if (!n) return NULL;
    if (!eat(p, ")")) {
      unexpected(p);
      node_free(n);
      return NULL;
    }
    return n;
  }
  if (c == '\'' || c == '"') return parse_string(p);
  if ((c == 'b' || c == 'B') && p->pos + 1 < p->len && (p->s[p->pos + 1] == '\'' || p->s[p->pos + 1] == '"')) {
    p->pos++;
    struct node *n = parse_string(p);
    if (n) n->lit = L_BYTES;
    return n;
  }
  if (isdigit((unsigned char)c)) return parse_number(p);
  if (c == '.' && p->pos + 1 < p->len && ident_start(p->s[p->pos + 1])) p->pos++; /* .ident: root-scoped */
  if (ident_start(p->s[p->pos])) {
    char *id = parse_ident_text(p);
    if (strcmp(id, "true") == 0 || strcmp(id, "false") == 0 || strcmp(id, "null") == 0) {
      struct node *n = node_new(K_LITERAL);
      n->lit = id[0] == 'n' ? L_NULL : L_BOOL;
      free(id);
      return n;
    }
    if (eat(p, "(")) {
      struct node *n = node_new(K_CALL);
      n->name = id;
      if (!parse_args(p, n)) {
        node_free(n);
        return NULL;
      }
      return n;
    }
    struct node *n = node_new(K_IDENT);
    n->name = id;
    return n;
  }
  unexpected(p);
  return NULL;
}

static struct node *parse_member(struct parser *p)
{
  struct node *n = parse_primary(p);
  while (n) {
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '.') {
      p->pos++;
      skip_ws(p);
      if (p->pos >= p->len || !ident_start(p->s[p->pos])) {
        unexpected(p);
        node_free(n);
        return NULL;
      }
      char *id = parse_ident_text(p);
      if (eat(p, "(")) {
        /* receiver call target.f(args): the target becomes the first argument
         * in this tree; the walk rejects every such call anyway */
        struct node *c = node_new(K_CALL);
        c->name = id;
        c->args = sim_xmalloc(sizeof *c->args);
        c->args[c->nargs++] = n;
        if (!parse_args(p, c)) {
          node_free(c);
          return NULL;
        }
        n = c;
        continue;
      }
      struct node *s = node_new(K_SELECT);
      s->name = id;
      s->operand = n;
      n = s;
      continue;
    }
    if (p->pos < p->len && p->s[p->pos] == '[') {
      p->pos++;
      struct node *idx = parse_or(p);
      if (!idx || !eat(p, "]")) {
        if (idx) unexpected(p);
        node_free(idx);
        node_free(n);
        return NULL;
      }
      n = call2("_[_]", n, idx);
      continue;
    }
    break;
  }
  return n;
}

static struct node *parse_unary(struct parser *p)
{
  if (++p->depth > 64) {
    syntax(p, "expression nested too deeply", NULL);
    return NULL;
  }
  struct node *n;
  if (eat(p, "!")) {
    struct node *a = parse_unary(p);
    n = a ? call2("!_", a, NULL) : NULL;
  } else if (eat(p, "-")) {
    struct node *a = parse_unary(p);
    n = a ? call2("-_", a, NULL) : NULL;
  } else {
    n = parse_member(p);
  }
  p->depth--;
  return n;
}

/* Binary levels, lowest first; each operator's CEL function name. */
static const struct { const char *tok, *fn; int level; } ops[] = {
    {"||", "_||_", 0}, {"&&", "_&&_", 1},
    {"==", "_==_", 2}, {"!=", "_!=_", 2}, {"<=", "_<=_", 2}, {">=", "_>=_", 2},
    {"<", "_<_", 2}, {">", "_>_", 2}, {"in ", "@in", 2},
    {"+", "_+_", 3}, {"-", "_-_", 3},
    {"*", "_*_", 4}, {"/", "_/_", 4}, {"%", "_%_", 4},
};

static struct node *parse_level(struct parser *p, int level)
{
  if (level > 4) return parse_unary(p);
  struct node *l = parse_level(p, level + 1);
  while (l) {
    const char *fn = NULL;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
      if (ops[i].level != level || !peek_is(p, ops[i].tok)) continue;
      /* "||" must not be read as two "|", "<=" before "<" (table order) */
      p->pos += strlen(ops[i].tok);
      fn = ops[i].fn;
      break;
    }
    if (!fn) break;
    struct node *r = parse_level(p, level + 1);
    if (!r) {
      node_free(l);
      return NULL;
    }
    l = call2(fn, l, r);
  }
  return l;
}

static struct node *parse_or(struct parser *p)
{
  if (++p->depth > 64) {
    syntax(p, "expression nested too deeply", NULL);
    return NULL;
  }
  struct node *n = parse_level(p, 0);
  p->depth--;
  if (n && eat(p, "?")) {
    /* the conditional parses in CEL; the walk rejects it as a call */
    struct node *a = parse_or(p), *b = NULL;
    if (a && eat(p, ":")) b = parse_or(p);
    else if (a) unexpected(p);
    if (!a || !b) {
      node_free(a);
      node_free(b);
      node_free(n);
      return NULL;
    }
    struct node *c = call2("_?_:_", n, a);
    c->args = sim_xrealloc(c->args, 3 * sizeof *c->args);
    c->args[c->nargs++] = b;
    return c;
  }
  return n;
}

/* ---- the server's walk ---- */

/* Go's %q of s (printable ASCII kept; the rest escaped). */
static void go_quote(struct sim_buf *b, const char *s)
{
  sim_buf_putc(b, '"');
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      sim_buf_putc(b, '\\');
      sim_buf_putc(b, (char)*c);
    } else if (*c == '\n') sim_buf_puts(b, "\\n");
    else if (*c == '\t') sim_buf_puts(b, "\\t");
    else if (*c == '\r') sim_buf_puts(b, "\\r");
    else if (*c < 0x20 || *c == 0x7f) sim_buf_printf(b, "\\x%02x", *c);
    else sim_buf_putc(b, (char)*c);
  }
  sim_buf_putc(b, '"');
}

static char *quoted(const char *s)
{
  struct sim_buf b = {0};
  go_quote(&b, s);
  size_t l;
  return sim_buf_steal(&b, &l);
}

static const char *lit_gotype(enum lit l)
{
  switch (l) {
  case L_STRING: return "string";
  case L_INT: return "int64";
  case L_UINT: return "uint64";
  case L_DOUBLE: return "float64";
  case L_BOOL: return "bool";
  case L_BYTES: return "[]uint8";
  default: return "structpb.NullValue";
  }
}

static char *field_path(const struct node *e, char **err)
{
  if (e->kind == K_IDENT) return sim_xstrdup(e->name);
  if (e->kind == K_SELECT) {
    char *op = field_path(e->operand, err);
    if (!op) return NULL;
    char *r = sim_xasprintf("%s.%s", op, e->name);
    free(op);
    return r;
  }
  *err = sim_xasprintf("shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind %d",
                       (int)e->kind);
  return NULL;
}

/* Bound literal: 0 with *v / *max set, or -EINVAL with *err. */
static int hex_bound(const struct node *e, const char *name, uint64_t *v, bool *max, char **err)
{
  if (e->kind != K_LITERAL) {
    *err = sim_xasprintf("%s must be a string literal (e.g. '0xff'), got expression kind %d", name, (int)e->kind);
    return -EINVAL;
  }
  if (e->lit != L_STRING) {
    *err = sim_xasprintf("%s must be a string literal, got %s", name, lit_gotype(e->lit));
    return -EINVAL;
  }
  const char *s = e->str;
  char *q = quoted(s);
  int rc = -EINVAL;
  if (strncmp(s, "0x", 2) != 0) {
    *err = sim_xasprintf("%s must have '0x' prefix, got %s", name, q);
    goto out;
  }
  const char *hex = s + 2;
  size_t n = strlen(hex);
  if (n == 0) {
    *err = sim_xasprintf("%s: hex value is required after '0x'", name);
    goto out;
  }
  if (n > 17) {
    char *qh = quoted(hex);
    *err = sim_xasprintf("%s: hex value too long (%zu chars, max 17): %s", name, n, qh);
    free(qh);
    goto out;
  }
  for (const char *c = hex; *c; c++) {
    if ((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')) continue;
    /* Go ranges over runes: print the whole UTF-8 sequence */
    size_t cl = 1;
    while ((unsigned char)c[cl] >= 0x80 && (unsigned char)c[cl] < 0xc0 && (unsigned char)*c >= 0xc0) cl++;
    char ch[8] = {0};
    memcpy(ch, c, cl < sizeof ch - 1 ? cl : sizeof ch - 1);
    char *qc = quoted(ch);
    *err = sim_xasprintf("%s: invalid hex character %s in %s", name, qc, q);
    free(qc);
    goto out;
  }
  if (n == 17) {
    if (strcmp(s, "0x10000000000000000") != 0) {
      *err = sim_xasprintf("%s: 17-digit hex value must be '0x10000000000000000' (2^64), got %s", name, q);
      goto out;
    }
    *v = 0;
    *max = true;
    rc = 0;
    goto out;
  }
  if (n != 16) {
    *err = sim_xasprintf("%s must be a 0x-prefixed 16-digit hex value, got %s (did you mean \"0x%.*s%s\"?)", name, q,
                         (int)(16 - n), "0000000000000000", hex);
    goto out;
  }
  *v = strtoull(hex, NULL, 16);
  *max = false;
  rc = 0;
out:
  free(q);
  return rc;
}

static int walk(const struct node *e, struct sim_shardsel *out, char **err)
{
  if (e->kind != K_CALL) {
    *err = sim_xasprintf("unexpected expression kind %d; expected shardRange() call or || operator", (int)e->kind);
    return -EINVAL;
  }
  if (strcmp(e->name, "_||_") == 0) {
    if (e->nargs != 2) {
      *err = sim_xstrdup("|| operator requires exactly 2 arguments");
      return -EINVAL;
    }
    int rc = walk(e->args[0], out, err);
    return rc < 0 ? rc : walk(e->args[1], out, err);
  }
  if (strcmp(e->name, "shardRange") != 0) {
    char *q = quoted(e->name);
    *err = sim_xasprintf("unsupported function %s; only shardRange() and || are allowed", q);
    free(q);
    return -EINVAL;
  }
  if (e->nargs != 3) {
    *err = sim_xasprintf("shardRange() requires exactly 3 arguments, got %zu", e->nargs);
    return -EINVAL;
  }
  char *path = field_path(e->args[0], err);
  if (!path) return -EINVAL;
  if (strcmp(path, "object.metadata.uid") != 0 && strcmp(path, "object.metadata.namespace") != 0) {
    char *q = quoted(path);
    *err = sim_xasprintf("unsupported field path %s; supported: object.metadata.uid, object.metadata.namespace", q);
    free(q);
    free(path);
    return -EINVAL;
  }
  struct sim_shard_range r = {0};
  bool smax = false;
  if (hex_bound(e->args[1], "hexStart", &r.start, &smax, err) < 0 ||
      hex_bound(e->args[2], "hexEnd", &r.end, &r.end_max, err) < 0) {
    free(path);
    return -EINVAL;
  }
  /* start < end as the server compares them: by length, then text */
  if (smax || (!r.end_max && r.start >= r.end)) {
    *err = sim_xasprintf("shard range start %s must be less than end %s", e->args[1]->str, e->args[2]->str);
    free(path);
    return -EINVAL;
  }
  const char *field = path + strlen("object.");
  if (out->field && strcmp(out->field, field) != 0) {
    *err = sim_xasprintf("all shard ranges must use the same field, got \"object.%s\" and \"%s\"", out->field, path);
    free(path);
    return -EINVAL;
  }
  if (!out->field) out->field = sim_xstrdup(field);
  free(path);
  out->r = sim_xrealloc(out->r, (out->n + 1) * sizeof *out->r);
  out->r[out->n++] = r;
  return 0;
}

int sim_shardsel_parse(const char *s, struct sim_shardsel *out, char **err)
{
  memset(out, 0, sizeof *out);
  *err = NULL;
  size_t b = 0, e = strlen(s);
  while (b < e && isspace((unsigned char)s[b])) b++;
  while (e > b && isspace((unsigned char)s[e - 1])) e--;
  if (b == e) {
    *err = sim_xstrdup("empty shard selector is not allowed; omit the parameter for unfiltered lists");
    return -EINVAL;
  }
  struct parser p = {.s = s + b, .len = e - b};
  struct node *root = parse_or(&p);
  if (root) {
    skip_ws(&p);
    if (p.pos < p.len) {
      unexpected(&p);
      node_free(root);
      root = NULL;
    }
  }
  if (!root) {
    *err = p.err ? p.err : sim_xstrdup("CEL parse error: Syntax error");
    return -EINVAL;
  }
  free(p.err);
  int rc = walk(root, out, err);
  node_free(root);
  if (rc < 0) {
    sim_shardsel_free(out);
    return rc;
  }
  out->text = sim_xstrdup(s);
  return 0;
}

bool sim_shardsel_match(const struct sim_shardsel *sel, const jv *dom)
{
  const jv *meta = jv_geta(dom, "metadata", (const char *)NULL);
  const char *v = meta ? jv_gets(meta, strcmp(sel->field, "metadata.uid") == 0 ? "uid" : "namespace") : NULL;
  if (!v) v = "";
  uint64_t h = sim_fnv1a64(v, strlen(v));
  for (size_t i = 0; i < sel->n; i++)
    if (h >= sel->r[i].start && (sel->r[i].end_max || h < sel->r[i].end)) return true;
  return false;
}

void sim_shardsel_free(struct sim_shardsel *sel)
{
  free(sel->field);
  free(sel->text);
  free(sel->r);
  memset(sel, 0, sizeof *sel);
}
