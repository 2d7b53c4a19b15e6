/* SPDX-License-Identifier: Apache-2.0 */
/* controller: see controller.h. */
#include "runtime/controller.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "host/writeobserver.h"
#include "kube/kname.h"
#include "lease/sharding.h"
#include "lease/shardsel.h"

#define KEY_MAX 512

/* Why a key is being queued, and at which level (enum kc_wq_priority): the
 * reason and, when an informer delivery caused it, that delivery, for the
 * key's trace (keytrace.h). */
typedef struct cause {
  const char *why;   /* "own event", "owned child", "mapping", "resync", ... */
  const char *type;  /* "ADDED", "MODIFIED", "DELETED"; NULL: no informer delivery */
  const kc_obj *obj; /* the delivered object (type set) */
  kc_informer *inf;  /* the informer that delivered it (type set) */
  int level;
} cause;

typedef struct subscription {
  kc_controller *c;
  kc_informer *inf;
  int handler_id;
  enum { SUB_FOR, SUB_OWNS, SUB_WATCHES } role;
  unsigned predicates;
  const kc_watch_spec *watch; /* SUB_WATCHES */
  unsigned slot;              /* the informer's source in c->writes */
} subscription;

/* What the worker threads call: the plugin instance and, once sharded, the
 * sharding component whose fence guards each reconcile's writes. Freed by
 * the pool's release hook (possibly on an abandoned worker's thread). */
typedef struct reconcile_ctx {
  kc_plugin_instance *inst;
  kc_keytrace *trace; /* the controller's; freed with the context */
  _Atomic(kc_sharding *) sh; /* set before the first dispatch; retained */
} reconcile_ctx;

struct kc_controller {
  const kc_controller_spec *spec;
  kc_informer *for_informer;
  char for_group[256]; /* API group of the `for` kind ("" = core) */
  bool for_namespaced; /* the `for` kind's scope (discovery): keys "namespace/name", else "name" */
  kc_plugin_instance *inst;
  reconcile_ctx *rctx;
  bool inst_released_by_pool; /* the worker pool frees rctx (and inst) once no thread can use it */
  kc_sharding *sh;            /* NULL unless sharded (kc_controller_shard) */
  bool sh_started;
  bool sh_select;             /* set the for-informer's shardSelector to our ranges */
  char *sh_selector;          /* the selector we set last */
  uv_loop_t *loop;
  kc_workqueue *wq;
  kc_workers *pool;
  kc_timer timer; /* delayed keys; timer.uv.data = this */
  subscription *subs;
  size_t nsubs;
  bool active;
  bool paused; /* kctrld ctl pause: keys are queued but not handed to workers */
  bool stopping;
  kc_keytrace *trace; /* owned by rctx (workers record writes into it) */
  void (*stopped_cb)(void *ud);
  void *stopped_ud;
  kc_controller_stats stats;
  kc_reconcile_histogram reconcile_time;
  /* Read your own writes (NULL when off): the writes of reconciles, and
   * the informer of each of its sources (slots). */
  kc_ownwrites *writes;
  kc_informer **sources;
  size_t nsources;
};

/* The group of an apiVersion into buf ("" for the core group); false when
 * api_version is not one (kname.h) or the group does not fit. */
static bool group_of(const char *api_version, char *buf, size_t cap) {
  kc_str g, v;
  if (!kc_name_split_api_version(api_version, strlen(api_version), &g, &v) || g.len >= cap)
    return false;
  memcpy(buf, g.ptr, g.len);
  buf[g.len] = 0;
  return true;
}

static void on_timer(uv_timer_t *t);

static void arm_timer(kc_controller *c) {
  uint64_t when, timeout;
  bool due = kc_workqueue_next_ready(c->wq, &when);
  if (c->writes && kc_ownwrites_next_timeout(c->writes, &timeout) && (!due || timeout < when)) {
    when = timeout;
    due = true;
  }
  if (c->stopping || !due) {
    kc_timer_stop(&c->timer);
    return;
  }
  uint64_t now = kc_clock_now_ns();
  uint64_t ms = when > now ? (when - now + 999999) / 1000000 : 0;
  kc_timer_start(&c->timer, on_timer, ms, 0);
}

/* --- read your own writes ------------------------------------------------- */

/* Whether the informer of w's slot has observed w (ownwrites.h; the rules
 * are docs/design.md "Read your own writes"). Loop thread. */
static enum kc_ownwrite_state observed(void *ud, const kc_ownwrite *w) {
  kc_controller *c = ud;
  kc_informer *inf = c->sources[w->slot];
  kc_str ns = kc_str_c(w->ns), name = kc_str_c(w->name);
  if (w->tombstone) { /* observed once the cache no longer holds that object */
    kc_obj *o = kc_informer_get(inf, ns, name);
    bool gone = !o || (w->uid[0] && !kc_str_eq_c(kc_obj_uid(o), w->uid));
    kc_obj_unref(o);
    return gone ? KC_OWNWRITE_OBSERVED : KC_OWNWRITE_PENDING;
  }
  if (!w->rv) return KC_OWNWRITE_OBSERVED; /* nothing to compare */
  uint64_t seen;
  int rc = kc_informer_observed_rv(inf, ns, &seen);
  /* not numeric (the wait is off for this informer) or a namespace it
   * does not watch (it will never see the object) */
  if (rc < 0 || (rc == 1 && seen >= w->rv)) return KC_OWNWRITE_OBSERVED;
  /* The store is written before the handlers run, the observed
   * resourceVersion after them: the object itself may be there already. */
  kc_obj *o = kc_informer_get(inf, ns, name);
  bool seen_obj = false;
  if (o) {
    kc_str rv = kc_obj_resource_version(o);
    uint64_t v = 0;
    for (size_t i = 0; i < rv.len && rv.ptr[i] >= '0' && rv.ptr[i] <= '9' && v < UINT64_MAX / 20; i++)
      v = v * 10 + (uint64_t)(rv.ptr[i] - '0');
    seen_obj = v >= w->rv;
  }
  kc_obj_unref(o);
  return seen_obj ? KC_OWNWRITE_OBSERVED : KC_OWNWRITE_PENDING;
}

