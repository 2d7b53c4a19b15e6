/* SPDX-License-Identifier: Apache-2.0 */
/* config: see config.h. */
#include "config/config.h"

#include "base/buf.h"
#include "base/fileperm.h"
#include "json/jsonpath.h"
#include "kube/kbuild.h"
#include "kube/kname.h"
#include "kube/selector.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- owned allocations ----------------------------------------------------- */

/* kc_config is the first member, so a kc_config * is a struct config_priv *. */
struct config_priv {
  kc_config pub;
  void **allocs;
  size_t nallocs, cap;
};

struct ctx {
  struct config_priv *priv;
  kc_config *cfg;
  char *err;
  size_t errlen;
  size_t used;    /* bytes of err in use */
  int nerrors;
  bool oom;
  char tmp[640];  /* one message from a yamltree getter */
};

static void *keep(struct ctx *c, void *p) {
  if (!p) {
    c->oom = true;
    return NULL;
  }
  struct config_priv *pv = c->priv;
  if (pv->nallocs == pv->cap) {
    size_t ncap = pv->cap ? pv->cap * 2 : 32;
    void **n = realloc(pv->allocs, ncap * sizeof *n);
    if (!n) {
      free(p);
      c->oom = true;
      return NULL;
    }
    pv->allocs = n;
    pv->cap = ncap;
  }
  pv->allocs[pv->nallocs++] = p;
  return p;
}

static void *xcalloc(struct ctx *c, size_t n, size_t size) {
  if (n == 0) n = 1;
  return keep(c, calloc(n, size));
}

static char *xstrdup(struct ctx *c, const char *s) { return keep(c, strdup(s)); }

/* ---- errors ---------------------------------------------------------------- */

static void add_line(struct ctx *c, const char *line) {
  c->nerrors++;
  if (!c->err || c->errlen == 0 || c->nerrors > KC_CONFIG_MAX_ERRORS) return;
  size_t room = c->errlen - c->used;
  int w = snprintf(c->err + c->used, room, "%s%s", c->used ? "\n" : "", line);
  if (w < 0) return;
  c->used += (size_t)w < room ? (size_t)w : room - 1;
}

__attribute__((format(printf, 3, 4))) static void fail(struct ctx *c, const kc_yaml_node *at,
                                                      const char *fmt, ...) {
  char line[768];
  int n = 0;
  if (at) n = snprintf(line, sizeof line, "%s:%u:%u: ", at->file, at->line, at->column);
  else n = snprintf(line, sizeof line, "%s: ", c->cfg->file);
  if (n < 0) n = 0;
  va_list ap;
  va_start(ap, fmt);
  if ((size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  add_line(c, line);
}

/* Folds a yamltree getter's result into the context: -EINVAL becomes an
 * error line, -ENOMEM marks the load as failed. Returns true on success. */
static bool took(struct ctx *c, int rc) {
  if (rc == 0) return true;
  if (rc == -ENOMEM) c->oom = true;
  else add_line(c, c->tmp);
  return false;
}

/* Duration in a compact Go-like form for messages: 1h30m, 15s, 2s500ms. */
static const char *fmt_ms(int64_t ms, char *buf, size_t cap) {
  if (ms == 0) {
    snprintf(buf, cap, "0s");
    return buf;
  }
  int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, r = ms % 1000;
  size_t o = 0;
  buf[0] = '\0';
#define PART(v, u)                                                              \
  if ((v) && o < cap) {                                                         \
    int w_ = snprintf(buf + o, cap - o, "%lld%s", (long long)(v), u);           \
    if (w_ > 0) o += (size_t)w_;                                                \
  }
  PART(h, "h")
  PART(m, "m")
  PART(s, "s")
  PART(r, "ms")
#undef PART
  return buf;
}

/* ---- small validators ------------------------------------------------------- */

static bool is_lower_alnum(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); }
static bool is_alnum(char ch) {
  return is_lower_alnum(ch) || (ch >= 'A' && ch <= 'Z');
}

/* Name rules: kname.h. */
static bool dns_label(const char *s) { return kc_name_is_dns_label(s, strlen(s)); }
static bool dns_subdomain(const char *s) { return kc_name_is_dns_subdomain(s, strlen(s)); }

/* "v1" or "group/version"; group is a DNS subdomain, version [a-z0-9]+. */
static bool api_version_ok(const char *s) {
  kc_str g, v;
  if (!kc_name_split_api_version(s, strlen(s), &g, &v)) return false;
  for (size_t i = 0; i < v.len; i++)
    if (!is_lower_alnum(v.ptr[i])) return false;
  return !g.len || kc_name_is_dns_subdomain(g.ptr, g.len);
}

static bool kind_ok(const char *s) {
  if (!(s[0] >= 'A' && s[0] <= 'Z')) return false;
  for (const char *p = s; *p; p++)
    if (!is_alnum(*p)) return false;
  return strlen(s) <= 63;
}

static bool simple_name(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n > max) return false;
  for (size_t i = 0; i < n; i++)
    if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return false;
  return true;
}

static int str_cmp_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---- table-driven sections -------------------------------------------------- */

enum ftype {
  F_STRING = 1, /* const char * */
  F_PATH,       /* const char *, relative resolved against cfg->dir */
  F_BOOL,       /* bool */
  F_INT,        /* int64_t within [min, max] */
  F_DOUBLE,     /* double within [dmin, dmax] */
  F_DURATION,   /* int64_t ms within [min, max] */
  F_CUSTOM,     /* handled by the caller; only declares the key */
};

struct field {
  const char *key;
  enum ftype type;
  size_t off;
  bool required;
  int64_t min, max;
  double dmin, dmax;
};

#define FIELD(k, t, s, m) {.key = k, .type = t, .off = offsetof(s, m)}
#define FIELD_RANGE(k, t, s, m, lo, hi) {.key = k, .type = t, .off = offsetof(s, m), .min = lo, .max = hi}
#define REQUIRED(k, t, s, m) {.key = k, .type = t, .off = offsetof(s, m), .required = true}
#define CUSTOM(k) {.key = k, .type = F_CUSTOM}

static const char *resolve_path(struct ctx *c, const char *p) {
  if (p[0] == '/' || !c->cfg->dir) return p;
  size_t n = strlen(c->cfg->dir) + strlen(p) + 2;
  char *r = xcalloc(c, n, 1);
  if (!r) return p;
  snprintf(r, n, "%s/%s", c->cfg->dir, p);
  return r;
}

/* Checks keys, required keys and types of one mapping and stores every
 * non-custom value at base + off. Returns false when `map` is not a mapping
 * (the caller then skips the section). */
static bool apply_table(struct ctx *c, const kc_yaml_node *map, const char *what,
                        const struct field *t, size_t n, void *base) {
  if (!took(c, kc_yaml_expect(map, KC_YAML_MAPPING, what, c->tmp, sizeof c->tmp))) return false;
  const char *keys[32];
  for (size_t i = 0; i < n && i < 32; i++) keys[i] = t[i].key;
  took(c, kc_yaml_check_keys(map, keys, n, what, c->tmp, sizeof c->tmp));
  for (size_t i = 0; i < n; i++) {
    const kc_yaml_node *v = kc_yaml_map_get(map, t[i].key);
    char w[200];
    snprintf(w, sizeof w, "%s.%s", what, t[i].key);
    if (!v) {
      if (t[i].required) fail(c, map, "%s: missing required key \"%s\"", what, t[i].key);
      continue;
    }
    char *dst = (char *)base + t[i].off;
    switch (t[i].type) {
    case F_STRING:
    case F_PATH: {
      const char *s;
      if (took(c, kc_yaml_get_string(v, w, &s, c->tmp, sizeof c->tmp))) {
        if (t[i].type == F_PATH && !*s) {
          fail(c, v, "%s: empty path", w);
          break;
        }
        if (t[i].type == F_PATH) s = resolve_path(c, s);
        memcpy(dst, &s, sizeof s);
      }
      break;
    }
    case F_BOOL: {
      bool b;
      if (took(c, kc_yaml_get_bool(v, w, &b, c->tmp, sizeof c->tmp))) memcpy(dst, &b, sizeof b);
      break;
    }
    case F_INT: {
      int64_t x;
      if (took(c, kc_yaml_get_int(v, w, t[i].min, t[i].max, &x, c->tmp, sizeof c->tmp)))
        memcpy(dst, &x, sizeof x);
      break;
    }
    case F_DOUBLE: {
      double x;
      if (took(c, kc_yaml_get_double(v, w, t[i].dmin, t[i].dmax, &x, c->tmp, sizeof c->tmp)))
        memcpy(dst, &x, sizeof x);
      break;
    }
    case F_DURATION: {
      int64_t x;
      if (took(c, kc_yaml_get_duration_ms(v, w, t[i].min, t[i].max, &x, c->tmp, sizeof c->tmp)))
        memcpy(dst, &x, sizeof x);
      break;
    }
    case F_CUSTOM: break;
    }
  }
  return true;
}

/* Position to blame for a key: its value if present, else the section. */
static const kc_yaml_node *blame(const kc_yaml_node *map, const char *key) {
  const kc_yaml_node *v = kc_yaml_map_get(map, key);
  return v ? v : map;
}

/* ---- selectors --------------------------------------------------------------
 * Parsed with daemon/kube/selector.h (the apiserver's grammar and messages) and
 * stored in canonical form, so "app in (b,a)" and "app in (a,b)" are the same
 * scope. Whether a field is supported for the resource needs discovery (the
 * plural name), so kc_field_selector_check is left to the reflector. */

/* Column of byte `pos` of a one-line scalar (quotes add one). Escapes in
 * double-quoted scalars can shift it; good enough to point at the token. */
static kc_yaml_node at_offset(const kc_yaml_node *n, size_t pos) {
  kc_yaml_node at = *n;
  if (!memchr(n->u.scalar.text, '\n', n->u.scalar.len) && pos < UINT32_MAX / 2)
    at.column += (uint32_t)pos + (n->u.scalar.plain ? 0u : 1u);
  return at;
}

/* Renders a selector with its *_string function into an owned string. */
static const char *canonical(struct ctx *c, const void *sel,
                             int (*render)(const void *, char *, size_t)) {
  size_t cap = 256;
  for (;;) {
    char *buf = malloc(cap);
    if (!buf) {
      c->oom = true;
      return "";
    }
    int n = render(sel, buf, cap);
    if (n >= 0) return keep(c, buf) ? buf : "";
    free(buf);
    if (n != -ENOSPC || cap > (1u << 24)) {
      c->oom = true;
      return "";
    }
    cap *= 4;
  }
}

static int render_label(const void *sel, char *buf, size_t cap) {
  return kc_label_selector_string(sel, buf, cap);
}

static int render_field(const void *sel, char *buf, size_t cap) {
  return kc_field_selector_string(sel, buf, cap);
}

/* Folds a selector parse result into the context: out of memory marks the
 * load as failed, a syntax error becomes an error line at its column.
 * Returns true when the selector parsed. */
