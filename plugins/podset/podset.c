/* SPDX-License-Identifier: Apache-2.0 */
/* podset: the classic example controller. A PodSet (demo.kctrld.io/v1,
 * config/podset-crd.yaml) keeps exactly spec.replicas Pods built from
 * spec.template, labelled `podset: <name>` and controlled by the PodSet
 * (ownerReference with controller: true). See README.md.
 *
 * Reconcile (worker thread, one key at a time per PodSet):
 *  1. read the PodSet from the cache; gone: forget its expectations;
 *  2. list its Pods from the cache (namespace + label selector podset=<name>,
 *     controlled by this PodSet's uid, not being deleted);
 *  3. only when the expectations of earlier creates/deletes are satisfied
 *     (the cache has seen them), create or delete the difference, setting
 *     new expectations first, so a lagging cache never makes it overshoot;
 *  4. write status.replicas / status.observedGeneration with a merge patch
 *     of the status subresource, only when they differ.
 * Instance state: none (the expectations live in the host).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kctrld/plugin_util.h"
#include "kctrld/plugin.h"

#define PODSET_API_VERSION "demo.kctrld.io/v1"
#define PODSET_KIND "PodSet"
#define PODSET_LABEL "podset"
/* At most this many creates or deletes per reconcile (kube's burstReplicas). */
#define PODSET_BURST 500

static const struct kctrld_host_api *H;

/* ---- pure logic (unit-tested) ---- */

struct label_copy {
  pu_buf *b;
  bool first;
};

static bool copy_label(kctrld_str key, kctrld_str value, void *ud) {
  struct label_copy *c = ud;
  if (pu_lit_eq(key, PODSET_LABEL)) return true; /* ours wins */
  if (!c->first) pu_add(c->b, ",", 1);
  pu_add(c->b, key.ptr, key.len);
  pu_add(c->b, ":", 1);
  pu_add(c->b, value.ptr, value.len);
  c->first = false;
  return true;
}

/* Builds the JSON of one Pod for PodSet ns/name (uid) from the raw JSON of
 * spec.template: template labels plus podset=<name>, template annotations,
 * generateName "<name>-", the controller ownerReference and the template's
 * spec. Returns 0 with the text in *out (caller frees out->p), -EINVAL
 * (template without an object spec), -ENOMEM. */
static int podset_build_pod(const char *ns, const char *name, const char *uid, kctrld_str tmpl_labels,
                            kctrld_str tmpl_annotations, kctrld_str tmpl_spec, pu_buf *out) {
  *out = (pu_buf){0};
  if (!tmpl_spec.ptr || tmpl_spec.len < 2 || tmpl_spec.ptr[0] != '{') return -EINVAL;
  pu_buf *b = out;
  pu_str(b, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":");
  size_t nl = strlen(name);
  char gen[256];
  snprintf(gen, sizeof gen, "%.*s-", (int)(nl > 200 ? 200 : nl), name);
  pu_json_str(b, gen, strlen(gen));
  pu_str(b, ",\"namespace\":");
  pu_json_str(b, ns, strlen(ns));
  pu_str(b, ",\"labels\":{");
  struct label_copy c = {b, true};
  if (tmpl_labels.ptr && pu_json_members(tmpl_labels, copy_label, &c) < 0) {
    pu_buf_free(b);
    return -EINVAL;
  }
  if (!c.first) pu_add(b, ",", 1);
  pu_str(b, "\"" PODSET_LABEL "\":");
  pu_json_str(b, name, nl);
  pu_str(b, "}");
  if (tmpl_annotations.ptr && tmpl_annotations.len && tmpl_annotations.ptr[0] == '{') {
    pu_str(b, ",\"annotations\":");
    pu_add(b, tmpl_annotations.ptr, tmpl_annotations.len);
  }
  pu_str(b, ",\"ownerReferences\":[");
  pu_owner_ref(b, PODSET_API_VERSION, PODSET_KIND, name, uid, true);
  pu_str(b, "]},\"spec\":");
  pu_add(b, tmpl_spec.ptr, tmpl_spec.len);
  pu_str(b, "}");
  if (b->oom) {
    pu_buf_free(b);
    return -ENOMEM;
  }
  return 0;
}

