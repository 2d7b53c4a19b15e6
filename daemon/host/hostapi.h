/* SPDX-License-Identifier: Apache-2.0 */
/* hostapi: the host functions of kctrld/plugin.h (struct kctrld_host_api),
 * every one of them, implemented on the calling instance's host environment
 * (hostenv.h) and on nothing else.
 *
 * Line with plugin_host: plugin_host.c loads plugin files, checks the ABI
 * and runs the instance lifecycle (init, reconcile, fini) with a ctx it
 * builds here (kc_hostapi_ctx_init); this file is the table those plugins
 * call back into. No process-global backend: a host function that gets a
 * ctx reaches the environment through it (ctx->env). The ABI gives three
 * kinds of functions no ctx: settings_* (they get the settings handle,
 * which is the env's settings node), object_* / value_* / list_* (pure
 * functions of the object they get), and `log` (its only state is the
 * thread-local ctx of the plugin call running on this thread, which adds
 * the reconcile key; kc_hostapi_enter/leave).
 *
 * Also owns, per worker thread, the last parsed label selector of
 * cache_list (created on first use, freed at thread exit or by
 * kc_hostapi_thread_cleanup).
 *
 * Mapping onto the daemon:
 *  - kctrld_object is a kc_obj (object_ref/object_release = kc_obj_ref/unref);
 *    kctrld_list is a heap kc_obj_vec sorted by namespace/name;
 *    kctrld_settings is a const kc_yaml_node (kc_host_env.settings).
 *  - cache_get/cache_list go to env->ops->cache_*; field_index lists go
 *    through cache_by_index, then namespace and selector filter the (small)
 *    result.
 *  - writes build "<api_path>[/namespaces/NS]/<plural>[/NAME][/status]" from
 *    env->ops->resource and are sent with env->ops->request (timeout
 *    KC_HOST_ENV_REQUEST_TIMEOUT_MS). When env->ops->may_write is false
 *    nothing is sent and -EAGAIN is returned. Status codes map to the errno
 *    table of plugin.h (map_status in hostapi.c); the Status message goes to
 *    ctx_api_error. 404 and 409 are normal outcomes: logged at debug. An
 *    answer no retry can fix (terminal_failure in hostapi.c: 404/405 on a
 *    subresource the kind does not have, 400, 422) is logged at warn, its
 *    reason (naming the subresource or the field) goes to ctx_api_error and
 *    ctx->terminal, where kc_plugin_reconcile finds it.
 *  - every write answered with 2xx is recorded in ctx->writes for the
 *    reconciled key (kc_hostapi_write_answered; read your own writes).
 *  - event formats the message and hands it to env->ops->event (the
 *    daemon's recorder aggregates and writes core/v1 Events from the loop).
 *  - finalizer_add/remove are JSON patches through api_patch; the
 *    expect_* functions use the ctx's kc_expectations (the instance's).
 *  A ctx without an env (or an env without the member) answers -ENOSYS.
 *
 * Threads: the functions run on whichever thread the plugin calls from
 * (worker threads for reconcile; the loop thread for init/fini).
 * Errors: 0 or a negative errno, as plugin.h documents per function.
 * Ownership: as plugin.h. A kctrld_ctx lives on the stack of the plugin
 * call it is passed to.
 */
#ifndef KC_HOSTAPI_H
#define KC_HOSTAPI_H

#include <stdbool.h>

#include "client/apiclient.h"
#include "host/desired.h"
#include "host/expectations.h"
#include "host/hostenv.h"
#include "host/ownwrites.h"
#include "kube/kobj.h"
#include "kctrld/plugin.h"
#include "host/result.h"
#include "json/yamltree.h"

typedef struct kc_settings_used kc_settings_used;

