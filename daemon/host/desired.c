/* SPDX-License-Identifier: Apache-2.0 */
/* desired: see desired.h.
 *
 * Children are checked as yajl trees (jsontree.h) and sent as their own
 * text with the ownerReference (and namespace) spliced into metadata, so
 * what the plugin or hook wrote goes to the server byte for byte. */
#include "host/desired.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/hash.h"
#include "host/hostapi.h"
#include "json/jsonpath.h"
#include "json/jsontree.h"
#include "kube/kname.h"

#define NS_MAX 64
#define NAME_MAX_LEN 254
#define AV_MAX 128
#define KIND_MAX 64

/* ---- spec ------------------------------------------------------------------ */

static bool kind_copy(kc_desired_kind *k, const char *av, const char *kind,
                      enum kc_update_strategy st) {
  k->api_version = strdup(av);
  k->kind = strdup(kind);
  k->strategy = st;
  return k->api_version && k->kind;
}

kc_desired_spec *kc_desired_spec_new(const kc_controller_spec *spec) {
  kc_desired_spec *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  bool ok = kind_copy(&s->parent, spec->for_.api_version, spec->for_.kind, KC_UPDATE_IN_PLACE);
  if (ok && spec->nowns) {
    s->owns = calloc(spec->nowns, sizeof *s->owns);
    ok = s->owns != NULL;
    for (size_t i = 0; ok && i < spec->nowns; i++) {
      s->nowns = i + 1;
      ok = kind_copy(&s->owns[i], spec->owns[i].ref.api_version, spec->owns[i].ref.kind,
                     spec->owns[i].update_strategy);
    }
  }
  if (ok && spec->finalizer) ok = (s->finalizer = strdup(spec->finalizer)) != NULL;
  if (ok) ok = (s->applied = kc_applymemo_new(0)) != NULL;
  if (ok) return s;
  kc_desired_spec_free(s);
  return NULL;
}

void kc_desired_spec_free(kc_desired_spec *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nowns; i++) {
    free(s->owns[i].api_version);
    free(s->owns[i].kind);
  }
  free(s->owns);
  free(s->parent.api_version);
  free(s->parent.kind);
  free(s->finalizer);
  kc_applymemo_free(s->applied);
  free(s);
}

/* ---- set ------------------------------------------------------------------- */

struct text {
  char *p;
  size_t len;
};

struct kc_desired_set {
  struct text *children;
  size_t n, cap;
  struct text status; /* p NULL: leave the status alone */
};

kc_desired_set *kc_desired_set_new(void) { return calloc(1, sizeof(kc_desired_set)); }

void kc_desired_set_free(kc_desired_set *set) {
  if (!set) return;
  for (size_t i = 0; i < set->n; i++) free(set->children[i].p);
  free(set->children);
  free(set->status.p);
  free(set);
}

static int text_copy(struct text *t, const char *json, size_t len) {
  if (!json || !len) return -EINVAL;
  char *p = malloc(len + 1);
  if (!p) return -ENOMEM;
  memcpy(p, json, len);
  p[len] = '\0';
  t->p = p;
  t->len = len;
  return 0;
}

int kc_desired_set_add_child(kc_desired_set *set, const char *json, size_t len) {
  if (!set) return -EINVAL;
  if (KC_ARRAY_ROOM(set->children, set->cap, set->n, 8) < 0) return -ENOMEM;
  int rc = text_copy(&set->children[set->n], json, len);
  if (rc == 0) set->n++;
  return rc;
}

int kc_desired_set_status(kc_desired_set *set, const char *json, size_t len) {
  if (!set) return -EINVAL;
  struct text t;
  int rc = text_copy(&t, json, len);
  if (rc < 0) return rc;
  free(set->status.p);
  set->status = t;
  return 0;
}

/* ---- helpers --------------------------------------------------------------- */

static yajl_val member(yajl_val obj, const char *key) {
  if (!YAJL_IS_OBJECT(obj)) return NULL;
  for (size_t i = 0; i < obj->u.object.len; i++)
    if (strcmp(obj->u.object.keys[i], key) == 0) return obj->u.object.values[i];
  return NULL;
}

static bool has_duplicate_key(yajl_val obj) {
  for (size_t i = 0; YAJL_IS_OBJECT(obj) && i < obj->u.object.len; i++)
    for (size_t j = 0; j < i; j++)
      if (strcmp(obj->u.object.keys[i], obj->u.object.keys[j]) == 0) return true;
  return false;
}

/* A string member copied into buf: 0, -ENOENT absent, -EINVAL not a
 * string or too long. */
