/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/hooks/hook_child.c: spawning (own process group, default
 * signal dispositions although the test ignores SIGPIPE like kctrld, only
 * fds 0-2), line and EOF exchanges, stderr line forwarding, every failure
 * of an exchange (exit, timeout, garbage after the line, too large), kill
 * and the graceful stop (SIGTERM, then SIGKILL for a child ignoring it),
 * with every child reaped: no zombie is left. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "hooks/hook_child.h"

extern char **environ;

static char lines[16][256];
static int nlines;

static void on_line(void *ud, pid_t pid, const char *line, size_t len) {
  (void)ud;
  (void)pid;
  if (nlines < 16) snprintf(lines[nlines++], sizeof lines[0], "%.*s", (int)len, line);
}

static kc_hook_child *sh(const char *script) {
  const char *argv[] = {"sh", "-c", script, NULL};
  kc_hook_child *c = NULL;
  char err[256];
  int rc = kc_hook_child_spawn("test", argv, (const char *const *)environ, &c, err, sizeof err);
  if (rc) fail_msg("spawn: %s", err);
  return c;
}

static uint64_t in_ms(uint64_t ms) {
  return kc_clock_now_ns() + ms * 1000000ull;
}

/* No child of this process is left, reaped or not. */
static void assert_no_children(void) {
  assert_int_equal(kc_hook_children_unreaped(), 0);
  errno = 0;
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
}

static int setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN); /* as kctrld's main() */
  nlines = 0;
  return 0;
}

static void test_line_exchange(void **state) {
  (void)state;
  kc_hook_child *c = sh("echo started >&2; while read -r l; do echo \"got $l\"; done");
  pid_t pid = kc_hook_child_pid(c);
  assert_int_equal(getpgid(pid), pid); /* its own process group */
  kc_buf out = {0};
  assert_int_equal(kc_hook_child_exchange(c, "one\n", 4, KC_HOOK_READ_LINE, in_ms(5000), 100, &out,
                                          NULL, on_line, NULL),
                   0);
  assert_string_equal(out.p, "got one");
  assert_int_equal(kc_hook_child_exchange(c, "two\n", 4, KC_HOOK_READ_LINE, in_ms(5000), 100, &out,
                                          NULL, on_line, NULL),
                   0);
  assert_string_equal(out.p, "got two");
  int status = -1;
  kc_hook_child_kill(c, &status, on_line, NULL);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGKILL);
  assert_true(nlines >= 1);
  assert_string_equal(lines[0], "started");
  kc_buf_free(&out);
  assert_no_children();
}

/* One LINE exchange with a fresh child of script; the child is killed after. */
static int line_rc(const char *script, const char *req, size_t len, uint64_t ms, size_t max) {
  kc_buf out = {0};
  kc_hook_child *c = sh(script);
  int rc = kc_hook_child_exchange(c, req, len, KC_HOOK_READ_LINE, in_ms(ms), max, &out, NULL,
                                  on_line, NULL);
  kc_hook_child_kill(c, NULL, on_line, NULL);
  kc_buf_free(&out);
  return rc;
}

