/* SPDX-License-Identifier: Apache-2.0 */
/* dryrun: see dryrun.h. */
#include "host/dryrun.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/namedcounts.h"
#include "json/jsontree.h"

#define SUMMARY_MAX_FIELDS 8

static const char *const verb_names[KC_DRY_RUN_NVERBS] = {"create", "update", "patch",
                                                          "apply",  "delete", "event"};

const char *kc_dry_run_verb_name(enum kc_dry_run_verb v) {
  return (unsigned)v < KC_DRY_RUN_NVERBS ? verb_names[v] : "unknown";
}

int kc_dry_run_verb_of(const char *method, const char *content_type) {
  if (!method) return -EINVAL;
  if (strcmp(method, "POST") == 0) return KC_DRY_RUN_CREATE;
  if (strcmp(method, "PUT") == 0) return KC_DRY_RUN_UPDATE;
  if (strcmp(method, "DELETE") == 0) return KC_DRY_RUN_DELETE;
  if (strcmp(method, "PATCH") == 0)
    return content_type && strncmp(content_type, "application/apply-patch", 23) == 0
               ? KC_DRY_RUN_APPLY
               : KC_DRY_RUN_PATCH;
  return -EINVAL;
}

int kc_dry_run_path(const char *path, kc_buf *out) {
  kc_buf_puts(out, path);
  kc_buf_puts(out, strchr(path, '?') ? "&dryRun=All" : "?dryRun=All");
  return out->err ? -ENOMEM : 0;
}

/* ---- describing a write ---- */

/* The object a request path names: resource, namespace, name, subresource
 * (each possibly empty), as slices of path. */
struct target {
  const char *seg[12];
  size_t len[12];
  size_t n;
};

static void split_path(const char *path, struct target *t) {
  t->n = 0;
  const char *end = path + strcspn(path, "?");
  for (const char *p = path; p < end && t->n < 12;) {
    while (p < end && *p == '/') p++;
    const char *s = p;
    while (p < end && *p != '/') p++;
    if (p > s) {
      t->seg[t->n] = s;
      t->len[t->n++] = (size_t)(p - s);
    }
  }
}

static bool seg_is(const struct target *t, size_t i, const char *s) {
  return i < t->n && t->len[i] == strlen(s) && memcmp(t->seg[i], s, t->len[i]) == 0;
}

static void put_seg(kc_buf *b, const struct target *t, size_t i) {
  if (i < t->n) kc_buf_add(b, t->seg[i], t->len[i]);
}

static const char *str_member(yajl_val obj, const char *k1, const char *k2) {
  const char *path[] = {k1, k2, NULL};
  yajl_val v = obj ? yajl_tree_get(obj, path, yajl_t_string) : NULL;
  return v ? YAJL_GET_STRING(v) : NULL;
}

/* "<resource>[/<sub>] <ns>/<name>" (or "<name>" for a cluster-scoped one). */
static void put_target(kc_buf *b, const char *method, const char *path, yajl_val doc) {
  struct target t;
  split_path(path, &t);
  size_t i = seg_is(&t, 0, "api") ? 2 : seg_is(&t, 0, "apis") ? 3 : 0;
  size_t ns = SIZE_MAX;
  /* /namespaces/NS/<resource>..., but /namespaces/NAME/status is the
   * Namespace's own subresource */
  if (seg_is(&t, i, "namespaces") && i + 2 < t.n &&
      !(i + 3 == t.n && (seg_is(&t, i + 2, "status") || seg_is(&t, i + 2, "finalize")))) {
    ns = i + 1;
    i += 2;
  }
  put_seg(b, &t, i);
  if (i + 2 < t.n) {
    kc_buf_putc(b, '/');
    put_seg(b, &t, i + 2);
  }
  kc_buf_putc(b, ' ');
  if (ns != SIZE_MAX) {
    put_seg(b, &t, ns);
    kc_buf_putc(b, '/');
  }
  if (i + 1 < t.n) {
    put_seg(b, &t, i + 1);
  } else if (strcmp(method, "POST") == 0) {
    const char *name = str_member(doc, "metadata", "name");
    const char *gen = str_member(doc, "metadata", "generateName");
    if (name && *name) kc_buf_puts(b, name);
    else if (gen && *gen) kc_buf_printf(b, "(generateName %s)", gen);
    else kc_buf_puts(b, "(no name)");
  }
}

struct summary {
  kc_buf *b;
  size_t shown, more;
  char path[512];
};

static void add_field(struct summary *s, const char *prefix, const char *p) {
  if (s->shown == SUMMARY_MAX_FIELDS) {
    s->more++;
    return;
  }
  kc_buf_puts(s->b, s->shown ? ", " : ": ");
  kc_buf_puts(s->b, prefix);
  kc_buf_puts(s->b, p);
  s->shown++;
}

