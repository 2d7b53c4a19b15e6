/* plugin_host: loads plugin .so files, checks them, builds the host function
 * table of kctrld/plugin.h, and runs plugin code with its context.
 *
 * Owns: the list of loaded plugin files (each dlopen'd once with RTLD_NOW |
 * RTLD_LOCAL | RTLD_NODELETE, entry point called once, never unloaded at
 * runtime), the one host function table (static storage, as the ABI
 * requires), the per-controller instances, and each instance's expectations.
 *
 * The cache, settings, object-field, API-write and Event functions of the
 * table come from struct kc_host_services, which the daemon provides once it
 * has its store and HTTP client (kc_plugin_host_set_services); members left
 * NULL answer -ENOSYS (or an empty value), so a plugin never jumps to NULL.
 * Allocation, logging, results, finalizer helpers (built on the services'
 * object_each + api_patch) and expectations are implemented here.
 *
 * Threads: kc_plugin_host_set_services, kc_plugin_load, kc_plugin_instance_new
 * and kc_plugin_host_unload_all: loop thread only. kc_plugin_instance_free:
 * the loop thread, or the worker thread of a reconcile abandoned at a stop,
 * whichever is last to stop using the instance (the worker pool's release
 * hook); a plugin whose instances are still in use is not freed by
 * kc_plugin_host_unload_all, and service calls made after it get no daemon.
 * kc_plugin_reconcile: worker thread (it is a kc_reconcile_fn).
 * The kc_ctx_* helpers: the thread the ctx was passed on (service code).
 * Errors: 0 or a negative errno; loaders also fill an operator-grade message
 * into err (never NULL-terminated-less: always a C string when errlen > 0).
 * Ownership: strings are copied; returned plugins/instances are owned by the
 * host (plugins) or the caller (instances, free with kc_plugin_instance_free).
 */
#ifndef KC_PLUGIN_HOST_H
#define KC_PLUGIN_HOST_H

#include <stddef.h>

#include "expectations.h"
#include "kctrld/plugin.h"
#include "workers.h"

/* Members of the host table that the daemon implements (same types). */
#define KC_SERVICE_MEMBERS(X)                                                              \
  X(settings_string) X(settings_int) X(settings_bool) X(settings_duration_ms) X(settings_len) \
  X(cache_get) X(cache_list) X(list_len) X(list_item) X(list_release) X(object_ref)        \
  X(object_release) X(object_namespace) X(object_name) X(object_uid)                       \
  X(object_resource_version) X(object_api_version) X(object_kind)                          \
  X(object_creation_timestamp) X(object_generation) X(object_deleting) X(object_json)      \
  X(object_label) X(object_each_label) X(object_get) X(object_each) X(object_string)        \
  X(object_int) X(object_bool) X(value_get) X(value_string) X(value_int) X(api_create)     \
  X(api_update) X(api_update_status) X(api_patch) X(api_delete) X(api_get)

struct kc_host_services {
#define KC_SERVICE_FIELD(m) __typeof__(((struct kctrld_host_api *)0)->m) m;
  KC_SERVICE_MEMBERS(KC_SERVICE_FIELD)
#undef KC_SERVICE_FIELD
  /* Event with the message already formatted (host->event formats it). */
  int (*event)(kctrld_ctx *ctx, const kctrld_object *regarding, int type, const char *reason,
               const char *message);
};

typedef struct kc_plugin kc_plugin;
typedef struct kc_plugin_instance kc_plugin_instance;

/* Installs the daemon's services into the host table (copied; NULL members
 * keep their -ENOSYS fallbacks). May be called before or after loading. */
void kc_plugin_host_set_services(const struct kc_host_services *svc);

/* The host table handed to plugins (static storage). */
const struct kctrld_host_api *kc_plugin_host_api(void);

/* Loads a plugin file, or returns the already loaded one for the same file.
 * Refuses, with -errno and a message naming the path: missing (-ENOENT), not
 * a regular file (-EINVAL), writable by group/other or owned by a user other
 * than root and the daemon's (-EPERM), also for its directory unless sticky;
 * dlopen failure (-ELIBBAD, with the dlerror and an ldd hint); no
 * kctrld_plugin_entry (-ENOEXEC); entry returned NULL (-ECANCELED); ABI major
 * mismatch, table too small or build signature mismatch (-ENOTSUP, naming
 * both sides); incomplete table (-EINVAL).
 * Ownership: *out stays owned by the host until kc_plugin_host_unload_all. */
int kc_plugin_load(const char *path, kc_plugin **out, char *err, size_t errlen);

const char *kc_plugin_name(const kc_plugin *p);
const char *kc_plugin_path(const kc_plugin *p);
const struct kctrld_plugin *kc_plugin_table(const kc_plugin *p);

/* Creates one controller's instance: calls the plugin's init with settings
 * (borrowed until kc_plugin_instance_free). daemon_data is what service
 * functions get back from kc_ctx_daemon_data(). Returns 0, -ENOMEM, or the
 * init's error (message in err: plugin name and path, controller, strerror of the
 * error and the value init returned). */
int kc_plugin_instance_new(kc_plugin *p, const char *controller, const kctrld_settings *settings,
                           void *daemon_data, kc_plugin_instance **out, char *err, size_t errlen);

/* Calls fini (if any) and frees. Only once no reconcile of it runs. NULL ok. */
void kc_plugin_instance_free(kc_plugin_instance *inst);

/* fn(arg) runs once, right after the instance's fini, on whichever thread
 * frees it (see Threads): the owner of the settings frees them there. Loop
 * thread, before the instance is handed to a controller. */
void kc_plugin_instance_on_free(kc_plugin_instance *inst, void (*fn)(void *arg), void *arg);

/* kc_reconcile_fn adapter (ud = the instance): runs the plugin's reconcile
 * with a fresh ctx, the log context set to "controller/plugin", and maps its
 * return value into *res (unknown values become KC_RESULT_ERROR). */
void kc_plugin_reconcile(void *ud, const char *key, kc_reconcile_result *res);

/* The instance's expectations: the daemon observes owned-object events here. */
kc_expectations *kc_plugin_instance_expectations(kc_plugin_instance *inst);
const char *kc_plugin_instance_controller(const kc_plugin_instance *inst);

/* dlcloses every loaded file (code stays mapped: RTLD_NODELETE) and frees
 * the list. Only after every instance is freed (process shutdown, tests). */
void kc_plugin_host_unload_all(void);

/* Service-side helpers on a ctx. */
void *kc_ctx_daemon_data(const kctrld_ctx *ctx);
const char *kc_ctx_key(const kctrld_ctx *ctx); /* NULL outside reconcile */
kc_plugin_instance *kc_ctx_instance(const kctrld_ctx *ctx);
/* Records the message returned by ctx_api_error (truncated to 255 bytes). */
void kc_ctx_set_api_error(kctrld_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
