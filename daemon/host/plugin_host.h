/* SPDX-License-Identifier: Apache-2.0 */
/* plugin_host: loads plugin .so files, checks their ABI, and runs the
 * lifecycle of plugin instances (init, reconcile, fini) with a ctx on the
 * instance's host environment.
 *
 * Owns: the list of loaded plugin files (each version of a file dlopen'd
 * once, from a private sealed memfd copy of the checked file, with RTLD_NOW
 * | RTLD_LOCAL | RTLD_NODELETE, entry point called once with
 * kc_hostapi_table(), never unloaded at runtime; a file whose identity
 * changed - device, inode, size, mtime or ctime: rebuilt, replaced or
 * rewritten in place - is loaded anew, so its new code runs) and of the
 * built-in implementations registered with kc_plugin_builtin, the identities
 * of the files isolated controllers run (kc_plugin_file_used), the
 * per-controller instances, each instance's copy of its kc_host_env
 * (hostenv.h) and its expectations.
 *
 * Line with hostapi: every function of the host table (kctrld/plugin.h)
 * lives in hostapi.c and works on the ctx built here: the instance's env
 * (cache, API client, write fence, Event recorder, settings), controller
 * name and expectations. Nothing here is process-global but the lists of
 * loaded and used files.
 *
 * Threads: kc_plugin_load, kc_plugin_file_used, kc_plugin_builtin,
 * kc_plugin_instance_new(_arg) and kc_plugin_host_unload_all: loop thread
 * only. kc_plugin_instance_free:
 * the loop thread, or the worker thread of a reconcile abandoned at a stop,
 * whichever is last to stop using the instance (the worker pool's release
 * hook); a plugin whose instances are still in use is not freed by
 * kc_plugin_host_unload_all. An abandoned instance keeps its env retained:
 * the env's implementation decides what its functions answer after the
 * daemon stopped (daemon.c: nothing is cached, nothing may be written).
 * kc_plugin_reconcile: worker thread (it is a kc_reconcile_fn).
 * Errors: 0 or a negative errno; loaders also fill an operator-grade message
 * into err (always a C string when errlen > 0).
 * Ownership: strings and the env are copied (env->ud retained); returned
 * plugins/instances are owned by the host (plugins) or the caller
 * (instances, free with kc_plugin_instance_free).
 */
#ifndef KC_PLUGIN_HOST_H
#define KC_PLUGIN_HOST_H

#include <stdbool.h>
#include <stddef.h>

#include "host/expectations.h"
#include "host/ownwrites.h"
#include "host/hostapi.h"
#include "host/hostenv.h"
#include "kctrld/plugin.h"
#include "host/result.h"

typedef struct kc_plugin kc_plugin;
typedef struct kc_plugin_instance kc_plugin_instance;

/* Loads a plugin file, or returns the already loaded one for the same file
 * (same identity: device, inode, size, mtime, ctime; a file refused before
 * and unchanged since gets the same refusal without being loaded again).
 * Refuses, with -errno and a message naming the path: missing (-ENOENT), not
 * a regular file (-EINVAL), writable by group/other or owned by a user other
 * than root and the daemon's (-EPERM), also for its directory unless sticky;
 * dlopen failure (-ELIBBAD, with the dlerror and an ldd hint); no
 * kctrld_plugin_entry (-ENOEXEC); entry returned NULL (-ECANCELED); ABI major
 * mismatch, table too small or build signature mismatch (-ENOTSUP, naming
 * both sides); incomplete table (-EINVAL).
 * Ownership: *out stays owned by the host until kc_plugin_host_unload_all. */
int kc_plugin_load(const char *path, kc_plugin **out, char *err, size_t errlen);

/* True when a plugin was loaded from path, or recorded with
 * kc_plugin_file_used, and the file there now is another one (rebuilt,
 * replaced, rewritten): a reload must re-instantiate its controllers for
 * the new code to run. False when neither or the file cannot be stat'ed
 * (the running code stays). Loop thread. */
bool kc_plugin_file_changed(const char *path);

