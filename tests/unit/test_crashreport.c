/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/crashreport: in a forked child, a real NULL
 * dereference (and an abort) on a thread that published its work; the
 * parent reads the child's stderr through a pipe and checks the report and
 * that the child died by the signal itself. Skipped under AddressSanitizer,
 * where the report is off by design. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/crashreport.h"

static int crash_sig;

static void *other_main(void *arg) {
  (void)arg;
  kc_crash_thread_enter();
  kc_crash_busy("bystander", "/lib/ok.so", "ns/innocent");
  for (;;) pause();
  return NULL;
}

static void *crasher_main(void *arg) {
  (void)arg;
  /* As a worker thread: every signal blocked at creation. */
  if (kc_crash_thread_enter() != 0) _exit(3);
  kc_crash_busy("crashy", "/plugins/segv.so", "default/boom");
  if (crash_sig == SIGABRT) abort();
  volatile int *p = NULL;
  *p = 1;
  return NULL;
}

/* Runs the crash in a child; returns its stderr, *status its wait status. */
static char *crash_child(int sig, int *status) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    dup2(fds[1], 2);
    close(fds[0]);
    if (kc_crash_install() != 0) _exit(2);
    crash_sig = sig;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    pthread_t t1, t2;
    if (pthread_create(&t1, NULL, other_main, NULL) != 0) _exit(4);
    usleep(50000);
    if (pthread_create(&t2, NULL, crasher_main, NULL) != 0) _exit(4);
    pthread_join(t2, NULL);
    _exit(5);
  }
  close(fds[1]);
  static char buf[16384];
  size_t n = 0;
  ssize_t r;
  while ((r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
  buf[n] = '\0';
  close(fds[0]);
  assert_int_equal(waitpid(pid, status, 0), pid);
  return buf;
}

static void test_segv_report(void **state) {
  (void)state;
  int st;
  char *err = crash_child(SIGSEGV, &st);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 2) skip(); /* AddressSanitizer: report off */
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV) fail_msg("status %#x, stderr:\n%s", st, err);
  assert_non_null(strstr(err, "kctrld: fatal signal SIGSEGV (segmentation fault) (11) at address 0x0 "
                              "while reconciling controller=crashy plugin=/plugins/segv.so key=default/boom "
                              "thread="));
  assert_non_null(strstr(err, "kctrld: also reconciling at the time: controller=bystander "
                              "plugin=/lib/ok.so key=ns/innocent thread="));
  assert_non_null(strstr(err, "kctrld: backtrace:\n"));
  assert_non_null(strstr(err, "kctrld: re-raising the signal with its default action\n"));
}

static void test_abort_report(void **state) {
  (void)state;
  int st;
  char *err = crash_child(SIGABRT, &st);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 2) skip();
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT) fail_msg("status %#x, stderr:\n%s", st, err);
  assert_non_null(strstr(err, "kctrld: fatal signal SIGABRT (abort) (6) while reconciling "
                              "controller=crashy plugin=/plugins/segv.so key=default/boom"));
}

static void test_idle_and_slots(void **state) {
  (void)state;
  /* Without install every call is a no-op and costs nothing. */
  assert_false(kc_crash_installed());
  assert_int_equal(kc_crash_thread_enter(), 0);
  kc_crash_busy("a", "b", "c");
  kc_crash_idle();
  kc_crash_thread_leave();
#if defined(__SANITIZE_ADDRESS__)
  /* ASan's own handler reports crashes: install says so with an errno. */
  assert_int_equal(kc_crash_install(), -ENOTSUP);
  assert_false(kc_crash_installed());
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idle_and_slots),
      cmocka_unit_test(test_segv_report),
      cmocka_unit_test(test_abort_report),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
