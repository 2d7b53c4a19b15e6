/* SPDX-License-Identifier: Apache-2.0 */
/* hook_host: see hook_host.h. */
#include "hooks/hook_host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/hash.h"
#include "host/hostapi.h"
#include "json/jsonpath.h"
#include "kube/kname.h"

#define NS_MAX 64
#define NAME_MAX_LEN 254

/* "ns/name" or "name" (kname.h) into ns (empty: cluster-scoped) and name. */
static int split_key(const char *key, char ns[NS_MAX], char name[NAME_MAX_LEN]) {
  kc_str n, m;
  if (!kc_name_split_key(key, strlen(key), &n, &m) || n.len >= NS_MAX || m.len >= NAME_MAX_LEN)
    return -EINVAL;
  memcpy(ns, n.ptr, n.len);
  ns[n.len] = '\0';
  memcpy(name, m.ptr, m.len);
  name[m.len] = '\0';
  return 0;
}

struct owner_match {
  const struct kctrld_host_api *h;
  kctrld_str uid;          /* the owner's uid; absent when the owner is gone */
  const char *kind, *name; /* else: match kind and name */
  bool found;
};

static bool ref_matches(const kctrld_value *v, void *ud) {
  struct owner_match *m = ud;
  char buf[NAME_MAX_LEN];
  if (m->uid.ptr) {
    kctrld_value u;
    int n;
    if (m->h->value_get(v, "uid", &u) == 0 && (n = m->h->value_string(&u, buf, sizeof buf)) >= 0 &&
        (size_t)n == m->uid.len && memcmp(buf, m->uid.ptr, m->uid.len) == 0)
      m->found = true;
  } else {
    kctrld_value k, nm;
    char kbuf[128];
    if (m->h->value_get(v, "kind", &k) == 0 && m->h->value_string(&k, kbuf, sizeof kbuf) >= 0 &&
        strcmp(kbuf, m->kind) == 0 && m->h->value_get(v, "name", &nm) == 0 &&
        m->h->value_string(&nm, buf, sizeof buf) >= 0 && strcmp(buf, m->name) == 0)
      m->found = true;
  }
  return !m->found;
}

struct desired_children {
  const kc_obj **owned;
  size_t *kind;
  size_t n, cap, capk;
};

static int add_child(void *ud, size_t k, const kctrld_object *o) {
  struct desired_children *d = ud;
  if (KC_ARRAY_ROOM(d->owned, d->cap, d->n, 16) < 0 || KC_ARRAY_ROOM(d->kind, d->capk, d->n, 16) < 0)
    return -ENOMEM;
  d->owned[d->n] = kc_hostapi_obj(o);
  d->kind[d->n++] = k;
  return 0;
}

/* kc_hook_request_build of style desired: obj is the cached object. */
static int desired_request(const struct kctrld_host_api *h, kctrld_ctx *ctx,
                           const kc_hook_kinds *kinds, const char *key, uint64_t attempt,
                           const kctrld_object *obj, kc_buf *b, char *err, size_t errlen) {
  bool finalizing = h->ctx_finalizing(ctx);
  if (!obj || (h->object_deleting(obj) && !finalizing)) {
    /* Nothing to build for it: its children go with it (ownerReferences). */
    if (!obj) h->expectations_forget(ctx, key);
    return 1;
  }
  struct desired_children d = {0};
  char **names = kinds->nowns ? calloc(kinds->nowns, sizeof *names) : NULL;
  int rc = kinds->nowns && !names ? -ENOMEM : 0;
  for (size_t k = 0; rc == 0 && k < kinds->nowns; k++) {
    size_t n = strlen(kinds->owns[k].kind) + strlen(kinds->owns[k].api_version) + 2;
    if (!(names[k] = malloc(n))) rc = -ENOMEM;
    else snprintf(names[k], n, "%s.%s", kinds->owns[k].kind, kinds->owns[k].api_version);
  }
  if (rc == 0) rc = kc_desired_observed(h, ctx, obj, add_child, &d);
  if (rc == 0) {
    const kc_hook_request req = {
        .controller = h->ctx_controller(ctx),
        .key = key,
        .attempt = attempt,
        .object = kc_hostapi_obj(obj),
        .owned = d.owned,
        .nowned = d.n,
        .expectations_satisfied = h->expectations_satisfied(ctx, key),
        .finalizing = finalizing,
        .child_kinds = (const char *const *)names,
        .nchild_kinds = kinds->nowns,
        .owned_kind = d.kind,
        .children_by_namespace = h->object_namespace(obj).len == 0,
    };
    if (!names) { /* no owns: an empty `children` all the same */
      static const char *const none[1] = {NULL};
      kc_hook_request r2 = req;
      r2.child_kinds = none;
      kc_hook_request_write(b, &r2);
    } else {
      kc_hook_request_write(b, &req);
    }
    rc = b->err;
  }
  if (rc == -ENOTSUP || rc == -EINVAL)
    kc_errf(err, errlen, "children of %s %s: %s", kinds->for_.kind, key, strerror(-rc));
  for (size_t k = 0; names && k < kinds->nowns; k++) free(names[k]);
  free(names);
  free(d.owned);
  free(d.kind);
  return rc;
}