static int string_member(yajl_val obj, const char *key, char *buf, size_t cap) {
  yajl_val v = member(obj, key);
  if (!v) return -ENOENT;
  if (!YAJL_IS_STRING(v) || strlen(v->u.string) >= cap) return -EINVAL;
  strcpy(buf, v->u.string);
  return 0;
}

/* Deep equality of two JSON values (object members in any order). */
static bool json_equal(yajl_val a, yajl_val b) {
  if (!a || !b) return a == b;
  if (a->type != b->type) return false;
  switch (a->type) {
  case yajl_t_string: return strcmp(a->u.string, b->u.string) == 0;
  case yajl_t_number:
    if (YAJL_IS_INTEGER(a) && YAJL_IS_INTEGER(b)) return YAJL_GET_INTEGER(a) == YAJL_GET_INTEGER(b);
    if (YAJL_IS_DOUBLE(a) && YAJL_IS_DOUBLE(b)) return YAJL_GET_DOUBLE(a) == YAJL_GET_DOUBLE(b);
    return strcmp(a->u.number.r, b->u.number.r) == 0;
  case yajl_t_object:
    if (a->u.object.len != b->u.object.len) return false;
    for (size_t i = 0; i < a->u.object.len; i++) {
      yajl_val o = member(b, a->u.object.keys[i]);
      if (!o || !json_equal(a->u.object.values[i], o)) return false;
    }
    return true;
  case yajl_t_array:
    if (a->u.array.len != b->u.array.len) return false;
    for (size_t i = 0; i < a->u.array.len; i++)
      if (!json_equal(a->u.array.values[i], b->u.array.values[i])) return false;
    return true;
  default: return true; /* true, false, null: the type says it all */
  }
}

/* "apps" of "apps/v1", "" of "v1". */
static kc_str group_of(const char *api_version) {
  const char *slash = strchr(api_version, '/');
  return slash ? (kc_str){api_version, (size_t)(slash - api_version)} : (kc_str){"", 0};
}

static bool split_key(const char *key, char ns[NS_MAX], char name[NAME_MAX_LEN]) {
  kc_str n, m;
  if (!kc_name_split_key(key, strlen(key), &n, &m) || n.len >= NS_MAX || m.len >= NAME_MAX_LEN)
    return false;
  memcpy(ns, n.ptr, n.len);
  ns[n.len] = '\0';
  memcpy(name, m.ptr, m.len);
  name[m.len] = '\0';
  return true;
}

/* ---- observed children ------------------------------------------------------ */

struct controller_scan {
  const struct kctrld_host_api *h;
  kctrld_str uid; /* the parent's */
  bool ours, other; /* a controller reference to the parent / to another owner */
};

static bool scan_ref(const kctrld_value *v, void *ud) {
  struct controller_scan *s = ud;
  kctrld_value c, u;
  if (s->h->value_get(v, "controller", &c) != 0 || c.type != KCTRLD_JSON_BOOL ||
      c.raw.len != 4 /* true */)
    return true;
  char buf[NAME_MAX_LEN];
  int n;
  if (s->h->value_get(v, "uid", &u) == 0 && (n = s->h->value_string(&u, buf, sizeof buf)) >= 0 &&
      (size_t)n == s->uid.len && memcmp(buf, s->uid.ptr, s->uid.len) == 0)
    s->ours = true;
  else
    s->other = true;
  return false; /* one controller reference at most */
}

int kc_desired_observed(const struct kctrld_host_api *h, kctrld_ctx *ctx,
                        const kctrld_object *parent,
                        int (*fn)(void *ud, size_t owns_index, const kctrld_object *child),
                        void *ud) {
  const kc_desired_spec *sp = ctx->sync;
  if (!sp) return -EINVAL;
  char ns[NS_MAX] = "";
  kctrld_str pns = h->object_namespace(parent);
  if (pns.len >= NS_MAX) return -EINVAL;
  if (pns.len) memcpy(ns, pns.ptr, pns.len);
  ns[pns.len] = '\0';
  kctrld_str uid = h->object_uid(parent);
  if (!uid.len) return 0; /* an object without a uid owns nothing */
  int rc = 0;
  for (size_t k = 0; rc == 0 && k < sp->nowns; k++) {
    const kctrld_list_opts opts = {.struct_size = sizeof opts, .namespace_ = *ns ? ns : NULL};
    kctrld_list *l = NULL;
    rc = h->cache_list(ctx, sp->owns[k].api_version, sp->owns[k].kind, &opts, &l);
    for (size_t i = 0; rc == 0 && i < h->list_len(l); i++) {
      const kctrld_object *o = h->list_item(l, i);
      struct controller_scan s = {.h = h, .uid = uid};
      if (h->object_each(o, "metadata.ownerReferences[]", scan_ref, &s) < 0 || !s.ours) continue;
      rc = fn(ud, k, o);
    }
    h->list_release(l);
  }
  return rc;
}