/* A parked key is ready: queued again (pump runs it). */
static void release_parked(void *ud, const char *key) {
  kc_controller *c = ud;
  int rc = kc_workqueue_add(c->wq, key);
  if (rc < 0) kc_error("controller", "%s: cannot queue %s: %s", c->spec->name, key, strerror(-rc));
}

static void recheck_parked(kc_controller *c) {
  if (c->writes) kc_ownwrites_recheck(c->writes, observed, c, release_parked, c);
}

/* Whether key may run now; if not it waits, out of the queue, until its
 * writes are observed or time out (recheck_parked queues it again). */
static bool may_run(kc_controller *c, const char *key) {
  if (!c->writes || kc_ownwrites_ready(c->writes, key, observed, c)) return true;
  int rc = kc_ownwrites_park(c->writes, key);
  if (rc == -ENOMEM) return true; /* cannot wait: run on what the cache holds */
  if (rc == 0)
    kc_debug("controller", "%s: %s waits until its writes are observed", c->spec->name, key);
  kc_workqueue_done(c->wq, key);
  return false;
}

/* Hands queued keys to idle workers; a key that cannot be handed over
 * (ENOMEM) goes back rate-limited. */
static void pump(kc_controller *c) {
  const char *key;
  while (c->active && !c->paused && !c->stopping && kc_workers_idle(c->pool) > 0 &&
         kc_workqueue_get(c->wq, &key) == KC_WQ_KEY) {
    if (!may_run(c, key)) continue;
    if (c->sh && !kc_sharding_admit(c->sh, key)) { /* not in an owned range: never run */
      kc_debug("controller", "%s: %s is not in an owned shard range; dropped", c->spec->name, key);
      kc_workqueue_forget(c->wq, key);
      kc_workqueue_done(c->wq, key);
      continue;
    }
    uint32_t attempt = kc_workqueue_num_requeues(c->wq, key) + 1;
    int rc = kc_workers_dispatch(c->pool, key, attempt);
    if (rc == 0) kc_keytrace_add(c->trace, key, KC_TRACE_DEQUEUED, "attempt %u", attempt);
    if (rc < 0) {
      if (c->sh) kc_sharding_end(c->sh, key, true);
      kc_error("controller", "%s: cannot hand %s to a worker: %s", c->spec->name, key,
               strerror(-rc));
      kc_workqueue_add_rate_limited(c->wq, key);
      kc_workqueue_done(c->wq, key);
      break;
    }
  }
  arm_timer(c);
}

static void on_timer(uv_timer_t *t) {
  kc_controller *c = t->data;
  kc_workqueue_tick(c->wq);
  recheck_parked(c);
  pump(c);
}

/* "namespace/name", or "name" without a namespace; false when it does not fit. */
static bool format_key(char key[KEY_MAX], kc_str ns, kc_str name) {
  int n;
  if (ns.len)
    n = snprintf(key, KEY_MAX, "%.*s/%.*s", (int)ns.len, ns.ptr, (int)name.len, name.ptr);
  else
    n = snprintf(key, KEY_MAX, "%.*s", (int)name.len, name.ptr);
  return n > 0 && n < KEY_MAX;
}

/* How an informer delivery came: "watch" (an event), "list", "relist",
 * "resync". */
static const char *delivery_of(const kc_informer *inf) {
  switch (kc_informer_cause(inf)) {
  case KC_INFORMER_EVENT: return "watch";
  case KC_INFORMER_LIST: return "list";
  case KC_INFORMER_RELIST: return "relist";
  case KC_INFORMER_RESYNC: return "resync";
  }
  return "?";
}

/* The queued stage of key's trace: why, at which level, and the informer
 * delivery (source, type, kind, object, resourceVersion, informer) when
 * there is one. */
static void trace_queued(kc_controller *c, const char *key, const cause *why, bool already) {
  const char *note = already ? "; already queued" : "";
  if (!why->type) {
    kc_keytrace_add(c->trace, key, KC_TRACE_QUEUED, "%s (%s)%s", why->why,
                    kc_wq_priority_name(why->level), note);
    return;
  }
  const kc_informer_spec *is = kc_informer_spec_get(why->inf);
  kc_str rv = kc_obj_resource_version(why->obj), ns = kc_obj_namespace(why->obj),
         name = kc_obj_name(why->obj);
  kc_keytrace_add(c->trace, key, KC_TRACE_QUEUED,
                  "%s (%s): %s %s %s %.*s%s%.*s rv=%.*s informer=%s%s", why->why,
                  kc_wq_priority_name(why->level), delivery_of(why->inf), why->type,
                  is ? is->kind : "?", (int)ns.len, ns.ptr, ns.len ? "/" : "", (int)name.len,
                  name.ptr, (int)rv.len, rv.ptr,
                  is && is->name ? is->name : kc_informer_resource(why->inf), note);
}