int kc_hook_request_build(const struct kctrld_host_api *h, kctrld_ctx *ctx,
                          const kc_hook_kinds *kinds, const char *key, uint64_t attempt, kc_buf *b,
                          kc_hook_input *in, char *err, size_t errlen) {
  in->object = NULL;
  char ns[NS_MAX], name[NAME_MAX_LEN];
  if (split_key(key, ns, name) != 0) {
    kc_errf(err, errlen, "malformed key \"%s\"", key);
    return -EINVAL;
  }
  const kctrld_ref ref = {kinds->for_.api_version, kinds->for_.kind, ns, name};
  const kctrld_object *obj = NULL;
  int rc = h->cache_get(ctx, &ref, &obj);
  if (rc == -ENOENT) {
    obj = NULL;
  } else if (rc < 0) {
    kc_errf(err, errlen, "cache of %s %s: %s", ref.api_version, ref.kind, strerror(-rc));
    return rc;
  }
  if (kinds->desired) {
    rc = desired_request(h, ctx, kinds, key, attempt, obj, b, err, errlen);
    if (rc == 0) in->object = obj;
    else if (obj) h->object_release(obj);
    return rc;
  }
  kctrld_list **lists = kinds->nowns ? calloc(kinds->nowns, sizeof *lists) : NULL;
  const kc_obj **owned = NULL;
  size_t nowned = 0, cap = 0;
  if (kinds->nowns && !lists) {
    rc = -ENOMEM;
    goto out;
  }
  struct owner_match m = {.h = h, .kind = kinds->for_.kind, .name = name};
  if (obj) {
    kctrld_str uid = h->object_uid(obj);
    m.uid = uid.ptr ? uid : (kctrld_str){"", 0};
  }
  for (size_t k = 0; k < kinds->nowns; k++) {
    const kctrld_list_opts opts = {.struct_size = sizeof opts, .namespace_ = *ns ? ns : NULL};
    rc = h->cache_list(ctx, kinds->owns[k].api_version, kinds->owns[k].kind, &opts, &lists[k]);
    if (rc < 0) {
      kc_errf(err, errlen, "cache of %s %s: %s", kinds->owns[k].api_version, kinds->owns[k].kind,
              strerror(-rc));
      goto out;
    }
    for (size_t i = 0; i < h->list_len(lists[k]); i++) {
      const kctrld_object *o = h->list_item(lists[k], i);
      m.found = false;
      if (h->object_each(o, "metadata.ownerReferences[]", ref_matches, &m) < 0 || !m.found)
        continue;
      if (KC_ARRAY_ROOM(owned, cap, nowned, 16) < 0) {
        rc = -ENOMEM;
        goto out;
      }
      /* The cached object itself (the daemon's table hands out kc_obj):
       * its text goes into the request span by span, where object_json
       * would keep a contiguous copy with every object ever sent. */
      owned[nowned++] = kc_hostapi_obj(o);
    }
  }

  const kc_hook_request req = {
      .controller = h->ctx_controller(ctx),
      .key = key,
      .attempt = attempt,
      .object = obj ? kc_hostapi_obj(obj) : NULL,
      .owned = owned,
      .nowned = nowned,
      .expectations_satisfied = h->expectations_satisfied(ctx, key),
      .finalizing = h->ctx_finalizing(ctx),
  };
  kc_hook_request_write(b, &req);
  rc = b->err;
out:
  if (rc == -ENOMEM)
    kc_errf(err, errlen, "out of memory building the request");
  else if (rc < 0 && rc != -ENOTSUP && !(err && *err))
    kc_errf(err, errlen, "%s", strerror(-rc));
  for (size_t k = 0; lists && k < kinds->nowns; k++)
    if (lists[k]) h->list_release(lists[k]);
  free(lists);
  free(owned);
  if (rc == 0)
    in->object = obj;
  else if (obj)
    h->object_release(obj);
  return rc;
}

