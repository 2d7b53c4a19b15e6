/* SPDX-License-Identifier: Apache-2.0 */
/* hostapi: see hostapi.h. */
#include "host/hostapi.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "watch/decode.h"
#include "client/events.h"
#include "json/jsonpath.h"
#include "kube/kname.h"
#include "kube/kobj.h"
#include "kube/kurl.h"
#include "base/log.h"
#include "host/dryrun.h"
#include "kube/selector.h"
#include "cache/store.h"
#include "json/yamltree.h"

#define COMPONENT "hostapi"

_Static_assert(sizeof(kctrld_str) == sizeof(kc_str), "slice layouts");
_Static_assert((int)KCTRLD_JSON_ARRAY == (int)KC_JSON_ARRAY, "json types");
_Static_assert((int)KCTRLD_JSON_STRING == (int)KC_JSON_STRING, "json types");

static inline kctrld_str S(kc_str s) { return (kctrld_str){s.ptr, s.len}; }
static inline const kc_obj *O(const kctrld_object *o) { return kc_hostapi_obj(o); }

/* ---- per-thread state: the last parsed label selector ---- */

struct thread_state {
  char *sel_text; /* text of the cached selector */
  kc_label_selector *sel;
};

static pthread_key_t tkey;
static pthread_once_t tonce = PTHREAD_ONCE_INIT;
static _Thread_local struct thread_state *tstate;
static _Thread_local kctrld_ctx *current_ctx; /* the plugin call on this thread (log) */

static void thread_state_free(void *p) {
  struct thread_state *t = p;
  if (!t) return;
  free(t->sel_text);
  kc_label_selector_free(t->sel);
  free(t);
}

static void tkey_init(void) {
  if (pthread_key_create(&tkey, thread_state_free) != 0) abort(); /* only at startup: EAGAIN */
}

static struct thread_state *thread_state(void) {
  if (tstate) return tstate;
  pthread_once(&tonce, tkey_init);
  struct thread_state *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (pthread_setspecific(tkey, t) != 0) {
    free(t);
    return NULL;
  }
  tstate = t;
  return t;
}

void kc_hostapi_thread_cleanup(void) {
  if (!tstate) return;
  pthread_setspecific(tkey, NULL);
  thread_state_free(tstate);
  tstate = NULL;
}

/* ---- ctx ---- */

void kc_hostapi_ctx_init(kctrld_ctx *ctx, const kc_host_env *env, const char *controller,
                         kc_expectations *exp, const char *key, kc_reconcile_result *res) {
  *ctx = (kctrld_ctx){.env = env, .controller = controller ? controller : "", .exp = exp,
                      .key = key, .res = res};
}

kctrld_ctx *kc_hostapi_enter(kctrld_ctx *ctx) {
  kctrld_ctx *prev = current_ctx;
  current_ctx = ctx;
  return prev;
}

void kc_hostapi_leave(kctrld_ctx *previous) { current_ctx = previous; }

/* The environment member m of ctx's env, or NULL. */
#define ENV_OP(ctx, m) ((ctx) && (ctx)->env && (ctx)->env->ops && (ctx)->env->ops->m ? (ctx)->env->ops->m : NULL)
#define ENV_UD(ctx) ((ctx)->env->ud)
/* Names the type of an operation (__typeof__ of a member of a real object,
 * not of a cast null pointer). */
static const kc_host_env_ops op_types;
#define ENV_OP_T(m) __typeof__(op_types.m)

/* ---- small helpers ---- */

static void api_error(kctrld_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records the message ctx_api_error returns (truncated to 511 bytes). A
 * failure is an ordinary one unless terminal_failure marks it after this. */
static void api_error(kctrld_ctx *ctx, const char *fmt, ...) {
  if (!ctx) return;
  ctx->terminal[0] = '\0';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->api_error, sizeof ctx->api_error, fmt, ap);
  va_end(ap);
}

static kc_str cstr_or_absent(const char *s) { return s ? kc_str_c(s) : (kc_str){NULL, 0}; }

/* ---- settings ---- */

/* Resolves a path (jsonpath.h syntax without "[]"; "" is node itself)
 * below node. Returns 0 with *out (NULL when absent), or -EINVAL for a
 * malformed path. */
/* Records n as read when the running init tracks reads of root. */
static void settings_mark(const kc_yaml_node *root, const kc_yaml_node *n) {
  kc_settings_used *u = current_ctx ? current_ctx->used : NULL;
  if (!u || !n || u->root != root || u->oom) return;
  for (size_t i = 0; i < u->n; i++)
    if (u->nodes[i] == n) return;
  if (KC_ARRAY_ROOM(u->nodes, u->cap, u->n, 16) < 0) {
    u->oom = true;
    return;
  }
  u->nodes[u->n++] = n;
}

static bool settings_was_read(const kc_settings_used *u, const kc_yaml_node *n) {
  for (size_t i = 0; i < u->n; i++)
    if (u->nodes[i] == n) return true;
  return false;
}

struct unread_walk {
  const char *controller, *plugin;
  size_t warned;
};

/* path holds the path of n (len bytes used, cap in all). */
static void warn_unread_below(const kc_settings_used *u, const kc_yaml_node *n, char *path,
                              size_t len, size_t cap, struct unread_walk *w) {
  if (n->type == KC_YAML_SEQUENCE) {
    for (size_t i = 0; i < n->u.seq.len; i++) {
      const kc_yaml_node *item = &n->u.seq.items[i];
      if (!settings_was_read(u, item)) continue; /* items are no keys to misspell */
      int k = snprintf(path + len, cap - len, "[%zu]", i);
      if (k > 0 && (size_t)k < cap - len) warn_unread_below(u, item, path, len + (size_t)k, cap, w);
      path[len] = '\0';
    }
    return;
  }
  if (n->type != KC_YAML_MAPPING) return;
  for (size_t i = 0; i < n->u.map.len; i++) {
    const kc_yaml_pair *pr = &n->u.map.pairs[i];
    const char *key = pr->key.u.scalar.text;
    bool quote = strpbrk(key, ".[]\"") != NULL;
    int k = snprintf(path + len, cap - len, quote ? "[\"%s\"]" : "%s%s", quote ? key : len ? "." : "",
                     key);
    if (k < 0 || (size_t)k >= cap - len) {
      path[len] = '\0';
      continue;
    }
    if (settings_was_read(u, &pr->value)) {
      warn_unread_below(u, &pr->value, path, len + (size_t)k, cap, w);
    } else {
      kc_warn("plugin",
              "%s:%u:%u: controller %s: settings key \"%s\" was not read by plugin %s (misspelt, "
              "or not a setting of this plugin?)",
              pr->key.file ? pr->key.file : "?", (unsigned)pr->key.line, (unsigned)pr->key.column,
              w->controller, path, w->plugin);
      w->warned++;
    }
    path[len] = '\0';
  }
}