/* Queues key at why->level (enum kc_wq_priority). */
static void enqueue_key(kc_controller *c, const char *key, const cause *why) {
  if (c->sh && !kc_sharding_owns_key(c->sh, key)) return; /* another replica's */
  uint64_t before = kc_workqueue_metrics(c->wq)->deduped_total;
  int rc = kc_workqueue_add_at(c->wq, key, why->level);
  if (rc < 0) kc_error("controller", "%s: cannot queue %s: %s", c->spec->name, key, strerror(-rc));
  else trace_queued(c, key, why, kc_workqueue_metrics(c->wq)->deduped_total != before);
  pump(c);
}

static void enqueue(kc_controller *c, kc_str ns, kc_str name, const cause *why) {
  char key[KEY_MAX];
  if (format_key(key, ns, name)) enqueue_key(c, key, why);
}

/* The level of the keys an informer delivery maps to: a change the watch
 * saw is news (NORMAL); a list, relist or resync is catch-up (LOW), which
 * must not hold up news behind a backlog of unchanged objects. */
static int level_of(const kc_informer *inf) {
  return kc_informer_cause(inf) == KC_INFORMER_EVENT ? KC_WQ_NORMAL : KC_WQ_LOW;
}

/* The namespace of the `for` key that an owned or watched object names: the
 * object's own when the `for` kind is namespaced (an owner and its
 * dependents share a namespace), none when it is cluster-scoped (a
 * Namespace owning ConfigMaps: the key is the Namespace's name). */
static kc_str owner_namespace(const kc_controller *c, const kc_obj *obj) {
  return c->for_namespaced ? kc_obj_namespace(obj) : (kc_str){NULL, 0};
}

/* --- predicates ------------------------------------------------------------ */

static bool json_equal(const kc_obj *a, const kc_obj *b, const char *path) {
  kc_json_value va, vb;
  if (kc_obj_get(a, path, &va) < 0 || kc_obj_get(b, path, &vb) < 0) return true;
  if (va.type != vb.type) return false;
  /* absent on both sides: no text (raw.ptr NULL), equal */
  return va.raw.len == vb.raw.len && (!va.raw.len || memcmp(va.raw.ptr, vb.raw.ptr, va.raw.len) == 0);
}

static bool labels_equal(const kc_obj *a, const kc_obj *b) {
  if (a->nlabels != b->nlabels) return false;
  for (uint32_t i = 0; i < a->nlabels; i++)
    if (!kc_str_eq(kc_obj_label_key(a, i), kc_obj_label_key(b, i)) ||
        !kc_str_eq(kc_obj_label_value(a, i), kc_obj_label_value(b, i)))
      return false;
  return true;
}

/* True when an update passes: any selected predicate reports a change (OR,
 * like controller-runtime's predicate.Or). 0 = every update passes. A
 * resync (old == new) meets the predicates like any update, as in
 * controller-runtime: none sees a change, so predicates drop resyncs. */
static bool update_passes(unsigned preds, const kc_obj *old, const kc_obj *obj) {
  if (!preds) return true;
  if ((preds & KC_PRED_GENERATION_CHANGED) && old->generation != obj->generation) return true;
  if ((preds & KC_PRED_LABELS_CHANGED) && !labels_equal(old, obj)) return true;
  if ((preds & KC_PRED_ANNOTATIONS_CHANGED) && !json_equal(old, obj, "metadata.annotations"))
    return true;
  if ((preds & KC_PRED_RESOURCE_VERSION_CHANGED) &&
      !kc_str_eq(kc_obj_resource_version(old), kc_obj_resource_version(obj)))
    return true;
  if ((preds & KC_PRED_DELETION_STARTED) && !old->deleting && obj->deleting) return true;
  if ((preds & KC_PRED_OWNER_REFERENCES_CHANGED) &&
      !json_equal(old, obj, "metadata.ownerReferences"))
    return true;
  if ((preds & KC_PRED_FINALIZERS_CHANGED) && !json_equal(old, obj, "metadata.finalizers"))
    return true;
  return false;
}

/* --- mapping events to keys ------------------------------------------------ */

typedef struct owner_scan {
  kc_controller *c;
  const kc_obj *obj;
  int observe; /* 1: an owned object was added, -1: deleted, 0: updated */
  const cause *why;
  unsigned slot; /* the owned informer's source (read your own writes) */
} owner_scan;

static bool on_owner_ref(const kc_json_value *ref, void *ud) {
  owner_scan *s = ud;
  kc_json_value controller, kind, api_version, name;
  if (kc_json_get(ref->raw, "controller", &controller) < 0 || !kc_json_true(&controller))
    return true;
  if (kc_json_get(ref->raw, "kind", &kind) < 0 || kc_json_get(ref->raw, "apiVersion", &api_version) < 0 ||
      kc_json_get(ref->raw, "name", &name) < 0)
    return true;
  char buf[256], group[256];
  if (kc_json_string(&kind, buf, sizeof buf) < 0 || strcmp(buf, s->c->spec->for_.kind) != 0)
    return true;
  if (kc_json_string(&api_version, buf, sizeof buf) < 0) return true;
  if (!group_of(buf, group, sizeof group) || strcmp(group, s->c->for_group) != 0) return true;
  char owner[256], key[KEY_MAX];
  int n = kc_json_string(&name, owner, sizeof owner);
  if (n <= 0) return true;
  if (!format_key(key, owner_namespace(s->c, s->obj), (kc_str){owner, (size_t)n})) return false;
  /* Expectations of the owner (plugin.h): adds and deletes seen. Observed
   * before the key is queued: an idle worker may take it at once, and must
   * find the event counted. */
  if (s->observe)
    kc_expectations_observe(kc_plugin_instance_expectations(s->c->inst), key, s->observe > 0,
                            s->observe < 0);
  if (s->observe < 0 && s->c->writes) { /* the owner's write of it is moot */
    char ns[256], nm[256];
    kc_str ons = kc_obj_namespace(s->obj), onm = kc_obj_name(s->obj);
    if (ons.len < sizeof ns && onm.len < sizeof nm) {
      snprintf(ns, sizeof ns, "%.*s", (int)ons.len, ons.ptr ? ons.ptr : "");
      snprintf(nm, sizeof nm, "%.*s", (int)onm.len, onm.ptr);
      kc_ownwrites_drop_object(s->c->writes, key, s->slot, ns, nm);
    }
  }
  enqueue_key(s->c, key, s->why);
  return false; /* at most one controller reference */
}