/* Scale-down choice: Pods that are not Running first, then the newest
 * (creationTimestamp is RFC 3339 UTC: text order is time order), then by
 * name, so the choice is deterministic. */
struct pod_info {
  const kctrld_object *obj;
  bool running;
  kctrld_str created;
  kctrld_str name;
};

static int slice_cmp(kctrld_str a, kctrld_str b) {
  size_t n = a.len < b.len ? a.len : b.len;
  int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
  return c ? c : (a.len > b.len) - (a.len < b.len);
}

static int delete_order(const void *x, const void *y) {
  const struct pod_info *a = x, *b = y;
  if (a->running != b->running) return a->running ? 1 : -1;
  int c = slice_cmp(b->created, a->created); /* newest first */
  return c ? c : slice_cmp(b->name, a->name);
}

/* ---- reconcile ---- */

struct owner_scan {
  kctrld_str uid;
  bool ours;
};

static bool owner_visit(const kctrld_value *v, void *ud) {
  struct owner_scan *s = ud;
  kctrld_value ctl, uid;
  if (H->value_get(v, "controller", &ctl) < 0 || ctl.type != KCTRLD_JSON_BOOL ||
      !pu_str_eq(ctl.raw, "true"))
    return true;
  /* A controller reference: it is ours when its uid is the PodSet's. */
  if (H->value_get(v, "uid", &uid) == 0 && uid.type == KCTRLD_JSON_STRING && uid.raw.len == s->uid.len + 2 &&
      memcmp(uid.raw.ptr + 1, s->uid.ptr, s->uid.len) == 0)
    s->ours = true;
  return false;
}

static bool controlled_by(const kctrld_object *pod, kctrld_str uid) {
  struct owner_scan s = {uid, false};
  H->object_each(pod, "metadata.ownerReferences[]", owner_visit, &s);
  return s.ours;
}

static int create_pods(kctrld_ctx *ctx, const char *key, const kctrld_object *ps, const char *ns,
                       const char *name, int64_t n, int64_t replicas) {
  kctrld_value labels, annotations, spec;
  char uid[128];
  if (!pu_copy(H->object_uid(ps), uid, sizeof uid) ||
      H->object_get(ps, "spec.template.metadata.labels", &labels) < 0 ||
      H->object_get(ps, "spec.template.metadata.annotations", &annotations) < 0 ||
      H->object_get(ps, "spec.template.spec", &spec) < 0)
    return H->result_error(ctx, "podset %s: unreadable object", key);
  pu_buf pod;
  int rc = podset_build_pod(ns, name, uid, labels.type == KCTRLD_JSON_OBJECT ? labels.raw : (kctrld_str){0},
                            annotations.type == KCTRLD_JSON_OBJECT ? annotations.raw : (kctrld_str){0},
                            spec.type == KCTRLD_JSON_OBJECT ? spec.raw : (kctrld_str){0}, &pod);
  if (rc == -EINVAL) {
    H->event(ctx, ps, KCTRLD_EVENT_WARNING, "InvalidTemplate", "spec.template.spec must be an object");
    H->log(KCTRLD_LOG_WARN, "invalid template podset=%s", key);
    return KCTRLD_RESULT_DONE; /* fixed by a spec change, which enqueues again */
  }
  if (rc < 0) return H->result_error(ctx, "podset %s: building the pod: %d", key, rc);
  rc = H->expect_creations(ctx, key, n);
  if (rc < 0) {
    pu_buf_free(&pod);
    return H->result_error(ctx, "podset %s: expectations: %d", key, rc);
  }
  int64_t created = 0, failed = 0;
  int last_err = 0;
  for (int64_t i = 0; i < n; i++) {
    const kctrld_object *got = NULL;
    rc = H->api_create(ctx, pod.p, pod.n, &got);
    if (rc < 0) {
      /* The add event will never come: lower the expectation ourselves. */
      H->creation_observed(ctx, key);
      failed++;
      last_err = rc;
      H->log(KCTRLD_LOG_WARN, "create failed podset=%s error=\"%s\"", key, H->ctx_api_error(ctx));
      if (rc == -EACCES || rc == -EINVAL || rc == -ENOENT) { /* the rest would fail alike */
        for (int64_t j = i + 1; j < n; j++) H->creation_observed(ctx, key);
        break;
      }
      continue;
    }
    kctrld_str pn = H->object_name(got);
    H->log(KCTRLD_LOG_INFO, "created pod=%.*s/%.*s podset=%s", (int)H->object_namespace(got).len,
           H->object_namespace(got).ptr, (int)pn.len, pn.ptr, key);
    H->object_release(got);
    created++;
  }
  pu_buf_free(&pod);
  if (created)
    H->event(ctx, ps, KCTRLD_EVENT_NORMAL, "ScaledUp", "created %lld pod(s) for %lld replica(s)",
             (long long)created, (long long)replicas);
  if (failed)
    return H->result_error(ctx, "podset %s: %lld create(s) failed: %s (%d)", key, (long long)failed,
                           H->ctx_api_error(ctx), last_err);
  return KCTRLD_RESULT_DONE;
}

