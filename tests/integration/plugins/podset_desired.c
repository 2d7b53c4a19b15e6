/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "podset-desired" (tests/integration/test_podset_desired_plugin.py):
 * the podset controller of plugins/hooks/podset/podset.py written with the
 * SDK's desired-state functions (kctrld/plugin.h, ABI 1.3): a PodSet has
 * spec.replicas Pods NAME-0, NAME-1, ... from spec.template, labelled
 * podset=NAME; its status counts the Pods it controls; finalizing, it
 * keeps none and says finalized once they are gone. The host applies,
 * prunes, writes the status and handles the finalizer.
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 * Threads: reconcile on workers; no instance state.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kctrld/plugin_util.h"
#include "kctrld/plugin.h"

static const struct kctrld_host_api *H;

static int ps_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  (void)settings;
  *out = NULL;
  if (!KCTRLD_HOST_HAS(H, desired_commit)) {
    H->log(KCTRLD_LOG_ERROR, "this daemon has no desired-state functions (ABI 1.3 needed)");
    return -ENOTSUP;
  }
  return 0;
}

struct count {
  kctrld_str uid;
  int64_t n;
};

static bool is_controller_ref(const kctrld_value *v, void *ud) {
  struct count *c = ud;
  kctrld_value u, ctl;
  if (H->value_get(v, "controller", &ctl) == 0 && ctl.type == KCTRLD_JSON_BOOL && ctl.raw.len == 4 &&
      H->value_get(v, "uid", &u) == 0 && u.raw.len == c->uid.len + 2 &&
      memcmp(u.raw.ptr + 1, c->uid.ptr, c->uid.len) == 0)
    c->n++;
  return true;
}

/* The Pods of ns controlled by the PodSet with uid. */
static int64_t count_pods(kctrld_ctx *ctx, const char *ns, kctrld_str uid) {
  kctrld_list_opts opts = {.struct_size = sizeof opts, .namespace_ = ns};
  kctrld_list *l = NULL;
  struct count c = {uid, 0};
  if (H->cache_list(ctx, "v1", "Pod", &opts, &l) != 0) return 0;
  for (size_t i = 0; i < H->list_len(l); i++)
    H->object_each(H->list_item(l, i), "metadata.ownerReferences[]", is_controller_ref, &c);
  H->list_release(l);
  return c.n;
}

static int ps_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  (void)instance;
  char ns[64], name[254];
  if (pu_split_key(key, ns, sizeof ns, name, sizeof name) != 0) return H->result_error(ctx, "bad key %s", key);
  kctrld_ref ref = {"demo.kctrld.io/v1", "PodSet", ns, name};
  const kctrld_object *ps = NULL;
  if (H->cache_get(ctx, &ref, &ps) != 0) return KCTRLD_RESULT_DONE; /* gone */
  int64_t replicas = 1, have = count_pods(ctx, ns, H->object_uid(ps));
  H->object_int(ps, "spec.replicas", &replicas);
  bool finalizing = H->ctx_finalizing(ctx);
  if (finalizing) replicas = 0;
  kctrld_value labels = {0}, spec = {0};
  H->object_get(ps, "spec.template.metadata.labels", &labels);
  H->object_get(ps, "spec.template.spec", &spec);
  int rc = H->desired_begin(ctx);
  pu_buf b;
  pu_buf_init(&b);
  for (int64_t i = 0; rc == 0 && i < replicas; i++) {
    b.n = 0;
    pu_str(&b, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"");
    pu_str(&b, name);
    char idx[48];
    snprintf(idx, sizeof idx, "-%lld\",\"labels\":{", (long long)i);
    pu_str(&b, idx);
    pu_json_kv_str(&b, "podset", name);
    if (labels.type == KCTRLD_JSON_OBJECT && labels.raw.len > 2) { /* the template's, after ours */
      pu_add(&b, ",", 1);
      pu_add(&b, labels.raw.ptr + 1, labels.raw.len - 1);
    } else {
      pu_add(&b, "}", 1);
    }
    pu_str(&b, "},\"spec\":");
    if (spec.type == KCTRLD_JSON_OBJECT) pu_add(&b, spec.raw.ptr, spec.raw.len);
    else pu_str(&b, "{}");
    pu_str(&b, "}");
    rc = b.oom ? -ENOMEM : H->desired_add_child(ctx, b.p, b.n);
  }
  if (rc == 0) {
    b.n = 0;
    char st[96];
    snprintf(st, sizeof st, "{\"replicas\":%lld,\"observedGeneration\":%lld}", (long long)have,
             (long long)H->object_generation(ps));
    rc = H->desired_set_status(ctx, st, strlen(st));
  }
  pu_buf_free(&b);
  H->object_release(ps);
  if (rc != 0) return H->result_error(ctx, "building the desired state: %d", rc);
  if (finalizing && have == 0) H->result_finalized(ctx);
  return H->desired_commit(ctx);
}

KCTRLD_PLUGIN_DEFINE(H, "podset-desired", "1.0", ps_init, ps_reconcile, NULL);