typedef struct value_scan {
  kc_controller *c;
  const kc_obj *obj;
  const cause *why;
} value_scan;

static bool on_mapped_value(const kc_json_value *v, void *ud) {
  value_scan *s = ud;
  char buf[512];
  int n = kc_json_scalar_text(v, buf, sizeof buf);
  if (n > 0) enqueue(s->c, owner_namespace(s->c, s->obj), (kc_str){buf, (size_t)n}, s->why);
  return true;
}

/* "namespace/name", or "name" in obj's namespace; nothing for a text that
 * is no key (kname.h). For a cluster-scoped `for` kind the text is the
 * name: a "namespace/name" names no object of it. */
static void enqueue_name_or_nsname(kc_controller *c, const kc_obj *obj, const char *text, size_t n,
                                   const cause *why) {
  kc_str ns, name;
  if (!kc_name_split_key(text, n, &ns, &name)) return;
  if (!c->for_namespaced) {
    if (!ns.len) enqueue(c, ns, name, why);
    return;
  }
  enqueue(c, ns.len ? ns : kc_obj_namespace(obj), name, why);
}

/* type: the delivery's ("ADDED", "MODIFIED", "DELETED"). */
static void map_event(subscription *s, const kc_obj *obj, int observe, const char *type) {
  kc_controller *c = s->c;
  bool resync = kc_informer_cause(s->inf) == KC_INFORMER_RESYNC;
  cause why = {.why = resync ? "resync"
                    : s->role == SUB_FOR ? "own event"
                    : s->role == SUB_OWNS ? "owned child"
                                          : "mapping",
               .type = type, .obj = obj, .inf = s->inf, .level = level_of(s->inf)};
  switch (s->role) {
  case SUB_FOR:
    /* a deleted object's key is placed by its last known uid */
    if (observe < 0 && c->sh && kc_sharding_owns_obj(c->sh, obj) &&
        kc_sharding_note_deleted(c->sh, obj) < 0)
      kc_error("controller", "%s: cannot remember the deleted %.*s/%.*s: out of memory",
               c->spec->name, (int)kc_obj_namespace(obj).len, kc_obj_namespace(obj).ptr,
               (int)kc_obj_name(obj).len, kc_obj_name(obj).ptr);
    if (observe < 0 && c->writes) { /* deleted: its key's writes are moot */
      char key[KEY_MAX];
      if (format_key(key, kc_obj_namespace(obj), kc_obj_name(obj))) kc_ownwrites_drop_key(c->writes, key);
    }
    enqueue(c, kc_obj_namespace(obj), kc_obj_name(obj), &why);
    return;
  case SUB_OWNS: {
    owner_scan scan = {c, obj, observe, &why, s->slot};
    kc_obj_get_each(obj, "metadata.ownerReferences[]", on_owner_ref, &scan);
    return;
  }
  case SUB_WATCHES:
    break;
  }
  const kc_watch_spec *w = s->watch;
  switch (w->mapping) {
  case KC_MAP_LABEL: {
    kc_str v = kc_obj_label(obj, kc_str_c(w->key));
    if (v.ptr && v.len) enqueue(c, owner_namespace(c, obj), v, &why);
    return;
  }
  case KC_MAP_ANNOTATION: {
    char path[600], buf[512];
    snprintf(path, sizeof path, "metadata.annotations[\"%s\"]", w->key);
    kc_json_value v;
    if (kc_obj_get(obj, path, &v) == 0 && v.type == KC_JSON_STRING) {
      int n = kc_json_string(&v, buf, sizeof buf);
      if (n > 0) enqueue_name_or_nsname(c, obj, buf, (size_t)n, &why);
    }
    return;
  }
  case KC_MAP_FIELD: {
    value_scan scan = {c, obj, &why};
    kc_obj_get_each(obj, w->key, on_mapped_value, &scan);
    return;
  }
  case KC_MAP_INDEX: {
    /* For-objects whose index holds this object's name (e.g. Deployments
     * indexed by the ConfigMaps they reference), in its namespace when the
     * `for` kind has namespaces. */
    kc_obj_vec found = {0};
    if (kc_informer_by_index(c->for_informer, w->key, kc_obj_name(obj), &found) >= 0) {
      for (size_t i = 0; i < found.n; i++)
        if (!c->for_namespaced || kc_str_eq(kc_obj_namespace(found.v[i]), kc_obj_namespace(obj)))
          enqueue(c, kc_obj_namespace(found.v[i]), kc_obj_name(found.v[i]), &why);
    }
    kc_obj_vec_release(&found);
    return;
  }
  }
}

static void on_add(void *ud, kc_informer *inf, kc_obj *obj) { map_event(ud, obj, 1, "ADDED"); }

static void on_update(void *ud, kc_informer *inf, kc_obj *old, kc_obj *obj) {
  subscription *s = ud;
  if (!update_passes(s->predicates, old, obj)) return;
  map_event(s, obj, 0, "MODIFIED");
  /* An owned or watched object that changed its owner/mapping must also
   * wake the former one. */
  if (s->role != SUB_FOR && old != obj) map_event(s, old, 0, "MODIFIED");
}