static int delete_pods(kctrld_ctx *ctx, const char *key, const kctrld_object *ps, struct pod_info *pods,
                       size_t npods, int64_t n, int64_t replicas) {
  qsort(pods, npods, sizeof *pods, delete_order);
  int rc = H->expect_deletions(ctx, key, n);
  if (rc < 0) return H->result_error(ctx, "podset %s: expectations: %d", key, rc);
  int64_t deleted = 0, failed = 0;
  for (int64_t i = 0; i < n; i++) {
    char ns[256], name[256], uid[128];
    const kctrld_object *p = pods[i].obj;
    if (!pu_copy(H->object_namespace(p), ns, sizeof ns) || !pu_copy(H->object_name(p), name, sizeof name) ||
        !pu_copy(H->object_uid(p), uid, sizeof uid)) {
      H->deletion_observed(ctx, key);
      failed++;
      continue;
    }
    kctrld_ref ref = {"v1", "Pod", ns, name};
    kctrld_delete_opts o = {.struct_size = sizeof o, .precondition_uid = uid, .grace_period_seconds = -1};
    rc = H->api_delete(ctx, &ref, &o);
    if (rc < 0 && rc != -ENOENT) {
      H->deletion_observed(ctx, key);
      failed++;
      H->log(KCTRLD_LOG_WARN, "delete failed pod=%s/%s podset=%s error=\"%s\"", ns, name, key,
             H->ctx_api_error(ctx));
      continue;
    }
    if (rc == -ENOENT) { /* already gone: its delete event may have been seen */
      H->deletion_observed(ctx, key);
      continue;
    }
    H->log(KCTRLD_LOG_INFO, "deleted pod=%s/%s podset=%s", ns, name, key);
    deleted++;
  }
  if (deleted)
    H->event(ctx, ps, KCTRLD_EVENT_NORMAL, "ScaledDown", "deleted %lld pod(s) for %lld replica(s)",
             (long long)deleted, (long long)replicas);
  if (failed) return H->result_error(ctx, "podset %s: %lld delete(s) failed", key, (long long)failed);
  return KCTRLD_RESULT_DONE;
}

static int update_status(kctrld_ctx *ctx, const char *key, const kctrld_object *ps, const char *ns,
                         const char *name, int64_t seen) {
  int64_t cur_replicas = -1, cur_gen = -1, gen = H->object_generation(ps);
  if (H->object_int(ps, "status.replicas", &cur_replicas) < 0) cur_replicas = -1;
  if (H->object_int(ps, "status.observedGeneration", &cur_gen) < 0) cur_gen = -1;
  if (cur_replicas == seen && cur_gen == gen) return 0;
  char patch[128];
  int n = snprintf(patch, sizeof patch, "{\"status\":{\"replicas\":%lld,\"observedGeneration\":%lld}}",
                   (long long)seen, (long long)gen);
  kctrld_ref ref = {PODSET_API_VERSION, PODSET_KIND, ns, name};
  int rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, patch, (size_t)n, true, NULL);
  if (rc == 0)
    H->log(KCTRLD_LOG_INFO, "status podset=%s replicas=%lld observedGeneration=%lld", key, (long long)seen,
           (long long)gen);
  return rc;
}