size_t kc_hostapi_settings_warn_unread(kc_settings_used *u, const char *controller,
                                       const char *plugin) {
  struct unread_walk w = {controller ? controller : "", plugin ? plugin : "", 0};
  if (u->root && !u->oom) {
    char path[512] = "";
    warn_unread_below(u, u->root, path, 0, sizeof path, &w);
  }
  free(u->nodes);
  u->nodes = NULL;
  u->n = u->cap = 0;
  return w.warned;
}

static int settings_find(const kc_yaml_node *node, const char *path, const kc_yaml_node **out) {
  *out = NULL;
  if (!path) return -EINVAL;
  const kc_yaml_node *root = node;
  kc_path_seg sg;
  int rc = 0;
  for (bool first = true; *path && (rc = kc_path_next(&path, &sg, first, NULL)) == 1; first = false) {
    if (sg.type == KC_PATH_EACH) return -EINVAL;
    if (sg.type == KC_PATH_INDEX) {
      bool in = node && node->type == KC_YAML_SEQUENCE && sg.index < node->u.seq.len;
      node = in ? &node->u.seq.items[sg.index] : NULL;
      settings_mark(root, node);
      continue;
    }
    char key[256];
    if (sg.len >= sizeof key) return -EINVAL;
    memcpy(key, sg.key, sg.len);
    key[sg.len] = '\0';
    node = node && node->type == KC_YAML_MAPPING ? kc_yaml_map_get(node, key) : NULL;
    settings_mark(root, node);
  }
  if (rc < 0) return rc;
  *out = node;
  return 0;
}

/* The node at path for a typed read: 0, -ENOENT (absent or a plain YAML
 * null), -EINVAL (malformed path). `what` gets "settings.PATH". */
static int settings_value(const kctrld_settings *s, const char *path, const kc_yaml_node **out,
                          char *what, size_t cap) {
  const kc_yaml_node *n;
  int rc = settings_find((const kc_yaml_node *)s, path, &n);
  if (rc < 0) return rc;
  if (!n || (n->type == KC_YAML_SCALAR && n->u.scalar.plain && kc_yaml_is_null(n))) return -ENOENT;
  snprintf(what, cap, "settings.%s", path);
  *out = n;
  return 0;
}

/* A typed read failed: the plugin gets rc; the operator gets the getter's
 * "file:line:col: settings.PATH: ..." with the controller it belongs to
 * (the config file's rules hold for settings too: docs/plugins.md). */
static int settings_refused(int rc, const char *err) {
  const kctrld_ctx *ctx = current_ctx;
  if (ctx && ctx->controller[0]) kc_warn(COMPONENT, "controller %s: %s", ctx->controller, err);
  else kc_warn(COMPONENT, "%s", err);
  return rc;
}

/* The settings getters are yamltree.h's typed getters, the ones the config
 * file is read with: one set of rules for the whole file. */
static int svc_settings_string(const kctrld_settings *s, const char *path, const char **out) {
  const kc_yaml_node *n;
  char what[300], err[512];
  int rc = settings_value(s, path, &n, what, sizeof what);
  if (rc < 0) return rc;
  const char *t;
  if (kc_yaml_get_string(n, what, &t, err, sizeof err) < 0) return settings_refused(-EINVAL, err);
  *out = t;
  return 0;
}

static int svc_settings_int(const kctrld_settings *s, const char *path, int64_t *out) {
  const kc_yaml_node *n;
  char what[300], err[512];
  int rc = settings_value(s, path, &n, what, sizeof what);
  if (rc < 0) return rc;
  if (kc_yaml_get_int(n, what, INT64_MIN, INT64_MAX, out, err, sizeof err) == 0) return 0;
  /* Only digits, yet refused: it does not fit in 64 bits. */
  const char *t = n->type == KC_YAML_SCALAR && n->u.scalar.plain ? n->u.scalar.text : "";
  t += *t == '-' || *t == '+';
  bool digits = *t != '\0';
  for (; *t; t++) digits = digits && *t >= '0' && *t <= '9';
  return settings_refused(digits ? -ERANGE : -EINVAL, err);
}

static int svc_settings_bool(const kctrld_settings *s, const char *path, bool *out) {
  const kc_yaml_node *n;
  char what[300], err[512];
  int rc = settings_value(s, path, &n, what, sizeof what);
  if (rc < 0) return rc;
  return kc_yaml_get_bool(n, what, out, err, sizeof err) < 0 ? settings_refused(-EINVAL, err) : 0;
}

static int svc_settings_duration_ms(const kctrld_settings *s, const char *path, int64_t *out) {
  const kc_yaml_node *n;
  char what[300], err[512];
  int rc = settings_value(s, path, &n, what, sizeof what);
  if (rc < 0) return rc;
  if (kc_yaml_get_duration_ms(n, what, 0, INT64_MAX, out, err, sizeof err) == 0) return 0;
  int64_t ns;
  bool range = n->type == KC_YAML_SCALAR && kc_yaml_parse_duration(n->u.scalar.text, &ns) == -ERANGE;
  return settings_refused(range ? -ERANGE : -EINVAL, err);
}

static int svc_settings_len(const kctrld_settings *s, const char *path, size_t *out) {
  const kc_yaml_node *n;
  int rc = settings_find((const kc_yaml_node *)s, path, &n);
  if (rc < 0) return rc;
  if (!n) return -ENOENT;
  if (n->type == KC_YAML_SEQUENCE) *out = n->u.seq.len;
  else if (n->type == KC_YAML_MAPPING) *out = n->u.map.len;
  else return -EINVAL;
  return 0;
}

/* ---- cache ---- */

static int svc_cache_get(kctrld_ctx *ctx, const kctrld_ref *ref, const kctrld_object **out) {
  if (!ref || !ref->name || !ref->api_version || !ref->kind || !out) return -EINVAL;
  ENV_OP_T(cache_get) get = ENV_OP(ctx, cache_get);
  if (!get) return -ENOSYS;
  kc_obj *o = NULL;
  int rc = get(ENV_UD(ctx), ref->api_version, ref->kind,
               kc_str_c(ref->namespace_ ? ref->namespace_ : ""), kc_str_c(ref->name), &o);
  if (rc < 0) return rc;
  if (!o) return -ENOENT;
  *out = (const kctrld_object *)o;
  return 0;
}

