/* SPDX-License-Identifier: Apache-2.0 */
/* spawn: the one way the daemon starts a child process (exec credential
 * plugins, exec hooks, isolated plugin children). It owns the child's
 * hygiene, the same for every child:
 *  - descriptors: the child has exactly 0, 1 and 2, each one the caller
 *    chose (a new pipe, /dev/null, or a descriptor of the caller such as one
 *    end of a socketpair); every other descriptor is closed in the child,
 *    also one a library opened without O_CLOEXEC (a socket to the API
 *    server, a plugin's file), so no credential or connection leaks;
 *  - signals: the mask is empty and every signal has its default action
 *    (the daemon ignores SIGPIPE and its worker threads block signals:
 *    neither must reach a program that expects a fresh process). The one
 *    exception is glibc's own: it reserves signals 32 and 33 (below
 *    SIGRTMIN) for thread cancellation and set*id, refuses them to
 *    sigaction(), and its posix_spawn leaves them ignored in the child so
 *    that no handler of the parent can run before the exec; a program's C
 *    library installs its handlers for them when it uses them;
 *  - its own process group (pgid = its pid), so the daemon can signal the
 *    child together with whatever it started (kc_spawn_kill_group).
 *
 * Why posix_spawn (glibc 2.36, Debian 12) and not fork + exec: glibc's
 * posix_spawn runs the child on a separate stack in a clone(CLONE_VM |
 * CLONE_VFORK), so nothing between the clone and the exec allocates or takes
 * a lock that another thread of the daemon (libuv, libcurl, the workers)
 * might hold; it copies no page tables, which matters with a large cache in
 * the heap; an exec failure comes back as posix_spawn's own result (ENOENT,
 * EACCES, ...) instead of a child that exits 127; and every hygiene step
 * above is an attribute or file action (POSIX_SPAWN_SETSIGMASK,
 * POSIX_SPAWN_SETSIGDEF, POSIX_SPAWN_SETPGROUP, and
 * posix_spawn_file_actions_addclosefrom_np, glibc 2.34 and later, which
 * closes through close_range(2)).
 *
 * Threads: any thread, concurrently. The pipes are created close-on-exec,
 * so a child another thread starts meanwhile does not get them either.
 * Errors: a negative errno with a message naming the program in err.
 * Ownership: argv and envp are borrowed for the call; the returned pipe
 * ends and the pid (to be reaped with kc_spawn_reap) are the caller's.
 *
 * Ending a child: a pid is only safe to signal while it is not reaped (a
 * reaped pid, and so its group id, may belong to another process by now).
 * So the order is: kc_spawn_exited (which leaves the child a zombie that
 * holds its pid), kc_spawn_kill_group for what it left running in its group
 * (a script's background processes), then kc_spawn_reap. The functions act
 * on that one pid, never on "any child" (waitpid(-1)): children of other
 * parts of the daemon, or of a library, are not touched.
 */
#ifndef KC_SPAWN_H
#define KC_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/* What one of the child's descriptors 0, 1, 2 is, besides a descriptor
 * >= 0 of the caller that is passed on (the caller keeps its copy). */
enum {
  KC_SPAWN_NULL = -1, /* /dev/null (read-only as 0, write-only as 1 and 2) */
  KC_SPAWN_PIPE = -2, /* a new pipe; the caller's end comes back in ours[] */
};

/* Starts argv[0] (looked up in the daemon's PATH when it has no '/') with
 * argv and envp (NULL: the daemon's environment), its descriptor i set up
 * as stdio[i] says. For each KC_SPAWN_PIPE, ours[i] gets the caller's end
 * (the write end for 0, the read end for 1 and 2; blocking, close-on-exec);
 * the other entries of ours[] are -1 (ours may be NULL without pipes;
 * with one it is -EINVAL).
 * Returns 0 and *pid, or a negative errno (-ENOENT no such program,
 * -EACCES, -EMFILE for the pipes, ...) with "cannot start PROGRAM: reason"
 * in err; then nothing is left open and no child exists. */
int kc_spawn(const char *const *argv, const char *const *envp, const int stdio[3], int ours[3],
             pid_t *pid, char *err, size_t errlen);

/* Whether child pid has exited, without waiting and without reaping it
 * (waitid WNOWAIT): 1 exited (a zombie until kc_spawn_reap), 0 still
 * running, or a negative errno (-ECHILD: not our child, or reaped). */
int kc_spawn_exited(pid_t pid);

/* Sends sig to the process group of child pid (the group spawn.h gives it),
 * which reaches what the child started too. Only for a pid not reaped yet.
 * 0 or a negative errno (-ESRCH: the group has no process left). */
int kc_spawn_kill_group(pid_t pid, int sig);

/* Waits for child pid to exit and reaps it: 0 with its wait status in
 * *status, or a negative errno (-ECHILD: not our child, or reaped already)
 * with *status 0. Blocks; call it once the child exited or was killed. */
int kc_spawn_reap(pid_t pid, int *status);

/* A wait status in words, for a log line or an error after the program's
 * name: "exited with status 3", "was killed by signal 11 (SIGSEGV:
 * Segmentation fault)". Truncated to cap, always terminated. */
void kc_spawn_describe_status(int status, char *buf, size_t cap);

#endif