/* Fields that identify the object or guard the write, not changes. */
static bool identity_field(const char *p, bool apply) {
  if (strcmp(p, "metadata.resourceVersion") == 0) return true;
  return apply && (strcmp(p, "apiVersion") == 0 || strcmp(p, "kind") == 0 ||
                   strcmp(p, "metadata.name") == 0 || strcmp(p, "metadata.namespace") == 0);
}

static void walk(struct summary *s, yajl_val v, size_t at, bool apply) {
  if (!YAJL_IS_OBJECT(v) || v->u.object.len == 0) {
    if (at == 0) return;
    if (identity_field(s->path, apply)) return;
    add_field(s, YAJL_IS_NULL(v) && !apply ? "-" : "", s->path);
    return;
  }
  for (size_t i = 0; i < v->u.object.len; i++) {
    int n = snprintf(s->path + at, sizeof s->path - at, "%s%s", at ? "." : "", v->u.object.keys[i]);
    size_t next = n < 0 || (size_t)n >= sizeof s->path - at ? sizeof s->path - 1 : at + (size_t)n;
    walk(s, v->u.object.values[i], next, apply);
    s->path[at] = '\0';
  }
}

static void put_summary(kc_buf *b, const char *content_type, yajl_val doc) {
  struct summary s = {.b = b};
  if (content_type && strcmp(content_type, "application/json-patch+json") == 0 &&
      YAJL_IS_ARRAY(doc)) {
    for (size_t i = 0; i < doc->u.array.len; i++) {
      const char *op = str_member(doc->u.array.values[i], "op", NULL);
      const char *p = str_member(doc->u.array.values[i], "path", NULL);
      snprintf(s.path, sizeof s.path, "%s %s", op ? op : "?", p ? p : "?");
      add_field(&s, "", s.path);
    }
  } else if (YAJL_IS_OBJECT(doc)) {
    walk(&s, doc, 0, content_type && strncmp(content_type, "application/apply-patch", 23) == 0);
  }
  if (s.more) kc_buf_printf(b, " +%zu more", s.more);
}

size_t kc_dry_run_describe(const char *method, const char *path, const char *content_type,
                           const char *body, size_t len, char *out, size_t cap) {
  if (!cap) return 0;
  char mem[1024];
  kc_buf b = kc_buf_fixed(mem, sizeof mem);
  int verb = kc_dry_run_verb_of(method, content_type);
  yajl_val doc = NULL;
  bool parsed = true;
  if (body && len && verb != KC_DRY_RUN_DELETE)
    parsed = kc_jsontree_parse(body, len, &doc, NULL, 0) == 0;
  kc_buf_puts(&b, verb >= 0 ? kc_dry_run_verb_name((enum kc_dry_run_verb)verb) : method);
  kc_buf_putc(&b, ' ');
  put_target(&b, method, path, doc);
  if (verb == KC_DRY_RUN_PATCH || verb == KC_DRY_RUN_APPLY) {
    if (!parsed) kc_buf_puts(&b, ": (unparsed body)");
    else put_summary(&b, content_type, doc);
  }
  if (doc) yajl_tree_free(doc);
  size_t n = b.len < cap ? b.len : cap - 1;
  memcpy(out, b.p ? b.p : "", n);
  out[n] = '\0';
  return n;
}

/* ---- counting ---- */

_Static_assert(KC_DRY_RUN_NVERBS <= KC_NAMED_COUNTS_COLUMNS, "a column per verb");
static kc_named_counts counts = KC_NAMED_COUNTS_INIT;

void kc_dry_run_count(const char *controller, enum kc_dry_run_verb v) {
  if ((unsigned)v < KC_DRY_RUN_NVERBS) kc_named_counts_add(&counts, controller, (unsigned)v);
}

void kc_dry_run_note(const char *controller, const char *method, const char *path,
                     const char *content_type, const char *body, size_t len) {
  int verb = kc_dry_run_verb_of(method, content_type);
  if (verb < 0) return;
  char what[1024];
  kc_dry_run_describe(method, path, content_type, body, len, what, sizeof what);
  kc_dry_run_count(controller, (enum kc_dry_run_verb)verb); /* first: a logged write is counted */
  kc_info("dryrun", "dry run: would %s", what);
}

struct each_verb {
  void (*fn)(const char *controller, const char *verb, uint64_t n, void *ud);
  void *ud;
};

static void each_verb(const char *controller, unsigned column, uint64_t n, void *ud) {
  const struct each_verb *e = ud;
  if (column < KC_DRY_RUN_NVERBS) e->fn(controller, verb_names[column], n, e->ud);
}

void kc_dry_run_each(void (*fn)(const char *controller, const char *verb, uint64_t n, void *ud),
                     void *ud) {
  struct each_verb e = {fn, ud};
  kc_named_counts_each(&counts, each_verb, &e);
}

uint64_t kc_dry_run_count_of(const char *controller, enum kc_dry_run_verb v) {
  if ((unsigned)v >= KC_DRY_RUN_NVERBS) return 0;
  return kc_named_counts_get(&counts, controller, (unsigned)v);
}