/* The thread's parsed selector for text (cached: plugins reuse one). */
static int selector_for(kctrld_ctx *ctx, const char *text, const kc_label_selector **out) {
  struct thread_state *t = thread_state();
  if (!t) return -ENOMEM;
  if (t->sel_text && strcmp(t->sel_text, text) == 0) {
    *out = t->sel;
    return 0;
  }
  kc_label_selector *sel;
  kc_sel_error err;
  int rc = kc_label_selector_parse(text, strlen(text), &sel, &err);
  if (rc == -EINVAL) {
    api_error(ctx, "label selector %s: %s", text, err.msg);
    return rc;
  }
  if (rc < 0) return rc;
  char *copy = strdup(text);
  if (!copy) {
    kc_label_selector_free(sel);
    return -ENOMEM;
  }
  free(t->sel_text);
  kc_label_selector_free(t->sel);
  t->sel_text = copy;
  t->sel = sel;
  *out = sel;
  return 0;
}

static int obj_cmp(const void *a, const void *b) {
  const kc_obj *x = *(kc_obj *const *)a, *y = *(kc_obj *const *)b;
  int c = kc_str_cmp(kc_obj_namespace(x), kc_obj_namespace(y));
  return c ? c : kc_str_cmp(kc_obj_name(x), kc_obj_name(y));
}

static int svc_cache_list(kctrld_ctx *ctx, const char *api_version, const char *kind,
                          const kctrld_list_opts *opts, kctrld_list **out) {
  if (!out) return -EINVAL;
  *out = NULL;
  const char *ns = NULL, *seltext = NULL, *index = NULL, *value = NULL;
  if (opts) {
    size_t sz = opts->struct_size;
    if (sz >= offsetof(kctrld_list_opts, namespace_) + sizeof(char *)) ns = opts->namespace_;
    if (sz >= offsetof(kctrld_list_opts, label_selector) + sizeof(char *))
      seltext = opts->label_selector;
    if (sz >= offsetof(kctrld_list_opts, field_value) + sizeof(char *)) {
      index = opts->field_index;
      value = opts->field_value;
    }
  }
  if ((index && !value) || !api_version || !kind) return -EINVAL;
  ENV_OP_T(cache_list) list = ENV_OP(ctx, cache_list);
  ENV_OP_T(cache_by_index) by_index = ENV_OP(ctx, cache_by_index);
  if (!list || (index && !by_index)) return -ENOSYS;
  const kc_label_selector *sel = NULL;
  if (seltext && *seltext) {
    int rc = selector_for(ctx, seltext, &sel);
    if (rc < 0) return rc;
  }
  kc_obj_vec *vec = calloc(1, sizeof *vec);
  if (!vec) return -ENOMEM;
  int rc;
  if (index) {
    rc = by_index(ENV_UD(ctx), api_version, kind, index, kc_str_c(value), vec);
    if (rc == -ENOENT) {
      api_error(ctx, "no field index %s on the cache of %s %s", index, api_version, kind);
      rc = -EINVAL;
    }
    if (rc >= 0 && (ns || sel)) { /* index results are few: filter in place */
      kc_str want = cstr_or_absent(ns);
      size_t j = 0;
      for (size_t i = 0; i < vec->n; i++) {
        kc_obj *o = vec->v[i];
        if ((ns && !kc_str_eq(kc_obj_namespace(o), want)) ||
            (sel && !kc_label_selector_matches_obj(sel, o)))
          kc_obj_unref(o);
        else
          vec->v[j++] = o;
      }
      vec->n = j;
    }
  } else {
    rc = list(ENV_UD(ctx), api_version, kind, cstr_or_absent(ns), sel, vec);
  }
  if (rc < 0) {
    kc_obj_vec_release(vec);
    free(vec);
    return rc;
  }
  if (vec->n > 1) qsort(vec->v, vec->n, sizeof vec->v[0], obj_cmp);
  *out = (kctrld_list *)vec;
  return 0;
}

static size_t svc_list_len(const kctrld_list *l) { return l ? ((const kc_obj_vec *)l)->n : 0; }

static const kctrld_object *svc_list_item(const kctrld_list *l, size_t i) {
  const kc_obj_vec *v = (const kc_obj_vec *)l;
  return v && i < v->n ? (const kctrld_object *)v->v[i] : NULL;
}

static void svc_list_release(kctrld_list *l) {
  if (!l) return;
  kc_obj_vec_release((kc_obj_vec *)l);
  free(l);
}

/* Objects are immutable; the refcount is the only thing that changes. */
static const kctrld_object *svc_object_ref(const kctrld_object *o) {
  if (o) kc_obj_ref((kc_obj *)(uintptr_t)o);
  return o;
}
static void svc_object_release(const kctrld_object *o) { kc_obj_unref((kc_obj *)(uintptr_t)o); }

/* ---- object fields ---- */

static const kc_str absent;
#define FIELD(o, f) ((o) ? S(kc_obj_field(O(o), f)) : S(absent))
static kctrld_str svc_object_namespace(const kctrld_object *o) {
  return FIELD(o, KC_OBJ_NAMESPACE);
}
static kctrld_str svc_object_name(const kctrld_object *o) {
  return FIELD(o, KC_OBJ_NAME);
}
static kctrld_str svc_object_uid(const kctrld_object *o) {
  return FIELD(o, KC_OBJ_UID);
}
static kctrld_str svc_object_resource_version(const kctrld_object *o) {
  return FIELD(o, KC_OBJ_RESOURCE_VERSION);
}
static kctrld_str svc_object_api_version(const kctrld_object *o) {
  return FIELD(o, KC_OBJ_API_VERSION);
}
static kctrld_str svc_object_kind(const kctrld_object *o) {
  return FIELD(o, KC_OBJ_KIND);
}
static kctrld_str svc_object_creation_timestamp(const kctrld_object *o) {
  return FIELD(o, KC_OBJ_CREATION_TIMESTAMP);
}
#undef FIELD
static int64_t svc_object_generation(const kctrld_object *o) { return o ? O(o)->generation : 0; }
static bool svc_object_deleting(const kctrld_object *o) { return o && O(o)->deleting; }
static kctrld_str svc_object_json(const kctrld_object *o) {
  if (!o) return S(absent);
  kc_str t = kc_obj_text(O(o)); /* a copy kept with the object when it has shared pieces */
  return t.ptr ? (kctrld_str){t.ptr, t.len} : S(absent);
}

static kctrld_str svc_object_label(const kctrld_object *o, const char *key) {
  if (!o || !key) return S(absent);
  return S(kc_obj_label(O(o), kc_str_c(key)));
}

static int svc_object_each_label(const kctrld_object *o,
                                 bool (*cb)(kctrld_str key, kctrld_str value, void *ud), void *ud) {
  if (!o || !cb) return 0;
  int n = 0;
  for (uint32_t i = 0; i < O(o)->nlabels; i++) {
    n++;
    if (!cb(S(kc_obj_label_key(O(o), i)), S(kc_obj_label_value(O(o), i)), ud)) break;
  }
  return n;
}