static void on_delete(void *ud, kc_informer *inf, kc_obj *obj) {
  map_event(ud, obj, -1, "DELETED");
}

/* The informer observed more (or listed anew): parked keys may be ready. */
static void on_progress(void *ud, kc_informer *inf, bool relisted) {
  subscription *s = ud;
  kc_controller *c = s->c;
  if (!c->writes) return;
  if (relisted) kc_ownwrites_relisted(c->writes, s->slot);
  recheck_parked(c);
  pump(c);
}

/* --- results ---------------------------------------------------------------- */

static const char *result_name(enum kc_result_kind k) {
  switch (k) {
  case KC_RESULT_DONE: return "success";
  case KC_RESULT_REQUEUE: return "requeue";
  case KC_RESULT_REQUEUE_AFTER: return "requeue_after";
  case KC_RESULT_ERROR: return "error";
  case KC_RESULT_TERMINAL: return "terminal error";
  }
  return "unknown";
}

/* The result stage of the key's trace, and its last error. */
static void trace_result(kc_controller *c, const char *key, const kc_reconcile_result *res,
                         uint64_t duration_ns) {
  bool failed = res->kind == KC_RESULT_ERROR || res->kind == KC_RESULT_TERMINAL;
  double ms = (double)duration_ns / 1e6;
  if (failed)
    kc_keytrace_add(c->trace, key, KC_TRACE_RESULT, "%s after %.3f ms: %s", result_name(res->kind),
                    ms, res->message[0] ? res->message : "no message");
  else if (res->kind == KC_RESULT_REQUEUE_AFTER)
    kc_keytrace_add(c->trace, key, KC_TRACE_RESULT, "%s %llu ms%s after %.3f ms",
                    result_name(res->kind), (unsigned long long)res->after_ms,
                    res->held ? " (held, not run)" : "", ms);
  else
    kc_keytrace_add(c->trace, key, KC_TRACE_RESULT, "%s after %.3f ms", result_name(res->kind), ms);
  if (res->kind == KC_RESULT_REQUEUE_AFTER && res->held) return; /* not run: nothing learnt */
  int rc = kc_keytrace_set_error(c->trace, key,
                                 failed ? (res->message[0] ? res->message : "no message") : NULL);
  if (rc == -ENOMEM)
    kc_warn("controller", "%s: cannot keep the last error of %s: out of memory", c->spec->name, key);
}

/* The requeue stage: where the result left the key in the queue. */
static void trace_requeue(kc_controller *c, const char *key, const kc_reconcile_result *res) {
  switch (res->kind) {
  case KC_RESULT_DONE: return;
  case KC_RESULT_TERMINAL:
    kc_keytrace_add(c->trace, key, KC_TRACE_REQUEUE, "not requeued (terminal); runs at its next event");
    return;
  case KC_RESULT_REQUEUE_AFTER:
    kc_keytrace_add(c->trace, key, KC_TRACE_REQUEUE, "after %llu ms",
                    (unsigned long long)res->after_ms);
    return;
  default: break;
  }
  kc_wq_key_state st = {0};
  bool waiting = kc_workqueue_key_state(c->wq, key, &st) && st.waiting;
  if (waiting) {
    uint64_t when = st.ready_ns, now = kc_clock_now_ns();
    kc_keytrace_add(c->trace, key, KC_TRACE_REQUEUE, "rate-limited: backoff %.3f s (failures %u)",
                    when > now ? (double)(when - now) / 1e9 : 0.0, st.failures);
  } else {
    kc_keytrace_add(c->trace, key, KC_TRACE_REQUEUE, "rate-limited: queued (failures %u)",
                    st.failures);
  }
}

static void on_result(kc_workers *pool, const char *key, const kc_reconcile_result *res,
                      uint64_t duration_ns, void *ud) {
  kc_controller *c = ud;
  if (c->sh)
    kc_sharding_end(c->sh, key, res->kind != KC_RESULT_DONE && res->kind != KC_RESULT_TERMINAL);
  switch (res->kind) {
  case KC_RESULT_DONE: c->stats.success++; break;
  case KC_RESULT_REQUEUE: c->stats.requeue++; break;
  case KC_RESULT_REQUEUE_AFTER: c->stats.requeue_after++; break;
  case KC_RESULT_ERROR:
    c->stats.error++; /* logged by the worker: "Reconciler error" (workers.h) */
    break;
  case KC_RESULT_TERMINAL: /* an error too, as controller-runtime counts it */
    c->stats.error++;
    c->stats.terminal++;
    break;
  }
  c->stats.reconcile_count++;
  c->stats.reconcile_seconds_sum += (double)duration_ns / 1e9;
  kc_reconcile_histogram_observe(&c->reconcile_time, (double)duration_ns / 1e9);
  trace_result(c, key, res, duration_ns);
  kc_controller_apply_result(c->wq, key, res);
  trace_requeue(c, key, res);
  pump(c);
}

/* A public priority (plugin.h KCTRLD_PRIORITY_*) as a workqueue level. */
static int level_of_priority(int priority) {
  return priority < 0 ? KC_WQ_LOW : priority > 0 ? KC_WQ_HIGH : KC_WQ_NORMAL;
}

