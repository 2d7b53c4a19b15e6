/* SPDX-License-Identifier: Apache-2.0 */
/* hook_exec: exec hooks (docs/hooks.md), a built-in plugin implementation:
 * a struct kctrld_plugin compiled into the daemon that plugin_host
 * instantiates like a .so (kc_plugin_builtin + kc_plugin_instance_new_arg,
 * with the controller's kc_controller_spec as init argument). Its reconcile
 * builds the kctrld.io/hook/v1 request from the cache and performs the
 * response's actions through the host table (hook_host.h); in between the
 * request goes to a child process (hook_child.h):
 *   - persistent (default): one long-running child per worker slot
 *     (base/childpool.h), one JSON line each way; a child that exits, hangs
 *     past the timeout or writes garbage is killed, the key it was
 *     reconciling fails (the workqueue's per-key backoff), and the next key
 *     gets a new child at once. Only a program that loses its child for
 *     KC_CHILDPOOL_BREAK_KEYS distinct keys in a row backs off as a whole
 *     (KC_HOOK_RESTART_BASE_MS doubling to KC_HOOK_RESTART_MAX_MS); a key
 *     finding no running child meanwhile is held: requeued after the
 *     backoff without being run or charged (no error, no attempt);
 *   - per-call: the command runs once per reconcile.
 * Every other failure is an error result, so the key gets the workqueue's
 * per-key backoff; stderr goes to the log line by line with controller
 * and key (the host's log).
 *
 * Owns (per instance): copies of the command, environment and kinds; the
 * worker slots with their persistent children (a kc_childpool); the
 * per-key attempt counters (keys that failed since their last success; a
 * held key is not counted). fini hands the
 * children to kc_hook_child_stop (SIGTERM, SIGKILL after stopGracePeriod,
 * reaped); kc_hook_child_drain waits for that.
 *
 * A command[0] given as a path must pass the plugin files' permission rule
 * (fileperm.h: not writable by others, owned by root or the daemon); init
 * refuses it otherwise (-EPERM, -ENOENT, -EINVAL), so the controller is
 * retried with backoff and /readyz names the reason.
 *
 * Threads: init/fini as plugin.h (loop thread, or the last worker of an
 * abandoned reconcile for fini); reconcile on worker threads, concurrently
 * for different keys (the slots and the counters each under a mutex, held
 * only to pick or give back a slot, or to count). Errors: init returns 0, -EINVAL (no hook
 * spec, or the program is not a regular file), -EPERM, -ENOENT (above) or
 * -ENOMEM. Ownership: the spec is borrowed during init only.
 */
#ifndef KC_HOOK_EXEC_H
#define KC_HOOK_EXEC_H

#include "config/config.h"
#include "kctrld/plugin.h"

/* The backoff of a program that fails for every key (exec hooks and
 * isolated plugins; base/childpool.h). */
#define KC_HOOK_RESTART_BASE_MS 250
#define KC_HOOK_RESTART_MAX_MS (10 * 1000)

/* The checks init makes before anything runs, for --check-config too
 * (configcheck.c): a command[0] given as a path exists and passes the
 * plugin files' permission rule. Returns 0, -ENOENT, -EPERM or -EINVAL with
 * a message naming the program in err. Any thread. */
int kc_hook_exec_check(const kc_hook_exec_spec *ex, char *err, size_t errlen);

/* The built-in plugin table ("exec-hook"); static storage. */
const struct kctrld_plugin *kc_hook_exec_plugin(void);

#endif