static void test_line_failures(void **state) {
  (void)state;
  kc_buf out = {0};
  /* exits before answering */
  kc_hook_child *c = sh("read -r l; echo bye >&2; exit 3");
  assert_int_equal(kc_hook_child_exchange(c, "x\n", 2, KC_HOOK_READ_LINE, in_ms(5000), 100, &out,
                                          NULL, on_line, NULL),
                   -EPIPE);
  int status = 0;
  kc_hook_child_kill(c, &status, on_line, NULL);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 3);
  assert_string_equal(lines[nlines - 1], "bye");
  /* hangs; two lines for one request (printf writes both at once: one
   * read); an answer before the request was read; more than max */
  assert_int_equal(line_rc("sleep 30", "x\n", 2, 100, 100), -ETIMEDOUT);
  assert_int_equal(line_rc("read -r l; printf 'a\\nb\\n'; sleep 30", "x\n", 2, 5000, 100), -EPROTO);
  char *req = malloc(1 << 20);
  assert_non_null(req);
  memset(req, 'x', (1 << 20) - 1);
  req[(1 << 20) - 1] = '\n';
  assert_int_equal(line_rc("echo early; sleep 30", req, 1 << 20, 5000, 100), -EPROTO);
  free(req);
  assert_int_equal(
      line_rc("read -r l; head -c 5000 /dev/zero | tr '\\0' a; echo", "x\n", 2, 5000, 1000),
      -E2BIG);
  /* a child that never reads its stdin: the write gets EPIPE, not SIGPIPE */
  c = sh("exec 0<&-; sleep 0.2; exit 0");
  char *big = malloc(1 << 20);
  assert_non_null(big);
  memset(big, 'x', 1 << 20);
  assert_int_equal(kc_hook_child_exchange(c, big, 1 << 20, KC_HOOK_READ_LINE, in_ms(5000), 100,
                                          &out, NULL, on_line, NULL),
                   -EPIPE);
  kc_hook_child_kill(c, NULL, on_line, NULL);
  free(big);
  kc_buf_free(&out);
  assert_no_children();
}

/* Processes of group pgid that are not zombies (from /proc). */
static int running_in_group(pid_t pgid) {
  DIR *d = opendir("/proc");
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *rp = strrchr(buf, ')');
    char state;
    int ppid, grp;
    if (rp && sscanf(rp + 2, "%c %d %d", &state, &ppid, &grp) == 3 && grp == pgid && state != 'Z')
      n++;
  }
  closedir(d);
  return n;
}

static void test_eof_exchange(void **state) {
  (void)state;
  kc_buf out = {0};
  int status = -1;
  kc_hook_child *c = sh("cat; echo done >&2");
  assert_int_equal(kc_hook_child_exchange(c, "{\"a\":1}", 7, KC_HOOK_READ_EOF, in_ms(5000), 100,
                                          &out, &status, on_line, NULL),
                   0);
  assert_string_equal(out.p, "{\"a\":1}");
  assert_int_equal(status, 0);
  kc_hook_child_kill(c, NULL, on_line, NULL); /* already reaped: only closes */
  assert_string_equal(lines[nlines - 1], "done");
  /* exit status comes back; a command ignoring its stdin is fine */
  c = sh("echo out; exit 2");
  char *big = malloc(1 << 20);
  assert_non_null(big);
  memset(big, 'x', 1 << 20);
  assert_int_equal(kc_hook_child_exchange(c, big, 1 << 20, KC_HOOK_READ_EOF, in_ms(5000), 100, &out,
                                          &status, on_line, NULL),
                   0);
  free(big);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 2);
  assert_string_equal(out.p, "out\n");
  kc_hook_child_kill(c, NULL, on_line, NULL);
  /* what a per-call script leaves running in its group dies with it */
  c = sh("sleep 30 >/dev/null 2>&1 & echo '{}'");
  pid_t pgid = kc_hook_child_pid(c);
  assert_int_equal(kc_hook_child_exchange(c, "", 0, KC_HOOK_READ_EOF, in_ms(5000), 100, &out,
                                          &status, on_line, NULL),
                   0);
  kc_hook_child_kill(c, NULL, on_line, NULL);
  /* (SIGKILL was sent; its delivery is asynchronous: wait, bounded) */
  for (int i = 0; running_in_group(pgid) && i < 500; i++)
    usleep(10 * 1000);
  assert_int_equal(running_in_group(pgid), 0);
  /* stdout closed, but the process keeps running: the deadline ends it */
  c = sh("exec 1>&-; sleep 30");
  assert_int_equal(kc_hook_child_exchange(c, "", 0, KC_HOOK_READ_EOF, in_ms(100), 100, &out,
                                          &status, on_line, NULL),
                   -ETIMEDOUT);
  kc_hook_child_kill(c, NULL, on_line, NULL);
  kc_buf_free(&out);
  assert_no_children();
}