int kc_controller_apply_result(kc_workqueue *wq, const char *key, const kc_reconcile_result *res) {
  int level = res->has_priority ? level_of_priority(res->priority) : KC_WQ_KEEP;
  switch (res->kind) {
  case KC_RESULT_DONE: kc_workqueue_forget(wq, key); break;
  case KC_RESULT_REQUEUE_AFTER:
    if (!res->held) kc_workqueue_forget(wq, key); /* held: not run, so nothing to forget */
    kc_workqueue_add_after_at(wq, key, res->after_ms * 1000000u, level);
    break;
  case KC_RESULT_TERMINAL: break; /* until the key is queued again */
  default: kc_workqueue_add_rate_limited_at(wq, key, level); break; /* requeue, error, unknown */
  }
  return kc_workqueue_done(wq, key);
}

int kc_controller_requeue(kc_controller *c, const char *key, int level) {
  if (!key || !*key || level < 0 || level >= KC_WQ_LEVELS) return -EINVAL;
  if (c->stopping) return -ECANCELED;
  if (c->sh && !kc_sharding_owns_key(c->sh, key)) return -ESRCH;
  int rc = kc_workqueue_add_at(c->wq, key, level);
  if (rc == 0) {
    kc_info("controller", "%s: %s requeued at %s priority", c->spec->name, key,
            kc_wq_priority_name(level));
    kc_keytrace_add(c->trace, key, KC_TRACE_QUEUED, "requeue asked for (%s)",
                    kc_wq_priority_name(level));
    pump(c);
  }
  return rc;
}

static void on_idle(kc_workers *pool, void *ud) { pump(ud); }

static void on_slow(kc_workers *pool, const char *key, uint64_t running_ns, void *ud) {
  kc_controller *c = ud;
  c->stats.timeouts++;
  kc_warn("controller", "%s: reconcile %s still running after %.1f s (timeout %lld ms)",
          c->spec->name, key, (double)running_ns / 1e9, (long long)c->spec->reconcile_timeout_ms);
}

/* --- lifetime --------------------------------------------------------------- */

/* inf's source in c->sources (added when new); 0 when read your own
 * writes is off. */
static unsigned source_of(kc_controller *c, kc_informer *inf) {
  if (!c->sources) return 0;
  for (size_t i = 0; i < c->nsources; i++)
    if (c->sources[i] == inf) return (unsigned)i;
  c->sources[c->nsources] = inf;
  return (unsigned)c->nsources++;
}

static int subscribe(kc_controller *c, kc_informer *inf, int role, unsigned preds,
                     const kc_watch_spec *w) {
  subscription *s = &c->subs[c->nsubs];
  *s = (subscription){.c = c, .inf = inf, .role = role, .predicates = preds, .watch = w,
                      .slot = source_of(c, inf)};
  kc_informer_handler h = {on_add, on_update, on_delete, s, on_progress};
  int id = kc_informer_add_handler(inf, &h);
  if (id < 0) return id;
  s->handler_id = id;
  c->nsubs++;
  return 0;
}

/* The pool's release hook: runs when no worker can call into the plugin any
 * more, on a worker thread if a reconcile was abandoned at stop. */
static void release_instance(void *ud) {
  reconcile_ctx *rc = ud;
  kc_plugin_instance_free(rc->inst);
  kc_keytrace_free(rc->trace);
  kc_sharding *sh = atomic_load(&rc->sh);
  if (sh) kc_sharding_unref(sh);
  free(rc);
}

/* Worker thread: one reconcile, its writes fenced by the key's shard range. */
/* What a reconcile wrote, into its key's trace (worker thread). */
typedef struct write_trace {
  kc_keytrace *trace;
  const char *key;
} write_trace;

static void on_write(void *ud, const char *verb, const char *path, long code, const char *rv) {
  write_trace *w = ud;
  if (rv[0])
    kc_keytrace_add(w->trace, w->key, KC_TRACE_WRITE, "%s %s: %ld rv=%s", verb, path, code, rv);
  else if (code)
    kc_keytrace_add(w->trace, w->key, KC_TRACE_WRITE, "%s %s: %ld", verb, path, code);
  else
    kc_keytrace_add(w->trace, w->key, KC_TRACE_WRITE, "%s %s: no answer", verb, path);
}

static void reconcile_fenced(void *ud, const char *key, kc_reconcile_result *res) {
  reconcile_ctx *rc = ud;
  kc_sharding *sh = atomic_load(&rc->sh);
  write_trace w = {rc->trace, key};
  kc_write_observer_set(on_write, &w);
  if (sh) kc_sharding_fence_enter(sh, key);
  kc_plugin_reconcile(rc->inst, key, res);
  if (sh) kc_sharding_fence_leave();
  kc_write_observer_set(NULL, NULL);
}

