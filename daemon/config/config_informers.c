/* SPDX-License-Identifier: Apache-2.0 */
/* config_informers: the `informers:` section of the configuration (scope,
 * selectors in canonical form, transform, indexes, list/watch tuning), the
 * identity string that says whether two specs watch the same scope, and the
 * binding of each controller's kinds to an informer (adding a default
 * informer for a kind no entry lists). Called only from the loader in
 * config.c, on the thread that loads the config. */
#include "config/config.h"
#include "config/config_int.h"

#include "base/buf.h"
#include "json/jsonpath.h"
#include "kube/kbuild.h"
#include "kube/selector.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- selectors --------------------------------------------------------------
 * Parsed with daemon/kube/selector.h (the apiserver's grammar and messages) and
 * stored in canonical form, so "app in (b,a)" and "app in (a,b)" are the same
 * scope. Whether the server supports a field for the resource is not the
 * loader's to say: --check-config asks (configcheck.h, configonline.h). */

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
    if (n >= 0) return cfg_keep(c, buf) ? buf : "";
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
    cfg_fail(c, &pos, "%s: %s", what, e->msg);
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
  return cfg_keep(c, b.p);
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
  char *r = cfg_xcalloc(c, g.len + 1, 1);
  if (r) memcpy(r, g.ptr, g.len);
  return r ? r : "";
}

/* Reports every item of list v (read from node) that `check` (may be NULL)
 * finds a problem with, and every item listed twice. True when none. */