static bool parsed(struct ctx *c, const kc_yaml_node *at, const char *what, int rc,
                   const kc_sel_error *e) {
  if (rc == 0) return true;
  if (rc == -ENOMEM) {
    c->oom = true;
  } else {
    kc_yaml_node pos = at_offset(at, e->pos);
    fail(c, &pos, "%s: %s", what, e->msg);
  }
  return false;
}

static const char *check_label_selector(struct ctx *c, const kc_yaml_node *at, const char *what,
                                        const char *s) {
  kc_label_selector *sel = NULL;
  kc_sel_error e;
  if (!parsed(c, at, what, kc_label_selector_parse(s, strlen(s), &sel, &e), &e)) return NULL;
  const char *r = canonical(c, sel, render_label);
  kc_label_selector_free(sel);
  return r;
}

static const char *check_field_selector(struct ctx *c, const kc_yaml_node *at, const char *what,
                                        const char *s) {
  kc_field_selector *sel = NULL;
  kc_sel_error e;
  if (!parsed(c, at, what, kc_field_selector_parse(s, strlen(s), &sel, &e), &e)) return NULL;
  const char *r = canonical(c, sel, render_field);
  kc_field_selector_free(sel);
  return r;
}

/* ---- identity strings ------------------------------------------------------- */

/* Escapes the separators so distinct scopes never render the same. */
static void sb_esc(kc_buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == ';' || *s == ',' || *s == '=') kc_buf_add(b, "\\", 1);
    kc_buf_add(b, s, 1);
  }
}

static void sb_list(kc_buf *b, const char *const *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (i) kc_buf_add(b, ",", 1);
    sb_esc(b, v[i]);
  }
}

static const char *make_identity(struct ctx *c, const kc_informer_spec *inf) {
  kc_buf b = {0};
  kc_buf_puts(&b, "apiVersion=");
  sb_esc(&b, inf->api_version);
  kc_buf_puts(&b, ";kind=");
  sb_esc(&b, inf->kind);
  kc_buf_puts(&b, ";namespaces=");
  sb_list(&b, inf->namespaces, inf->nnamespaces);
  kc_buf_puts(&b, ";labelSelector=");
  sb_esc(&b, inf->label_selector);
  kc_buf_puts(&b, ";fieldSelector=");
  sb_esc(&b, inf->field_selector);
  kc_buf_puts(&b, ";drop=");
  sb_list(&b, inf->drop, inf->ndrop);
  kc_buf_puts(&b, inf->metadata_only ? ";metadataOnly=true" : ";metadataOnly=false");
  if (b.err) {
    free(b.p);
    c->oom = true;
    return "";
  }
  return keep(c, b.p);
}

/* ---- informers ---------------------------------------------------------- */

static void informer_defaults(kc_informer_spec *inf) {
  memset(inf, 0, sizeof *inf);
  inf->label_selector = "";
  inf->field_selector = "";
  inf->page_size = KC_DEFAULT_PAGE_SIZE;
  inf->watch_timeout_ms = KC_DEFAULT_WATCH_TIMEOUT_MS;
  inf->watch_inactivity_ms = KC_DEFAULT_WATCH_INACTIVITY_MS;
  inf->streaming_list = KC_STREAMING_AUTO;
  inf->consistency_check_ms = KC_DEFAULT_CONSISTENCY_CHECK_MS;
}

static const char *group_of(struct ctx *c, const char *api_version) {
  kc_str g, v;
  if (!kc_name_split_api_version(api_version, strlen(api_version), &g, &v) || !g.len) return "";
  char *r = xcalloc(c, g.len + 1, 1);
  if (r) memcpy(r, g.ptr, g.len);
  return r ? r : "";
}

/* A YAML string list, kept with the config. Returns false when it is not
 * one (reported) or out of memory. */
static bool string_list(struct ctx *c, const kc_yaml_node *node, const char *what,
                        const char ***v, size_t *n) {
  *v = NULL;
  *n = 0;
  if (!took(c, kc_yaml_get_string_list(node, what, v, n, c->tmp, sizeof c->tmp))) return false;
  return !*v || keep(c, *v);
}

/* Reports every item of list v (read from node) that `check` (may be NULL)
 * finds a problem with, and every item listed twice. True when none. */
static bool items_ok(struct ctx *c, const kc_yaml_node *node, const char *what, const char **v,
                     size_t n, const char *(*check)(const char *)) {
  bool ok = true;
  for (size_t i = 0; i < n; i++) {
    const char *why = check ? check(v[i]) : NULL;
    if (why) {
      fail(c, &node->u.seq.items[i], "%s[%zu]: %s", what, i, why);
      ok = false;
    }
    for (size_t j = 0; j < i; j++)
      if (strcmp(v[i], v[j]) == 0) {
        fail(c, &node->u.seq.items[i], "%s[%zu]: \"%s\" is listed twice", what, i, v[i]);
        ok = false;
        break;
      }
  }
  return ok;
}

/* Sorted unique string list from a YAML sequence; reports duplicates. */
static bool sorted_list(struct ctx *c, const kc_yaml_node *node, const char *what,
                        const char *const **out, size_t *count,
                        const char *(*check)(const char *)) {
  const char **v;
  size_t n;
  if (!string_list(c, node, what, &v, &n) || !items_ok(c, node, what, v, n, check)) return false;
  if (n > 1) qsort(v, n, sizeof *v, str_cmp_ptr);
  *out = v;
  *count = n;
  return true;
}

static const char *namespace_problem(const char *s) {
  return dns_label(s) ? NULL : "not a valid namespace name (lowercase RFC 1123 label)";
}

static const char *drop_path_problem(const char *s) { return kc_transform_drop_problem(s); }
static const char *index_path_problem(const char *s) { return kc_path_problem(s, true); }

/* `NAME: [path, ...]`: every path checked and reported at its own
 * position; file order kept (the index is their union). */
static void index_paths(struct ctx *c, const kc_yaml_node *node, const char *what,
                        kc_index_spec *ix) {
  const char **v;
  size_t n;
  if (!string_list(c, node, what, &v, &n)) return;
  if (n == 0) {
    fail(c, node, "%s: an empty list: give at least one path", what);
    return;
  }
  if (n > KC_CONFIG_MAX_INDEX_PATHS) {
    fail(c, &node->u.seq.items[KC_CONFIG_MAX_INDEX_PATHS], "%s: more than %d paths", what,
         KC_CONFIG_MAX_INDEX_PATHS);
    return;
  }
  if (!items_ok(c, node, what, v, n, index_path_problem)) return;
  ix->path = v[0];
  ix->paths = v;
  ix->npaths = n;
}

static void parse_informer(struct ctx *c, const kc_yaml_node *n, size_t idx,
                           kc_informer_spec *inf) {
  static const struct field table[] = {
      FIELD("name", F_STRING, kc_informer_spec, name),
      REQUIRED("apiVersion", F_STRING, kc_informer_spec, api_version),
      REQUIRED("kind", F_STRING, kc_informer_spec, kind),
      CUSTOM("namespaces"),
      CUSTOM("labelSelector"),
      CUSTOM("fieldSelector"),
      CUSTOM("transform"),
      FIELD("metadataOnly", F_BOOL, kc_informer_spec, metadata_only),
      FIELD_RANGE("resync", F_DURATION, kc_informer_spec, resync_ms, 0, 30LL * 86400000),
      FIELD_RANGE("consistencyCheck", F_DURATION, kc_informer_spec, consistency_check_ms, 0,
                  30LL * 86400000),
      CUSTOM("indexes"),
      FIELD_RANGE("pageSize", F_INT, kc_informer_spec, page_size, 0, 100000),
      FIELD_RANGE("watchTimeout", F_DURATION, kc_informer_spec, watch_timeout_ms, 1000,
                  3600000),
      FIELD_RANGE("watchInactivityTimeout", F_DURATION, kc_informer_spec, watch_inactivity_ms,
                  0, 86400000),
      CUSTOM("streamingList"),
  };
  char what[64];
  snprintf(what, sizeof what, "informers[%zu]", idx);
  informer_defaults(inf);
  inf->at = n;
  inf->api_version = "";
  inf->kind = "";
  if (!apply_table(c, n, what, table, sizeof table / sizeof table[0], inf)) return;
  char w[128];

  if (inf->name && !simple_name(inf->name, 63))
    fail(c, kc_yaml_map_get(n, "name"), "%s.name: must be 1-63 characters of [A-Za-z0-9._-]",
         what);
  if (*inf->api_version && !api_version_ok(inf->api_version))
    fail(c, kc_yaml_map_get(n, "apiVersion"),
         "%s.apiVersion: \"%s\" is not of the form VERSION or GROUP/VERSION", what,
         inf->api_version);
  if (*inf->kind && !kind_ok(inf->kind))
    fail(c, kc_yaml_map_get(n, "kind"), "%s.kind: \"%s\" is not a kind (e.g. Pod, Deployment)",
         what, inf->kind);
  inf->group = group_of(c, inf->api_version);
  if (inf->resync_ms > 0 && inf->resync_ms < 1000)
    fail(c, kc_yaml_map_get(n, "resync"), "%s.resync: must be 0 (off) or at least 1s", what);

  const kc_yaml_node *v;
  if ((v = kc_yaml_map_get(n, "namespaces"))) {
    snprintf(w, sizeof w, "%s.namespaces", what);
    if (sorted_list(c, v, w, &inf->namespaces, &inf->nnamespaces, namespace_problem) &&
        inf->nnamespaces == 0)
      fail(c, v, "%s: empty list (omit the key to watch all namespaces)", w);
  }
  const char *s;
  if ((v = kc_yaml_map_get(n, "labelSelector"))) {
    snprintf(w, sizeof w, "%s.labelSelector", what);
    if (took(c, kc_yaml_get_string(v, w, &s, c->tmp, sizeof c->tmp))) {
      const char *canon = check_label_selector(c, v, w, s);
      if (canon) inf->label_selector = canon;
    }
  }
  if ((v = kc_yaml_map_get(n, "fieldSelector"))) {
    snprintf(w, sizeof w, "%s.fieldSelector", what);
    if (took(c, kc_yaml_get_string(v, w, &s, c->tmp, sizeof c->tmp))) {
      const char *canon = check_field_selector(c, v, w, s);
      if (canon) inf->field_selector = canon;
    }
  }
  if ((v = kc_yaml_map_get(n, "transform"))) {
    static const char *const tkeys[] = {"drop"};
    snprintf(w, sizeof w, "%s.transform", what);
    if (took(c, kc_yaml_expect(v, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp)) &&
        took(c, kc_yaml_check_keys(v, tkeys, 1, w, c->tmp, sizeof c->tmp))) {
      const kc_yaml_node *d = kc_yaml_map_get(v, "drop");
      if (d) {
        snprintf(w, sizeof w, "%s.transform.drop", what);
        sorted_list(c, d, w, &inf->drop, &inf->ndrop, drop_path_problem);
      }
    }
  }
  if ((v = kc_yaml_map_get(n, "indexes"))) {
    snprintf(w, sizeof w, "%s.indexes", what);
    if (took(c, kc_yaml_expect(v, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp)) && v->u.map.len) {
      kc_index_spec *ix = xcalloc(c, v->u.map.len, sizeof *ix);
      if (ix) {
        for (size_t i = 0; i < v->u.map.len; i++) {
          const kc_yaml_pair *p = &v->u.map.pairs[i];
          char iw[200];
          snprintf(iw, sizeof iw, "%s.%s", w, p->key.u.scalar.text);
          ix[i].name = p->key.u.scalar.text;
          if (!simple_name(ix[i].name, 63))
            fail(c, &p->key, "%s: index name must be 1-63 characters of [A-Za-z0-9._-]", w);
          if (p->value.type == KC_YAML_SEQUENCE) {
            index_paths(c, &p->value, iw, &ix[i]);
          } else if (p->value.type == KC_YAML_MAPPING) {
            fail(c, &p->value, "%s: expected a path or a list of paths, got a mapping", iw);
          } else if (took(c, kc_yaml_get_string(&p->value, iw, &ix[i].path, c->tmp,
                                                sizeof c->tmp))) {
            const char *why = kc_path_problem(ix[i].path, true);
            if (why) fail(c, &p->value, "%s: %s", iw, why);
            ix[i].paths = &ix[i].path; /* ix is never moved */
            ix[i].npaths = 1;
          }
        }
        inf->indexes = ix;
        inf->nindexes = v->u.map.len;
      }
    }
  }
  if ((v = kc_yaml_map_get(n, "streamingList"))) {
    snprintf(w, sizeof w, "%s.streamingList", what);
    /* `on`/`off` are plain strings in YAML 1.2; also accept true/false. */
    if (took(c, kc_yaml_get_string(v, w, &s, c->tmp, sizeof c->tmp))) {
      if (!strcmp(s, "auto")) inf->streaming_list = KC_STREAMING_AUTO;
      else if (!strcmp(s, "on") || (!strcmp(s, "true") && v->u.scalar.plain))
        inf->streaming_list = KC_STREAMING_ON;
      else if (!strcmp(s, "off") || (!strcmp(s, "false") && v->u.scalar.plain))
        inf->streaming_list = KC_STREAMING_OFF;
      else
        fail(c, v, "%s: expected auto, on or off, got \"%s\"", w, s);
    }
  }
  inf->identity = make_identity(c, inf);
}