int kc_controller_new(uv_loop_t *loop, const kc_controller_spec *spec, kc_informer *const *informers,
                      kc_plugin_instance *inst, kc_controller **out) {
  kc_controller *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  c->spec = spec;
  c->inst = inst;
  c->for_informer = informers[spec->for_.informer];
  group_of(spec->for_.api_version, c->for_group, sizeof c->for_group);
  c->for_namespaced = kc_informer_namespaced(c->for_informer);
  kc_ratelimit_config rl = {
      .base_delay_ns = (uint64_t)spec->rate_limit.base_delay_ms * 1000000ull,
      .max_delay_ns = (uint64_t)spec->rate_limit.max_delay_ms * 1000000ull,
      .qps = spec->rate_limit.qps,
      .burst = (uint32_t)spec->rate_limit.burst,
  };
  c->wq = kc_workqueue_new(spec->name, &rl);
  c->subs = calloc(1 + spec->nowns + spec->nwatches, sizeof *c->subs);
  c->rctx = calloc(1, sizeof *c->rctx);
  if (spec->read_your_own_writes)
    c->sources = calloc(1 + spec->nowns + spec->nwatches, sizeof *c->sources);
  c->trace = kc_keytrace_new(0);
  if (!c->wq || !c->subs || !c->rctx || !c->trace || (spec->read_your_own_writes && !c->sources) ||
      kc_timer_init(loop, &c->timer) != 0) {
    kc_keytrace_free(c->trace);
    kc_workqueue_free(c->wq);
    free(c->sources);
    free(c->subs);
    free(c->rctx);
    free(c);
    return -ENOMEM;
  }
  c->rctx->inst = inst;
  c->rctx->trace = c->trace;
  c->loop = loop;
  c->timer.uv.data = c;
  kc_workers_config wc = {
      .name = spec->name,
      .plugin = spec->plugin,
      /* As config.c produced them (its defaults and ranges): no second default here. */
      .nworkers = (unsigned)spec->workers,
      .timeout_ms = (uint64_t)spec->reconcile_timeout_ms,
      .reconcile = reconcile_fenced,
      .reconcile_ud = c->rctx,
      .release = release_instance,
      .on_result = on_result,
      .on_idle = on_idle,
      .on_timeout = on_slow,
      .ud = c,
  };
  int rc = kc_workers_start(loop, &wc, &c->pool);
  if (rc == 0) c->inst_released_by_pool = true;
  if (rc == 0) rc = subscribe(c, c->for_informer, SUB_FOR, spec->predicates, NULL);
  for (size_t i = 0; rc == 0 && i < spec->nowns; i++)
    rc = subscribe(c, informers[spec->owns[i].ref.informer], SUB_OWNS, spec->owns[i].predicates, NULL);
  for (size_t i = 0; rc == 0 && i < spec->nwatches; i++)
    rc = subscribe(c, informers[spec->watches[i].ref.informer], SUB_WATCHES,
                   spec->watches[i].predicates, &spec->watches[i]);
  if (rc == 0 && c->sources) {
    kc_ownwrites_source *src = calloc(c->nsources, sizeof *src);
    for (size_t i = 0; src && i < c->nsources; i++) {
      kc_resource_ref ref;
      kc_informer_resource_ref(c->sources[i], &ref);
      src[i] = (kc_ownwrites_source){ref.api_path, ref.resource, ref.namespaced};
    }
    c->writes = src ? kc_ownwrites_new(src, c->nsources, 0, 0) : NULL;
    free(src);
    if (c->writes)
      kc_plugin_instance_set_writes(inst, c->writes);
    else
      rc = -ENOMEM;
  }
  if (rc < 0) {
    kc_controller_stop(c, 0, NULL, NULL);
    return rc;
  }
  *out = c;
  return 0;
}

void kc_controller_rebind(kc_controller *c, const kc_controller_spec *spec) {
  c->spec = spec;
  size_t w = 0;
  for (size_t i = 0; i < c->nsubs; i++) {
    subscription *s = &c->subs[i];
    if (s->role == SUB_FOR) s->predicates = spec->predicates;
    if (s->role == SUB_WATCHES && w < spec->nwatches) {
      s->watch = &spec->watches[w];
      s->predicates = spec->watches[w].predicates;
      w++;
    }
  }
  size_t o = 0;
  for (size_t i = 0; i < c->nsubs; i++)
    if (c->subs[i].role == SUB_OWNS && o < spec->nowns) c->subs[i].predicates = spec->owns[o++].predicates;
}

int kc_controller_shard_start(kc_controller *c) {
  if (!c->sh || c->stopping) return -EINVAL;
  if (c->sh_started) return 0;
  int rc = kc_sharding_start(c->sh);
  c->sh_started = rc == 0;
  if (rc < 0) kc_error("controller", "%s: sharding: cannot start: %s", c->spec->name, strerror(-rc));
  return rc;
}

void kc_controller_set_active(kc_controller *c, bool active) {
  if (active && c->sh && !c->sh_started && !c->stopping) kc_controller_shard_start(c);
  if (c->active == active) return;
  c->active = active;
  kc_info("controller", "%s: %s", c->spec->name, active ? "started" : "paused");
  pump(c);
}

static void on_timer_closed(uv_handle_t *h) {
  kc_controller *c = h->data;
  void (*cb)(void *) = c->stopped_cb;
  void *ud = c->stopped_ud;
  free(c->sh_selector);
  kc_workqueue_free(c->wq);
  kc_ownwrites_unref(c->writes);
  free(c->sources);
  if (!c->inst_released_by_pool) {
    kc_plugin_instance_free(c->inst);
    kc_keytrace_free(c->trace);
    free(c->rctx);
  }
  free(c->subs);
  free(c);
  if (cb) cb(ud);
}

static void on_sharding_down(void *ud) {
  kc_controller *c = ud;
  kc_sharding_close(c->sh);
  c->sh = NULL;
  kc_timer_close(&c->timer, on_timer_closed);
}

static void on_pool_stopped(kc_workers *pool, unsigned abandoned, void *ud) {
  kc_controller *c = ud;
  if (abandoned)
    kc_warn("controller", "%s: %u reconciles did not finish in time and were abandoned",
            c->spec->name, abandoned);
  c->pool = NULL;
  /* The workers stopped (or were abandoned: the release fences them), so
   * the ranges go at once. */
  if (c->sh && c->sh_started) {
    kc_sharding_shutdown(c->sh, on_sharding_down, c);
    return;
  }
  kc_sharding_close(c->sh);
  c->sh = NULL;
  kc_timer_close(&c->timer, on_timer_closed);
}