/* The ctx of one plugin call (opaque to plugins). */
struct kctrld_ctx {
  const kc_host_env *env;   /* NULL: every environment function answers -ENOSYS */
  const char *controller;   /* "" when unknown */
  kc_expectations *exp;     /* NULL: expect_* answer -EINVAL */
  const char *key;          /* NULL in init/fini */
  kc_reconcile_result *res; /* NULL in init/fini */
  bool after_set;           /* result_requeue_after was called */
  char api_error[512];
  /* The reason of the last failed API call when no retry can fix it
   * (plugin.h "Terminal errors"), "" when the last failure was another one
   * or none failed: an error result then is terminal (plugin_host.c). */
  char terminal[512];
  kc_settings_used *used;   /* init only: records what settings_* read (NULL: nothing) */
  const kc_desired_spec *sync; /* the controller's children and finalizer (NULL: none) */
  kc_desired_set *desired;  /* desired_begin..desired_commit; freed by kc_desired_ctx_done */
  bool finalizing;          /* the object is being deleted and holds the finalizer */
  bool finalized;           /* result_finalized was called */
  /* Where the reconcile's answered writes are recorded (ownwrites.h; NULL:
   * nowhere, e.g. read your own writes is off or the call is no reconcile). */
  kc_ownwrites *writes;
};

/* The settings nodes one init read (plugin.h: "reading a key marks it as
 * used"): plugin_host points the init ctx's `used` at one, then warns about
 * the keys nobody read. */
struct kc_settings_used {
  const kc_yaml_node *root;  /* the settings handle reads are recorded for */
  const kc_yaml_node **nodes; /* every node a read reached (malloc'ed) */
  size_t n, cap;
  bool oom;                  /* a node could not be recorded: warn about nothing */
};

/* After init: one warning per mapping key under u->root that no read
 * reached (a key whose parent was not reached is covered by the parent's
 * warning): "file:line:col: controller C: settings key "PATH" was not read
 * by plugin P (...)". Returns the number of warnings. Frees u->nodes. */
size_t kc_hostapi_settings_warn_unread(kc_settings_used *u, const char *controller,
                                       const char *plugin);

/* A fresh ctx for one call (key and res NULL outside reconcile). */
void kc_hostapi_ctx_init(kctrld_ctx *ctx, const kc_host_env *env, const char *controller,
                         kc_expectations *exp, const char *key, kc_reconcile_result *res);

/* A write (any method but GET) of ctx's reconcile got answer r: a 2xx is
 * recorded in ctx->writes for ctx->key (ownwrites.h), unless the env is in
 * dry-run mode (nothing was stored). Every write a plugin,
 * hook or plugin child sends comes back here: do_request for the ones sent
 * in this process, isolate.c for the ones a plugin child sends through the
 * daemon. Any thread. */
static inline void kc_hostapi_write_answered(const kctrld_ctx *ctx, const char *method,
                                             const char *path, const kc_api_response *r) {
  if (ctx && ctx->writes && ctx->key && !(ctx->env && ctx->env->dry_run) && r->code / 100 == 2)
    kc_ownwrites_record(ctx->writes, ctx->key, method, path, r->body, r->body ? r->body_len : 0);
}

/* Marks ctx as the plugin call running on this thread (for `log`), and
 * returns the previous one, which kc_hostapi_leave restores. */
kctrld_ctx *kc_hostapi_enter(kctrld_ctx *ctx);
void kc_hostapi_leave(kctrld_ctx *previous);

/* The host table handed to plugins (static storage, complete). */
const struct kctrld_host_api *kc_hostapi_table(void);

/* The cached object behind a kctrld_object of this table (see "Mapping"). */
static inline const kc_obj *kc_hostapi_obj(const kctrld_object *o) { return (const kc_obj *)o; }

/* The settings handle of a controller's `settings:` node (may be NULL). */
static inline const kctrld_settings *kc_hostapi_settings(const kc_yaml_node *node) {
  return (const kctrld_settings *)node;
}

/* Frees the calling thread's selector cache now. */
void kc_hostapi_thread_cleanup(void);

#endif