/* Records the identity of the file at path now (as kc_plugin_load compares
 * them), for code loaded from it elsewhere: isolation: process, whose child
 * loads the file (isolate.h). Call before that load starts, so a change in
 * between reads as changed (one restart too many, never a rebuild missed).
 * The record replaces the path's last one, and logs at info when the file
 * changed since. Loop thread. 0, -EINVAL (no path), -ENOMEM, or stat's
 * -errno (nothing recorded). */
int kc_plugin_file_used(const char *path);

/* Registers a built-in plugin implementation, a table compiled into the
 * daemon (hook_exec.h's exec hook): checked like a loaded file's table, no
 * file and no dlopen; its path reads "builtin:NAME". The same table gives
 * the same kc_plugin. Loop thread. Errors as kc_plugin_load's table checks,
 * or -ENOMEM. */
int kc_plugin_builtin(const struct kctrld_plugin *table, kc_plugin **out, char *err, size_t errlen);

/* The plugin's declared permissions (kctrld/plugin.h, ABI 1.1), or NULL when
 * it declares none (a 1.0 table, or the member NULL). */
const kctrld_permission *kc_plugin_permissions(const kc_plugin *p);

/* Creates one controller's instance on env (copied, env->ops->retain
 * called; NULL: no environment, every environment function answers
 * -ENOSYS): calls the plugin's init with env->settings (borrowed until the
 * on_free hook). Returns 0, -ENOMEM, or the init's error (message in err:
 * plugin name and path, controller, strerror of the error and the value
 * init returned). */
int kc_plugin_instance_new(kc_plugin *p, const char *controller, const kc_host_env *env,
                           kc_plugin_instance **out, char *err, size_t errlen);

/* kc_plugin_instance_new with an argument for init: *instance is preset to
 * init_arg when init runs (kc_plugin_instance_new presets NULL). For
 * built-in plugins, whose init needs more than the settings (the exec hook
 * gets its controller spec this way); a .so's init must not rely on it. */
int kc_plugin_instance_new_arg(kc_plugin *p, const char *controller, const kc_host_env *env,
                               void *init_arg, kc_plugin_instance **out, char *err, size_t errlen);

/* Calls fini (if any), the on_free hook, env->ops->release, and frees.
 * Only once no reconcile of it runs. NULL ok. */
void kc_plugin_instance_free(kc_plugin_instance *inst);

/* fn(arg) runs once, right after the instance's fini, on whichever thread
 * frees it (see Threads): the owner of the settings frees them there. Loop
 * thread, before the instance is handed to a controller. */
void kc_plugin_instance_on_free(kc_plugin_instance *inst, void (*fn)(void *arg), void *arg);

/* kc_reconcile_fn adapter (ud = the instance): runs the plugin's reconcile
 * with a fresh ctx, the log context set to "controller/plugin", and maps its
 * return value into *res (unknown values become KC_RESULT_ERROR). An error
 * returned while the ctx holds a terminal API failure (hostapi.h) becomes
 * KC_RESULT_TERMINAL, its message followed by the failure's reason. */
void kc_plugin_reconcile(void *ud, const char *key, kc_reconcile_result *res);

/* The instance's expectations: the daemon observes owned-object events here. */
kc_expectations *kc_plugin_instance_expectations(kc_plugin_instance *inst);

/* Where the writes of the instance's reconciles are recorded (ownwrites.h;
 * read your own writes): the instance takes a reference (dropped when it is
 * freed); NULL records nothing. Loop thread, before the first reconcile. */
void kc_plugin_instance_set_writes(kc_plugin_instance *inst, kc_ownwrites *w);

/* The host table later loads hand to a plugin's entry point (NULL: the
 * daemon's own, kc_hostapi_table()). A plugin child (isolate_child.h) hands
 * out its proxy table this way. Loop thread, before the first load. */
void kc_plugin_host_set_table(const struct kctrld_host_api *table);

/* dlcloses every loaded file (code stays mapped: RTLD_NODELETE) and frees
 * the lists. Only after every instance is freed (process shutdown, tests). */
void kc_plugin_host_unload_all(void);

/* --- Test seam: for tests only, not called by the daemon --- */
const char *kc_plugin_name(const kc_plugin *p);
const struct kctrld_plugin *kc_plugin_table(const kc_plugin *p);
const char *kc_plugin_instance_controller(const kc_plugin_instance *inst);

#endif