static kctrld_value V(const kc_json_value *v) { return (kctrld_value){(int)v->type, S(v->raw)}; }
static kc_json_value KV(const kctrld_value *v) {
  return (kc_json_value){(enum kc_json_type)v->type, {v->raw.ptr, v->raw.len}};
}

static int svc_object_get(const kctrld_object *o, const char *path, kctrld_value *out) {
  if (!o || !path || !out) return -EINVAL;
  kc_json_value v;
  int rc = kc_obj_get(O(o), path, &v);
  if (rc < 0) return rc;
  *out = V(&v);
  return 0;
}

struct each_ud {
  bool (*cb)(const kctrld_value *v, void *ud);
  void *ud;
};

static bool each_adapt(const kc_json_value *v, void *ud) {
  struct each_ud *e = ud;
  kctrld_value x = V(v);
  return e->cb(&x, e->ud);
}

static int svc_object_each(const kctrld_object *o, const char *path,
                           bool (*cb)(const kctrld_value *v, void *ud), void *ud) {
  if (!o || !path || !cb) return -EINVAL;
  struct each_ud e = {cb, ud};
  return kc_obj_get_each(O(o), path, each_adapt, &e);
}

static int get_typed(const kctrld_object *o, const char *path, kc_json_value *v) {
  if (!o || !path) return -EINVAL;
  int rc = kc_obj_get(O(o), path, v);
  if (rc < 0) return rc;
  return v->type == KC_JSON_ABSENT ? -ENOENT : 0;
}

static int svc_object_string(const kctrld_object *o, const char *path, char *buf, size_t cap) {
  kc_json_value v;
  int rc = get_typed(o, path, &v);
  return rc < 0 ? rc : kc_json_string(&v, buf, cap);
}

static int svc_object_int(const kctrld_object *o, const char *path, int64_t *out) {
  kc_json_value v;
  int rc = get_typed(o, path, &v);
  if (rc < 0) return rc;
  return v.type == KC_JSON_NUMBER ? kc_json_int64(&v, out) : -EINVAL;
}

static int svc_object_bool(const kctrld_object *o, const char *path, bool *out) {
  kc_json_value v;
  int rc = get_typed(o, path, &v);
  if (rc < 0) return rc;
  if (v.type != KC_JSON_BOOL) return -EINVAL;
  *out = kc_json_true(&v);
  return 0;
}

static int svc_value_get(const kctrld_value *v, const char *path, kctrld_value *out) {
  if (!v || !path || !out) return -EINVAL;
  if (v->type == KCTRLD_JSON_ABSENT) {
    *out = (kctrld_value){KCTRLD_JSON_ABSENT, {NULL, 0}};
    return 0;
  }
  kc_json_value r;
  int rc = kc_json_get((kc_str){v->raw.ptr, v->raw.len}, path, &r);
  if (rc < 0) return rc;
  *out = V(&r);
  return 0;
}

static int svc_value_string(const kctrld_value *v, char *buf, size_t cap) {
  if (!v) return -EINVAL;
  kc_json_value x = KV(v);
  return kc_json_string(&x, buf, cap);
}

static int svc_value_int(const kctrld_value *v, int64_t *out) {
  if (!v || v->type != KCTRLD_JSON_NUMBER) return -EINVAL;
  kc_json_value x = KV(v);
  return kc_json_int64(&x, out);
}

/* ---- API requests ---- */

/* Maps a failed response onto plugin.h's errno table. json_patch: a 422
 * answering a JSON patch whose "test" op failed is -ESTALE. */
static int map_status(const kc_status *st, bool json_patch) {
  if (kc_api_is_not_found(st)) return -ENOENT;
  if (kc_api_is_already_exists(st)) return -EEXIST;
  if (kc_api_is_conflict(st)) return -ESTALE;
  if (kc_api_is_invalid(st)) {
    /* A failed "test" op of a JSON patch is optimistic concurrency. */
    if (json_patch && strstr(st->message, "test failed")) return -ESTALE;
    return -EINVAL;
  }
  if (st->code == 400 || !strcmp(st->reason, "BadRequest")) return -EINVAL;
  if (kc_api_is_unauthorized(st) || kc_api_is_forbidden(st)) return -EACCES;
  if (st->code == 504 || !strcmp(st->reason, "Timeout")) return -ETIMEDOUT;
  if (kc_api_is_retryable(st)) return -EAGAIN;
  return -EPROTO;
}

/* Where a request goes: its URL path, and the resource plural and
 * subresource it names (for the messages of terminal failures). */
struct req_target {
  kc_buf path;
  char resource[128];
  const char *sub; /* NULL, or static storage ("status") */
};

/* Builds the URL path of an object (name may be NULL: the collection). */
static int object_path(kctrld_ctx *ctx, const char *api_version, const char *kind,
                       kc_str ns, kc_str name, const char *sub, struct req_target *t) {
  kc_buf *b = &t->path;
  kc_resource_ref res;
  if (!api_version || !*api_version || !kind || !*kind) {
    api_error(ctx, "apiVersion and kind are required");
    return -EINVAL;
  }
  ENV_OP_T(resource) resource = ENV_OP(ctx, resource);
  if (!resource) return -ENOSYS;
  if (resource(ENV_UD(ctx), api_version, kind, &res) < 0) {
    api_error(ctx, "the API server does not serve %s %s", api_version, kind);
    return -ENOTSUP;
  }
  if (res.namespaced && !ns.len) {
    api_error(ctx, "%s %s is namespaced: a namespace is required", api_version, kind);
    return -EINVAL;
  }
  if (name.ptr && !name.len) {
    api_error(ctx, "a name is required");
    return -EINVAL;
  }
  snprintf(t->resource, sizeof t->resource, "%s", res.resource);
  t->sub = sub;
  kc_url_resource(b, res.api_path, res.resource, res.namespaced ? ns : (kc_str){NULL, 0}, name, sub);
  return b->err;
}

/* Whether an answer is one no retry can fix (plugin.h "Terminal errors"),
 * and then why, naming the subresource or the field, into why:
 *  - 404 or 405 on a subresource, when the Status names no object (an
 *    object that is missing is named in details.name; a route the server
 *    does not have is not): the kind has no such subresource;
 *  - 422 Invalid (but not a failed JSON patch "test": e == -ESTALE) and 400
 *    BadRequest: the request itself is wrong; the first cause that names a
 *    field names it. */
