/* SPDX-License-Identifier: Apache-2.0 */
/* spawn: see spawn.h. */
#include "base/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"

extern char **environ;

static void close_all(int *fds, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
}

/* The file actions and attributes of spawn.h's hygiene; src[i] is what
 * becomes the child's i (a descriptor, or KC_SPAWN_NULL). Returns 0 or a
 * positive errno, as posix_spawn's functions do. */
static int prepare(posix_spawn_file_actions_t *fa, posix_spawnattr_t *at, const int src[3]) {
  static const int null_mode[3] = {O_RDONLY, O_WRONLY, O_WRONLY};
  int e = 0;
  for (int i = 0; i < 3 && !e; i++) {
    if (src[i] == KC_SPAWN_NULL)
      e = posix_spawn_file_actions_addopen(fa, i, "/dev/null", null_mode[i], 0);
    else /* with src[i] == i, glibc clears FD_CLOEXEC instead (Austin Group issue 411) */
      e = posix_spawn_file_actions_adddup2(fa, src[i], i);
  }
  if (!e) e = posix_spawn_file_actions_addclosefrom_np(fa, 3);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  if (!e)
    e = posix_spawnattr_setflags(at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                         POSIX_SPAWN_SETSIGDEF);
  if (!e) e = posix_spawnattr_setpgroup(at, 0);
  if (!e) e = posix_spawnattr_setsigmask(at, &none);
  if (!e) e = posix_spawnattr_setsigdefault(at, &all);
  return e;
}

static int start(const char *const *argv, const char *const *envp, const int src[3], pid_t *pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  int e = posix_spawn_file_actions_init(&fa);
  if (e) return e;
  if ((e = posix_spawnattr_init(&at)) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return e;
  }
  e = prepare(&fa, &at, src);
  if (!e) {
    char *const *av = (char *const *)argv;
    char *const *ev = (char *const *)(envp ? envp : (const char *const *)environ);
    e = strchr(argv[0], '/') ? posix_spawn(pid, argv[0], &fa, &at, av, ev)
                             : posix_spawnp(pid, argv[0], &fa, &at, av, ev);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  return e;
}

int kc_spawn(const char *const *argv, const char *const *envp, const int stdio[3], int ours[3],
             pid_t *pid, char *err, size_t errlen) {
  int src[3];
  int theirs[3] = {-1, -1, -1}; /* the child's pipe ends, and moved copies: closed here */
  int mine[3] = {-1, -1, -1};
  int rc = 0;
  for (int i = 0; i < 3; i++)
    if (!ours && stdio[i] == KC_SPAWN_PIPE) {
      kc_errf(err, errlen, "cannot start %s: no place for its pipe ends", argv[0]);
      return -EINVAL;
    }
  for (int i = 0; i < 3 && !rc; i++) {
    src[i] = stdio[i];
    if (stdio[i] == KC_SPAWN_PIPE) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) {
        rc = -errno;
        break;
      }
      mine[i] = i == 0 ? p[1] : p[0];
      src[i] = theirs[i] = i == 0 ? p[0] : p[1];
    }
    /* A source below 3 other than the target itself would be overwritten
     * by an earlier dup2 in the child (a daemon started with 0-2 closed
     * gets pipes there): it is passed from a copy above 2. */
    if (src[i] >= 0 && src[i] < 3 && src[i] != i) {
      int high = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
      if (high < 0) {
        rc = -errno;
        break;
      }
      if (theirs[i] >= 0) close(theirs[i]);
      src[i] = theirs[i] = high;
    }
  }
  if (rc) {
    kc_errf(err, errlen, "cannot start %s: cannot create its pipes: %s", argv[0], strerror(-rc));
  } else {
    int e = start(argv, envp, src, pid);
    if (e) {
      rc = -e;
      kc_errf(err, errlen, "cannot start %s: %s", argv[0], strerror(e));
    }
  }
  close_all(theirs, 3);
  if (rc) close_all(mine, 3);
  if (ours) memcpy(ours, mine, sizeof mine);
  return rc;
}

int kc_spawn_exited(pid_t pid) {
  siginfo_t info;
  memset(&info, 0, sizeof info); /* si_pid stays 0 while it runs */
  int w;
  do
    w = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT);
  while (w < 0 && errno == EINTR);
  if (w < 0) return -errno;
  return info.si_pid != 0;
}

int kc_spawn_kill_group(pid_t pid, int sig) {
  if (pid <= 0) return -EINVAL; /* kill(0 or 1, ...) would reach other processes */
  return kill(-pid, sig) == 0 ? 0 : -errno;
}

int kc_spawn_reap(pid_t pid, int *status) {
  *status = 0;
  if (pid <= 0) return -ECHILD; /* waitpid would take any child */
  int st;
  pid_t r;
  do
    r = waitpid(pid, &st, 0);
  while (r < 0 && errno == EINTR);
  if (r < 0) return -errno;
  *status = st;
  return 0;
}

void kc_spawn_describe_status(int status, char *buf, size_t cap) {
  if (WIFEXITED(status)) {
    snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *abbrev = sigabbrev_np(sig); /* "SEGV" */
    if (abbrev)
      snprintf(buf, cap, "was killed by signal %d (SIG%s: %s)", sig, abbrev, strsignal(sig));
    else
      snprintf(buf, cap, "was killed by signal %d (%s)", sig, strsignal(sig));
  } else {
    snprintf(buf, cap, "stopped (status 0x%x)", (unsigned)status);
  }
}
