/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/base/spawn.c: a child gets only the descriptors passed
 * to it (not one opened without O_CLOEXEC, not one at a high number), pipes
 * and a socketpair end passed as its stdio, /dev/null, sources below 3 that
 * an earlier dup2 would overwrite, an empty signal mask and default
 * dispositions although the caller blocks and ignores signals, its own
 * process group (a kill of the group reaches a grandchild), and exec
 * failures reported with the program's name, leaving no child and no
 * descriptor behind. Ending a child: whether it exited, seen without
 * reaping it; its group killed after it exited, reaching what it left
 * running; reaping it, also one killed by a signal, and a pid that is not
 * our child; a wait status in words. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/spawn.h"

/* Reads fd to EOF and closes it; the text is NUL-terminated. */
static char *read_all(int fd) {
  size_t cap = 4096, len = 0;
  char *p = malloc(cap);
  assert_non_null(p);
  for (;;) {
    if (len + 1 == cap) {
      cap *= 2;
      p = realloc(p, cap);
      assert_non_null(p);
    }
    ssize_t n = read(fd, p + len, cap - len - 1);
    if (n < 0 && errno == EINTR) continue;
    assert_true(n >= 0);
    if (n == 0) break;
    len += (size_t)n;
  }
  p[len] = '\0';
  close(fd);
  return p;
}

/* Runs argv with stdin /dev/null, stdout on a pipe and stderr as given;
 * returns what it wrote, its wait status in *status. */
static char *run(const char *const *argv, int err_fd, int *status) {
  const int stdio[3] = {KC_SPAWN_NULL, KC_SPAWN_PIPE, err_fd};
  int ours[3];
  pid_t pid = -1;
  char err[256];
  int rc = kc_spawn(argv, NULL, stdio, ours, &pid, err, sizeof err);
  if (rc) fail_msg("spawn: %s", err);
  assert_int_equal(ours[0], -1);
  assert_int_equal(ours[2], -1);
  char *out = read_all(ours[1]);
  assert_int_equal(waitpid(pid, status, 0), pid);
  return out;
}

static int count_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++)
    if (fcntl(fd, F_GETFD) >= 0) n++;
  return n;
}

static void assert_no_children(void) {
  errno = 0;
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
}

/* The child's descriptors as `ls -l /proc/self/fd` lists them: only 0-2
 * and the directory ls itself reads. */
static void test_descriptors_not_passed(void **state) {
  (void)state;
  /* As a library may leave them: without close-on-exec, one at a number
   * far above the others. */
  int marker = memfd_create("kc-spawn-marker", 0);
  assert_true(marker > 2);
  assert_int_equal(dup2(marker, 200), 200);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int status;
  const char *argv[] = {"ls", "-l", "/proc/self/fd", NULL};
  char *out = run(argv, KC_SPAWN_NULL, &status);
  assert_int_equal(status, 0);
  bool seen[3] = {false, false, false};
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
    char *arrow = strstr(line, " -> ");
    if (!arrow) continue; /* "total 0" */
    char *num = arrow;
    while (num > line && num[-1] != ' ')
      num--;
    int fd = atoi(num);
    const char *target = arrow + 4;
    if (fd < 3) {
      seen[fd] = true;
      if (fd == 1)
        assert_true(strncmp(target, "pipe:", 5) == 0);
      else
        assert_string_equal(target, "/dev/null");
    } else if (strncmp(target, "/proc/", 6) != 0) { /* ls's directory */
      fail_msg("fd %d -> %s reached the child", fd, target);
    }
  }
  assert_true(seen[0] && seen[1] && seen[2]);
  free(out);
  close(marker);
  close(200);
  close(sv[0]);
  close(sv[1]);
  assert_no_children();
}

/* One end of a socketpair as stdin and stdout: a conversation. */
static void test_socketpair_passed(void **state) {
  (void)state;
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  const int stdio[3] = {sv[1], sv[1], KC_SPAWN_NULL};
  const char *argv[] = {"sh", "-c", "read -r l; echo \"got $l\"", NULL};
  pid_t pid;
  char err[256];
  assert_int_equal(kc_spawn(argv, NULL, stdio, NULL, &pid, err, sizeof err), 0);
  close(sv[1]); /* the caller's copy: the child has its own */
  assert_int_equal(write(sv[0], "hello\n", 6), 6);
  char *out = read_all(sv[0]);
  assert_string_equal(out, "got hello\n");
  free(out);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_int_equal(status, 0);
}