static bool terminal_failure(const kc_status *st, int e, const char *method,
                             const struct req_target *t, char *why, size_t cap) {
  const char *res = t && t->resource[0] ? t->resource : "the resource";
  if (t && t->sub && (st->code == 404 || st->code == 405) && !st->details_name[0]) {
    snprintf(why, cap, "%s has no %s subresource (HTTP %d on %s)", res, t->sub, st->code, method);
    return true;
  }
  if (e != -EINVAL) return false;
  const char *sub = t && t->sub ? t->sub : NULL;
  /* Precisions: the server's texts are cut so that the names stay; a
   * reason longer than cap is cut (n is only looked at to say so). */
  int n;
  if (st->cause_field[0])
    n = snprintf(why, cap, "%s %s%s%s refused (HTTP %d %s): field %.100s: %.200s", method, res,
                 sub ? "/" : "", sub ? sub : "", st->code, st->reason[0] ? st->reason : "Invalid",
                 st->cause_field, st->cause_message[0] ? st->cause_message : st->message);
  else
    n = snprintf(why, cap, "%s %s%s%s refused (HTTP %d %s): %.300s", method, res, sub ? "/" : "",
                 sub ? sub : "", st->code, st->reason[0] ? st->reason : "BadRequest",
                 st->message[0] ? st->message : "no message");
  if (n < 0) snprintf(why, cap, "%s refused (HTTP %d)", method, st->code);
  return true;
}

enum { REQ_WRITE = 1, REQ_JSON_PATCH = 2, REQ_CREATED_IS_1 = 4 };

static int send_request(kctrld_ctx *ctx, const char *method, const struct req_target *t,
                        const char *path, const char *content_type, const char *body, size_t len,
                        int flags, const kctrld_object **out);

static bool dry_run(const kctrld_ctx *ctx) { return ctx && ctx->env && ctx->env->dry_run; }

/* Sends one request on the thread's worker (a write with dryRun=All in
 * dry-run mode); parses a 2xx body into *out when out is not NULL. Returns
 * 0 for a 2xx (1 for a 201 with REQ_CREATED_IS_1) or an error from the
 * table in plugin.h. */
static int do_request(kctrld_ctx *ctx, const char *method, const struct req_target *t,
                      const char *content_type, const char *body, size_t len, int flags,
                      const kctrld_object **out) {
  if (!(flags & REQ_WRITE) || !dry_run(ctx))
    return send_request(ctx, method, t, t->path.p, content_type, body, len, flags, out);
  /* Dry-run mode (dryrun.h): the server answers as if written, stores
   * nothing; what it accepted is logged as what the write would do. */
  kc_buf dry = {0};
  if (kc_dry_run_path(t->path.p, &dry) < 0) {
    free(dry.p);
    if (out) *out = NULL;
    api_error(ctx, "out of memory");
    return -ENOMEM;
  }
  int rc = send_request(ctx, method, t, dry.p, content_type, body, len, flags, out);
  if (rc >= 0) kc_dry_run_note(ctx->controller, method, t->path.p, content_type, body, len);
  free(dry.p);
  return rc;
}

/* do_request to path (t's, or t's with dryRun=All). */
static int send_request(kctrld_ctx *ctx, const char *method, const struct req_target *t,
                        const char *path, const char *content_type, const char *body, size_t len,
                        int flags, const kctrld_object **out) {
  if (out) *out = NULL;
  ENV_OP_T(request) request = ENV_OP(ctx, request);
  ENV_OP_T(may_write) may_write = ENV_OP(ctx, may_write);
  if (!request) return -ENOSYS;
  if ((flags & REQ_WRITE) && (!may_write || !may_write(ENV_UD(ctx)))) {
    api_error(ctx, "not the leader (or the key's shard range is not held): %s %s refused", method,
              path);
    return -EAGAIN;
  }
  kc_api_response r;
  int rc = request(ENV_UD(ctx), method, path, content_type, body, len,
                   KC_HOST_ENV_REQUEST_TIMEOUT_MS, &r);
  if (rc < 0) {
    api_error(ctx, "%s %s: %s", method, path, r.status.message[0] ? r.status.message : strerror(-rc));
    kc_warn(COMPONENT, "request failed method=%s path=%s error=\"%s\"", method, path, strerror(-rc));
    return rc == -ETIMEDOUT || rc == -ETIME ? -ETIMEDOUT : -EAGAIN;
  }
  if (r.code >= 200 && r.code < 300) {
    if (flags & REQ_WRITE) kc_hostapi_write_answered(ctx, method, path, &r);
    int ok = (flags & REQ_CREATED_IS_1) && r.code == 201 ? 1 : 0;
    if (!out) return ok;
    char err[160];
    kc_obj *o = kc_obj_parse(r.body, r.body_len, NULL, err, sizeof err);
    if (!o) {
      api_error(ctx, "%s %s: unreadable response: %s", method, path, err);
      return -EPROTO;
    }
    *out = (const kctrld_object *)o;
    return ok;
  }
  int e = map_status(&r.status, flags & REQ_JSON_PATCH);
  char why[sizeof ctx->terminal];
  if (ctx && terminal_failure(&r.status, e, method, t, why, sizeof why)) {
    /* The reason replaces the Status message: it says what the message
     * does not (which subresource, which field). */
    api_error(ctx, "%s", why);
    snprintf(ctx->terminal, sizeof ctx->terminal, "%s", why);
    kc_warn(COMPONENT, "%s %s failed code=%ld reason=%s: %s", method, path, r.code,
            r.status.reason, why);
    return t->sub && (r.code == 404 || r.code == 405) ? -ENOTSUP : e;
  }
  api_error(ctx, "%s", r.status.message[0] ? r.status.message : "request failed");
  if (e == -ENOENT || e == -ESTALE || e == -EEXIST)
    kc_debug(COMPONENT, "%s %s: code=%ld reason=%s", method, path, r.code, r.status.reason);
  else
    kc_warn(COMPONENT, "%s %s failed code=%ld reason=%s message=\"%s\"", method, path, r.code,
            r.status.reason, r.status.message);
  return e;
}

/* C copies of an object's identity (from a parsed body). */
static bool copy_slice(kc_str s, char *buf, size_t cap) {
  if (s.len >= cap) return false;
  if (s.len) memcpy(buf, s.ptr, s.len);
  buf[s.len] = '\0';
  return true;
}

/* The path of the object a JSON body describes (its apiVersion, kind,
 * namespace; its name unless for_create), plus sub. 0, or -EINVAL with
 * ctx's API error set for a body that does not parse or names nothing. */