void kc_hook_input_release(const struct kctrld_host_api *h, kc_hook_input *in) {
  if (in->object) h->object_release(in->object);
  in->object = NULL;
}

/* ---- actions ------------------------------------------------------------------ */

/* A string member of an action's raw object ("kind", "metadata.name"), or "". */
static void member_text(kc_str obj, const char *path, char *buf, size_t cap) {
  kc_json_value v;
  buf[0] = '\0';
  if (kc_json_get(obj, path, &v) != 0 || kc_json_string(&v, buf, cap) < 0) buf[0] = '\0';
}

static bool is_owned_kind(const kc_hook_kinds *kinds, const char *api_version, const char *kind) {
  for (size_t i = 0; i < kinds->nowns; i++)
    if (strcmp(kinds->owns[i].api_version, api_version) == 0 &&
        strcmp(kinds->owns[i].kind, kind) == 0)
      return true;
  return false;
}

/* What an action is about, for messages: "v1 ConfigMap ns/name". */
static void describe(const kc_hook_action *a, char *buf, size_t cap) {
  if (a->object.ptr) {
    char av[128], kind[64], ns[NS_MAX], name[NAME_MAX_LEN];
    member_text(a->object, "apiVersion", av, sizeof av);
    member_text(a->object, "kind", kind, sizeof kind);
    member_text(a->object, "metadata.namespace", ns, sizeof ns);
    member_text(a->object, "metadata.name", name, sizeof name);
    if (!*name) member_text(a->object, "metadata.generateName", name, sizeof name);
    snprintf(buf, cap, "%s %s %s%s%s", av, kind, ns, *ns ? "/" : "", name);
  } else if (a->ref.kind) {
    snprintf(buf, cap, "%s %s %s%s%s", a->ref.api_version, a->ref.kind,
             a->ref.namespace_ ? a->ref.namespace_ : "", a->ref.namespace_ ? "/" : "", a->ref.name);
  } else {
    snprintf(buf, cap, "(the reconciled object)");
  }
}

_Static_assert((int)KC_HOOK_PATCH_STRATEGIC == (int)KCTRLD_PATCH_STRATEGIC, "patch types");

/* Whether action a creates (+1) or deletes (-1) an object of an owned kind;
 * an apply creates when its object is not in the cache. */
static int owned_effect(const struct kctrld_host_api *h, kctrld_ctx *ctx, const kc_hook_kinds *kinds,
                        const kc_hook_action *a) {
  if (a->type == KC_HOOK_CREATE || a->type == KC_HOOK_APPLY) {
    char av[128], kind[64];
    member_text(a->object, "apiVersion", av, sizeof av);
    member_text(a->object, "kind", kind, sizeof kind);
    if (!is_owned_kind(kinds, av, kind)) return 0;
    if (a->type == KC_HOOK_CREATE) return 1;
    char ns[NS_MAX], name[NAME_MAX_LEN];
    member_text(a->object, "metadata.namespace", ns, sizeof ns);
    member_text(a->object, "metadata.name", name, sizeof name);
    const kctrld_ref ref = {av, kind, *ns ? ns : NULL, name};
    const kctrld_object *o = NULL;
    if (h->cache_get(ctx, &ref, &o) == 0) {
      h->object_release(o);
      return 0;
    }
    return 1;
  }
  if (a->type == KC_HOOK_DELETE)
    return is_owned_kind(kinds, a->ref.api_version, a->ref.kind) ? -1 : 0;
  return 0;
}

static int do_event(const struct kctrld_host_api *h, kctrld_ctx *ctx, const kc_hook_input *in,
                    const kc_hook_action *a) {
  const kctrld_object *about = in->object;
  const kctrld_object *looked = NULL;
  if (a->ref.name) {
    const kctrld_ref ref = {a->ref.api_version, a->ref.kind, a->ref.namespace_, a->ref.name};
    if (h->cache_get(ctx, &ref, &looked) != 0) looked = NULL;
    about = looked;
  }
  if (!about) {
    /* Events are best effort (plugin.h): one about nothing is dropped. */
    h->log(KCTRLD_LOG_DEBUG, "event %s dropped: its object is not in the cache", a->reason);
    return 0;
  }
  int rc = h->event(ctx, about, a->warning ? KCTRLD_EVENT_WARNING : KCTRLD_EVENT_NORMAL, a->reason,
                    "%s", a->message);
  if (looked) h->object_release(looked);
  return rc;
}