void kc_controller_stop(kc_controller *c, uint64_t bound_ms, void (*done)(void *ud), void *ud) {
  if (c->stopping) return;
  c->stopping = true;
  c->stopped_cb = done;
  c->stopped_ud = ud;
  for (size_t i = 0; i < c->nsubs; i++)
    kc_informer_remove_handler(c->subs[i].inf, c->subs[i].handler_id);
  c->nsubs = 0;
  if (c->writes) kc_ownwrites_unpark_all(c->writes);
  kc_workqueue_shutdown(c->wq);
  kc_timer_stop(&c->timer);
  if (c->pool)
    kc_workers_stop(c->pool, bound_ms, on_pool_stopped, c);
  else
    on_pool_stopped(NULL, 0, c);
}

/* --- sharding ------------------------------------------------------------------ */

/* A range was acquired: every cached `for` object of it is queued once
 * (level-triggered, as at activation). */
static void on_range_acquired(unsigned index, void *ud) {
  kc_controller *c = ud;
  kc_obj_vec all = {0};
  if (kc_informer_list(c->for_informer, (kc_str){NULL, 0}, NULL, &all) < 0) {
    kc_error("controller", "%s: shard range %u: cannot list the cache", c->spec->name, index);
    return;
  }
  size_t queued = 0;
  for (size_t i = 0; i < all.n; i++) {
    if (kc_sharding_range_of(c->sh, kc_sharding_obj_hash(c->sh, all.v[i])) != index) continue;
    static const cause acquired = {.why = "shard range acquired", .level = KC_WQ_LOW}; /* catch-up */
    enqueue(c, kc_obj_namespace(all.v[i]), kc_obj_name(all.v[i]), &acquired);
    queued++;
  }
  kc_obj_vec_release(&all);
  kc_info("controller", "%s: shard range %u acquired: %zu cached keys queued", c->spec->name,
          index, queued);
}

/* Server-side selection: the for-informer caches only the held ranges. With
 * none held the last selector stays (the cache keeps what it has; keys are
 * filtered anyway). Where the server ignores the selector (support NONE)
 * the informer caches everything and the filter alone decides. */
static void on_ranges_changed(void *ud) {
  kc_controller *c = ud;
  if (!c->sh_select || c->stopping) return;
  unsigned n = (unsigned)c->spec->sharding.shards;
  kc_shard_range *r = calloc(n, sizeof *r);
  if (!r) return;
  size_t k = kc_sharding_held_ranges(c->sh, r, n);
  kc_buf b = {0};
  const char *field =
      c->spec->sharding.key == KC_SHARD_KEY_NAMESPACE ? "metadata.namespace" : "metadata.uid";
  if (k && kc_shard_selector_format(field, r, k, &b) == 0 && b.p &&
      (!c->sh_selector || strcmp(c->sh_selector, b.p) != 0)) {
    char *copy = strdup(b.p);
    int rc = copy ? kc_informer_set_shard_selector(c->for_informer, b.p) : -ENOMEM;
    if (rc < 0) {
      kc_error("controller", "%s: cannot set the shard selector: %s", c->spec->name, strerror(-rc));
      free(copy);
    } else {
      free(c->sh_selector);
      c->sh_selector = copy;
      kc_info("controller", "%s: shard selector of the %s informer: %zu ranges", c->spec->name,
              c->spec->for_.kind, k);
    }
  }
  kc_buf_free(&b);
  free(r);
}

int kc_controller_shard(kc_controller *c, kc_api *api, const char *identity, uint64_t drain_ms,
                        bool select_on_server) {
  if (c->sh || c->stopping) return -EALREADY;
  if (c->spec->sharding.shards <= 0) return -EINVAL;
  c->sh_select = select_on_server;
  kc_sharding_callbacks cb = {.on_acquired = on_range_acquired, .on_changed = on_ranges_changed};
  int rc = kc_sharding_new(c->loop, api, c->spec->name, &c->spec->sharding, identity,
                           c->for_informer, drain_ms, &cb, c, &c->sh);
  if (rc < 0) return rc;
  kc_sharding_retain(c->sh);
  atomic_store(&c->rctx->sh, c->sh);
  return 0;
}

kc_sharding *kc_controller_sharding(kc_controller *c) { return c->sh; }

const char *kc_controller_name(const kc_controller *c) { return c->spec->name; }
const kc_reconcile_histogram *kc_controller_reconcile_histogram(const kc_controller *c) {
  return &c->reconcile_time;
}
kc_workqueue *kc_controller_queue(kc_controller *c) { return c->wq; }

kc_ownwrites *kc_controller_own_writes(kc_controller *c) { return c->writes; }

bool kc_controller_own_writes_stats(const kc_controller *c, kc_ownwrites_stats *out) {
  if (!c->writes) return false;
  kc_ownwrites_stats_get(c->writes, out);
  return true;
}
const kc_controller_spec *kc_controller_spec_get(const kc_controller *c) { return c->spec; }

void kc_controller_stats_get(const kc_controller *c, kc_controller_stats *out) {
  *out = c->stats;
  out->workers = c->pool ? kc_workers_size(c->pool) : 0;
  out->active_workers = c->pool ? kc_workers_active(c->pool) : 0;
}

/* --- kctrld ctl ----------------------------------------------------------------- */

void kc_controller_set_paused(kc_controller *c, bool paused) {
  if (c->paused == paused) return;
  c->paused = paused;
  kc_info("controller", "%s: %s by kctrld ctl", c->spec->name, paused ? "paused" : "resumed");
  pump(c);
}

bool kc_controller_paused(const kc_controller *c) { return c->paused; }
bool kc_controller_active(const kc_controller *c) { return c->active; }

kc_keytrace *kc_controller_keytrace(kc_controller *c) { return c->trace; }
