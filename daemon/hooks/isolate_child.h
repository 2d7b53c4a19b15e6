/* SPDX-License-Identifier: Apache-2.0 */
/* isolate_child: the child side of `isolation: process` (isolate.h), run as
 * `kctrld --plugin-child` with its stdin and stdout on pipes to the daemon.
 * Before anything else it moves that channel onto private close-on-exec
 * descriptors and points fd 0 at /dev/null and fd 1 at stderr (line-
 * buffered), so what a plugin prints to stdout goes to the daemon's log
 * instead of breaking the protocol. It reads the init message, loads the plugin file (plugin_host.h: the same
 * checks as in the daemon) and creates its instance on a proxy host
 * environment; then serves reconcile messages until stdin ends, when it runs
 * the plugin's fini and exits 0.
 *
 * The proxy: the plugin gets the daemon's own host table
 * (kc_hostapi_table()) with the functions that reach state the daemon keeps
 * replaced (log, expect_*, expectations_*, ctx_finalizing, result_finalized,
 * desired_*: the daemon's reconcile of the key commits the set), and its instance's host
 * environment (hostenv.h) is one whose every operation (cache_get,
 * cache_list, cache_by_index, resource, request, may_write, event) is a
 * "call" message answered by the daemon. So everything built on those in
 * hostapi.c (api_*, finalizers, settings, object accessors) runs here
 * unchanged, and a host function added to hostapi.c on top of them needs
 * nothing new here.
 *
 * A crash in the plugin is reported on stderr by crashreport.h (signal,
 * controller, plugin, key, backtrace; the daemon logs the lines) before the
 * child dies by the signal.
 *
 * Owns: the process (it is one). Threads: the main thread runs the
 * conversation; a host call the plugin makes from a thread of its own
 * while no init or reconcile runs answers -EAGAIN (its log lines go to
 * stderr). Calls are serialised by a mutex.
 * Errors: the exit status: 0 after stdin ended, 1 on a broken conversation
 * or when the channel cannot be moved (the daemon kills and restarts such a
 * child anyway).
 */
#ifndef KC_ISOLATE_CHILD_H
#define KC_ISOLATE_CHILD_H

/* The hidden argument that selects the child mode (main.c). */
#define KC_ISOLATE_CHILD_FLAG "--plugin-child"

/* Runs the child until stdin ends. Returns the exit status. */
int kc_isolate_child_main(void);

#endif