/* ---- commit ------------------------------------------------------------------ */

/* One desired child, checked. */
struct want {
  kc_str text;
  size_t kind; /* index into spec->owns */
  char api_version[AV_MAX], kind_name[KIND_MAX], ns[NS_MAX], name[NAME_MAX_LEN];
  bool add_ns;      /* the parent's namespace goes into metadata */
  bool names_owner; /* its ownerReferences already name the parent */
  bool create;      /* not in the cache: the apply creates it */
  bool skip;        /* a create waiting for the expectations */
  char cached_uid[NAME_MAX_LEN]; /* of the cached object ("" when none) */
  char cached_rv[KC_APPLYMEMO_RV_MAX + 1]; /* of the cached object ("" when none or longer) */
};

struct observed {
  size_t kind;
  char ns[NS_MAX], name[NAME_MAX_LEN], uid[NAME_MAX_LEN];
  bool wanted;
};

struct commit {
  const struct kctrld_host_api *h;
  kctrld_ctx *ctx;
  const kc_desired_spec *sp;
  const kctrld_object *parent;
  char pns[NS_MAX], pname[NAME_MAX_LEN], puid[NAME_MAX_LEN];
  struct want *w;
  size_t nw;
  struct observed *obs;
  size_t nobs, capobs;
};

static bool copy_kstr(kctrld_str s, char *buf, size_t cap) {
  if (s.len >= cap) return false;
  if (s.len) memcpy(buf, s.ptr, s.len);
  buf[s.len] = '\0';
  return true;
}

static int collect_observed(void *ud, size_t k, const kctrld_object *o) {
  struct commit *c = ud;
  if (KC_ARRAY_ROOM(c->obs, c->capobs, c->nobs, 16) < 0) return -ENOMEM;
  struct observed *ob = &c->obs[c->nobs];
  memset(ob, 0, sizeof *ob);
  ob->kind = k;
  if (!copy_kstr(c->h->object_namespace(o), ob->ns, sizeof ob->ns) ||
      !copy_kstr(c->h->object_name(o), ob->name, sizeof ob->name) ||
      !copy_kstr(c->h->object_uid(o), ob->uid, sizeof ob->uid))
    return 0; /* no name the API server would give: not ours to delete */
  c->nobs++;
  return 0;
}

/* Checks child i into c->w[i]; on failure the error names the child. */
static int check_child(struct commit *c, size_t i, kc_str text, char *err, size_t errlen) {
  struct want *w = &c->w[i];
  memset(w, 0, sizeof *w);
  w->text = text;
  char why[200];
  yajl_val t = NULL;
  int rc = kc_jsontree_parse(text.ptr, text.len, &t, why, sizeof why);
  if (rc == -ENOMEM) return rc;
  if (rc < 0) {
    kc_errf(err, errlen, "children[%zu]: not JSON: %s", i, why);
    return -EINVAL;
  }
  yajl_val md = member(t, "metadata");
  const char *problem = NULL;
  if (!YAJL_IS_OBJECT(t)) problem = "not a JSON object";
  else if (has_duplicate_key(t) || has_duplicate_key(md)) problem = "a key is given twice";
  else if (string_member(t, "apiVersion", w->api_version, sizeof w->api_version) < 0 ||
           !*w->api_version)
    problem = "apiVersion: required (a string)";
  else if (string_member(t, "kind", w->kind_name, sizeof w->kind_name) < 0 || !*w->kind_name)
    problem = "kind: required (a string)";
  else if (!YAJL_IS_OBJECT(md)) problem = "metadata: required (an object)";
  else if (string_member(md, "name", w->name, sizeof w->name) < 0 || !*w->name)
    problem = "metadata.name: required (a child needs a fixed name; generateName is not enough)";
  else if ((rc = string_member(md, "namespace", w->ns, sizeof w->ns)) == -EINVAL)
    problem = "metadata.namespace: not a string";
  if (problem) goto bad;
  if (*c->pns && !*w->ns) {
    snprintf(w->ns, sizeof w->ns, "%s", c->pns);
    w->add_ns = true;
  } else if (*c->pns && strcmp(w->ns, c->pns) != 0) {
    problem = "not in the namespace of its owner";
    goto bad;
  }
  w->kind = SIZE_MAX;
  for (size_t k = 0; k < c->sp->nowns; k++)
    if (strcmp(c->sp->owns[k].api_version, w->api_version) == 0 &&
        strcmp(c->sp->owns[k].kind, w->kind_name) == 0)
      w->kind = k;
  if (w->kind == SIZE_MAX) {
    problem = "its kind is not one of the controller's owns";
    goto bad;
  }
  yajl_val refs = member(md, "ownerReferences");
  if (refs && !YAJL_IS_ARRAY(refs)) {
    problem = "metadata.ownerReferences: not an array";
    goto bad;
  }
  for (size_t r = 0; refs && r < refs->u.array.len; r++) {
    yajl_val ref = refs->u.array.values[r], uid = member(ref, "uid");
    bool same = YAJL_IS_STRING(uid) && strcmp(uid->u.string, c->puid) == 0;
    if (same) w->names_owner = true;
    if (!same && YAJL_IS_TRUE(member(ref, "controller"))) {
      problem = "metadata.ownerReferences: names another controller";
      goto bad;
    }
  }
  kc_str g = group_of(w->api_version);
  for (size_t j = 0; j < i; j++) {
    const struct want *o = &c->w[j];
    if (kc_str_eq(group_of(o->api_version), g) && strcmp(o->kind_name, w->kind_name) == 0 &&
        strcmp(o->ns, w->ns) == 0 && strcmp(o->name, w->name) == 0) {
      snprintf(why, sizeof why, "the same object as children[%zu]", j);
      problem = why;
      goto bad;
    }
  }
  yajl_tree_free(t);
  return 0;
bad:
  kc_errf(err, errlen, "desired child children[%zu] %s %s %s%s%s: %s", i, w->api_version,
          w->kind_name, w->ns, *w->ns ? "/" : "", w->name, problem);
  yajl_tree_free(t);
  return -EINVAL;
}