/* ---- controllers -------------------------------------------------------- */

static const struct {
  const char *name;
  unsigned bit;
} predicate_names[] = {
    {"GenerationChanged", KC_PRED_GENERATION_CHANGED},
    {"LabelsChanged", KC_PRED_LABELS_CHANGED},
    {"AnnotationsChanged", KC_PRED_ANNOTATIONS_CHANGED},
    {"ResourceVersionChanged", KC_PRED_RESOURCE_VERSION_CHANGED},
    {"DeletionStarted", KC_PRED_DELETION_STARTED},
    {"OwnerReferencesChanged", KC_PRED_OWNER_REFERENCES_CHANGED},
    {"FinalizersChanged", KC_PRED_FINALIZERS_CHANGED},
};

static unsigned parse_predicates(struct ctx *c, const kc_yaml_node *n, const char *what) {
  const char **v = NULL;
  size_t cnt = 0;
  unsigned bits = 0;
  if (!took(c, kc_yaml_get_string_list(n, what, &v, &cnt, c->tmp, sizeof c->tmp))) return 0;
  for (size_t i = 0; i < cnt; i++) {
    unsigned bit = 0;
    for (size_t j = 0; j < sizeof predicate_names / sizeof predicate_names[0]; j++)
      if (strcmp(v[i], predicate_names[j].name) == 0) bit = predicate_names[j].bit;
    if (!bit)
      fail(c, &n->u.seq.items[i],
           "%s[%zu]: unknown predicate \"%s\" (known: GenerationChanged, LabelsChanged, "
           "AnnotationsChanged, ResourceVersionChanged, DeletionStarted, "
           "OwnerReferencesChanged, FinalizersChanged)",
           what, i, v[i]);
    else if (bits & bit)
      fail(c, &n->u.seq.items[i], "%s[%zu]: \"%s\" is listed twice", what, i, v[i]);
    bits |= bit;
  }
  free(v);
  return bits;
}

/* Reads apiVersion/kind/informer of a kind reference whose other keys the
 * caller's table already declared. */
static void parse_kind_ref(struct ctx *c, const kc_yaml_node *n, const char *what,
                           kc_kind_ref *ref, const struct field *extra, size_t nextra) {
  struct field t[8] = {
      REQUIRED("apiVersion", F_STRING, kc_kind_ref, api_version),
      REQUIRED("kind", F_STRING, kc_kind_ref, kind),
      FIELD("informer", F_STRING, kc_kind_ref, informer_name),
  };
  size_t nt = 3;
  for (size_t i = 0; i < nextra && nt < 8; i++) {
    t[nt] = extra[i];
    t[nt].type = F_CUSTOM; /* the caller applies those */
    nt++;
  }
  ref->at = n;
  ref->api_version = "";
  ref->kind = "";
  ref->informer = SIZE_MAX;
  if (!apply_table(c, n, what, t, nt, ref)) return;
  if (*ref->api_version && !api_version_ok(ref->api_version))
    fail(c, kc_yaml_map_get(n, "apiVersion"),
         "%s.apiVersion: \"%s\" is not of the form VERSION or GROUP/VERSION", what,
         ref->api_version);
  if (*ref->kind && !kind_ok(ref->kind))
    fail(c, kc_yaml_map_get(n, "kind"), "%s.kind: \"%s\" is not a kind (e.g. Pod, Deployment)",
         what, ref->kind);
}

static void parse_watch(struct ctx *c, const kc_yaml_node *n, const char *what,
                        kc_watch_spec *ws) {
  static const struct field extra[] = {CUSTOM("mapping"), CUSTOM("predicates")};
  parse_kind_ref(c, n, what, &ws->ref, extra, 2);
  if (!n || n->type != KC_YAML_MAPPING) return;
  const kc_yaml_node *m = kc_yaml_map_get(n, "mapping");
  char w[200];
  snprintf(w, sizeof w, "%s.mapping", what);
  if (!m) {
    fail(c, n, "%s: missing required key \"mapping\"", what);
  } else if (took(c, kc_yaml_expect(m, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp))) {
    static const char *const mkeys[] = {"label", "annotation", "field", "index"};
    if (took(c, kc_yaml_check_keys(m, mkeys, 4, w, c->tmp, sizeof c->tmp))) {
      if (m->u.map.len != 1) {
        fail(c, m, "%s: needs exactly one of label, annotation, field, index", w);
      } else {
        const kc_yaml_pair *p = &m->u.map.pairs[0];
        const char *k = p->key.u.scalar.text;
        char kw[220];
        snprintf(kw, sizeof kw, "%s.%s", w, k);
        ws->mapping = !strcmp(k, "label")        ? KC_MAP_LABEL
                      : !strcmp(k, "annotation") ? KC_MAP_ANNOTATION
                      : !strcmp(k, "field")      ? KC_MAP_FIELD
                                                 : KC_MAP_INDEX;
        if (took(c, kc_yaml_get_string(&p->value, kw, &ws->key, c->tmp, sizeof c->tmp))) {
          const char *why = NULL;
          if ((ws->mapping == KC_MAP_LABEL || ws->mapping == KC_MAP_ANNOTATION) &&
              !kc_name_is_qualified(ws->key, strlen(ws->key)))
            why = "not a valid label/annotation key ([prefix/]name)";
          else if (ws->mapping == KC_MAP_FIELD)
            why = kc_path_problem(ws->key, true);
          else if (ws->mapping == KC_MAP_INDEX && !simple_name(ws->key, 63))
            why = "not a valid index name";
          if (why) fail(c, &p->value, "%s: %s", kw, why);
        }
      }
    }
  }
  const kc_yaml_node *pr = kc_yaml_map_get(n, "predicates");
  if (pr) {
    snprintf(w, sizeof w, "%s.predicates", what);
    ws->predicates = parse_predicates(c, pr, w);
  }
}

static void parse_owns(struct ctx *c, const kc_yaml_node *n, const char *what, kc_owns_spec *os) {
  static const struct field extra[] = {CUSTOM("predicates")};
  parse_kind_ref(c, n, what, &os->ref, extra, 1);
  const kc_yaml_node *pr = kc_yaml_map_get(n, "predicates");
  if (pr) {
    char w[200];
    snprintf(w, sizeof w, "%s.predicates", what);
    os->predicates = parse_predicates(c, pr, w);
  }
}

/* One parser of list items, for parse_items. */
typedef void (*item_parser)(struct ctx *c, const kc_yaml_node *n, const char *what, void *out);

static void owns_item(struct ctx *c, const kc_yaml_node *n, const char *what, void *out) {
  parse_owns(c, n, what, out);
}

static void watch_item(struct ctx *c, const kc_yaml_node *n, const char *what, void *out) {
  parse_watch(c, n, what, out);
}

/* The optional sequence `key` of map n (named what): each item, named
 * what.key[i], parsed by `each` into an owned array of `size`-byte items.
 * Returns the array and its length in *count; NULL when the key is absent,
 * empty or not a sequence (reported). */
static void *parse_items(struct ctx *c, const kc_yaml_node *n, const char *what, const char *key,
                         size_t size, item_parser each, size_t *count) {
  const kc_yaml_node *v = kc_yaml_map_get(n, key);
  if (!v) return NULL;
  char w[160];
  snprintf(w, sizeof w, "%s.%s", what, key);
  if (!took(c, kc_yaml_expect(v, KC_YAML_SEQUENCE, w, c->tmp, sizeof c->tmp)) || !v->u.seq.len)
    return NULL;
  char *items = xcalloc(c, v->u.seq.len, size);
  if (!items) return NULL;
  for (size_t i = 0; i < v->u.seq.len; i++) {
    snprintf(w, sizeof w, "%s.%s[%zu]", what, key, i);
    each(c, &v->u.seq.items[i], w, items + i * size);
  }
  *count = v->u.seq.len;
  return items;
}

/* ---- hooks (docs/hooks.md) -------------------------------------------------- */

/* An environment variable name as POSIX shells take it. */
static bool env_name_ok(const char *s) {
  if (!*s || (*s >= '0' && *s <= '9')) return false;
  for (const char *p = s; *p; p++)
    if (!is_alnum(*p) && *p != '_') return false;
  return true;
}