static int do_action(const struct kctrld_host_api *h, kctrld_ctx *ctx, const kc_hook_input *in,
                     const kc_hook_action *a, const char **unsupported) {
  const kctrld_ref ref = {a->ref.api_version, a->ref.kind, a->ref.namespace_, a->ref.name};
  switch (a->type) {
  case KC_HOOK_CREATE: return h->api_create(ctx, a->object.ptr, a->object.len, NULL);
  case KC_HOOK_UPDATE: return h->api_update(ctx, a->object.ptr, a->object.len, NULL);
  case KC_HOOK_UPDATE_STATUS: return h->api_update_status(ctx, a->object.ptr, a->object.len, NULL);
  case KC_HOOK_PATCH:
    if (a->patch_type == KC_HOOK_PATCH_STRATEGIC && !KCTRLD_HOST_HAS(h, api_apply)) {
      *unsupported = "strategic merge patch needs a host API 1.2";
      return -ENOTSUP;
    }
    return h->api_patch(ctx, &ref, a->patch_type, a->patch.ptr, a->patch.len, a->status, NULL);
  case KC_HOOK_DELETE: {
    const kctrld_delete_opts opts = {
        .struct_size = sizeof opts,
        .precondition_uid = a->precondition_uid,
        .precondition_resource_version = a->precondition_resource_version,
        .propagation = a->propagation,
        .grace_period_seconds = a->grace_period_seconds,
    };
    return h->api_delete(ctx, &ref, &opts);
  }
  case KC_HOOK_EVENT: return do_event(h, ctx, in, a);
  case KC_HOOK_APPLY:
    if (!KCTRLD_HOST_HAS(h, api_apply)) {
      *unsupported = "server-side apply needs a host API 1.2";
      return -ENOTSUP;
    }
    /* 1: created, 0: updated (kc_hook_perform observes the expectation) */
    return h->api_apply(ctx, a->object.ptr, a->object.len, a->field_manager, a->force, NULL);
  }
  *unsupported = "unknown action";
  return -EINVAL;
}

/* kc_hook_perform after the expectations: the actions in order, then the
 * result. eff[i]: action i's owned effect (+1 create, -1 delete). */
static int run_actions(const struct kctrld_host_api *h, kctrld_ctx *ctx, const char *key,
                       const kc_hook_input *in, const kc_hook_response *r, const signed char *eff,
                       int64_t creates, int64_t deletes) {
  /* Expectations first (kube's ExpectCreations before the creates): the
   * informer may see an object before its create call returns. */
  if (creates)
    h->expect_creations(ctx, key, creates);
  else if (deletes)
    h->expect_deletions(ctx, key, deletes);
  for (size_t i = 0; i < r->nactions; i++) {
    const kc_hook_action *a = &r->actions[i];
    const char *unsupported = NULL;
    int rc = do_action(h, ctx, in, a, &unsupported);
    if (rc == -ENOENT && a->type == KC_HOOK_DELETE) {
      /* Already gone: done, but no delete event will observe it. */
      if (eff[i] < 0 && !creates) h->deletion_observed(ctx, key);
      continue;
    }
    /* An apply that found the object (the cache was behind) created nothing. */
    if (rc == 0 && a->type == KC_HOOK_APPLY && eff[i] > 0) h->creation_observed(ctx, key);
    if (rc >= 0) continue;
    /* This action and the ones not run will never be observed. */
    for (size_t j = i; j < r->nactions; j++) {
      int ej = eff[j];
      if (ej > 0 && creates) h->creation_observed(ctx, key);
      if (ej < 0 && !creates) h->deletion_observed(ctx, key);
    }
    char what[512];
    describe(a, what, sizeof what);
    if (rc == -ESTALE || rc == -EEXIST) {
      h->log(KCTRLD_LOG_INFO, "actions[%zu] %s %s: conflict (%s); requeue", i,
             kc_hook_action_name(a->type), what, h->ctx_api_error(ctx));
      return KCTRLD_RESULT_REQUEUE;
    }
    const char *api = h->ctx_api_error(ctx);
    return h->result_error(ctx, "actions[%zu] %s %s: %s%s%s", i, kc_hook_action_name(a->type), what,
                           unsupported ? unsupported : strerror(-rc),
                           !unsupported && api && *api ? ": " : "", !unsupported && api ? api : "");
  }
  switch (r->result) {
  case KC_HOOK_DONE: return KCTRLD_RESULT_DONE;
  case KC_HOOK_REQUEUE: return KCTRLD_RESULT_REQUEUE;
  case KC_HOOK_REQUEUE_AFTER:
    return r->has_priority ? h->result_requeue_priority(ctx, r->after_ms, r->priority)
                           : h->result_requeue_after(ctx, r->after_ms);
  case KC_HOOK_ERROR: break;
  case KC_HOOK_TERMINAL:
    return h->result_terminal(ctx, "hook: %s", *r->message ? r->message : "terminal error (no message)");
  }
  return h->result_error(ctx, "hook: %s", *r->message ? r->message : "error (no message)");
}