/* The apply body of w: its text with the ownerReference (unless it names
 * the parent already) and the namespace spliced into metadata. */
static int apply_body(const struct commit *c, const struct want *w, kc_buf *b) {
  kc_json_value md, refs;
  if (kc_json_get(w->text, "metadata", &md) != 0 || md.type != KC_JSON_OBJECT) return -EINVAL;
  if (kc_json_get(w->text, "metadata.ownerReferences", &refs) != 0) return -EINVAL;
  kc_buf ref = {0};
  kc_buf_puts(&ref, "{\"apiVersion\":");
  kc_buf_json_c(&ref, c->sp->parent.api_version);
  kc_buf_puts(&ref, ",\"kind\":");
  kc_buf_json_c(&ref, c->sp->parent.kind);
  kc_buf_puts(&ref, ",\"name\":");
  kc_buf_json_c(&ref, c->pname);
  kc_buf_puts(&ref, ",\"uid\":");
  kc_buf_json_c(&ref, c->puid);
  kc_buf_puts(&ref, ",\"controller\":true,\"blockOwnerDeletion\":true}");
  const char *base = w->text.ptr;
  size_t md_in = (size_t)(md.raw.ptr - base) + 1; /* just after metadata's '{' */
  /* Whether metadata has members: the first non-blank after '{' is not '}'. */
  size_t k = md_in;
  while (k < w->text.len && (base[k] == ' ' || base[k] == '\n' || base[k] == '\t' || base[k] == '\r'))
    k++;
  bool md_empty = k < w->text.len && base[k] == '}';
  bool add_ref = !w->names_owner;
  bool ref_in_array = add_ref && refs.type == KC_JSON_ARRAY;
  kc_buf_add(b, base, md_in);
  bool first = true;
  if (w->add_ns) {
    kc_buf_puts(b, "\"namespace\":");
    kc_buf_json_c(b, w->ns);
    first = false;
  }
  if (add_ref && !ref_in_array) {
    kc_buf_puts(b, first ? "\"ownerReferences\":[" : ",\"ownerReferences\":[");
    kc_buf_add(b, ref.p, ref.len);
    kc_buf_putc(b, ']');
    first = false;
  }
  if (!first && !md_empty) kc_buf_putc(b, ',');
  if (ref_in_array) {
    size_t arr_in = (size_t)(refs.raw.ptr - base) + 1;
    size_t a = arr_in;
    while (a < w->text.len && (base[a] == ' ' || base[a] == '\n' || base[a] == '\t' || base[a] == '\r'))
      a++;
    kc_buf_add(b, base + md_in, arr_in - md_in);
    kc_buf_add(b, ref.p, ref.len);
    if (base[a] != ']') kc_buf_putc(b, ',');
    kc_buf_add(b, base + arr_in, w->text.len - arr_in);
  } else {
    kc_buf_add(b, base + md_in, w->text.len - md_in);
  }
  kc_buf_free(&ref);
  return b->err ? -ENOMEM : 0;
}