static const kc_hook_exec_spec *parse_hook_exec(struct ctx *c, const kc_yaml_node *n,
                                                const char *what) {
  static const struct field table[] = {
      CUSTOM("command"),
      CUSTOM("env"),
      FIELD_RANGE("timeout", F_DURATION, kc_hook_exec_spec, timeout_ms, 1, 86400000),
      CUSTOM("mode"),
      FIELD_RANGE("maxResponseBytes", F_INT, kc_hook_exec_spec, max_response_bytes, 64,
                  1LL << 30),
      FIELD_RANGE("stopGracePeriod", F_DURATION, kc_hook_exec_spec, stop_grace_ms, 0, 3600000),
  };
  kc_hook_exec_spec *ex = xcalloc(c, 1, sizeof *ex);
  if (!ex) return NULL;
  ex->timeout_ms = KC_DEFAULT_HOOK_TIMEOUT_MS;
  ex->max_response_bytes = KC_DEFAULT_HOOK_MAX_RESPONSE;
  ex->stop_grace_ms = KC_DEFAULT_HOOK_STOP_GRACE_MS;
  if (!apply_table(c, n, what, table, sizeof table / sizeof table[0], ex)) return ex;
  char w[200];
  const kc_yaml_node *v = kc_yaml_map_get(n, "command");
  snprintf(w, sizeof w, "%s.command", what);
  if (!v) {
    fail(c, n, "%s: missing required key \"command\"", what);
  } else {
    const char **argv = NULL;
    size_t argc = 0;
    if (string_list(c, v, w, &argv, &argc)) {
      if (!argc) {
        fail(c, v, "%s: must name a program (a non-empty list)", w);
      } else if (!*argv[0]) {
        fail(c, &v->u.seq.items[0], "%s[0]: empty program name", w);
      } else {
        /* One more slot: the argv handed to posix_spawn ends with NULL. */
        const char **cmd = xcalloc(c, argc + 1, sizeof *cmd);
        if (cmd) {
          for (size_t i = 0; i < argc; i++) cmd[i] = argv[i];
          if (strchr(cmd[0], '/')) cmd[0] = resolve_path(c, cmd[0]);
          ex->command = cmd;
          ex->ncommand = argc;
        }
      }
    }
  }
  if ((v = kc_yaml_map_get(n, "env"))) {
    snprintf(w, sizeof w, "%s.env", what);
    if (took(c, kc_yaml_expect(v, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp)) && v->u.map.len) {
      const char **env = xcalloc(c, v->u.map.len + 1, sizeof *env);
      for (size_t i = 0; env && i < v->u.map.len; i++) {
        const kc_yaml_pair *pr = &v->u.map.pairs[i];
        char wk[260];
        const char *key = pr->key.u.scalar.text;
        snprintf(wk, sizeof wk, "%s.%s", w, key);
        const char *val;
        if (strlen(key) != pr->key.u.scalar.len || !env_name_ok(key)) {
          fail(c, &pr->value, "%s: not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", wk);
          continue;
        }
        if (!took(c, kc_yaml_get_string(&pr->value, wk, &val, c->tmp, sizeof c->tmp))) continue;
        size_t len = strlen(key) + strlen(val) + 2;
        char *kv = xcalloc(c, len, 1);
        if (!kv) break;
        snprintf(kv, len, "%s=%s", key, val);
        env[ex->nenv++] = kv;
      }
      ex->env = env;
    }
  }
  if ((v = kc_yaml_map_get(n, "mode"))) {
    snprintf(w, sizeof w, "%s.mode", what);
    const char *m;
    if (took(c, kc_yaml_get_string(v, w, &m, c->tmp, sizeof c->tmp))) {
      if (strcmp(m, "persistent") == 0) ex->mode = KC_HOOK_MODE_PERSISTENT;
      else if (strcmp(m, "per-call") == 0) ex->mode = KC_HOOK_MODE_PER_CALL;
      else fail(c, v, "%s: must be persistent or per-call, not \"%s\"", w, m);
    }
  }
  return ex;
}

/* `permissions: [{group: "", resource: configmaps, verbs: [patch]}, ...]`:
 * the hook's writes, as a plugin declares them in its table (plugin.h). */
static const kctrld_permission *parse_hook_permissions(struct ctx *c, const kc_yaml_node *n,
                                                       const char *what) {
  static const char *const verbs[] = {"get",    "list",   "watch",  "create",          "update",
                                      "patch",  "delete", "deletecollection", NULL};
  if (!took(c, kc_yaml_expect(n, KC_YAML_SEQUENCE, what, c->tmp, sizeof c->tmp))) return NULL;
  kctrld_permission *perms = xcalloc(c, n->u.seq.len + 1, sizeof *perms);
  if (!perms) return NULL;
  for (size_t i = 0; i < n->u.seq.len; i++) {
    const kc_yaml_node *it = &n->u.seq.items[i];
    char w[200], wk[220];
    snprintf(w, sizeof w, "%s[%zu]", what, i);
    if (!took(c, kc_yaml_expect(it, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp))) continue;
    for (size_t k = 0; k < it->u.map.len; k++) {
      const char *key = it->u.map.pairs[k].key.u.scalar.text;
      if (strcmp(key, "group") && strcmp(key, "resource") && strcmp(key, "verbs"))
        fail(c, &it->u.map.pairs[k].key, "%s: unknown key \"%s\" (group, resource, verbs)", w, key);
    }
    const char *group = "", *resource = NULL;
    const kc_yaml_node *v;
    snprintf(wk, sizeof wk, "%s.group", w);
    if ((v = kc_yaml_map_get(it, "group")) &&
        took(c, kc_yaml_get_string(v, wk, &group, c->tmp, sizeof c->tmp)))
      group = xstrdup(c, group);
    snprintf(wk, sizeof wk, "%s.resource", w);
    if (!(v = kc_yaml_map_get(it, "resource")))
      fail(c, it, "%s: missing required key \"resource\" (the URL plural, e.g. configmaps)", w);
    else if (took(c, kc_yaml_get_string(v, wk, &resource, c->tmp, sizeof c->tmp)) && !*resource)
      fail(c, v, "%s: empty resource", wk);
    else if (resource)
      resource = xstrdup(c, resource);
    snprintf(wk, sizeof wk, "%s.verbs", w);
    const char **vs = NULL;
    size_t nv = 0;
    kc_buf joined = {0};
    if (!(v = kc_yaml_map_get(it, "verbs"))) {
      fail(c, it, "%s: missing required key \"verbs\"", w);
    } else if (string_list(c, v, wk, &vs, &nv)) {
      if (!nv) fail(c, v, "%s: must name at least one verb", wk);
      for (size_t j = 0; j < nv; j++) {
        bool known = false;
        for (const char *const *kv = verbs; *kv && !known; kv++) known = strcmp(*kv, vs[j]) == 0;
        if (!known)
          fail(c, &v->u.seq.items[j], "%s[%zu]: unknown verb \"%s\" (get, list, watch, create, update, patch, delete, deletecollection)",
               wk, j, vs[j]);
        kc_buf_printf(&joined, "%s%s", j ? "," : "", vs[j]);
      }
    }
    if (joined.err) fail(c, it, "out of memory");
    if (resource && joined.len) {
      perms[i].group = group ? group : "";
      perms[i].resource = resource;
      perms[i].verbs = xstrdup(c, joined.p);
    }
    kc_buf_free(&joined);
  }
  return perms;
}


/* A loopback host as libcurl's URL parser gives it: localhost, 127.0.0.0/8,
 * [::1]. Plain HTTP to these never leaves the machine. */