static void test_child_environment(void **state) {
  (void)state;
  kc_buf out = {0};
  int status;
  /* Another child's pipes exist meanwhile, and a descriptor without
   * FD_CLOEXEC (as a library may leave one): neither may leak. */
  kc_hook_child *other = sh("sleep 30");
  int stray = open("/dev/null", O_RDONLY);
  assert_true(stray > 2);
  /* SIGPIPE is ignored here (setup) and SIGUSR1 blocked: the child has neither. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  const char *envp[] = {"HOOK_TEST=yes", "PATH=/usr/bin:/bin", NULL};
  const char *argv[] = {
      "sh", "-c",
      "grep -E '^Sig(Ign|Blk)' /proc/self/status; echo $HOOK_TEST; exec ls /proc/self/fd", NULL};
  kc_hook_child *c = NULL;
  char err[256];
  assert_int_equal(kc_hook_child_spawn("test", argv, envp, &c, err, sizeof err), 0);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  assert_int_equal(kc_hook_child_exchange(c, "", 0, KC_HOOK_READ_EOF, in_ms(5000), 4096, &out,
                                          &status, on_line, NULL),
                   0);
  kc_hook_child_kill(c, NULL, on_line, NULL);
  kc_hook_child_kill(other, NULL, on_line, NULL);
  unsigned long blk, ign;
  char yes[8];
  int used = 0;
  assert_int_equal(sscanf(out.p, "SigBlk: %lx SigIgn: %lx %7s %n", &blk, &ign, yes, &used), 3);
  assert_int_equal(blk, 0);
  assert_int_equal(ign & (1ul << (SIGPIPE - 1)), 0); /* default again */
  assert_string_equal(yes, "yes");
  close(stray);
  /* ls's fds: 0-2 and the directory it reads (3), nothing else. */
  int fds = 0;
  for (char *p = out.p + used; *p;) {
    int fd = atoi(p);
    if (fd > 3) fail_msg("fd %d leaked into the child", fd);
    fds++;
    p = strchr(p, '\n');
    if (!p) break;
    p++;
  }
  assert_true(fds >= 4);
  /* a program that does not exist */
  const char *none[] = {"kctrld-no-such-hook", NULL};
  assert_int_equal(kc_hook_child_spawn("test", none, envp, &c, err, sizeof err), -ENOENT);
  assert_string_equal(err, "cannot start kctrld-no-such-hook: No such file or directory");
  kc_buf_free(&out);
  assert_no_children();
}

static void test_stop(void **state) {
  (void)state;
  /* one that exits on EOF, one that ignores SIGTERM, one killed by it; the
   * stubborn one's grandchild dies with its group */
  kc_hook_child *v[3] = {
      sh("read -r l; exit 0"),
      sh("trap '' TERM; sleep 30 & while :; do sleep 1; done"),
      sh("sleep 30"),
  };
  pid_t pids[3];
  for (int i = 0; i < 3; i++)
    pids[i] = kc_hook_child_pid(v[i]);
  assert_int_equal(kc_hook_children_unreaped(), 3);
  kc_hook_child_stop(v, 3, 200);
  assert_int_equal(kc_hook_child_drain(10000), 0);
  assert_no_children();
  for (int i = 0; i < 3; i++) {
    assert_int_equal(kill(pids[i], 0), -1);
    /* the whole group is gone: a killed grandchild may still be a zombie
     * until init reaps it, but none runs (SIGKILL lands asynchronously: a
     * loaded machine may show it running for a moment, so poll, bounded) */
    int left = running_in_group(pids[i]);
    for (int tries = 0; left && tries < 500; tries++) {
      usleep(10 * 1000);
      left = running_in_group(pids[i]);
    }
    assert_int_equal(left, 0);
  }
  assert_int_equal(kc_hook_child_drain(0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_line_exchange, setup),
      cmocka_unit_test_setup(test_line_failures, setup),
      cmocka_unit_test_setup(test_eof_exchange, setup),
      cmocka_unit_test_setup(test_child_environment, setup),
      cmocka_unit_test_setup(test_stop, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