/* The parent with its status replaced by (or given) status. */
static int status_body(const struct kctrld_host_api *h, const kctrld_object *parent,
                       const struct text *status, kc_buf *b) {
  kctrld_str js = h->object_json(parent);
  kc_str text = {js.ptr, js.len};
  kc_json_value st;
  if (!text.ptr || kc_json_get(text, "status", &st) != 0) return -EINVAL;
  if (st.type != KC_JSON_ABSENT) {
    size_t at = (size_t)(st.raw.ptr - text.ptr);
    kc_buf_add(b, text.ptr, at);
    kc_buf_add(b, status->p, status->len);
    kc_buf_add(b, st.raw.ptr + st.raw.len, text.len - at - st.raw.len);
  } else {
    size_t open = 0;
    while (open < text.len && text.ptr[open] != '{') open++;
    if (open == text.len) return -EINVAL;
    kc_buf_add(b, text.ptr, open + 1);
    kc_buf_puts(b, "\"status\":");
    kc_buf_add(b, status->p, status->len);
    kc_buf_putc(b, ',');
    kc_buf_add(b, text.ptr + open + 1, text.len - open - 1);
  }
  return b->err ? -ENOMEM : 0;
}

/* Whether the desired status differs from parent's (a new status differs
 * from an absent one). -errno when either does not parse. */
static int status_differs(const struct kctrld_host_api *h, const kctrld_object *parent,
                          const struct text *status) {
  kctrld_value cur;
  if (h->object_get(parent, "status", &cur) != 0) return -EINVAL;
  if (cur.type == KCTRLD_JSON_ABSENT) return 1;
  yajl_val a = NULL, b = NULL;
  int rc = kc_jsontree_parse(status->p, status->len, &a, NULL, 0);
  if (rc == 0) rc = kc_jsontree_parse(cur.raw.ptr, cur.raw.len, &b, NULL, 0);
  if (rc == 0) rc = json_equal(a, b) ? 0 : 1;
  if (a) yajl_tree_free(a);
  if (b) yajl_tree_free(b);
  return rc;
}

static bool immutable_refusal(const struct kctrld_host_api *h, kctrld_ctx *ctx, int rc) {
  return rc == -EINVAL && strstr(h->ctx_api_error(ctx), "immutable") != NULL;
}

/* A failed write of what: a conflict requeues, anything else is an error. */
static int write_failed(struct commit *c, int rc, const char *verb, const char *what) {
  const struct kctrld_host_api *h = c->h;
  const char *api = h->ctx_api_error(c->ctx);
  if (rc == -ESTALE || rc == -EEXIST) {
    h->log(KCTRLD_LOG_INFO, "%s %s: conflict (%s); requeue", verb, what, api);
    return KCTRLD_RESULT_REQUEUE;
  }
  return h->result_error(c->ctx, "%s %s: %s%s%s", verb, what, strerror(-rc), *api ? ": " : "", api);
}

/* Applies w's body (what names it in logs), unless the child is cached
 * unchanged since our last apply of the same body (applymemo.h): then 0,
 * counted. Remembers what a successful apply answered. Returns api_apply's
 * value otherwise. */
static int apply_changed(struct commit *c, const struct want *w, const kc_buf *body,
                         const char *what) {
  const struct kctrld_host_api *h = c->h;
  uint64_t hash = kc_hash_bytes(body->p, body->len);
  if (!w->create && kc_applymemo_unchanged(c->sp->applied, w->cached_uid, strlen(w->cached_uid),
                                           w->cached_rv, strlen(w->cached_rv), hash, body->len)) {
    h->log(KCTRLD_LOG_DEBUG, "apply %s: unchanged since our apply (resourceVersion %s); skipped",
           what, w->cached_rv);
    kc_applymemo_count_skip(c->ctx->controller);
    return 0;
  }
  /* A dry-run answer is what the write would make, not what the cache
   * will hold: not remembered. */
  bool remember = !(c->ctx->env && c->ctx->env->dry_run);
  const kctrld_object *applied = NULL;
  int rc = h->api_apply(c->ctx, body->p, body->len, NULL, true, remember ? &applied : NULL);
  if (applied) {
    kctrld_str uid = h->object_uid(applied), rv = h->object_resource_version(applied);
    kc_applymemo_remember(c->sp->applied, uid.ptr, uid.len, rv.ptr, rv.len, hash, body->len);
    h->object_release(applied);
  }
  return rc;
}