static int body_path(kctrld_ctx *ctx, const char *json, size_t len, bool for_create,
                     const char *sub, struct req_target *path) {
  if (!json || !len) return -EINVAL;
  char err[160];
  kc_obj *o = kc_obj_parse(json, len, NULL, err, sizeof err);
  if (!o) {
    api_error(ctx, "bad object JSON: %s", err);
    return -EINVAL;
  }
  char av[256], kind[128];
  int rc = 0;
  if (!copy_slice(kc_obj_api_version(o), av, sizeof av) ||
      !copy_slice(kc_obj_kind(o), kind, sizeof kind)) {
    rc = -EINVAL;
  } else if (!for_create && !kc_obj_name(o).len) {
    api_error(ctx, "metadata.name is required");
    rc = -EINVAL;
  }
  if (rc == 0)
    rc = object_path(ctx, av, kind, kc_obj_namespace(o),
                     for_create ? (kc_str){NULL, 0} : kc_obj_name(o), sub, path);
  kc_obj_unref(o);
  return rc;
}

/* POST/PUT of a whole object given as JSON. */
static int write_object(kctrld_ctx *ctx, const char *method, const char *sub, const char *json,
                        size_t len, const kctrld_object **out) {
  if (out) *out = NULL;
  struct req_target t = {0};
  int rc = body_path(ctx, json, len, strcmp(method, "POST") == 0, sub, &t);
  if (rc == 0)
    rc = do_request(ctx, method, &t, "application/json", json, len, REQ_WRITE, out);
  free(t.path.p);
  return rc;
}

static int svc_api_create(kctrld_ctx *ctx, const char *json, size_t len, const kctrld_object **out) {
  return write_object(ctx, "POST", NULL, json, len, out);
}
static int svc_api_update(kctrld_ctx *ctx, const char *json, size_t len, const kctrld_object **out) {
  return write_object(ctx, "PUT", NULL, json, len, out);
}
static int svc_api_update_status(kctrld_ctx *ctx, const char *json, size_t len,
                                 const kctrld_object **out) {
  return write_object(ctx, "PUT", "status", json, len, out);
}

static int ref_path(kctrld_ctx *ctx, const kctrld_ref *ref, const char *sub, struct req_target *b) {
  if (!ref || !ref->name) return -EINVAL;
  return object_path(ctx, ref->api_version, ref->kind,
                     kc_str_c(ref->namespace_ ? ref->namespace_ : ""), kc_str_c(ref->name), sub, b);
}

static int svc_api_patch(kctrld_ctx *ctx, const kctrld_ref *ref, int type, const char *patch,
                         size_t len, bool status, const kctrld_object **out) {
  if (out) *out = NULL;
  const char *ct = type == KCTRLD_PATCH_MERGE       ? "application/merge-patch+json"
                   : type == KCTRLD_PATCH_JSON      ? "application/json-patch+json"
                   : type == KCTRLD_PATCH_STRATEGIC ? "application/strategic-merge-patch+json"
                                                    : NULL;
  if (!ct || !patch || !len) return -EINVAL;
  struct req_target t = {0};
  int rc = ref_path(ctx, ref, status ? "status" : NULL, &t);
  if (rc == 0)
    rc = do_request(ctx, "PATCH", &t, ct, patch, len,
                    REQ_WRITE | (type == KCTRLD_PATCH_JSON ? REQ_JSON_PATCH : 0), out);
  free(t.path.p);
  return rc;
}

/* Server-side apply: PATCH application/apply-patch+yaml (JSON is YAML) to
 * the object's own path, ?fieldManager=...[&force=true]. */
static int svc_api_apply(kctrld_ctx *ctx, const char *json, size_t len, const char *field_manager,
                         bool force, const kctrld_object **out) {
  if (out) *out = NULL;
  const char *fm = field_manager && *field_manager ? field_manager : ctx ? ctx->controller : "";
  struct req_target t = {0};
  int rc = body_path(ctx, json, len, false, NULL, &t);
  if (rc == 0 && !*fm) {
    api_error(ctx, "a field manager is required");
    rc = -EINVAL;
  }
  if (rc == 0) {
    char sep = '?';
    kc_url_param(&t.path, &sep, "fieldManager", fm);
    if (force) kc_url_param(&t.path, &sep, "force", "true");
    rc = t.path.err ? -ENOMEM
                    : do_request(ctx, "PATCH", &t, "application/apply-patch+yaml", json, len,
                                 REQ_WRITE | REQ_CREATED_IS_1, out);
  }
  free(t.path.p);
  return rc;
}

static int svc_api_delete(kctrld_ctx *ctx, const kctrld_ref *ref, const kctrld_delete_opts *opts) {
  struct req_target t = {0};
  kc_buf body = {0};
  int rc = ref_path(ctx, ref, NULL, &t);
  if (rc < 0) goto out;
  kc_buf_puts(&body, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"");
  if (opts) {
    size_t sz = opts->struct_size;
    const char *uid = sz >= offsetof(kctrld_delete_opts, precondition_uid) + sizeof(char *)
                          ? opts->precondition_uid
                          : NULL;
    const char *rv =
        sz >= offsetof(kctrld_delete_opts, precondition_resource_version) + sizeof(char *)
            ? opts->precondition_resource_version
            : NULL;
    int prop = sz >= offsetof(kctrld_delete_opts, propagation) + sizeof(int) ? opts->propagation : 0;
    int64_t grace = sz >= offsetof(kctrld_delete_opts, grace_period_seconds) + sizeof(int64_t)
                        ? opts->grace_period_seconds
                        : -1;
    if ((uid && *uid) || (rv && *rv)) {
      kc_buf_puts(&body, ",\"preconditions\":{");
      if (uid && *uid) {
        kc_buf_puts(&body, "\"uid\":");
        kc_buf_json(&body, uid, strlen(uid));
      }
      if (rv && *rv) {
        kc_buf_puts(&body, uid && *uid ? ",\"resourceVersion\":" : "\"resourceVersion\":");
        kc_buf_json(&body, rv, strlen(rv));
      }
      kc_buf_puts(&body, "}");
    }
    static const char *const policies[] = {NULL, "Background", "Foreground", "Orphan"};
    if (prop < 0 || prop > KCTRLD_PROPAGATION_ORPHAN) {
      rc = -EINVAL;
      goto out;
    }
    if (policies[prop]) kc_buf_printf(&body, ",\"propagationPolicy\":\"%s\"", policies[prop]);
    if (grace >= 0) kc_buf_printf(&body, ",\"gracePeriodSeconds\":%" PRId64, grace);
  }
  kc_buf_puts(&body, "}");
  if (body.err) {
    rc = -ENOMEM;
    goto out;
  }
  rc = do_request(ctx, "DELETE", &t, "application/json", body.p, body.len, REQ_WRITE, NULL);
out:
  free(t.path.p);
  free(body.p);
  return rc;
}