/* kc_hook_perform of style desired. */
static int perform_desired(const struct kctrld_host_api *h, kctrld_ctx *ctx,
                           const kc_hook_response *r) {
  if (r->result == KC_HOOK_ERROR)
    return h->result_error(ctx, "hook: %s", *r->message ? r->message : "error (no message)");
  if (r->result == KC_HOOK_TERMINAL)
    return h->result_terminal(ctx, "hook: %s",
                              *r->message ? r->message : "terminal error (no message)");
  int rc = h->desired_begin(ctx);
  for (size_t i = 0; rc == 0 && i < r->nchildren; i++)
    rc = h->desired_add_child(ctx, r->children[i].ptr, r->children[i].len);
  if (rc == 0 && r->status.ptr) rc = h->desired_set_status(ctx, r->status.ptr, r->status.len);
  if (rc < 0) return h->result_error(ctx, "hook: desired state: %s", strerror(-rc));
  int res = h->desired_commit(ctx);
  if (res == KCTRLD_RESULT_DONE && r->result == KC_HOOK_REQUEUE_AFTER)
    return h->result_requeue_after(ctx, r->after_ms);
  return res;
}

int kc_hook_perform(const struct kctrld_host_api *h, kctrld_ctx *ctx, const kc_hook_kinds *kinds,
                    const char *key, const kc_hook_input *in, const kc_hook_response *r) {
  if (kinds->desired != r->desired)
    return h->result_error(ctx, kinds->desired
                                    ? "hook response: `children` required (hook style: desired)"
                                    : "hook response: `children` given, but the hook's style is "
                                      "actions (set hook.style: desired)");
  if (r->finalized) h->result_finalized(ctx);
  if (kinds->desired) return perform_desired(h, ctx, r);
  int64_t creates = 0, deletes = 0;
  /* Effects are computed once: an apply's depends on the cache. */
  signed char *eff = r->nactions ? calloc(r->nactions, 1) : NULL;
  if (r->nactions && !eff) return h->result_error(ctx, "hook: out of memory");
  for (size_t i = 0; i < r->nactions; i++) {
    int e = owned_effect(h, ctx, kinds, &r->actions[i]);
    eff[i] = (signed char)e;
    creates += e > 0;
    deletes += e < 0;
  }
  int ret = run_actions(h, ctx, key, in, r, eff, creates, deletes);
  free(eff);
  return ret;
}

/* ---- shared by the transports ---------------------------------------------- */

static void kc_hook_kinds_free(kc_hook_kinds *k) {
  for (size_t i = 0; k->owns && i < k->nowns; i++) {
    free((char *)k->owns[i].api_version);
    free((char *)k->owns[i].kind);
  }
  free((void *)k->owns);
  free((char *)k->for_.api_version);
  free((char *)k->for_.kind);
  memset(k, 0, sizeof *k);
}

/* Copies spec's `for` and `owns` kinds into *out (owned strings). 0 or
 * -ENOMEM (then *out is freed already). */
static int kc_hook_kinds_copy(const kc_controller_spec *spec, kc_hook_kinds *out) {
  memset(out, 0, sizeof *out);
  out->desired = spec->hook && spec->hook->style == KC_HOOK_STYLE_DESIRED;
  out->for_.api_version = strdup(spec->for_.api_version);
  out->for_.kind = strdup(spec->for_.kind);
  bool ok = out->for_.api_version && out->for_.kind;
  if (ok && spec->nowns) {
    kc_hook_kind *owns = calloc(spec->nowns, sizeof *owns);
    out->owns = owns;
    ok = owns != NULL;
    for (size_t i = 0; ok && i < spec->nowns; i++) {
      out->nowns = i + 1;
      owns[i].api_version = strdup(spec->owns[i].ref.api_version);
      owns[i].kind = strdup(spec->owns[i].ref.kind);
      ok = owns[i].api_version && owns[i].kind;
    }
  }
  if (ok) return 0;
  kc_hook_kinds_free(out);
  return -ENOMEM;
}