static int run_commit(struct commit *c, const kc_desired_set *set, const char *key) {
  const struct kctrld_host_api *h = c->h;
  kctrld_ctx *ctx = c->ctx;
  char err[600];
  if (set->status.p) {
    yajl_val st = NULL;
    int rc = kc_jsontree_parse(set->status.p, set->status.len, &st, NULL, 0);
    bool ok = rc == 0 && YAJL_IS_OBJECT(st);
    if (st) yajl_tree_free(st);
    if (rc == -ENOMEM) return h->result_error(ctx, "desired state: out of memory");
    if (!ok) return h->result_error(ctx, "desired status: not a JSON object");
  }
  for (size_t i = 0; i < set->n; i++) {
    int rc = check_child(c, i, (kc_str){set->children[i].p, set->children[i].len}, err, sizeof err);
    if (rc == -ENOMEM) return h->result_error(ctx, "desired state: out of memory");
    if (rc < 0) return h->result_error(ctx, "%s", err);
  }
  c->nw = set->n;
  bool deleting = h->object_deleting(c->parent);
  if (deleting && !ctx->finalizing) {
    /* Nothing to build for an object on its way out (no finalizer keeps
     * it): its children go with it through their ownerReferences. */
    return KCTRLD_RESULT_DONE;
  }
  int rc = kc_desired_observed(h, ctx, c->parent, collect_observed, c);
  if (rc < 0)
    return h->result_error(ctx, "desired state: cache of owned kinds: %s", strerror(-rc));
  /* What exists, what is created, what is pruned. */
  int64_t creates = 0, deletes = 0;
  for (size_t i = 0; i < c->nw; i++) {
    struct want *w = &c->w[i];
    const kctrld_ref ref = {w->api_version, w->kind_name, *w->ns ? w->ns : NULL, w->name};
    const kctrld_object *o = NULL;
    if (h->cache_get(ctx, &ref, &o) == 0) {
      copy_kstr(h->object_uid(o), w->cached_uid, sizeof w->cached_uid);
      copy_kstr(h->object_resource_version(o), w->cached_rv, sizeof w->cached_rv);
      h->object_release(o);
    } else {
      w->create = true;
      creates++;
    }
    for (size_t j = 0; j < c->nobs; j++)
      if (c->obs[j].kind == w->kind && strcmp(c->obs[j].ns, w->ns) == 0 &&
          strcmp(c->obs[j].name, w->name) == 0)
        c->obs[j].wanted = true;
  }
  for (size_t j = 0; j < c->nobs; j++) deletes += !c->obs[j].wanted;
  /* Owned-object events are observed under the owner's key (controller.c),
   * namespaced or not. */
  bool observable = ctx->exp != NULL;
  /* Dry run: no create or delete ever shows up in the cache to observe. */
  if (ctx->env && ctx->env->dry_run) observable = false;
  bool act = true;
  if ((creates || deletes) && !h->expectations_satisfied(ctx, key)) {
    h->log(KCTRLD_LOG_DEBUG,
           "expectations pending: %lld creates and %lld deletes wait for the cache",
           (long long)creates, (long long)deletes);
    act = false;
  } else if (observable && (creates || deletes)) {
    /* Before the writes: the watch may report a child before its apply returns. */
    int e = kc_expectations_set(ctx->exp, key, creates, deletes, kc_clock_now_ns());
    if (e < 0) return h->result_error(ctx, "desired state: expectations: %s", strerror(-e));
  } else {
    observable = false;
  }
  int64_t creates_left = act ? creates : 0, deletes_left = act ? deletes : 0;
  int result = KCTRLD_RESULT_DONE;
  for (size_t i = 0; i < c->nw && result == KCTRLD_RESULT_DONE; i++) {
    struct want *w = &c->w[i];
    if (w->create && !act) continue;
    char what[AV_MAX + KIND_MAX + NS_MAX + NAME_MAX_LEN + 8];
    snprintf(what, sizeof what, "%s %s %s%s%s", w->api_version, w->kind_name, w->ns,
             *w->ns ? "/" : "", w->name);
    kc_buf body = {0};
    rc = apply_body(c, w, &body);
    if (rc < 0) {
      kc_buf_free(&body);
      result = h->result_error(ctx, "desired child %s: %s", what, strerror(-rc));
      break;
    }
    rc = apply_changed(c, w, &body, what);
    kc_buf_free(&body);
    if (w->create) {
      creates_left--;
      /* Created (1): its add event observes it. Found (0): nothing will. */
      if (rc == 0 && observable) h->creation_observed(ctx, key);
      if (rc < 0 && observable) h->creation_observed(ctx, key);
    }
    if (rc >= 0) continue;
    if (immutable_refusal(h, ctx, rc) && c->sp->owns[w->kind].strategy == KC_UPDATE_RECREATE &&
        *w->cached_uid) {
      /* Its delete event brings the next reconcile, which creates it. */
      h->log(KCTRLD_LOG_INFO, "recreating %s: %s", what, h->ctx_api_error(ctx));
      kc_applymemo_forget(c->sp->applied, w->cached_uid, strlen(w->cached_uid));
      const kctrld_ref ref = {w->api_version, w->kind_name, *w->ns ? w->ns : NULL, w->name};
      const kctrld_delete_opts opts = {.struct_size = sizeof opts,
                                       .precondition_uid = w->cached_uid,
                                       .propagation = KCTRLD_PROPAGATION_BACKGROUND,
                                       .grace_period_seconds = -1};
      rc = h->api_delete(ctx, &ref, &opts);
      if (rc >= 0 || rc == -ENOENT) continue;
      result = write_failed(c, rc, "delete (recreate)", what);
      break;
    }
    result = write_failed(c, rc, "apply", what);
  }
  for (size_t j = 0; j < c->nobs && act && result == KCTRLD_RESULT_DONE; j++) {
    const struct observed *ob = &c->obs[j];
    if (ob->wanted) continue;
    const kc_desired_kind *dk = &c->sp->owns[ob->kind];
    const kctrld_ref ref = {dk->api_version, dk->kind, *ob->ns ? ob->ns : NULL, ob->name};
    const kctrld_delete_opts opts = {.struct_size = sizeof opts,
                                     .precondition_uid = ob->uid,
                                     .propagation = KCTRLD_PROPAGATION_BACKGROUND,
                                     .grace_period_seconds = -1};
    deletes_left--;
    kc_applymemo_forget(c->sp->applied, ob->uid, strlen(ob->uid));
    rc = h->api_delete(ctx, &ref, &opts);
    if (rc >= 0) continue;
    if (observable) h->deletion_observed(ctx, key); /* no delete event for this one */
    if (rc == -ENOENT) continue;
    char what[AV_MAX + KIND_MAX + NS_MAX + NAME_MAX_LEN + 8];
    snprintf(what, sizeof what, "%s %s %s%s%s", dk->api_version, dk->kind, ob->ns, *ob->ns ? "/" : "",
             ob->name);
    result = write_failed(c, rc, "delete", what);
  }
  /* Writes not done will never be observed. */
  for (; observable && creates_left > 0; creates_left--) h->creation_observed(ctx, key);
  for (; observable && deletes_left > 0; deletes_left--) h->deletion_observed(ctx, key);
  if (result != KCTRLD_RESULT_DONE || !set->status.p) return result;
  rc = status_differs(h, c->parent, &set->status);
  if (rc < 0) return h->result_error(ctx, "desired status: %s", strerror(-rc));
  if (rc == 0) return KCTRLD_RESULT_DONE;
  kc_buf body = {0};
  rc = status_body(h, c->parent, &set->status, &body);
  if (rc == 0) rc = h->api_update_status(ctx, body.p, body.len, NULL);
  kc_buf_free(&body);
  if (rc >= 0) return KCTRLD_RESULT_DONE;
  char what[KIND_MAX + NS_MAX + NAME_MAX_LEN + 8];
  snprintf(what, sizeof what, "%s %s%s%s", c->sp->parent.kind, c->pns, *c->pns ? "/" : "", c->pname);
  return write_failed(c, rc, "status of", what);
}