static bool loopback_host(const char *host) {
  if (strcasecmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0) return true;
  struct in_addr a;
  return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* hook.webhook.url: http(s), a host, no credentials, no fragment; plain
 * HTTP only to loopback unless allowInsecureHTTP. */
static void check_webhook_url(struct ctx *c, const kc_yaml_node *at, const char *w,
                              kc_hook_webhook_spec *wh) {
  CURLU *u = curl_url();
  if (!u) {
    c->oom = true;
    return;
  }
  char *scheme = NULL, *host = NULL, *user = NULL, *frag = NULL;
  if (curl_url_set(u, CURLUPART_URL, wh->url, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
    fail(c, at, "%s: not an absolute http:// or https:// URL with a host", w);
  } else if (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0) {
    fail(c, at, "%s: scheme must be https (or http), not \"%s\"", w, scheme);
  } else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
    fail(c, at, "%s: must not contain credentials (user@host): use clientCertFile/clientKeyFile",
         w);
  } else if (curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
    fail(c, at, "%s: must not contain a fragment (#...)", w);
  } else if (strcmp(scheme, "http") == 0) {
    if (!loopback_host(host) && !wh->allow_insecure_http)
      fail(c, at,
           "%s: plain http:// to a host other than loopback sends every object unencrypted: "
           "use https://, or set allowInsecureHTTP: true",
           w);
    if (wh->ca_file || wh->client_cert_file || wh->insecure_skip_tls_verify)
      fail(c, at, "%s: TLS settings (caFile, clientCertFile, insecureSkipTLSVerify) need https://",
           w);
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(user);
  curl_free(frag);
  curl_url_cleanup(u);
}

static const kc_hook_webhook_spec *parse_hook_webhook(struct ctx *c, const kc_yaml_node *n,
                                                      const char *what) {
  static const struct field table[] = {
      REQUIRED("url", F_STRING, kc_hook_webhook_spec, url),
      FIELD("caFile", F_PATH, kc_hook_webhook_spec, ca_file),
      FIELD("clientCertFile", F_PATH, kc_hook_webhook_spec, client_cert_file),
      FIELD("clientKeyFile", F_PATH, kc_hook_webhook_spec, client_key_file),
      FIELD_RANGE("timeout", F_DURATION, kc_hook_webhook_spec, timeout_ms, 1, 86400000),
      FIELD("insecureSkipTLSVerify", F_BOOL, kc_hook_webhook_spec, insecure_skip_tls_verify),
      FIELD("allowInsecureHTTP", F_BOOL, kc_hook_webhook_spec, allow_insecure_http),
      FIELD_RANGE("maxResponseBytes", F_INT, kc_hook_webhook_spec, max_response_bytes, 64,
                  1LL << 30),
  };
  kc_hook_webhook_spec *wh = xcalloc(c, 1, sizeof *wh);
  if (!wh) return NULL;
  wh->url = "";
  wh->timeout_ms = KC_DEFAULT_WEBHOOK_TIMEOUT_MS;
  wh->max_response_bytes = KC_DEFAULT_HOOK_MAX_RESPONSE;
  if (!apply_table(c, n, what, table, sizeof table / sizeof table[0], wh)) return wh;
  char w[200];
  const kc_yaml_node *v = kc_yaml_map_get(n, "url");
  snprintf(w, sizeof w, "%s.url", what);
  if (v && *wh->url) check_webhook_url(c, v, w, wh);
  else if (v) fail(c, v, "%s: empty URL", w);
  if (!wh->client_cert_file != !wh->client_key_file) {
    const char *has = wh->client_cert_file ? "clientCertFile" : "clientKeyFile";
    fail(c, kc_yaml_map_get(n, has), "%s.%s: needs %s too", what, has,
         wh->client_cert_file ? "clientKeyFile" : "clientCertFile");
  }
  if (wh->ca_file && wh->insecure_skip_tls_verify)
    fail(c, kc_yaml_map_get(n, "insecureSkipTLSVerify"),
         "%s.insecureSkipTLSVerify: cannot be combined with caFile (verify with the CA, or do not "
         "verify)",
         what);
  return wh;
}

static const kc_hook_spec *parse_hook(struct ctx *c, const kc_yaml_node *n, const char *ctl) {
  static const struct field table[] = {CUSTOM("exec"), CUSTOM("webhook"), CUSTOM("permissions")};
  char what[96];
  snprintf(what, sizeof what, "%s.hook", ctl);
  kc_hook_spec *h = xcalloc(c, 1, sizeof *h);
  if (!h) return NULL;
  h->at = n;
  if (!apply_table(c, n, what, table, sizeof table / sizeof table[0], h)) return h;
  const kc_yaml_node *pv = kc_yaml_map_get(n, "permissions");
  if (pv) {
    char wp[120];
    snprintf(wp, sizeof wp, "%s.permissions", what);
    h->permissions = parse_hook_permissions(c, pv, wp);
  }
  const kc_yaml_node *v = kc_yaml_map_get(n, "exec"), *wv = kc_yaml_map_get(n, "webhook");
  if (!v && !wv) {
    fail(c, n, "%s: missing a hook kind: give \"exec\" or \"webhook\"", what);
    return h;
  }
  if (v && wv) {
    fail(c, wv, "%s: give either \"exec\" or \"webhook\", not both", what);
    return h;
  }
  char w[120];
  snprintf(w, sizeof w, "%s.%s", what, v ? "exec" : "webhook");
  if (v) h->exec = parse_hook_exec(c, v, w);
  else h->webhook = parse_hook_webhook(c, wv, w);
  return h;
}

/* ---- sharding ------------------------------------------------------------------ */

/* `sharding:` over *sh, which holds the defaults or the inherited values. */
static void parse_sharding(struct ctx *c, const kc_yaml_node *n, const char *what,
                           kc_sharding_spec *sh) {
  static const struct field table[] = {
      FIELD_RANGE("shards", F_INT, kc_sharding_spec, shards, 0, KC_MAX_SHARDS),
      CUSTOM("key"),
      FIELD("leaseNamespace", F_STRING, kc_sharding_spec, lease_namespace),
      FIELD("leasePrefix", F_STRING, kc_sharding_spec, lease_prefix),
      FIELD_RANGE("leaseDuration", F_DURATION, kc_sharding_spec, lease_duration_ms, 1, 86400000),
      FIELD_RANGE("renewDeadline", F_DURATION, kc_sharding_spec, renew_deadline_ms, 1, 86400000),
      FIELD_RANGE("retryPeriod", F_DURATION, kc_sharding_spec, retry_period_ms, 1, 86400000),
  };
  sh->at = n;
  if (!apply_table(c, n, what, table, sizeof table / sizeof table[0], sh)) return;
  const kc_yaml_node *v = kc_yaml_map_get(n, "key");
  char w[200];
  snprintf(w, sizeof w, "%s.key", what);
  const char *k;
  if (v && took(c, kc_yaml_get_string(v, w, &k, c->tmp, sizeof c->tmp))) {
    if (strcmp(k, "metadata.uid") == 0) sh->key = KC_SHARD_KEY_UID;
    else if (strcmp(k, "metadata.namespace") == 0) sh->key = KC_SHARD_KEY_NAMESPACE;
    else fail(c, v, "%s: expected metadata.uid or metadata.namespace, got \"%s\"", w, k);
  }
}

/* The node to blame for key: where it was written (the controller's
 * section, then the global one), else the controller's section. */
static const kc_yaml_node *shard_blame(const kc_yaml_node *own, const kc_yaml_node *global,
                                       const char *key) {
  if (own && kc_yaml_map_get(own, key)) return kc_yaml_map_get(own, key);
  if (global && kc_yaml_map_get(global, key)) return kc_yaml_map_get(global, key);
  return own ? own : global;
}

static bool written(const kc_yaml_node *own, const kc_yaml_node *global, const char *key) {
  return (own && kc_yaml_map_get(own, key)) || (global && kc_yaml_map_get(global, key));
}

/* Room a Lease name needs beyond the prefix: "-member-" + 16 hex digits
 * (sharding.h names the membership Leases so). */
#define SHARD_NAME_SUFFIX_MAX 24

/* Checks the effective settings of one sharded controller. */
static void check_sharding(struct ctx *c, const kc_sharding_spec *sh, const kc_yaml_node *own,
                           const char *what) {
  const kc_yaml_node *g = c->cfg->sharding.at;
  if (!dns_label(sh->lease_namespace))
    fail(c, shard_blame(own, g, "leaseNamespace"),
         "%s.leaseNamespace: \"%s\" is not a valid namespace", what, sh->lease_namespace);
  if (!dns_subdomain(sh->lease_prefix) ||
      strlen(sh->lease_prefix) + SHARD_NAME_SUFFIX_MAX > 253)
    fail(c, shard_blame(own, g, "leasePrefix"),
         "%s.leasePrefix: \"%s\" is not a valid Lease name prefix (a DNS subdomain of at most "
         "%d characters)",
         what, sh->lease_prefix, 253 - SHARD_NAME_SUFFIX_MAX);
  char a[32], b[32];
  if (sh->lease_duration_ms <= sh->renew_deadline_ms)
    fail(c, shard_blame(own, g, written(own, g, "renewDeadline") ? "renewDeadline" : "leaseDuration"),
         "%s: leaseDuration (%s) must be greater than renewDeadline (%s)", what,
         fmt_ms(sh->lease_duration_ms, a, sizeof a), fmt_ms(sh->renew_deadline_ms, b, sizeof b));
  else if (sh->renew_deadline_ms * 5 <= sh->retry_period_ms * 6)
    fail(c, shard_blame(own, g, written(own, g, "retryPeriod") ? "retryPeriod" : "renewDeadline"),
         "%s: renewDeadline (%s) must be greater than 1.2 x retryPeriod (%s)", what,
         fmt_ms(sh->renew_deadline_ms, a, sizeof a), fmt_ms(sh->retry_period_ms, b, sizeof b));
}

/* A controller's effective sharding: the global settings, its own on top,
 * and the default prefix "kctrld-<name>" (lowercase, '_' as '-'). */
static void controller_sharding(struct ctx *c, const kc_yaml_node *n, const char *what,
                                kc_controller_spec *ct) {
  ct->sharding = c->cfg->sharding;
  const kc_yaml_node *v = kc_yaml_map_get(n, "sharding");
  char w[160];
  snprintf(w, sizeof w, "%s.sharding", what);
  if (v) parse_sharding(c, v, w, &ct->sharding);
  if (!ct->sharding.shards) return;
  if (!ct->sharding.lease_prefix) {
    size_t len = strlen(ct->name) + 8;
    char *p = xcalloc(c, len, 1);
    if (!p) return;
    snprintf(p, len, "kctrld-%s", ct->name);
    for (char *q = p; *q; q++) {
      if (*q >= 'A' && *q <= 'Z') *q = (char)(*q - 'A' + 'a');
      else if (*q == '_') *q = '-';
    }
    ct->sharding.lease_prefix = p;
  }
  check_sharding(c, &ct->sharding, v, w);
}

static void parse_controller(struct ctx *c, const kc_yaml_node *n, size_t idx,
                             kc_controller_spec *ct) {
  static const struct field table[] = {
      REQUIRED("name", F_STRING, kc_controller_spec, name),
      FIELD("plugin", F_PATH, kc_controller_spec, plugin),
      CUSTOM("hook"),
      CUSTOM("isolation"),
      CUSTOM("for"),
      CUSTOM("owns"),
      CUSTOM("watches"),
      FIELD_RANGE("workers", F_INT, kc_controller_spec, workers, 1, 1024),
      FIELD_RANGE("reconcileTimeout", F_DURATION, kc_controller_spec, reconcile_timeout_ms, 1,
                  86400000),
      CUSTOM("rateLimit"),
      CUSTOM("predicates"),
      CUSTOM("sharding"),
      CUSTOM("settings"),
  };
  static const struct field rl_table[] = {
      FIELD_RANGE("baseDelay", F_DURATION, kc_rate_limit, base_delay_ms, 1, 86400000),
      FIELD_RANGE("maxDelay", F_DURATION, kc_rate_limit, max_delay_ms, 1, 30LL * 86400000),
      {.key = "qps", .type = F_DOUBLE, .off = offsetof(kc_rate_limit, qps), .dmin = 0.001,
       .dmax = 1e6},
      FIELD_RANGE("burst", F_INT, kc_rate_limit, burst, 1, 1000000),
  };
  char what[64], w[160];
  snprintf(what, sizeof what, "controllers[%zu]", idx);
  memset(ct, 0, sizeof *ct);
  ct->at = n;
  ct->name = "";
  ct->plugin = "";
  ct->workers = KC_DEFAULT_WORKERS;
  ct->reconcile_timeout_ms = KC_DEFAULT_RECONCILE_TIMEOUT_MS;
  ct->rate_limit.base_delay_ms = KC_DEFAULT_BASE_DELAY_MS;
  ct->rate_limit.max_delay_ms = KC_DEFAULT_MAX_DELAY_MS;
  ct->rate_limit.qps = KC_DEFAULT_QPS;
  ct->rate_limit.burst = KC_DEFAULT_BURST;
  ct->for_.informer = SIZE_MAX;
  ct->for_.api_version = "";
  ct->for_.kind = "";
  if (!apply_table(c, n, what, table, sizeof table / sizeof table[0], ct)) return;
  const kc_yaml_node *hook = kc_yaml_map_get(n, "hook");
  if (hook && kc_yaml_map_get(n, "plugin"))
    fail(c, hook, "%s: give either \"plugin\" or \"hook\", not both", what);
  else if (hook)
    ct->hook = parse_hook(c, hook, what);
  else if (!kc_yaml_map_get(n, "plugin"))
    fail(c, n, "%s: missing required key \"plugin\" (or \"hook\")", what);
  const kc_yaml_node *iso = kc_yaml_map_get(n, "isolation");
  if (iso) {
    snprintf(w, sizeof w, "%s.isolation", what);
    const char *m;
    if (took(c, kc_yaml_get_string(iso, w, &m, c->tmp, sizeof c->tmp))) {
      if (strcmp(m, "in-process") == 0)
        ct->isolation = KC_ISOLATION_IN_PROCESS;
      else if (strcmp(m, "process") == 0)
        ct->isolation = KC_ISOLATION_PROCESS;
      else
        fail(c, iso, "%s: must be in-process or process, not \"%s\"", w, m);
      if (hook && ct->isolation == KC_ISOLATION_PROCESS)
        fail(c, iso, "%s: only a plugin runs in a process of its own (a hook is one already)", w);
    }
  }
  if (*ct->name && !simple_name(ct->name, 63))
    fail(c, kc_yaml_map_get(n, "name"), "%s.name: must be 1-63 characters of [A-Za-z0-9._-]",
         what);

  const kc_yaml_node *v = kc_yaml_map_get(n, "for");
  snprintf(w, sizeof w, "%s.for", what);
  if (!v) fail(c, n, "%s: missing required key \"for\"", what);
  else parse_kind_ref(c, v, w, &ct->for_, NULL, 0);

  ct->owns = parse_items(c, n, what, "owns", sizeof *ct->owns, owns_item, &ct->nowns);
  ct->watches = parse_items(c, n, what, "watches", sizeof *ct->watches, watch_item, &ct->nwatches);
  if ((v = kc_yaml_map_get(n, "rateLimit"))) {
    snprintf(w, sizeof w, "%s.rateLimit", what);
    if (apply_table(c, v, w, rl_table, sizeof rl_table / sizeof rl_table[0], &ct->rate_limit) &&
        ct->rate_limit.base_delay_ms > ct->rate_limit.max_delay_ms) {
      char a[32], b[32];
      fail(c, blame(v, "baseDelay"), "%s: baseDelay (%s) must not exceed maxDelay (%s)", w,
           fmt_ms(ct->rate_limit.base_delay_ms, a, sizeof a),
           fmt_ms(ct->rate_limit.max_delay_ms, b, sizeof b));
    }
  }
  if ((v = kc_yaml_map_get(n, "predicates"))) {
    snprintf(w, sizeof w, "%s.predicates", what);
    ct->predicates = parse_predicates(c, v, w);
  }
  controller_sharding(c, n, what, ct);
  ct->settings = kc_yaml_map_get(n, "settings");
}

/* ---- binding kinds to informers ------------------------------------------- */

struct infvec {
  kc_informer_spec *v;
  size_t n, cap;
};

static kc_informer_spec *infvec_push(struct ctx *c, struct infvec *iv) {
  if (iv->n == iv->cap) {
    size_t ncap = iv->cap ? iv->cap * 2 : 8;
    kc_informer_spec *nv = realloc(iv->v, ncap * sizeof *nv);
    if (!nv) {
      c->oom = true;
      return NULL;
    }
    iv->v = nv;
    iv->cap = ncap;
  }
  return &iv->v[iv->n++];
}

static void bind_ref(struct ctx *c, struct infvec *iv, kc_kind_ref *ref, const char *what) {
  if (!*ref->api_version || !*ref->kind) return; /* already reported */
  if (ref->informer_name) {
    for (size_t i = 0; i < iv->n; i++) {
      const kc_informer_spec *inf = &iv->v[i];
      if (!inf->name || strcmp(inf->name, ref->informer_name) != 0) continue;
      if (strcmp(inf->api_version, ref->api_version) || strcmp(inf->kind, ref->kind))
        fail(c, kc_yaml_map_get(ref->at, "informer"),
             "%s.informer: informer \"%s\" watches %s %s, not %s %s", what, ref->informer_name,
             inf->api_version, inf->kind, ref->api_version, ref->kind);
      ref->informer = i;
      return;
    }
    fail(c, kc_yaml_map_get(ref->at, "informer"), "%s.informer: no informer named \"%s\"", what,
         ref->informer_name);
    return;
  }
  size_t found = SIZE_MAX, count = 0;
  for (size_t i = 0; i < iv->n; i++) {
    if (strcmp(iv->v[i].api_version, ref->api_version) || strcmp(iv->v[i].kind, ref->kind))
      continue;
    if (found == SIZE_MAX) found = i;
    count++;
  }
  if (count > 1) {
    fail(c, ref->at,
         "%s: %zu informers watch %s %s; say which one with `informer: NAME` (informers "
         "take a `name:`)",
         what, count, ref->api_version, ref->kind);
    return;
  }
  if (count == 1) {
    ref->informer = found;
    return;
  }
  /* Not listed: watch it with defaults (all namespaces, no selectors). */
  kc_informer_spec *inf = infvec_push(c, iv);
  if (!inf) return;
  informer_defaults(inf);
  inf->api_version = ref->api_version;
  inf->kind = ref->kind;
  inf->group = group_of(c, ref->api_version);
  inf->implicit = true;
  inf->identity = make_identity(c, inf);
  ref->informer = iv->n - 1;
}

static bool has_index(const kc_informer_spec *inf, const char *name) {
  for (size_t i = 0; i < inf->nindexes; i++)
    if (strcmp(inf->indexes[i].name, name) == 0) return true;
  return false;
}

/* ---- top level -------------------------------------------------------------- */

static void parse_leader_election(struct ctx *c, const kc_yaml_node *n) {
  static const struct field table[] = {
      FIELD("enabled", F_BOOL, kc_leader_election, enabled),
      FIELD("namespace", F_STRING, kc_leader_election, namespace_),
      FIELD("name", F_STRING, kc_leader_election, name),
      FIELD("identity", F_STRING, kc_leader_election, identity),
      FIELD_RANGE("leaseDuration", F_DURATION, kc_leader_election, lease_duration_ms, 1,
                  86400000),
      FIELD_RANGE("renewDeadline", F_DURATION, kc_leader_election, renew_deadline_ms, 1,
                  86400000),
      FIELD_RANGE("retryPeriod", F_DURATION, kc_leader_election, retry_period_ms, 1, 86400000),
  };
  kc_leader_election *le = &c->cfg->leader_election;
  if (!apply_table(c, n, "leaderElection", table, sizeof table / sizeof table[0], le)) return;
  if (!dns_label(le->namespace_))
    fail(c, blame(n, "namespace"), "leaderElection.namespace: \"%s\" is not a valid namespace",
         le->namespace_);
  if (!dns_subdomain(le->name))
    fail(c, blame(n, "name"), "leaderElection.name: \"%s\" is not a valid Lease name", le->name);
  if (le->identity && !*le->identity)
    fail(c, blame(n, "identity"), "leaderElection.identity: must not be empty");
  /* client-go's rules: LeaseDuration > RenewDeadline > JitterFactor(1.2) *
   * RetryPeriod > 0, so the leader gives up before anyone may take over and
   * gets more than one jittered retry before it must give up. */
  char a[32], b[32];
  if (le->lease_duration_ms <= le->renew_deadline_ms) {
    fail(c, blame(n, kc_yaml_map_get(n, "renewDeadline") ? "renewDeadline" : "leaseDuration"),
         "leaderElection: leaseDuration (%s) must be greater than renewDeadline (%s)",
         fmt_ms(le->lease_duration_ms, a, sizeof a), fmt_ms(le->renew_deadline_ms, b, sizeof b));
  } else if (le->renew_deadline_ms * 5 <= le->retry_period_ms * 6) {
    fail(c, blame(n, kc_yaml_map_get(n, "retryPeriod") ? "retryPeriod" : "renewDeadline"),
         "leaderElection: renewDeadline (%s) must be greater than 1.2 x retryPeriod (%s)",
         fmt_ms(le->renew_deadline_ms, a, sizeof a), fmt_ms(le->retry_period_ms, b, sizeof b));
  }
}

static bool bind_address_ok(const char *s) {
  if (strcmp(s, "0") == 0) return true;
  const char *colon = strrchr(s, ':');
  if (!colon || !colon[1] || strlen(colon + 1) > 5) return false;
  for (const char *p = colon + 1; *p; p++)
    if (*p < '0' || *p > '9') return false;
  if (atoi(colon + 1) > 65535) return false;
  size_t hl = (size_t)(colon - s);
  if (hl == 0) return true; /* ":9090": every address */
  char host[256];
  if (hl >= sizeof host) return false;
  memcpy(host, s, hl);
  host[hl] = '\0';
  unsigned char buf[16];
  if (host[0] == '[') {
    if (hl < 3 || host[hl - 1] != ']') return false;
    host[hl - 1] = '\0';
    return inet_pton(AF_INET6, host + 1, buf) == 1;
  }
  if (inet_pton(AF_INET, host, buf) == 1) return true;
  return dns_subdomain(host); /* e.g. localhost */
}

static void parse_metrics(struct ctx *c, const kc_yaml_node *n) {
  static const struct field table[] = {FIELD("bindAddress", F_STRING, kc_config, metrics_bind)};
  if (!apply_table(c, n, "metrics", table, 1, c->cfg)) return;
  if (!bind_address_ok(c->cfg->metrics_bind))
    fail(c, blame(n, "bindAddress"),
         "metrics.bindAddress: expected HOST:PORT, :PORT or \"0\" (disabled), got \"%s\"",
         c->cfg->metrics_bind);
}

static void parse_root(struct ctx *c, const kc_yaml_node *root) {
  static const struct field table[] = {
      FIELD("kubeconfig", F_PATH, kc_config, kubeconfig),
      CUSTOM("leaderElection"),
      CUSTOM("sharding"),
      CUSTOM("metrics"),
      CUSTOM("logLevel"),
      CUSTOM("logFormat"),
      FIELD_RANGE("shutdownTimeout", F_DURATION, kc_config, shutdown_timeout_ms, 0, 3600000),
      FIELD_RANGE("decodeThreads", F_INT, kc_config, decode_threads, 0, 64),
      CUSTOM("informers"),
      CUSTOM("controllers"),
  };
  kc_config *cfg = c->cfg;
  if (!root) {
    fail(c, NULL, "empty configuration (expected a mapping with informers: and controllers:)");
    return;
  }
  if (!apply_table(c, root, "config", table, sizeof table / sizeof table[0], cfg)) return;
  const kc_yaml_node *v;
  if ((v = kc_yaml_map_get(root, "leaderElection"))) parse_leader_election(c, v);
  if (!cfg->sharding.lease_namespace) cfg->sharding.lease_namespace = cfg->leader_election.namespace_;
  if ((v = kc_yaml_map_get(root, "sharding"))) parse_sharding(c, v, "sharding", &cfg->sharding);
  if ((v = kc_yaml_map_get(root, "metrics"))) parse_metrics(c, v);
  if ((v = kc_yaml_map_get(root, "logLevel"))) {
    const char *s;
    if (took(c, kc_yaml_get_string(v, "logLevel", &s, c->tmp, sizeof c->tmp)) &&
        kc_log_parse_level(s, &cfg->log_level) != 0)
      fail(c, v, "logLevel: expected error, warn, info or debug, got \"%s\"", s);
  }
  if ((v = kc_yaml_map_get(root, "logFormat"))) {
    const char *s;
    if (took(c, kc_yaml_get_string(v, "logFormat", &s, c->tmp, sizeof c->tmp)) &&
        kc_log_parse_format(s, &cfg->log_format) != 0)
      fail(c, v, "logFormat: expected text or json, got \"%s\"", s);
  }

  struct infvec iv = {0};
  if ((v = kc_yaml_map_get(root, "informers")) &&
      took(c, kc_yaml_expect(v, KC_YAML_SEQUENCE, "informers", c->tmp, sizeof c->tmp))) {
    for (size_t i = 0; i < v->u.seq.len; i++) {
      kc_informer_spec *inf = infvec_push(c, &iv);
      if (!inf) break;
      parse_informer(c, &v->u.seq.items[i], i, inf);
      for (size_t j = 0; j + 1 < iv.n; j++) {
        if (inf->identity && iv.v[j].identity && !strcmp(inf->identity, iv.v[j].identity)) {
          fail(c, inf->at, "informers[%zu]: watches the same scope as informers[%zu] (line %u)",
               i, j, iv.v[j].at->line);
          break;
        }
        if (inf->name && iv.v[j].name && !strcmp(inf->name, iv.v[j].name)) {
          fail(c, kc_yaml_map_get(inf->at, "name"),
               "informers[%zu].name: \"%s\" is already used by informers[%zu] (line %u)", i,
               inf->name, j, iv.v[j].at->line);
          break;
        }
      }
    }
  }

  if ((v = kc_yaml_map_get(root, "controllers")) &&
      took(c, kc_yaml_expect(v, KC_YAML_SEQUENCE, "controllers", c->tmp, sizeof c->tmp)) &&
      v->u.seq.len) {
    kc_controller_spec *cts = xcalloc(c, v->u.seq.len, sizeof *cts);
    if (cts) {
      cfg->controllers = cts;
      cfg->ncontrollers = v->u.seq.len;
      for (size_t i = 0; i < v->u.seq.len; i++) {
        kc_controller_spec *ct = &cts[i];
        parse_controller(c, &v->u.seq.items[i], i, ct);
        for (size_t j = 0; j < i; j++)
          if (*ct->name && !strcmp(ct->name, cts[j].name)) {
            fail(c, kc_yaml_map_get(ct->at, "name"),
                 "controllers[%zu].name: \"%s\" is already used by controllers[%zu] (line %u)",
                 i, ct->name, j, cts[j].at->line);
            break;
          }
        for (size_t j = 0; ct->sharding.shards && j < i; j++)
          if (cts[j].sharding.shards && ct->sharding.lease_prefix && cts[j].sharding.lease_prefix &&
              !strcmp(ct->sharding.lease_prefix, cts[j].sharding.lease_prefix) &&
              !strcmp(ct->sharding.lease_namespace, cts[j].sharding.lease_namespace)) {
            const kc_yaml_node *own = kc_yaml_map_get(ct->at, "sharding");
            fail(c, shard_blame(own, cfg->sharding.at, "leasePrefix"),
                 "controllers[%zu].sharding.leasePrefix: \"%s\" is already used by "
                 "controllers[%zu] (line %u); give each sharded controller its own",
                 i, ct->sharding.lease_prefix, j, cts[j].at->line);
            break;
          }
        char w[160];
        snprintf(w, sizeof w, "controllers[%zu].for", i);
        bind_ref(c, &iv, &ct->for_, w);
        for (size_t k = 0; k < ct->nowns; k++) {
          snprintf(w, sizeof w, "controllers[%zu].owns[%zu]", i, k);
          bind_ref(c, &iv, (kc_kind_ref *)&ct->owns[k].ref, w);
        }
        for (size_t k = 0; k < ct->nwatches; k++) {
          kc_watch_spec *ws = (kc_watch_spec *)&ct->watches[k];
          snprintf(w, sizeof w, "controllers[%zu].watches[%zu]", i, k);
          bind_ref(c, &iv, &ws->ref, w);
          /* An index mapping looks up for-objects by the index, so the
           * index must exist on the informer of the `for` kind. */
          if (ws->mapping == KC_MAP_INDEX && ws->key && ct->for_.informer != SIZE_MAX &&
              ct->for_.informer < iv.n && !has_index(&iv.v[ct->for_.informer], ws->key)) {
            const kc_informer_spec *fi = &iv.v[ct->for_.informer];
            const kc_yaml_node *m = kc_yaml_map_get(ws->ref.at, "mapping");
            fail(c, kc_yaml_map_get(m, "index"),
                 "%s.mapping.index: the informer for %s %s has no index \"%s\"%s", w,
                 fi->api_version, fi->kind, ws->key,
                 fi->implicit ? " (list the kind under informers: with indexes:)" : "");
          }
        }
      }
    }
  }
  /* The vector may have moved while growing: keep the final array. */
  if (iv.n) {
    if (!keep(c, iv.v)) return;
    cfg->informers = iv.v;
    cfg->ninformers = iv.n;
  } else {
    free(iv.v);
  }
}

static void config_set_defaults(kc_config *cfg) {
  cfg->leader_election.enabled = false;
  cfg->leader_election.namespace_ = "kube-system";
  cfg->leader_election.name = "kctrld";
  cfg->leader_election.lease_duration_ms = KC_DEFAULT_LEASE_DURATION_MS;
  cfg->leader_election.renew_deadline_ms = KC_DEFAULT_RENEW_DEADLINE_MS;
  cfg->leader_election.retry_period_ms = KC_DEFAULT_RETRY_PERIOD_MS;
  cfg->sharding = (kc_sharding_spec){
      .key = KC_SHARD_KEY_UID,
      .lease_duration_ms = KC_DEFAULT_LEASE_DURATION_MS,
      .renew_deadline_ms = KC_DEFAULT_RENEW_DEADLINE_MS,
      .retry_period_ms = KC_DEFAULT_RETRY_PERIOD_MS,
  };
  cfg->metrics_bind = KC_DEFAULT_METRICS_BIND;
  cfg->log_level = KC_LOG_INFO;
  cfg->log_format = KC_LOG_FORMAT_TEXT;
  cfg->shutdown_timeout_ms = KC_DEFAULT_SHUTDOWN_TIMEOUT_MS;
  cfg->decode_threads = -1;
}

void kc_config_free(kc_config *cfg) {
  if (!cfg) return;
  struct config_priv *pv = (struct config_priv *)cfg;
  kc_yaml_free(cfg->doc);
  for (size_t i = 0; i < pv->nallocs; i++) free(pv->allocs[i]);
  free(pv->allocs);
  free(pv);
}

/* Builds the config from a loaded document; takes ownership of doc. */
static int config_from_doc(kc_yaml_doc *doc, const char *dir, kc_config **out, char *err,
                           size_t errlen) {
  struct config_priv *pv = calloc(1, sizeof *pv);
  if (!pv) {
    kc_yaml_free(doc);
    return -ENOMEM;
  }
  struct ctx c = {.priv = pv, .cfg = &pv->pub, .err = err, .errlen = errlen};
  if (err && errlen) err[0] = '\0';
  kc_config *cfg = &pv->pub;
  cfg->doc = doc;
  cfg->file = kc_yaml_file(doc);
  config_set_defaults(cfg);
  if (dir) {
    cfg->dir = xstrdup(&c, dir);
  } else {
    char *cwd = getcwd(NULL, 0);
    cfg->dir = cwd ? keep(&c, cwd) : NULL;
  }
  if (!c.oom) parse_root(&c, kc_yaml_root(doc));
  if (c.oom) {
    kc_config_free(cfg);
    return -ENOMEM;
  }
  if (c.nerrors) {
    if (c.nerrors > KC_CONFIG_MAX_ERRORS) {
      char more[64];
      snprintf(more, sizeof more, "... and %d more errors", c.nerrors - KC_CONFIG_MAX_ERRORS);
      c.nerrors = 0; /* let add_line append this last one */
      add_line(&c, more);
    }
    kc_config_free(cfg);
    return -EINVAL;
  }
  *out = cfg;
  return 0;
}

int kc_config_load_buffer(const char *name, const char *dir, const char *buf, size_t len,
                          kc_config **out, char *err, size_t errlen) {
  *out = NULL;
  kc_yaml_doc *doc = NULL;
  int rc = kc_yaml_load_buffer(name, buf, len, &doc, err, errlen);
  if (rc) return rc;
  return config_from_doc(doc, dir, out, err, errlen);
}

int kc_config_load_file(const char *path, kc_config **out, char *err, size_t errlen) {
  *out = NULL;
  kc_yaml_doc *doc = NULL;
  /* A config others can write can re-point the daemon's credentials. */
  int rc = kc_fileperm_check_path("config file", path,
                                  "use settings others can change (kubeconfig, plugins)", 0, err,
                                  errlen);
  if (rc < 0 && rc != -ENOENT) return rc;
  rc = kc_yaml_load_file(path, &doc, err, errlen);
  if (rc) return rc;
  /* Relative paths resolve against the file's directory, made absolute so
   * a later chdir does not change their meaning. */
  char *copy = strdup(path);
  if (!copy) {
    kc_yaml_free(doc);
    return -ENOMEM;
  }
  char *slash = strrchr(copy, '/');
  const char *d = ".";
  if (slash == copy) d = "/";
  else if (slash) {
    *slash = '\0';
    d = copy;
  }
  char *abs = realpath(d, NULL);
  rc = config_from_doc(doc, abs ? abs : d, out, err, errlen);
  free(abs);
  free(copy);
  return rc;
}

ssize_t kc_config_find_informer(const kc_config *cfg, const char *identity) {
  for (size_t i = 0; i < cfg->ninformers; i++)
    if (strcmp(cfg->informers[i].identity, identity) == 0) return (ssize_t)i;
  return -1;
}

ssize_t kc_config_find_controller(const kc_config *cfg, const char *name) {
  for (size_t i = 0; i < cfg->ncontrollers; i++)
    if (strcmp(cfg->controllers[i].name, name) == 0) return (ssize_t)i;
  return -1;
}

/* ---- diff ------------------------------------------------------------------ */

static bool str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

static unsigned informer_fields(const kc_informer_spec *a, const kc_informer_spec *b) {
  unsigned f = 0;
  if (!str_eq(a->name, b->name)) f |= KC_INF_NAME;
  if (a->resync_ms != b->resync_ms) f |= KC_INF_RESYNC;
  bool ix = a->nindexes == b->nindexes;
  for (size_t i = 0; ix && i < a->nindexes; i++) {
    const kc_index_spec *x = &a->indexes[i], *y = &b->indexes[i];
    ix = str_eq(x->name, y->name) && x->npaths == y->npaths;
    /* The paths of one index are unique and their order does not matter
     * (the index is their union): compare as sets. */
    for (size_t p = 0; ix && p < x->npaths; p++) {
      bool found = false;
      for (size_t q = 0; !found && q < y->npaths; q++) found = str_eq(x->paths[p], y->paths[q]);
      ix = found;
    }
  }
  if (!ix) f |= KC_INF_INDEXES;
  if (a->page_size != b->page_size || a->watch_timeout_ms != b->watch_timeout_ms ||
      a->watch_inactivity_ms != b->watch_inactivity_ms || a->streaming_list != b->streaming_list)
    f |= KC_INF_WATCH_OPTIONS;
  if (a->implicit != b->implicit) f |= KC_INF_IMPLICIT;
  return f;
}

static bool ref_eq(const kc_kind_ref *a, const kc_kind_ref *b) {
  return str_eq(a->api_version, b->api_version) && str_eq(a->kind, b->kind) &&
         str_eq(a->informer_name, b->informer_name);
}

static bool ref_scope_eq(const kc_config *oc, const kc_kind_ref *a, const kc_config *nc,
                         const kc_kind_ref *b) {
  return str_eq(oc->informers[a->informer].identity, nc->informers[b->informer].identity);
}

static unsigned controller_fields(const kc_config *oc, const kc_controller_spec *a,
                                  const kc_config *nc, const kc_controller_spec *b) {
  unsigned f = 0;
  if (!str_eq(a->plugin, b->plugin) || a->isolation != b->isolation) f |= KC_CTL_PLUGIN;
  if (!kc_yaml_equal(a->hook ? a->hook->at : NULL, b->hook ? b->hook->at : NULL)) f |= KC_CTL_HOOK;
  if (!kc_yaml_equal(a->settings, b->settings)) f |= KC_CTL_SETTINGS;
  if (!ref_eq(&a->for_, &b->for_)) f |= KC_CTL_FOR;
  bool eq = a->nowns == b->nowns;
  for (size_t i = 0; eq && i < a->nowns; i++)
    eq = ref_eq(&a->owns[i].ref, &b->owns[i].ref) && a->owns[i].predicates == b->owns[i].predicates;
  if (!eq) f |= KC_CTL_OWNS;
  eq = a->nwatches == b->nwatches;
  for (size_t i = 0; eq && i < a->nwatches; i++)
    eq = ref_eq(&a->watches[i].ref, &b->watches[i].ref) &&
         a->watches[i].mapping == b->watches[i].mapping &&
         str_eq(a->watches[i].key, b->watches[i].key) &&
         a->watches[i].predicates == b->watches[i].predicates;
  if (!eq) f |= KC_CTL_WATCHES;
  if (a->workers != b->workers) f |= KC_CTL_WORKERS;
  if (a->reconcile_timeout_ms != b->reconcile_timeout_ms) f |= KC_CTL_TIMEOUT;
  if (a->rate_limit.base_delay_ms != b->rate_limit.base_delay_ms ||
      a->rate_limit.max_delay_ms != b->rate_limit.max_delay_ms ||
      a->rate_limit.qps != b->rate_limit.qps || a->rate_limit.burst != b->rate_limit.burst)
    f |= KC_CTL_RATE_LIMIT;
  if (a->predicates != b->predicates) f |= KC_CTL_PREDICATES;
  const kc_sharding_spec *sa = &a->sharding, *sb = &b->sharding;
  if (sa->shards != sb->shards ||
      (sa->shards && (sa->key != sb->key || !str_eq(sa->lease_namespace, sb->lease_namespace) ||
                      !str_eq(sa->lease_prefix, sb->lease_prefix) ||
                      sa->lease_duration_ms != sb->lease_duration_ms ||
                      sa->renew_deadline_ms != sb->renew_deadline_ms ||
                      sa->retry_period_ms != sb->retry_period_ms)))
    f |= KC_CTL_SHARDING;
  /* Same references, but does each still land on the same scope? */
  if (!(f & (KC_CTL_FOR | KC_CTL_OWNS | KC_CTL_WATCHES))) {
    bool same = ref_scope_eq(oc, &a->for_, nc, &b->for_);
    for (size_t i = 0; same && i < a->nowns; i++)
      same = ref_scope_eq(oc, &a->owns[i].ref, nc, &b->owns[i].ref);
    for (size_t i = 0; same && i < a->nwatches; i++)
      same = ref_scope_eq(oc, &a->watches[i].ref, nc, &b->watches[i].ref);
    if (!same) f |= KC_CTL_INFORMERS;
  }
  return f;
}

static bool push_change(kc_config_change **v, size_t *n, enum kc_change ch, ssize_t oi,
                        ssize_t ni, unsigned fields) {
  kc_config_change *nv = realloc(*v, (*n + 1) * sizeof *nv);
  if (!nv) return false;
  *v = nv;
  nv[*n] = (kc_config_change){.change = ch, .old_index = oi, .new_index = ni, .fields = fields};
  (*n)++;
  return true;
}

int kc_config_compare(const kc_config *oc, const kc_config *nc, kc_config_diff **out) {
  *out = NULL;
  kc_config_diff *d = calloc(1, sizeof *d);
  if (!d) return -ENOMEM;
  bool ok = true;
  for (size_t i = 0; ok && i < oc->ninformers; i++)
    if (kc_config_find_informer(nc, oc->informers[i].identity) < 0)
      ok = push_change(&d->informers, &d->ninformers, KC_CHANGE_REMOVED, (ssize_t)i, -1, 0);
  for (size_t i = 0; ok && i < nc->ninformers; i++) {
    ssize_t oi = kc_config_find_informer(oc, nc->informers[i].identity);
    if (oi < 0) {
      ok = push_change(&d->informers, &d->ninformers, KC_CHANGE_ADDED, -1, (ssize_t)i, 0);
    } else {
      unsigned f = informer_fields(&oc->informers[oi], &nc->informers[i]);
      if (f) ok = push_change(&d->informers, &d->ninformers, KC_CHANGE_CHANGED, oi, (ssize_t)i, f);
    }
  }
  for (size_t i = 0; ok && i < oc->ncontrollers; i++)
    if (kc_config_find_controller(nc, oc->controllers[i].name) < 0)
      ok = push_change(&d->controllers, &d->ncontrollers, KC_CHANGE_REMOVED, (ssize_t)i, -1, 0);
  for (size_t i = 0; ok && i < nc->ncontrollers; i++) {
    ssize_t oi = kc_config_find_controller(oc, nc->controllers[i].name);
    if (oi < 0) {
      ok = push_change(&d->controllers, &d->ncontrollers, KC_CHANGE_ADDED, -1, (ssize_t)i, 0);
    } else {
      unsigned f = controller_fields(oc, &oc->controllers[oi], nc, &nc->controllers[i]);
      if (f)
        ok = push_change(&d->controllers, &d->ncontrollers, KC_CHANGE_CHANGED, oi, (ssize_t)i, f);
    }
  }
  if (!ok) {
    kc_config_diff_free(d);
    return -ENOMEM;
  }
  if (!str_eq(oc->kubeconfig, nc->kubeconfig)) d->global |= KC_GLOBAL_KUBECONFIG;
  const kc_leader_election *a = &oc->leader_election, *b = &nc->leader_election;
  if (a->enabled != b->enabled || !str_eq(a->namespace_, b->namespace_) ||
      !str_eq(a->name, b->name) || !str_eq(a->identity, b->identity) ||
      a->lease_duration_ms != b->lease_duration_ms ||
      a->renew_deadline_ms != b->renew_deadline_ms || a->retry_period_ms != b->retry_period_ms)
    d->global |= KC_GLOBAL_LEADER_ELECTION;
  if (!str_eq(oc->metrics_bind, nc->metrics_bind)) d->global |= KC_GLOBAL_METRICS;
  if (oc->log_level != nc->log_level) d->global |= KC_GLOBAL_LOG_LEVEL;
  if (oc->log_format != nc->log_format) d->global |= KC_GLOBAL_LOG_FORMAT;
  if (oc->shutdown_timeout_ms != nc->shutdown_timeout_ms) d->global |= KC_GLOBAL_SHUTDOWN_TIMEOUT;
  if (oc->decode_threads != nc->decode_threads) d->global |= KC_GLOBAL_DECODE_THREADS;
  *out = d;
  return 0;
}

void kc_config_diff_free(kc_config_diff *d) {
  if (!d) return;
  free(d->informers);
  free(d->controllers);
  free(d);
}

bool kc_config_diff_empty(const kc_config_diff *d) {
  return d->ninformers == 0 && d->ncontrollers == 0 && d->global == 0;
}

int kc_config_diff_summary(const kc_config_diff *d, const kc_config *oc, const kc_config *nc,
                           char *buf, size_t cap) {
  static const char *const ctl_names[] = {"plugin",  "settings", "for",       "owns",
                                          "watches", "workers",  "timeout",   "rateLimit",
                                          "predicates", "informers", "hook",
                                          "sharding"};
  size_t add[2] = {0}, rem[2] = {0}, chg[2] = {0};
  for (size_t i = 0; i < d->ninformers; i++) {
    if (d->informers[i].change == KC_CHANGE_ADDED) add[0]++;
    else if (d->informers[i].change == KC_CHANGE_REMOVED) rem[0]++;
    else chg[0]++;
  }
  for (size_t i = 0; i < d->ncontrollers; i++) {
    if (d->controllers[i].change == KC_CHANGE_ADDED) add[1]++;
    else if (d->controllers[i].change == KC_CHANGE_REMOVED) rem[1]++;
    else chg[1]++;
  }
  kc_buf b = {0};
  char tmp[128];
  snprintf(tmp, sizeof tmp, "informers: +%zu -%zu ~%zu; controllers: +%zu -%zu ~%zu", add[0],
           rem[0], chg[0], add[1], rem[1], chg[1]);
  kc_buf_puts(&b, tmp);
  for (size_t i = 0; i < d->ncontrollers; i++) {
    const kc_config_change *ch = &d->controllers[i];
    const char *name = ch->new_index >= 0 ? nc->controllers[ch->new_index].name
                                          : oc->controllers[ch->old_index].name;
    kc_buf_puts(&b, ch->change == KC_CHANGE_ADDED     ? " +"
               : ch->change == KC_CHANGE_REMOVED ? " -"
                                                 : " ~");
    kc_buf_puts(&b, name);
    if (ch->change == KC_CHANGE_CHANGED) {
      kc_buf_puts(&b, "(");
      bool first = true;
      for (size_t k = 0; k < sizeof ctl_names / sizeof ctl_names[0]; k++)
        if (ch->fields & (1u << k)) {
          if (!first) kc_buf_puts(&b, ",");
          kc_buf_puts(&b, ctl_names[k]);
          first = false;
        }
      kc_buf_puts(&b, ")");
    }
  }
  if (d->global) {
    kc_buf_puts(&b, "; global:");
    static const char *const gnames[] = {"kubeconfig", "leaderElection", "metrics", "logLevel",
                                         "shutdownTimeout", "decodeThreads", "logFormat"};
    for (size_t k = 0; k < sizeof gnames / sizeof gnames[0]; k++)
      if (d->global & (1u << k)) {
        kc_buf_puts(&b, " ");
        kc_buf_puts(&b, gnames[k]);
      }
  }
  int rc;
  if (b.err || !b.p) {
    rc = -ENOMEM;
    if (cap) buf[0] = '\0';
  } else if (b.len + 1 > cap) {
    if (cap) {
      memcpy(buf, b.p, cap - 1);
      buf[cap - 1] = '\0';
    }
    rc = -ENOSPC;
  } else {
    memcpy(buf, b.p, b.len + 1);
    rc = (int)b.len;
  }
  free(b.p);
  return rc;
}