int kc_hook_result_held(const struct kctrld_host_api *host, kctrld_ctx *ctx, uint64_t hold_ns,
                        const char *why) {
  uint64_t ms = (hold_ns + 999999) / 1000000;
  host->log(KCTRLD_LOG_DEBUG, "not run: the program backs off for %llums (last failure: %s)",
            (unsigned long long)ms, why);
  int rc = host->result_requeue_after(ctx, ms);
  if (ctx && ctx->res) ctx->res->held = true;
  return rc;
}

struct kc_hook_attempt {
  struct kc_hook_attempt *next;
  uint64_t n;
  char key[];
};

static size_t bucket_of(const char *key) {
  return (size_t)(kc_hash_str(key) % KC_HOOK_ATTEMPT_BUCKETS);
}

/* 0 or -ENOMEM. */
static int kc_hook_attempts_init(kc_hook_attempts *a) {
  memset(a, 0, sizeof *a);
  return pthread_mutex_init(&a->mu, NULL) == 0 ? 0 : -ENOMEM;
}

static void kc_hook_attempts_free(kc_hook_attempts *a) {
  for (size_t b = 0; b < KC_HOOK_ATTEMPT_BUCKETS; b++) {
    while (a->b[b]) {
      struct kc_hook_attempt *x = a->b[b];
      a->b[b] = x->next;
      free(x);
    }
  }
  pthread_mutex_destroy(&a->mu);
}

uint64_t kc_hook_attempt_of(kc_hook_attempts *a, const char *key) {
  uint64_t n = 0;
  pthread_mutex_lock(&a->mu);
  for (struct kc_hook_attempt *x = a->b[bucket_of(key)]; x; x = x->next)
    if (strcmp(x->key, key) == 0) n = x->n;
  pthread_mutex_unlock(&a->mu);
  return n + 1;
}

void kc_hook_attempt_settle(kc_hook_attempts *a, const char *key, bool ok) {
  pthread_mutex_lock(&a->mu);
  struct kc_hook_attempt **link = &a->b[bucket_of(key)];
  while (*link && strcmp((*link)->key, key) != 0)
    link = &(*link)->next;
  if (ok && *link) {
    struct kc_hook_attempt *x = *link;
    *link = x->next;
    free(x);
  } else if (!ok && *link) {
    (*link)->n++;
  } else if (!ok) {
    size_t len = strlen(key) + 1;
    struct kc_hook_attempt *x = malloc(sizeof *x + len);
    if (x) {
      x->n = 1;
      memcpy(x->key, key, len);
      x->next = NULL;
      *link = x;
    }
  }
  pthread_mutex_unlock(&a->mu);
}

/* ---- the base of a transport's instance ------------------------------------ */

size_t kc_hook_nslots(const kc_controller_spec *spec) {
  return spec->workers > 0 ? (size_t)spec->workers : 1;
}

const kc_controller_spec *kc_hook_init_spec(void **instance, const char *what, const char *member,
                                            bool (*has_member)(const kc_controller_spec *)) {
  const kc_controller_spec *spec = *instance;
  *instance = NULL;
  if (!spec || (has_member && !has_member(spec))) {
    kc_hostapi_table()->log(KCTRLD_LOG_ERROR, "%s instance without a %s spec", what, member);
    return NULL;
  }
  return spec;
}

int kc_hook_base_init(kc_hook_base *b, const kc_controller_spec *spec) {
  memset(b, 0, sizeof *b);
  if (pthread_mutex_init(&b->mu, NULL) != 0) return -ENOMEM;
  if (kc_hook_attempts_init(&b->attempts) < 0) {
    pthread_mutex_destroy(&b->mu);
    return -ENOMEM;
  }
  b->nslots = kc_hook_nslots(spec);
  b->controller = strdup(spec->name);
  if (!b->controller || kc_hook_kinds_copy(spec, &b->kinds) < 0) {
    free(b->controller);
    kc_hook_attempts_free(&b->attempts);
    pthread_mutex_destroy(&b->mu);
    memset(b, 0, sizeof *b);
    return -ENOMEM;
  }
  return 0;
}

void kc_hook_base_free(kc_hook_base *b) {
  if (!b->controller) return; /* never initialised */
  free(b->controller);
  kc_hook_kinds_free(&b->kinds);
  kc_hook_attempts_free(&b->attempts);
  pthread_mutex_destroy(&b->mu);
  memset(b, 0, sizeof *b);
}