/* A pipe to the child's stdin, and its environment. */
static void test_stdin_pipe_and_env(void **state) {
  (void)state;
  const int stdio[3] = {KC_SPAWN_PIPE, KC_SPAWN_PIPE, KC_SPAWN_NULL};
  const char *argv[] = {"sh", "-c", "read -r l; echo \"$l $SPAWN_TEST\"", NULL};
  const char *envp[] = {"SPAWN_TEST=env-ok", "PATH=/usr/bin:/bin", NULL};
  int ours[3];
  pid_t pid;
  char err[256];
  assert_int_equal(kc_spawn(argv, envp, stdio, ours, &pid, err, sizeof err), 0);
  assert_true(ours[0] > 2 && ours[1] > 2);
  assert_int_equal(ours[2], -1);
  assert_int_equal(write(ours[0], "line\n", 5), 5);
  close(ours[0]);
  char *out = read_all(ours[1]);
  assert_string_equal(out, "line env-ok\n");
  free(out);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_int_equal(status, 0);
}

/* The caller's fd 0 given as the child's stdout, with stdin /dev/null: the
 * open onto 0 in the child must not replace it first. */
static void test_low_source(void **state) {
  (void)state;
  int saved = dup(0);
  assert_true(saved > 2);
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  assert_int_equal(dup2(p[1], 0), 0);
  close(p[1]);
  const int stdio[3] = {KC_SPAWN_NULL, 0, KC_SPAWN_NULL};
  const char *argv[] = {"sh", "-c", "echo low", NULL};
  pid_t pid;
  char err[256];
  int rc = kc_spawn(argv, NULL, stdio, NULL, &pid, err, sizeof err);
  dup2(saved, 0);
  close(saved);
  assert_int_equal(rc, 0);
  char *out = read_all(p[0]);
  assert_string_equal(out, "low\n");
  free(out);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_int_equal(status, 0);
}

static void on_term(int sig) {
  (void)sig;
}

/* The caller blocks SIGUSR1, ignores SIGPIPE and SIGUSR2 and handles
 * SIGTERM: the program (cat reading its own status) has an empty mask and
 * ignores none of the application's signals. */
