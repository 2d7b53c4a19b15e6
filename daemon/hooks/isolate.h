/* SPDX-License-Identifier: Apache-2.0 */
/* isolate: `isolation: process` (docs/plugins.md "Process isolation"), the
 * daemon's side. A built-in plugin (struct kctrld_plugin compiled into the
 * daemon, instantiated by plugin_host with the controller's
 * kc_controller_spec as init argument, like the hooks of hook_exec.h) whose
 * reconcile hands the key to a child process running the real .so: the
 * kctrld binary itself re-executed as `kctrld --plugin-child`
 * (isolate_child.h), which dlopens the plugin and runs its init and
 * reconciles with a proxy host environment. Every host call the plugin makes
 * in the child comes back over the child's stdin/stdout (isolate_wire.h) and
 * is answered here, on the reconcile's worker thread, from this instance's
 * own host environment and ctx: cache reads from the daemon's cache, API
 * requests through the daemon's client with its write fence (leadership),
 * Events through its recorder, expectations on the instance's record, log
 * lines with the controller and key. So a plugin behaves as in-process, but
 * a crash, abort or hang costs only the key it was reconciling.
 *
 * One child per worker slot (the controller's `workers:`), each with its own
 * init: no multiplexing, so a crash loses exactly one reconcile and the
 * slots never wait for each other. Supervision is hook_child.h's (own
 * process group, killed with its group, reaped, stopped with SIGTERM then
 * SIGKILL at fini): a child that dies (signal or exit), hangs past the
 * controller's reconcileTimeout or breaks the protocol is killed; its key
 * gets an error result (the workqueue's per-key backoff), the failure is
 * logged at error level naming the signal, the plugin path and the key, and
 * counted in controller_runtime_reconcile_panics_total{controller}. The next
 * key gets a new child at once (base/childpool.h); only a plugin that loses
 * its child for KC_CHILDPOOL_BREAK_KEYS distinct keys in a row backs off as
 * a whole (KC_HOOK_RESTART_BASE_MS doubling to KC_HOOK_RESTART_MAX_MS), and
 * a key finding no running child meanwhile is held: requeued after the
 * backoff, not run, no error, no attempt charged.
 * A child found dead when its slot is taken (it died between reconciles) is
 * reaped and logged, and the key gets a new child: no error, no panic.
 * The child's stderr goes to the log line by line.
 *
 * init starts the first slot's child and runs the plugin's init there (on
 * the loop thread, waiting at most reconcileTimeout): an init that fails or
 * a plugin that does not load fails the instance like in-process, with the
 * child's message. The other slots start on first use. Before it, init
 * records the file's identity with plugin_host (kc_plugin_file_used), so
 * that kc_plugin_file_changed sees a rebuild at the same path and a SIGHUP
 * re-instantiates the controller, restarting its children on the new code,
 * as for an in-process plugin. The child checks the file as kc_plugin_load
 * does (ownership and mode, fileperm.h; the daemon's
 * --allow-insecure-permissions is passed on).
 *
 * Owns (per instance): the shared hook base (hook_host.h), copies of the
 * plugin path and of the settings as YAML text, the slots and their
 * children (a kc_childpool). Process-wide: the panics counters per controller name. The
 * child is this same binary (/proc/self/exe) with --plugin-child.
 * Threads: init/fini as plugin.h; reconcile on worker threads, concurrently
 * for different keys (the pool's mutex, held only to pick or give back a
 * slot). The counters:
 * any thread.
 * Errors: init returns 0, -EINVAL (no spec), -ENOMEM, the child's init or
 * load error, or -EPROTO/-ETIMEDOUT/-EPIPE when the child failed to start it.
 * Ownership: the spec is borrowed during init only.
 */
#ifndef KC_ISOLATE_H
#define KC_ISOLATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "kctrld/plugin.h"
#include "json/yamltree.h"

/* The largest message a child may send (a create body, a list answer). */
#define KC_ISOLATE_MAX_MESSAGE (64u << 20)

/* The built-in plugin table ("isolated"); static storage. */
const struct kctrld_plugin *kc_isolate_plugin(void);

/* controller_runtime_reconcile_panics_total of a controller: the reconciles
 * whose child crashed, hung or broke the protocol. Any thread. */
uint64_t kc_isolate_panics(const char *controller);

/* The children of idle slots that died (between reconciles) since the last
 * look: reaped, logged at error level (pid, signal or status, "while
 * idle") and counted (kc_isolate_idle_exits), no key charged; the slot's
 * next reconcile starts a new child. Only the instances' own pids are
 * waited for (never waitpid(-1): other children are not touched). A few
 * syscalls per idle slot. Any thread; the daemon calls it on its 1 s loop
 * tick. Returns how many were reaped. */
unsigned kc_isolate_reap_idle(void);

/* Children of a controller that died while idle (found by
 * kc_isolate_reap_idle or when their slot was next used). Any thread. */
uint64_t kc_isolate_idle_exits(const char *controller);

/* Appends node as YAML block text that kc_yaml_load_buffer reads back as the
 * same tree (types, plain or quoted scalars); how settings reach the child. */
void kc_isolate_yaml_write(kc_buf *b, const kc_yaml_node *node);

#endif
