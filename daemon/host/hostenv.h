/* SPDX-License-Identifier: Apache-2.0 */
/* hostenv: the host environment of one plugin instance, i.e. everything the
 * host functions of kctrld/plugin.h reach outside the plugin: the cache
 * (informers view), the API client, the write fence (leadership), the Event
 * recorder and the instance's settings.
 *
 * A kc_host_env is a small value: an operations table, the implementation's
 * state (ud) and the settings node. The daemon builds one per plugin
 * instance (daemon.c, on its informers, kc_api, leader and kc_events) and
 * passes it to kc_plugin_instance_new; hostapi.c implements every host
 * function on it and on nothing else; tests build a fake one (in-memory
 * caches, a fake request function). Exec/webhook hooks and process
 * isolation are further implementations of the same table (docs/design.md,
 * "The host environment").
 *
 * Owns (hostenv.c): the kc_api-backed request implementation
 * kc_host_env_api_request, with one kc_api_worker (one reused curl easy
 * handle) per calling thread, created on the thread's first request and
 * freed when the thread exits (pthread key destructor) or by
 * kc_host_env_thread_cleanup.
 *
 * Threads: every operation may be called from any worker thread at once;
 * implementations lock what they share. retain/release: any thread (an
 * instance may be freed on the worker thread of an abandoned reconcile).
 * Errors: 0 or a negative errno as documented per member; a member an
 * implementation does not offer may be NULL (the host function then answers
 * -ENOSYS).
 * Ownership: the env is copied into the instance; ud stays alive while
 * retained (retain at kc_plugin_instance_new, release after fini). Objects
 * returned by the cache are references the caller drops (kc_obj_unref).
 */
#ifndef KC_HOSTENV_H
#define KC_HOSTENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/apiclient.h"
#include "config/config.h"
#include "cache/informer.h"
#include "kube/kobj.h"
#include "kube/selector.h"
#include "cache/store.h"
#include "json/yamltree.h"

/* Timeout of one request of a host function. */
#define KC_HOST_ENV_REQUEST_TIMEOUT_MS 30000

typedef struct kc_host_env_ops {
  /* --- cache (informers view) --- */
  /* One object of apiVersion+kind: 0 with a reference in *out, -ENOENT when
   * the cache has none, -ENOTSUP when the kind is not cached (yet). */
  int (*cache_get)(void *ud, const char *api_version, const char *kind, kc_str ns, kc_str name,
                   kc_obj **out);
  /* Appends the objects of apiVersion+kind in ns (absent slice: all) that
   * sel matches (NULL: all) to out, unsorted. 0, -ENOTSUP, -ENOMEM. */
  int (*cache_list)(void *ud, const char *api_version, const char *kind, kc_str ns,
                    const kc_label_selector *sel, kc_obj_vec *out);
  /* Appends the objects whose field index `index` holds value. 0, -ENOTSUP,
   * -ENOENT (no such index), -ENOMEM. */
  int (*cache_by_index)(void *ud, const char *api_version, const char *kind, const char *index,
                        kc_str value, kc_obj_vec *out);
  /* --- API client --- */
  /* Where objects of apiVersion+kind live (borrowed strings). 0 or -ENOENT. */
  int (*resource)(void *ud, const char *api_version, const char *kind, kc_resource_ref *out);
  /* Sends one request and waits for the answer (at most timeout_ms). As
   * kc_api_do: 0 when a response arrived, whatever its code; out->body is
   * borrowed until the calling thread's next request. */
  int (*request)(void *ud, const char *method, const char *path, const char *content_type,
                 const void *body, size_t len, uint64_t timeout_ms, kc_api_response *out);
  /* --- write fence --- */
  /* True while writes may go out (leading, or leader election off). */
  bool (*may_write)(void *ud);
  /* --- Event recorder --- */
  /* Queues one Event about o (KC_EVENT_TYPE_* of events.h), reported by
   * controller ("" when unknown), and returns at once; 0 also when it was
   * dropped (no recorder any more). */
  int (*event)(void *ud, const char *controller, const kc_obj *o, int type, const char *reason,
               const char *message);
  /* --- lifetime of ud --- */
  void (*retain)(void *ud);
  void (*release)(void *ud);
} kc_host_env_ops;

typedef struct kc_host_env {
  const kc_host_env_ops *ops;
  void *ud;
  /* The controller's `settings:` node (NULL: none); borrowed until the
   * instance's on_free hook ran (plugin_host.h). */
  const kc_yaml_node *settings;
  /* Dry-run mode (dryrun.h): every write goes out with dryRun=All, is
   * logged and counted; Events are not recorded; the expect_* functions
   * set nothing (no dry-run create or delete ever shows up in the cache). */
  bool dry_run;
  /* The controller's spec: its `for`/`owns` kinds, finalizer and update
   * strategies, copied at kc_plugin_instance_new (desired.h). NULL: none
   * (no finalizer, the desired_* functions answer -ENOTSUP). */
  const kc_controller_spec *spec;
} kc_host_env;

/* The `request` of an env on a real API client: runs kc_api_do on the
 * calling thread's worker for api (created on first use, replaced when api
 * changes). Any thread. Every request other than GET is reported to the
 * thread's write observer once answered (writeobserver.h). Returns as
 * kc_api_do, or -ENOMEM/-EIO when no worker can be created. */
int kc_host_env_api_request(kc_api *api, const char *method, const char *path,
                            const char *content_type, const void *body, size_t len,
                            uint64_t timeout_ms, kc_api_response *out);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Frees the calling thread's API worker now (it may request again later).
 * Every thread that sent requests must have exited or called this before
 * kc_api_close of that client. */
void kc_host_env_thread_cleanup(void);

#endif