static int podset_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  (void)instance;
  char ns[256], name[256];
  if (pu_split_key(key, ns, sizeof ns, name, sizeof name) < 0 || !ns[0])
    return H->result_error(ctx, "bad key %s", key);
  kctrld_ref ref = {PODSET_API_VERSION, PODSET_KIND, ns, name};
  const kctrld_object *ps = NULL;
  int rc = H->cache_get(ctx, &ref, &ps);
  if (rc == -ENOENT) {
    H->expectations_forget(ctx, key);
    return KCTRLD_RESULT_DONE; /* its Pods go with it (garbage collection) */
  }
  if (rc < 0) return H->result_error(ctx, "podset %s: cache: %d", key, rc);
  if (H->object_deleting(ps)) {
    H->object_release(ps);
    return KCTRLD_RESULT_DONE;
  }
  int64_t replicas;
  if (H->object_int(ps, "spec.replicas", &replicas) < 0 || replicas < 0) {
    H->log(KCTRLD_LOG_WARN, "spec.replicas missing or invalid podset=%s", key);
    H->object_release(ps);
    return KCTRLD_RESULT_DONE;
  }

  char sel[300];
  snprintf(sel, sizeof sel, PODSET_LABEL "=%s", name);
  kctrld_list_opts lo = {.struct_size = sizeof lo, .namespace_ = ns, .label_selector = sel};
  kctrld_list *list = NULL;
  rc = H->cache_list(ctx, "v1", "Pod", &lo, &list);
  if (rc < 0) {
    H->object_release(ps);
    return H->result_error(ctx, "podset %s: listing pods: %d (are Pods watched? add owns: Pod)", key, rc);
  }
  size_t total = H->list_len(list), n = 0;
  struct pod_info *pods = calloc(total ? total : 1, sizeof *pods);
  if (!pods) {
    H->list_release(list);
    H->object_release(ps);
    return H->result_error(ctx, "out of memory");
  }
  kctrld_str uid = H->object_uid(ps);
  for (size_t i = 0; i < total; i++) {
    const kctrld_object *p = H->list_item(list, i);
    if (H->object_deleting(p) || !controlled_by(p, uid)) continue;
    kctrld_value phase;
    bool running = H->object_get(p, "status.phase", &phase) == 0 && pu_str_eq(phase.raw, "\"Running\"");
    pods[n++] = (struct pod_info){p, running, H->object_creation_timestamp(p), H->object_name(p)};
  }

  int result = KCTRLD_RESULT_DONE;
  int64_t diff = replicas - (int64_t)n;
  if (diff != 0 && H->expectations_satisfied(ctx, key)) {
    if (diff > 0)
      result = create_pods(ctx, key, ps, ns, name, diff > PODSET_BURST ? PODSET_BURST : diff, replicas);
    else
      result = delete_pods(ctx, key, ps, pods, n, -diff > PODSET_BURST ? PODSET_BURST : -diff, replicas);
  } else if (diff != 0) {
    H->log(KCTRLD_LOG_DEBUG, "waiting for the cache podset=%s have=%zu want=%lld", key, n, (long long)replicas);
  }

  rc = update_status(ctx, key, ps, ns, name, (int64_t)n);
  free(pods);
  H->list_release(list);
  H->object_release(ps);
  if (rc == -ENOENT) return result; /* deleted meanwhile */
  if (rc < 0 && result == KCTRLD_RESULT_DONE)
    return rc == -ESTALE || rc == -EAGAIN ? KCTRLD_RESULT_REQUEUE
                                          : H->result_error(ctx, "podset %s: status: %s", key, H->ctx_api_error(ctx));
  return result;
}

static int podset_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **instance) {
  (void)settings;
  H->log(KCTRLD_LOG_INFO, "podset controller=%s ready", H->ctx_controller(ctx));
  *instance = NULL;
  return 0;
}

/* What reconcile writes (kctrld rbac): Pods, the PodSet's status, Events. */
static const kctrld_permission podset_permissions[] = {
    {"", "pods", "create,delete"},
    {"demo.kctrld.io", "podsets/status", "patch"},
    KCTRLD_PERMISSION_EVENTS,
    KCTRLD_PERMISSIONS_END,
};

KCTRLD_PLUGIN_DEFINE_PERMS(H, "podset", "1.0.0", podset_init, podset_reconcile, NULL, podset_permissions);