static int svc_api_get(kctrld_ctx *ctx, const kctrld_ref *ref, const kctrld_object **out) {
  if (!out) return -EINVAL;
  *out = NULL;
  struct req_target t = {0};
  int rc = ref_path(ctx, ref, NULL, &t);
  if (rc == 0) rc = do_request(ctx, "GET", &t, NULL, NULL, 0, 0, out);
  free(t.path.p);
  return rc;
}

/* kctrld_str flavour of copy_slice. */
static bool kslice_copy(kctrld_str s, char *buf, size_t cap) {
  return copy_slice((kc_str){s.ptr, s.len}, buf, cap);
}

/* ---- allocation, log, results, ctx ---- */

static void *host_alloc(size_t size) { return size ? malloc(size) : NULL; }
static void *host_realloc(void *p, size_t size) { return realloc(p, size); }
static void host_free(void *p) { free(p); }

__attribute__((format(printf, 2, 3))) static void host_log(int level, const char *fmt, ...) {
  if (level < KC_LOG_ERROR) level = KC_LOG_ERROR;
  if (level > KC_LOG_DEBUG) level = KC_LOG_DEBUG;
  if (level > (int)kc_log_get_level()) return;
  char msg[3072];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The key once: not again when the message names it (log.c then drops
   * the thread's reconcile key= in favour of the message's). */
  const kctrld_ctx *ctx = current_ctx;
  kc_log_field f[32];
  size_t text_len, nf = kc_log_split_fields(msg, strlen(msg), &text_len, f, 32);
  bool has_key = false;
  for (size_t i = 0; i < nf && !has_key; i++) has_key = f[i].name_len == 3 && !memcmp(f[i].name, "key", 3);
  if (ctx && ctx->key && !has_key)
    kc_log((enum kc_log_level)level, "plugin", "%s key=%s", msg, ctx->key);
  else
    kc_log((enum kc_log_level)level, "plugin", "%s", msg);
}

static int host_result_requeue_after(kctrld_ctx *ctx, uint64_t ms) {
  if (ctx && ctx->res) {
    ctx->res->after_ms = ms;
    ctx->after_set = true;
  }
  return KCTRLD_RESULT_REQUEUE_AFTER;
}

static int host_result_requeue_priority(kctrld_ctx *ctx, uint64_t ms, int priority) {
  if (ctx && ctx->res) {
    ctx->res->has_priority = true;
    ctx->res->priority = priority;
  }
  return host_result_requeue_after(ctx, ms);
}

__attribute__((format(printf, 2, 3))) static int host_result_error(kctrld_ctx *ctx, const char *fmt,
                                                                   ...) {
  if (ctx && ctx->res && fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->res->message, sizeof ctx->res->message, fmt, ap);
    va_end(ap);
  }
  return KCTRLD_RESULT_ERROR;
}

__attribute__((format(printf, 2, 3))) static int host_result_terminal(kctrld_ctx *ctx,
                                                                      const char *fmt, ...) {
  if (ctx && ctx->res && fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->res->message, sizeof ctx->res->message, fmt, ap);
    va_end(ap);
  }
  return KCTRLD_RESULT_TERMINAL;
}

static const char *host_ctx_controller(const kctrld_ctx *ctx) {
  return ctx && ctx->controller ? ctx->controller : "";
}

static const char *host_ctx_api_error(const kctrld_ctx *ctx) { return ctx ? ctx->api_error : ""; }

struct fin_scan {
  const char *name;
  size_t len;
  int index; /* of the match, -1 if none */
  int count;
};

static bool fin_visit(const kctrld_value *v, void *ud) {
  struct fin_scan *s = ud;
  /* Finalizers are qualified names: their JSON text needs no escapes. */
  if (v->type == KCTRLD_JSON_STRING && v->raw.len == s->len + 2 &&
      memcmp(v->raw.ptr + 1, s->name, s->len) == 0 && s->index < 0)
    s->index = s->count;
  s->count++;
  return true;
}

static int fin_scan(const kctrld_object *obj, const char *finalizer, struct fin_scan *s) {
  s->name = finalizer;
  s->len = strlen(finalizer);
  s->index = -1;
  s->count = 0;
  int rc = svc_object_each(obj, "metadata.finalizers[]", fin_visit, s);
  return rc < 0 ? rc : 0;
}

static bool host_object_has_finalizer(const kctrld_object *obj, const char *finalizer) {
  struct fin_scan s;
  if (!obj || !finalizer || fin_scan(obj, finalizer, &s) < 0) return false;
  return s.index >= 0;
}

/* A finalizer must be a qualified name, as the API server validates it
 * (apimachinery's ValidateFinalizerName: IsQualifiedName, kname.h); the
 * patches below also rely on that: such a name needs no JSON escapes. */
static bool finalizer_ok(const char *f) { return f && kc_name_is_qualified(f, strlen(f)); }

struct obj_ref_buf {
  char api_version[256], kind[128], ns[64], name[254];
  kctrld_ref ref;
};

static int ref_of(const kctrld_object *obj, struct obj_ref_buf *b) {
  if (!kslice_copy(svc_object_api_version(obj), b->api_version, sizeof b->api_version) ||
      !kslice_copy(svc_object_kind(obj), b->kind, sizeof b->kind) ||
      !kslice_copy(svc_object_namespace(obj), b->ns, sizeof b->ns) ||
      !kslice_copy(svc_object_name(obj), b->name, sizeof b->name) || !b->kind[0] || !b->name[0])
    return -EINVAL;
  b->ref = (kctrld_ref){b->api_version, b->kind, b->ns[0] ? b->ns : NULL, b->name};
  return 0;
}

static int host_finalizer_add(kctrld_ctx *ctx, const kctrld_object *obj, const char *finalizer) {
  if (!obj || !finalizer_ok(finalizer)) return -EINVAL;
  struct fin_scan s;
  int rc = fin_scan(obj, finalizer, &s);
  if (rc < 0) return rc;
  if (s.index >= 0) return 0;
  struct obj_ref_buf b;
  char rv[64];
  if (ref_of(obj, &b) < 0 || !kslice_copy(svc_object_resource_version(obj), rv, sizeof rv))
    return -EINVAL;
  char patch[768];
  int n;
  if (s.count == 0)
    n = snprintf(patch, sizeof patch,
                 "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"%s\"},"
                 "{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"%s\"]}]",
                 rv, finalizer);
  else
    n = snprintf(patch, sizeof patch,
                 "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"%s\"},"
                 "{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":\"%s\"}]",
                 rv, finalizer);
  if (n < 0 || (size_t)n >= sizeof patch) return -EINVAL;
  return svc_api_patch(ctx, &b.ref, KCTRLD_PATCH_JSON, patch, (size_t)n, false, NULL);
}