static bool items_ok(struct ctx *c, const kc_yaml_node *node, const char *what, const char **v,
                     size_t n, const char *(*check)(const char *)) {
  bool ok = true;
  for (size_t i = 0; i < n; i++) {
    const char *why = check ? check(v[i]) : NULL;
    if (why) {
      cfg_fail(c, &node->u.seq.items[i], "%s[%zu]: %s", what, i, why);
      ok = false;
    }
    for (size_t j = 0; j < i; j++)
      if (strcmp(v[i], v[j]) == 0) {
        cfg_fail(c, &node->u.seq.items[i], "%s[%zu]: \"%s\" is listed twice", what, i, v[i]);
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
  if (!cfg_string_list(c, node, what, &v, &n) || !items_ok(c, node, what, v, n, check))
    return false;
  if (n > 1) qsort(v, n, sizeof *v, cfg_str_cmp_ptr);
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
  if (!cfg_string_list(c, node, what, &v, &n)) return;
  if (n == 0) {
    cfg_fail(c, node, "%s: an empty list: give at least one path", what);
    return;
  }
  if (n > KC_CONFIG_MAX_INDEX_PATHS) {
    cfg_fail(c, &node->u.seq.items[KC_CONFIG_MAX_INDEX_PATHS], "%s: more than %d paths", what,
             KC_CONFIG_MAX_INDEX_PATHS);
    return;
  }
  if (!items_ok(c, node, what, v, n, index_path_problem)) return;
  ix->path = v[0];
  ix->paths = v;
  ix->npaths = n;
}

void cfg_parse_informer(struct ctx *c, const kc_yaml_node *n, size_t idx,
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
  if (!cfg_apply_table(c, n, what, table, sizeof table / sizeof table[0], inf)) return;
  char w[128];

  if (inf->name && !cfg_simple_name(inf->name, 63))
    cfg_fail(c, kc_yaml_map_get(n, "name"), "%s.name: must be 1-63 characters of [A-Za-z0-9._-]",
             what);
  if (*inf->api_version && !cfg_api_version_ok(inf->api_version))
    cfg_fail(c, kc_yaml_map_get(n, "apiVersion"),
             "%s.apiVersion: \"%s\" is not of the form VERSION or GROUP/VERSION", what,
             inf->api_version);
  if (*inf->kind && !cfg_kind_ok(inf->kind))
    cfg_fail(c, kc_yaml_map_get(n, "kind"), "%s.kind: \"%s\" is not a kind (e.g. Pod, Deployment)",
             what, inf->kind);
  inf->group = group_of(c, inf->api_version);
  if (inf->resync_ms > 0 && inf->resync_ms < 1000)
    cfg_fail(c, kc_yaml_map_get(n, "resync"), "%s.resync: must be 0 (off) or at least 1s", what);

  const kc_yaml_node *v;
  if ((v = kc_yaml_map_get(n, "namespaces"))) {
    snprintf(w, sizeof w, "%s.namespaces", what);
    if (sorted_list(c, v, w, &inf->namespaces, &inf->nnamespaces, namespace_problem) &&
        inf->nnamespaces == 0)
      cfg_fail(c, v, "%s: empty list (omit the key to watch all namespaces)", w);
  }
  const char *s;
  if ((v = kc_yaml_map_get(n, "labelSelector"))) {
    snprintf(w, sizeof w, "%s.labelSelector", what);
    if (cfg_took(c, kc_yaml_get_string(v, w, &s, c->tmp, sizeof c->tmp))) {
      const char *canon = check_label_selector(c, v, w, s);
      if (canon) inf->label_selector = canon;
    }
  }
  if ((v = kc_yaml_map_get(n, "fieldSelector"))) {
    snprintf(w, sizeof w, "%s.fieldSelector", what);
    if (cfg_took(c, kc_yaml_get_string(v, w, &s, c->tmp, sizeof c->tmp))) {
      const char *canon = check_field_selector(c, v, w, s);
      if (canon) inf->field_selector = canon;
    }
  }
  if ((v = kc_yaml_map_get(n, "transform"))) {
    static const char *const tkeys[] = {"drop"};
    snprintf(w, sizeof w, "%s.transform", what);
    if (cfg_took(c, kc_yaml_expect(v, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp))) {
      cfg_check_keys(c, v, tkeys, 1, w);
      const kc_yaml_node *d = kc_yaml_map_get(v, "drop");
      if (d) {
        snprintf(w, sizeof w, "%s.transform.drop", what);
        sorted_list(c, d, w, &inf->drop, &inf->ndrop, drop_path_problem);
      }
    }
  }
  if ((v = kc_yaml_map_get(n, "indexes"))) {
    snprintf(w, sizeof w, "%s.indexes", what);
    if (cfg_took(c, kc_yaml_expect(v, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp)) && v->u.map.len) {
      kc_index_spec *ix = cfg_xcalloc(c, v->u.map.len, sizeof *ix);
      if (ix) {
        for (size_t i = 0; i < v->u.map.len; i++) {
          const kc_yaml_pair *p = &v->u.map.pairs[i];
          char iw[200];
          snprintf(iw, sizeof iw, "%s.%s", w, p->key.u.scalar.text);
          ix[i].name = p->key.u.scalar.text;
          if (!cfg_simple_name(ix[i].name, 63))
            cfg_fail(c, &p->key, "%s: index name must be 1-63 characters of [A-Za-z0-9._-]", w);
          if (p->value.type == KC_YAML_SEQUENCE) {
            index_paths(c, &p->value, iw, &ix[i]);
          } else if (p->value.type == KC_YAML_MAPPING) {
            cfg_fail(c, &p->value, "%s: expected a path or a list of paths, got a mapping", iw);
          } else if (cfg_took(c, kc_yaml_get_string(&p->value, iw, &ix[i].path, c->tmp,
                                                sizeof c->tmp))) {
            const char *why = kc_path_problem(ix[i].path, true);
            if (why) cfg_fail(c, &p->value, "%s: %s", iw, why);
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
    if (cfg_took(c, kc_yaml_get_string(v, w, &s, c->tmp, sizeof c->tmp))) {
      if (!strcmp(s, "auto")) inf->streaming_list = KC_STREAMING_AUTO;
      else if (!strcmp(s, "on") || (!strcmp(s, "true") && v->u.scalar.plain))
        inf->streaming_list = KC_STREAMING_ON;
      else if (!strcmp(s, "off") || (!strcmp(s, "false") && v->u.scalar.plain))
        inf->streaming_list = KC_STREAMING_OFF;
      else
        cfg_fail(c, v, "%s: expected auto, on or off, got \"%s\"", w, s);
    }
  }
  inf->identity = make_identity(c, inf);
}


/* ---- binding kinds to informers ------------------------------------------- */

kc_informer_spec *cfg_infvec_push(struct ctx *c, struct infvec *iv) {
  if (KC_ARRAY_ROOM(iv->v, iv->cap, iv->n, 8) < 0) {
    c->oom = true;
    return NULL;
  }
  return &iv->v[iv->n++];
}

void cfg_bind_ref(struct ctx *c, struct infvec *iv, kc_kind_ref *ref, const char *what) {
  if (!*ref->api_version || !*ref->kind) return; /* already reported */
  if (ref->informer_name) {
    for (size_t i = 0; i < iv->n; i++) {
      const kc_informer_spec *inf = &iv->v[i];
      if (!inf->name || strcmp(inf->name, ref->informer_name) != 0) continue;
      if (strcmp(inf->api_version, ref->api_version) || strcmp(inf->kind, ref->kind))
        cfg_fail(c, kc_yaml_map_get(ref->at, "informer"),
                 "%s.informer: informer \"%s\" watches %s %s, not %s %s", what, ref->informer_name,
                 inf->api_version, inf->kind, ref->api_version, ref->kind);
      ref->informer = i;
      return;
    }
    cfg_fail(c, kc_yaml_map_get(ref->at, "informer"), "%s.informer: no informer named \"%s\"", what,
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
    cfg_fail(c, ref->at,
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
  kc_informer_spec *inf = cfg_infvec_push(c, iv);
  if (!inf) return;
  informer_defaults(inf);
  inf->api_version = ref->api_version;
  inf->kind = ref->kind;
  inf->group = group_of(c, ref->api_version);
  inf->implicit = true;
  inf->identity = make_identity(c, inf);
  ref->informer = iv->n - 1;
}

bool cfg_has_index(const kc_informer_spec *inf, const char *name) {
  for (size_t i = 0; i < inf->nindexes; i++)
    if (strcmp(inf->indexes[i].name, name) == 0) return true;
  return false;
}