int kc_desired_commit(const struct kctrld_host_api *h, kctrld_ctx *ctx, const kc_desired_set *set) {
  const kc_desired_spec *sp = ctx ? ctx->sync : NULL;
  if (!sp || !ctx->key || !set)
    return h->result_error(ctx, "desired state: not available to this controller");
  struct commit c = {.h = h, .ctx = ctx, .sp = sp};
  if (!split_key(ctx->key, c.pns, c.pname))
    return h->result_error(ctx, "desired state: malformed key \"%s\"", ctx->key);
  const kctrld_ref pref = {sp->parent.api_version, sp->parent.kind, *c.pns ? c.pns : NULL, c.pname};
  int rc = h->cache_get(ctx, &pref, &c.parent);
  if (rc == -ENOENT) {
    /* Gone: the garbage collector removes its children. */
    h->expectations_forget(ctx, ctx->key);
    return KCTRLD_RESULT_DONE;
  }
  if (rc < 0) return h->result_error(ctx, "desired state: cache of %s: %s", sp->parent.kind, strerror(-rc));
  if (!copy_kstr(h->object_uid(c.parent), c.puid, sizeof c.puid) || !*c.puid) {
    h->object_release(c.parent);
    return h->result_error(ctx, "desired state: %s %s has no uid", sp->parent.kind, ctx->key);
  }
  c.w = set->n ? calloc(set->n, sizeof *c.w) : NULL;
  int result = set->n && !c.w ? h->result_error(ctx, "desired state: out of memory")
                              : run_commit(&c, set, ctx->key);
  free(c.w);
  free(c.obs);
  h->object_release(c.parent);
  return result;
}

