/* SPDX-License-Identifier: Apache-2.0 */
/* hook_host: the transport-free half of a hook's reconcile, on the host
 * function table (kctrld/plugin.h) exactly as a C plugin uses it: build the
 * request of a key from the cache (cache_get, cache_list of the `owns`
 * kinds filtered by ownerReferences) and perform a parsed response's
 * actions (api_apply, api_create, api_update, api_update_status, api_patch,
 * api_delete, event, expectations), then map its result. So leadership
 * fencing, 409 -> requeue, the write timeout, Events and metrics are the
 * host's, shared with C plugins; exec hooks (hook_exec.h) and later
 * webhook hooks differ only in how the request travels.
 *
 * Owns: nothing beyond one call; kc_hook_kinds is the caller's.
 * Threads: a worker thread, inside a reconcile (the ctx of that call).
 * Errors: kc_hook_request_build returns 0 or a negative errno with the
 * reason in err; kc_hook_perform returns a KCTRLD_RESULT_* value, with the
 * error message set through host->result_error.
 * Ownership: host, ctx, kinds and the response are borrowed.
 *
 * Shared by the transports too (one copy, not one per transport): the
 * owned copy of a controller's kinds (kc_hook_base) and the per-key
 * attempt counters (kc_hook_attempts: any worker thread, under its mutex).
 */
#ifndef KC_HOOK_HOST_H
#define KC_HOOK_HOST_H

#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "base/buf.h"
#include "config/config.h"
#include "hooks/hook_proto.h"
#include "kctrld/plugin.h"

typedef struct kc_hook_kind {
  const char *api_version;
  const char *kind;
} kc_hook_kind;

/* The kinds of a hook's controller: its `for` kind and its `owns` kinds,
 * and the style of its hook (hook.style). */
typedef struct kc_hook_kinds {
  kc_hook_kind for_;
  const kc_hook_kind *owns;
  size_t nowns;
  bool desired; /* style: desired (the request's `children`, desired.h commits the response) */
} kc_hook_kinds;

/* What a request was built from: the object is kept (a reference) for the
 * `event` action's default target; release with kc_hook_input_release. */
typedef struct kc_hook_input {
  const kctrld_object *object; /* NULL: not in the cache */
} kc_hook_input;

/* Appends the request of key (attempt as counted by the caller) to b.
 * Returns 0, 1 when there is nothing to ask (style desired: the object is
 * gone, or being deleted without a finalizer of the controller's: the
 * reconcile is done), -EINVAL (malformed key), -ENOTSUP (a kind not cached
 * yet), -ENOMEM, with the reason in err. in->object is set on success. */
int kc_hook_request_build(const struct kctrld_host_api *host, kctrld_ctx *ctx,
                          const kc_hook_kinds *kinds, const char *key, uint64_t attempt, kc_buf *b,
                          kc_hook_input *in, char *err, size_t errlen);

void kc_hook_input_release(const struct kctrld_host_api *host, kc_hook_input *in);

/* Style desired (kinds->desired): hands r's children and status to the
 * host's desired_* functions (desired.h: check, apply, prune, status) and
 * returns their result, or r's resync. Style actions: performs r's
 * actions in order, then returns r's result. Either: `finalized` is
 * passed on (result_finalized); a response of the other style is an
 * error. Actions: the first
 * failing action stops the list: a conflict (-ESTALE, -EEXIST) returns
 * KCTRLD_RESULT_REQUEUE, anything else an error naming the action and the
 * server's message; a delete of an object already gone counts as done.
 * Creates and deletes of `owns` kinds set the key's expectations first; an
 * `apply` of an owned object absent from the cache counts as a create
 * (observed at once when the server answers that it existed). */
int kc_hook_perform(const struct kctrld_host_api *host, kctrld_ctx *ctx, const kc_hook_kinds *kinds,
                    const char *key, const kc_hook_input *in, const kc_hook_response *r);

/* The result of a key that was not run because its program backs off as a
 * whole (base/childpool.h): requeued after hold_ns (rounded up to ms) and
 * marked held, so the key is charged no attempt and keeps its backoff. The
 * reason goes to the log at debug level. */
int kc_hook_result_held(const struct kctrld_host_api *host, kctrld_ctx *ctx, uint64_t hold_ns,
                        const char *why);

/* Failures per key since its last success: the request's `attempt`. */
#define KC_HOOK_ATTEMPT_BUCKETS 256
struct kc_hook_attempt;
typedef struct kc_hook_attempts {
  pthread_mutex_t mu;
  struct kc_hook_attempt *b[KC_HOOK_ATTEMPT_BUCKETS];
} kc_hook_attempts;

/* 1 + the failures of key since its last success. */
uint64_t kc_hook_attempt_of(kc_hook_attempts *a, const char *key);
/* Records the outcome: success forgets the key, failure counts one more
 * (without memory the count stays at 1: the request says less). */
void kc_hook_attempt_settle(kc_hook_attempts *a, const char *key, bool ok);

/* What every transport of a hook (exec, webhook) and the process-isolated
 * plugin (isolate.h) share per instance: the controller name, its kinds,
 * the number of worker slots, the mutex guarding the slots, the attempt
 * counters. Embedded first in the transport's instance. */
typedef struct kc_hook_base {
  char *controller;
  kc_hook_kinds kinds;
  size_t nslots;      /* the controller's workers (kc_hook_nslots) */
  pthread_mutex_t mu; /* the transport's own slots (children: a kc_childpool, its own lock) */
  kc_hook_attempts attempts;
} kc_hook_base;

/* One worker slot per `workers:` (at least one): the one place this
 * default is made. */
size_t kc_hook_nslots(const kc_controller_spec *spec);

/* The shared start of a built-in's init (plugin.h; the init argument is
 * the controller spec, plugin_host.h kc_plugin_instance_new_arg): takes
 * the spec from *instance (NULL-ing it) and returns it, or logs "WHAT
 * instance without a MEMBER spec" and returns NULL when spec is NULL or
 * has_member (NULL: any spec will do) is false for it. */
const kc_controller_spec *kc_hook_init_spec(void **instance, const char *what, const char *member,
                                            bool (*has_member)(const kc_controller_spec *));

/* Fills b from spec: copies of the name and kinds, nslots, the mutex and
 * the attempt counters. 0 or -ENOMEM (b then holds nothing). */
int kc_hook_base_init(kc_hook_base *b, const kc_controller_spec *spec);
void kc_hook_base_free(kc_hook_base *b);

/* Defines `const struct kctrld_plugin *accessor(void)` returning the static
 * table of a plugin built into the daemon (exec and webhook hooks, the
 * isolated plugin's parent side): the same fields a loaded .so fills in. */
#define KC_BUILTIN_PLUGIN(accessor, name_, init_, reconcile_, fini_) \
  const struct kctrld_plugin *accessor(void) {                       \
    static const struct kctrld_plugin table_ = {                     \
        .abi_major = KCTRLD_ABI_MAJOR,                               \
        .abi_minor = KCTRLD_ABI_MINOR,                               \
        .struct_size = sizeof(struct kctrld_plugin),                 \
        .build_signature = KCTRLD_BUILD_SIGNATURE,                   \
        .name = (name_),                                             \
        .version = KCTRLD_VERSION,                                   \
        .init = (init_),                                             \
        .reconcile = (reconcile_),                                   \
        .fini = (fini_),                                             \
    };                                                               \
    return &table_;                                                  \
  }

#endif
