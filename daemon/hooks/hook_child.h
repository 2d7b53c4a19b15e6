/* SPDX-License-Identifier: Apache-2.0 */
/* hook_child: one child process of an exec hook (docs/hooks.md): spawned
 * in its own process group with its stdin, stdout and stderr on pipes to
 * the daemon; one request/response exchange at a time with a deadline;
 * killed (the whole group) and reaped; stopped gracefully (stdin closed,
 * SIGTERM to the group, SIGKILL after a grace period) by a stopper thread
 * so that neither the loop nor a worker waits for it.
 *
 * Spawning is base/spawn.h's (safe from any thread): the child gets exactly
 * fds 0, 1 and 2, an empty signal mask and default signal dispositions.
 * The daemon's ends are non-blocking; a write to a child that closed its
 * stdin is EPIPE (an error of the exchange), never a signal.
 *
 * Owns: the child's pid (until reaped), the daemon's ends of its pipes, the
 * partial stderr line, and the process-wide count of children not reaped
 * yet (kc_hook_children_unreaped) with the stopper threads in flight.
 *
 * Threads: a kc_hook_child is used by one thread at a time (the worker
 * running the reconcile that holds it, or the thread freeing its
 * instance); kc_hook_child_stop hands it to a stopper thread.
 * kc_hook_child_drain and the counters: any thread.
 * Errors: 0 or a negative errno; spawn failures carry a message in err.
 * Ownership: argv and envp are borrowed for the call; output goes into the
 * caller's kc_buf; line callbacks get borrowed text.
 */
#ifndef KC_HOOK_CHILD_H
#define KC_HOOK_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"

typedef struct kc_hook_child kc_hook_child;

/* One line the child wrote to stderr (without the newline; a line over
 * 4 KiB comes in pieces). Called on the thread of the exchange or stop. */
typedef void (*kc_hook_line_fn)(void *ud, pid_t pid, const char *line, size_t len);

/* Starts argv[0] (looked up in PATH when it has no '/') with envp; label
 * (copied; the controller name) names it in the log lines of a stop.
 * Returns 0 and *out, or a negative errno with the reason in err
 * (kc_spawn's: -ENOENT no such program, -EACCES, ...; pipes: -EMFILE ...). */
int kc_hook_child_spawn(const char *label, const char *const *argv, const char *const *envp,
                        kc_hook_child **out, char *err, size_t errlen);

pid_t kc_hook_child_pid(const kc_hook_child *c);

enum kc_hook_read {
  KC_HOOK_READ_LINE = 0, /* persistent mode: the response is one line */
  KC_HOOK_READ_EOF,      /* per-call mode: close stdin after the request; read to EOF */
};

/* Writes req[0..len) to the child's stdin and reads its response into out
 * (reset first, at most max bytes), until deadline_ns (kc_clock_now_ns);
 * stderr lines go to fn meanwhile. LINE: reads up to the first '\n' (not
 * stored), and bytes after it are an error. EOF: closes stdin after the
 * request, reads stdout until EOF and waits for the exit (status in
 * *status: the wait(2) status).
 * Returns 0; -ETIMEDOUT past the deadline; -EPIPE the child closed stdin or
 * stdout, or exited, before answering (LINE); -E2BIG more than max bytes;
 * -EPROTO bytes after the response line, or a response before the whole
 * request was written (LINE); -EIO/-ENOMEM otherwise. After any
 * error the child must be killed (kc_hook_child_kill): its stream can no
 * longer be trusted. */
int kc_hook_child_exchange(kc_hook_child *c, const char *req, size_t len, enum kc_hook_read mode,
                           uint64_t deadline_ns, size_t max, kc_buf *out, int *status,
                           kc_hook_line_fn fn, void *ud);

/* Kills the child's process group (SIGKILL), reaps the child (its exit
 * status in *status when not NULL), forwards what is left on stderr, closes
 * everything and frees c. NULL ok. */
void kc_hook_child_kill(kc_hook_child *c, int *status, kc_hook_line_fn fn, void *ud);

/* Stops children gracefully without waiting here: a stopper thread closes
 * their stdin, sends SIGTERM to each group, waits up to grace_ms for them
 * to exit, then kills what is left (SIGKILL) and reaps everything. Takes
 * ownership of v[0..n) (the array itself stays the caller's); what they
 * still write to stderr is logged with their label. When no thread can be
 * started, the stop happens on the calling thread. */
void kc_hook_child_stop(kc_hook_child *const *v, size_t n, uint64_t grace_ms);

/* Waits until every stop in flight finished, at most timeout_ms. Returns 0
 * or -ETIMEDOUT. Any thread (the daemon before it exits; tests). */
int kc_hook_child_drain(uint64_t timeout_ms);

/* Children spawned and not reaped yet (process-wide; any thread). */
unsigned kc_hook_children_unreaped(void);

#endif