/* ---- finalizer ------------------------------------------------------------------ */

static const kctrld_object *cached_parent(const struct kctrld_host_api *h, kctrld_ctx *ctx) {
  char ns[NS_MAX], name[NAME_MAX_LEN];
  if (!ctx->key || !split_key(ctx->key, ns, name)) return NULL;
  const kctrld_ref ref = {ctx->sync->parent.api_version, ctx->sync->parent.kind, *ns ? ns : NULL,
                          name};
  const kctrld_object *o = NULL;
  return h->cache_get(ctx, &ref, &o) == 0 ? o : NULL;
}

bool kc_desired_finalize_before(const struct kctrld_host_api *h, kctrld_ctx *ctx, int *result) {
  ctx->finalizing = false;
  if (!ctx->sync || !ctx->sync->finalizer) return true;
  const char *fin = ctx->sync->finalizer;
  const kctrld_object *o = cached_parent(h, ctx);
  if (!o) return true; /* gone: the reconcile learns it itself */
  bool run = true;
  bool has = h->object_has_finalizer(o, fin);
  if (h->object_deleting(o)) {
    ctx->finalizing = has;
    if (!has) { /* finalized already, or never ours: nothing to do */
      *result = KCTRLD_RESULT_DONE;
      run = false;
    }
  } else if (!has) {
    int rc = h->finalizer_add(ctx, o, fin);
    if (rc == -ESTALE) {
      h->log(KCTRLD_LOG_INFO, "adding finalizer %s: conflict; requeue", fin);
      *result = KCTRLD_RESULT_REQUEUE;
      run = false;
    } else if (rc < 0) {
      *result = h->result_error(ctx, "adding finalizer %s: %s: %s", fin, strerror(-rc),
                                h->ctx_api_error(ctx));
      run = false;
    }
  }
  h->object_release(o);
  return run;
}

int kc_desired_finalize_after(const struct kctrld_host_api *h, kctrld_ctx *ctx, int result) {
  if (!ctx->sync || !ctx->sync->finalizer || !ctx->finalizing || !ctx->finalized ||
      (result != KCTRLD_RESULT_DONE && result != KCTRLD_RESULT_REQUEUE_AFTER))
    return result;
  const char *fin = ctx->sync->finalizer;
  const kctrld_object *o = cached_parent(h, ctx);
  if (!o) return result;
  int rc = h->finalizer_remove(ctx, o, fin);
  h->object_release(o);
  if (rc == -ESTALE) {
    h->log(KCTRLD_LOG_INFO, "removing finalizer %s: conflict; requeue", fin);
    return KCTRLD_RESULT_REQUEUE;
  }
  if (rc < 0 && rc != -ENOENT)
    return h->result_error(ctx, "removing finalizer %s: %s: %s", fin, strerror(-rc),
                           h->ctx_api_error(ctx));
  if (rc == 0) h->log(KCTRLD_LOG_INFO, "finalized: finalizer %s removed", fin);
  return KCTRLD_RESULT_DONE;
}

/* ---- the host functions ------------------------------------------------------- */

void kc_desired_ctx_done(kctrld_ctx *ctx) {
  kc_desired_set_free(ctx->desired);
  ctx->desired = NULL;
}

bool kc_desired_host_finalizing(const kctrld_ctx *ctx) { return ctx && ctx->finalizing; }

void kc_desired_host_finalized(kctrld_ctx *ctx) {
  if (ctx && ctx->finalizing) ctx->finalized = true;
}

int kc_desired_host_begin(kctrld_ctx *ctx) {
  if (!ctx || !ctx->sync || !ctx->key) return -ENOTSUP;
  kc_desired_set *set = kc_desired_set_new();
  if (!set) return -ENOMEM;
  kc_desired_set_free(ctx->desired);
  ctx->desired = set;
  return 0;
}

int kc_desired_host_add_child(kctrld_ctx *ctx, const char *json, size_t len) {
  return ctx && ctx->desired ? kc_desired_set_add_child(ctx->desired, json, len) : -EINVAL;
}

int kc_desired_host_set_status(kctrld_ctx *ctx, const char *json, size_t len) {
  return ctx && ctx->desired ? kc_desired_set_status(ctx->desired, json, len) : -EINVAL;
}

int kc_desired_host_commit(kctrld_ctx *ctx) {
  const struct kctrld_host_api *h = kc_hostapi_table();
  if (!ctx || !ctx->desired) return h->result_error(ctx, "desired_commit without desired_begin");
  int rc = kc_desired_commit(h, ctx, ctx->desired);
  kc_desired_ctx_done(ctx);
  return rc;
}
