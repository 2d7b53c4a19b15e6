/* hostapi: the daemon's implementation of the plugin host services
 * (struct kc_host_services of plugin_host.h), i.e. the cache, settings,
 * object-field, API-write and Event functions of kctrld/plugin.h.
 *
 * Owns: the installed backend (where the caches, discovery and the API client
 * are found), and per worker thread one kc_api_worker (one reused curl easy
 * handle) plus the last parsed label selector. Both are created lazily on the
 * thread's first use and freed when the thread exits (pthread key
 * destructor) or by kc_hostapi_thread_cleanup.
 *
 * Mapping onto the daemon:
 *  - kctrld_object is a kc_obj (object_ref/object_release = kc_obj_ref/unref);
 *    kctrld_list is a heap kc_obj_vec sorted by namespace/name;
 *    kctrld_settings is a const kc_yaml_node (the controller's `settings:`
 *    subtree; NULL = no settings): pass kc_hostapi_settings(node) to
 *    kc_plugin_instance_new.
 *  - cache_get/cache_list find the informer of apiVersion+kind through
 *    kc_daemon_informer_for(kc_ctx_daemon_data(ctx), ...); field_index lists
 *    go through kc_informer_by_index, then namespace and selector filter the
 *    (small) result.
 *  - writes build "<api_path>[/namespaces/NS]/<plural>[/NAME][/status]" from
 *    kc_daemon_resource and are sent with kc_api_do on the thread's worker
 *    (timeout KC_HOSTAPI_WRITE_TIMEOUT_MS). When kc_daemon_may_write is false
 *    nothing is sent and -EAGAIN is returned. Status codes map to the errno
 *    table of plugin.h (kc_hostapi_map_status); the Status message goes to
 *    kc_ctx_set_api_error. 404 and 409 are normal outcomes: logged at debug.
 *  - event hands a copy of the event to the recorder installed with
 *    kc_hostapi_set_events (daemon/events.h) and returns at once; the
 *    recorder aggregates and writes core/v1 Events from the loop. Without
 *    a recorder the event is dropped (0).
 *
 * Threads: kc_hostapi_install* on the loop thread before any controller
 * starts (the backend is then read-only). The services themselves run on
 * worker threads (API writes and cache reads) or any thread (accessors).
 * Errors: 0 or a negative errno, as plugin.h documents per function.
 * Ownership: as plugin.h; the backend struct is copied.
 */
#ifndef KC_HOSTAPI_H
#define KC_HOSTAPI_H

#include <stdbool.h>

#include "apiclient.h"
#include "events.h"
#include "informer.h"
#include "kctrld/plugin.h"
#include "kobj.h"
#include "plugin_host.h"
#include "selector.h"
#include "store.h"
#include "yamltree.h"

#define KC_HOSTAPI_WRITE_TIMEOUT_MS 30000

/* Where the services find the daemon's parts. `dd` is the instance's
 * daemon_data (kc_ctx_daemon_data), `cache` what cache_for returned. All
 * members are required; they are called from worker threads. */
typedef struct kc_hostapi_backend {
  void *(*cache_for)(void *dd, const char *api_version, const char *kind); /* NULL: not cached */
  kc_obj *(*cache_get)(void *cache, kc_str ns, kc_str name);
  int (*cache_list)(void *cache, kc_str ns, const kc_label_selector *sel, kc_obj_vec *out);
  int (*cache_by_index)(void *cache, const char *index, kc_str value, kc_obj_vec *out);
  int (*resource)(void *dd, const char *api_version, const char *kind, kc_resource_ref *out);
  kc_api *(*api)(void *dd);
  bool (*may_write)(void *dd);
  /* ctx plumbing; the daemon backend uses kc_ctx_daemon_data and
   * kc_ctx_set_api_error (tests substitute their own ctx). */
  void *(*ctx_data)(const kctrld_ctx *ctx);
  void (*ctx_error)(kctrld_ctx *ctx, const char *msg);
} kc_hostapi_backend;

/* Installs the services on the daemon backend (daemon.h, informer.h) with
 * kc_plugin_host_set_services. Loop thread, before controllers start. */
void kc_hostapi_install(void);

/* Same on another backend (copied); tests. */
void kc_hostapi_install_backend(const kc_hostapi_backend *b);

/* Installs the Event recorder the `event` service feeds (NULL detaches).
 * Loop thread; once it returns no thread uses the previous recorder any more,
 * so it may be closed. */
void kc_hostapi_set_events(kc_events *ev);

/* The services table (static storage) as installed. */
const struct kc_host_services *kc_hostapi_services(void);

/* The settings handle of a controller's `settings:` node (may be NULL). */
static inline const kctrld_settings *kc_hostapi_settings(const kc_yaml_node *node) {
  return (const kctrld_settings *)node;
}

/* Maps a failed response onto plugin.h's errno table. json_patch: a 422
 * answering a JSON patch whose "test" op failed is -ESTALE. Any thread. */
int kc_hostapi_map_status(const kc_api_status *st, bool json_patch);

/* Frees the calling thread's API worker and selector cache now (the thread
 * may use the services again afterwards). Every thread that used the write
 * services must have exited or called this before kc_api_close. */
void kc_hostapi_thread_cleanup(void);

#endif