static void test_signals_reset(void **state) {
  (void)state;
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  assert_int_equal(pthread_sigmask(SIG_BLOCK, &block, &old), 0);
  struct sigaction ign = {.sa_handler = SIG_IGN}, handler = {.sa_handler = on_term};
  struct sigaction old_pipe, old_usr2, old_term;
  assert_int_equal(sigaction(SIGPIPE, &ign, &old_pipe), 0);
  assert_int_equal(sigaction(SIGUSR2, &ign, &old_usr2), 0);
  assert_int_equal(sigaction(SIGTERM, &handler, &old_term), 0);
  int status;
  const char *argv[] = {"cat", "/proc/self/status", NULL};
  char *out = run(argv, KC_SPAWN_NULL, &status);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  sigaction(SIGPIPE, &old_pipe, NULL);
  sigaction(SIGUSR2, &old_usr2, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  assert_int_equal(status, 0);
  const char *blk = strstr(out, "\nSigBlk:");
  const char *ign_line = strstr(out, "\nSigIgn:");
  assert_non_null(blk);
  assert_non_null(ign_line);
  assert_int_equal(strtoull(blk + 8, NULL, 16), 0);
  /* glibc's reserved signals (32 up to SIGRTMIN) are left ignored by its
   * posix_spawn (spawn.h); every other one has its default action. */
  unsigned long long reserved = 0;
  for (int sig = 32; sig < SIGRTMIN; sig++)
    reserved |= 1ull << (sig - 1);
  assert_int_equal(strtoull(ign_line + 8, NULL, 16) & ~reserved, 0);
  free(out);
}

static bool running(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool alive = fgets(buf, sizeof buf, f) && !strstr(buf, ") Z ");
  fclose(f);
  return alive;
}

/* Its own group: the pgid is the child's pid, and a kill of the group
 * reaches what the child started. */
static void test_process_group(void **state) {
  (void)state;
  const int stdio[3] = {KC_SPAWN_NULL, KC_SPAWN_PIPE, KC_SPAWN_NULL};
  const char *argv[] = {"sh", "-c", "sleep 60 & echo $!; wait", NULL};
  int ours[3];
  pid_t pid;
  char err[256];
  assert_int_equal(kc_spawn(argv, NULL, stdio, ours, &pid, err, sizeof err), 0);
  assert_int_equal(getpgid(pid), pid);
  assert_int_not_equal(getpgid(pid), getpgrp());
  char line[32] = "";
  size_t len = 0;
  while (len < sizeof line - 1 && !memchr(line, '\n', len)) {
    ssize_t n = read(ours[1], line + len, sizeof line - 1 - len);
    assert_true(n > 0);
    len += (size_t)n;
  }
  close(ours[1]);
  pid_t grandchild = (pid_t)atoi(line);
  assert_true(grandchild > 0);
  assert_int_equal(getpgid(grandchild), pid);
  assert_int_equal(kill(-pid, SIGKILL), 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  /* SIGKILL lands asynchronously; the orphan is then init's to reap. */
  for (int i = 0; i < 500 && running(grandchild); i++) {
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  assert_false(running(grandchild));
}

/* A program that does not exist, or cannot be executed: the error names
 * it; no child, no descriptor is left. */
static void test_exec_failure(void **state) {
  (void)state;
  int before = count_fds();
  const int stdio[3] = {KC_SPAWN_PIPE, KC_SPAWN_PIPE, KC_SPAWN_PIPE};
  int ours[3] = {7, 7, 7};
  pid_t pid = -1;
  char err[256];
  const char *missing[] = {"kctrld-no-such-program", NULL};
  assert_int_equal(kc_spawn(missing, NULL, stdio, ours, &pid, err, sizeof err), -ENOENT);
  assert_string_equal(err, "cannot start kctrld-no-such-program: No such file or directory");
  assert_int_equal(ours[0], -1);
  assert_int_equal(ours[1], -1);
  assert_int_equal(ours[2], -1);
  const char *absent[] = {"/nonexistent/kctrld-helper", "arg", NULL};
  assert_int_equal(kc_spawn(absent, NULL, stdio, ours, &pid, err, sizeof err), -ENOENT);
  assert_string_equal(err, "cannot start /nonexistent/kctrld-helper: No such file or directory");
  const char *not_a_program[] = {"/dev/null", NULL};
  assert_int_equal(kc_spawn(not_a_program, NULL, stdio, ours, &pid, err, sizeof err), -EACCES);
  assert_string_equal(err, "cannot start /dev/null: Permission denied");
  /* pipes asked for without a place for their ends */
  assert_int_equal(kc_spawn(missing, NULL, stdio, NULL, &pid, err, sizeof err), -EINVAL);
  assert_int_equal(count_fds(), before);
  assert_no_children();
}

/* Spawns sh -c script with stdin on a pipe (its write end in *in), stdout
 * on a pipe (its read end in *out), stderr /dev/null. */
static pid_t start_sh(const char *script, int *in, int *out) {
  const int stdio[3] = {KC_SPAWN_PIPE, KC_SPAWN_PIPE, KC_SPAWN_NULL};
  const char *argv[] = {"sh", "-c", script, NULL};
  int ours[3];
  pid_t pid = -1;
  char err[256];
  int rc = kc_spawn(argv, NULL, stdio, ours, &pid, err, sizeof err);
  if (rc) fail_msg("spawn: %s", err);
  *in = ours[0];
  *out = ours[1];
  return pid;
}

/* Blocks until child pid exited, leaving it unreaped (what
 * kc_spawn_exited then sees). */
static void wait_exit_unreaped(pid_t pid) {
  siginfo_t si;
  int w;
  do
    w = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT);
  while (w < 0 && errno == EINTR);
  assert_int_equal(w, 0);
}

/* Running, then exited and still unreaped (asked twice), then reaped with
 * its status; after that the pid is no longer ours. */
static void test_exited_and_reap(void **state) {
  (void)state;
  int in, out;
  pid_t pid = start_sh("read line; exit 5", &in, &out);
  assert_int_equal(kc_spawn_exited(pid), 0);
  close(in); /* read sees EOF: the script exits */
  wait_exit_unreaped(pid);
  assert_int_equal(kc_spawn_exited(pid), 1);
  assert_int_equal(kc_spawn_exited(pid), 1); /* looking does not reap */
  int status = -1;
  assert_int_equal(kc_spawn_reap(pid, &status), 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 5);
  assert_int_equal(kc_spawn_exited(pid), -ECHILD);
  status = -1;
  assert_int_equal(kc_spawn_reap(pid, &status), -ECHILD);
  assert_int_equal(status, 0);
  close(out);
  assert_no_children();
}

/* A child killed by a signal through its group: the status says which,
 * and in words. */
static void test_killed_by_signal(void **state) {
  (void)state;
  int in, out;
  pid_t pid = start_sh("echo up; exec sleep 60 >/dev/null", &in, &out);
  char *line = read_all(out); /* EOF once sleep runs in the child */
  assert_string_equal(line, "up\n");
  free(line);
  assert_int_equal(kc_spawn_exited(pid), 0);
  assert_int_equal(kc_spawn_kill_group(pid, SIGTERM), 0);
  int status;
  assert_int_equal(kc_spawn_reap(pid, &status), 0);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGTERM);
  char buf[128];
  kc_spawn_describe_status(status, buf, sizeof buf);
  assert_string_equal(buf, "was killed by signal 15 (SIGTERM: Terminated)");
  close(in);
  assert_no_children();
}

/* A child that exited and left a process running in its group: while the
 * exited child is unreaped its pid still names the group, and killing the
 * group reaches the grandchild. */
static void test_kill_group_after_exit(void **state) {
  (void)state;
  int in, out;
  pid_t pid = start_sh("sleep 60 >/dev/null & echo $!", &in, &out);
  char *line = read_all(out); /* EOF: the shell exited, sleep has no stdout of ours */
  pid_t grandchild = (pid_t)atoi(line);
  free(line);
  assert_true(grandchild > 0);
  wait_exit_unreaped(pid);
  assert_int_equal(kc_spawn_exited(pid), 1);
  assert_int_equal(getpgid(grandchild), pid);
  assert_true(running(grandchild));
  assert_int_equal(kc_spawn_kill_group(pid, SIGKILL), 0);
  int status;
  assert_int_equal(kc_spawn_reap(pid, &status), 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  /* SIGKILL lands asynchronously; the orphan is then init's to reap. */
  for (int i = 0; i < 500 && running(grandchild); i++) {
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  assert_false(running(grandchild));
  close(in);
  assert_no_children();
}

/* A pid that is not our child: nothing to look at, nothing to reap; no
 * group is signalled for pid 0 or below. */
static void test_unknown_pid(void **state) {
  (void)state;
  int status = -1;
  assert_int_equal(kc_spawn_reap(1, &status), -ECHILD);
  assert_int_equal(status, 0);
  assert_int_equal(kc_spawn_exited(1), -ECHILD);
  status = -1;
  assert_int_equal(kc_spawn_reap(0, &status), -ECHILD);
  assert_int_equal(status, 0);
  assert_int_equal(kc_spawn_kill_group(0, 0), -EINVAL);
}

/* Wait statuses in words: an exit, a signal named by its abbreviation, a
 * stop; a short buffer gets a terminated prefix. */
static void test_describe_status(void **state) {
  (void)state;
  char buf[128];
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    _exit(0);
  }
  int st = 0;
  assert_int_equal(kc_spawn_reap(pid, &st), 0);
  kc_spawn_describe_status(st, buf, sizeof buf);
  assert_string_equal(buf, "was killed by signal 11 (SIGSEGV: Segmentation fault)");
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(3);
  assert_int_equal(kc_spawn_reap(pid, &st), 0);
  kc_spawn_describe_status(st, buf, sizeof buf);
  assert_string_equal(buf, "exited with status 3");
  kc_spawn_describe_status(st, buf, 8);
  assert_string_equal(buf, "exited ");
  kc_spawn_describe_status(0x137f, buf, sizeof buf); /* stopped by SIGSTOP (WUNTRACED) */
  assert_string_equal(buf, "stopped (status 0x137f)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_descriptors_not_passed),
      cmocka_unit_test(test_socketpair_passed),
      cmocka_unit_test(test_stdin_pipe_and_env),
      cmocka_unit_test(test_low_source),
      cmocka_unit_test(test_signals_reset),
      cmocka_unit_test(test_process_group),
      cmocka_unit_test(test_exec_failure),
      cmocka_unit_test(test_exited_and_reap),
      cmocka_unit_test(test_killed_by_signal),
      cmocka_unit_test(test_kill_group_after_exit),
      cmocka_unit_test(test_unknown_pid),
      cmocka_unit_test(test_describe_status),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