static int host_finalizer_remove(kctrld_ctx *ctx, const kctrld_object *obj, const char *finalizer) {
  if (!obj || !finalizer_ok(finalizer)) return -EINVAL;
  struct fin_scan s;
  int rc = fin_scan(obj, finalizer, &s);
  if (rc < 0) return rc;
  if (s.index < 0) return 0;
  struct obj_ref_buf b;
  if (ref_of(obj, &b) < 0) return -EINVAL;
  char patch[768];
  /* The test op makes it fail (-ESTALE) if the list moved meanwhile. */
  int n = snprintf(patch, sizeof patch,
                   "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/%d\",\"value\":\"%s\"},"
                   "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/%d\"}]",
                   s.index, finalizer, s.index);
  if (n < 0 || (size_t)n >= sizeof patch) return -EINVAL;
  return svc_api_patch(ctx, &b.ref, KCTRLD_PATCH_JSON, patch, (size_t)n, false, NULL);
}

__attribute__((format(printf, 5, 6))) static int host_event(kctrld_ctx *ctx,
                                                            const kctrld_object *regarding,
                                                            int type, const char *reason,
                                                            const char *fmt, ...) {
  if (!reason || !*reason || !regarding) return -EINVAL;
  char msg[1024] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
  }
  ENV_OP_T(event) event = ENV_OP(ctx, event);
  if (!event) return -ENOSYS;
  const kc_obj *o = O(regarding);
  if (!kc_obj_name(o).len) return -EINVAL;
  if (dry_run(ctx)) { /* an Event has no dry run worth sending: said, not recorded */
    kc_dry_run_count(ctx->controller, KC_DRY_RUN_EVENT);
    kc_info("dryrun", "dry run: would record Event %s %s about %.*s %.*s%s%.*s: %s",
            type == KCTRLD_EVENT_WARNING ? "Warning" : "Normal", reason, (int)kc_obj_kind(o).len,
            kc_obj_kind(o).ptr, (int)kc_obj_namespace(o).len, kc_obj_namespace(o).ptr,
            kc_obj_namespace(o).len ? "/" : "", (int)kc_obj_name(o).len, kc_obj_name(o).ptr, msg);
    return 0;
  }
  return event(ENV_UD(ctx), ctx->controller ? ctx->controller : "", o,
               type == KCTRLD_EVENT_WARNING ? KC_EVENT_TYPE_WARNING : KC_EVENT_TYPE_NORMAL, reason,
               msg);
}

static kc_expectations *exp_of(kctrld_ctx *ctx) { return ctx ? ctx->exp : NULL; }

/* Dry-run mode sets no expectations: no dry-run create or delete ever
 * shows up in the cache, so they would only hold the key back. */
static int host_expect_creations(kctrld_ctx *ctx, const char *key, int64_t n) {
  kc_expectations *e = exp_of(ctx);
  if (e && dry_run(ctx)) return 0;
  return e ? kc_expectations_set(e, key, n, 0, kc_clock_now_ns()) : -EINVAL;
}
static int host_expect_deletions(kctrld_ctx *ctx, const char *key, int64_t n) {
  kc_expectations *e = exp_of(ctx);
  if (e && dry_run(ctx)) return 0;
  return e ? kc_expectations_set(e, key, 0, n, kc_clock_now_ns()) : -EINVAL;
}
static void host_creation_observed(kctrld_ctx *ctx, const char *key) {
  kc_expectations *e = exp_of(ctx);
  if (e) kc_expectations_observe(e, key, 1, 0);
}
static void host_deletion_observed(kctrld_ctx *ctx, const char *key) {
  kc_expectations *e = exp_of(ctx);
  if (e) kc_expectations_observe(e, key, 0, 1);
}
static bool host_expectations_satisfied(kctrld_ctx *ctx, const char *key) {
  kc_expectations *e = exp_of(ctx);
  return e ? kc_expectations_satisfied(e, key, kc_clock_now_ns()) : true;
}
static void host_expectations_forget(kctrld_ctx *ctx, const char *key) {
  kc_expectations *e = exp_of(ctx);
  if (e) kc_expectations_forget(e, key);
}

/* ---- the table ---- */

static const struct kctrld_host_api host_api = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_host_api),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
#ifdef KCTRLD_VERSION
    .version = KCTRLD_VERSION,
#else
    .version = "unknown",
#endif
    .alloc = host_alloc,
    .realloc = host_realloc,
    .free = host_free,
    .log = host_log,
    .result_requeue_after = host_result_requeue_after,
    .result_error = host_result_error,
    .result_terminal = host_result_terminal,
    .ctx_controller = host_ctx_controller,
    .ctx_api_error = host_ctx_api_error,
    .object_has_finalizer = host_object_has_finalizer,
    .finalizer_add = host_finalizer_add,
    .finalizer_remove = host_finalizer_remove,
    .event = host_event,
    .expect_creations = host_expect_creations,
    .expect_deletions = host_expect_deletions,
    .creation_observed = host_creation_observed,
    .deletion_observed = host_deletion_observed,
    .expectations_satisfied = host_expectations_satisfied,
    .expectations_forget = host_expectations_forget,
    .ctx_finalizing = kc_desired_host_finalizing,
    .result_finalized = kc_desired_host_finalized,
    .desired_begin = kc_desired_host_begin,
    .desired_add_child = kc_desired_host_add_child,
    .desired_set_status = kc_desired_host_set_status,
    .desired_commit = kc_desired_host_commit,
#define KC_SVC(m) .m = svc_##m,
    KC_SVC(settings_string) KC_SVC(settings_int) KC_SVC(settings_bool)
    KC_SVC(settings_duration_ms) KC_SVC(settings_len) KC_SVC(cache_get) KC_SVC(cache_list)
    KC_SVC(list_len) KC_SVC(list_item) KC_SVC(list_release) KC_SVC(object_ref)
    KC_SVC(object_release) KC_SVC(object_namespace) KC_SVC(object_name) KC_SVC(object_uid)
    KC_SVC(object_resource_version) KC_SVC(object_api_version) KC_SVC(object_kind)
    KC_SVC(object_creation_timestamp) KC_SVC(object_generation) KC_SVC(object_deleting)
    KC_SVC(object_json) KC_SVC(object_label) KC_SVC(object_each_label) KC_SVC(object_get)
    KC_SVC(object_each) KC_SVC(object_string) KC_SVC(object_int) KC_SVC(object_bool)
    KC_SVC(value_get) KC_SVC(value_string) KC_SVC(value_int) KC_SVC(api_create)
    KC_SVC(api_update) KC_SVC(api_update_status) KC_SVC(api_patch) KC_SVC(api_delete)
    KC_SVC(api_get) KC_SVC(api_apply)
#undef KC_SVC
    .result_requeue_priority = host_result_requeue_priority,
};
const struct kctrld_host_api *kc_hostapi_table(void) { return &host_api; }
