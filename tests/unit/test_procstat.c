/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/base/procstat.c: the /proc/<pid>/stat and
 * /proc/stat parsers on kernel-format text (odd command names included),
 * and the live figures of this very process. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/procstat.h"

/* Fields 3..52 of a real line, with utime 250, stime 50, starttime 12345,
 * vsize 409600 and rss 100 at fields 14, 15, 22, 23 and 24. */
#define AFTER_COMM                                                                                \
  " S 1 1234 1234 0 -1 4194560 1517 0 0 0 250 50 0 0 20 0 3 0 12345 409600 100 "                   \
  "18446744073709551615 1 1 0 0 0 0 0 4096 17408 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

static void parse_ok(const char *text, kc_proc_stat_fields *f) {
  assert_int_equal(kc_procstat_parse_stat(text, strlen(text), f), 0);
}

static void test_parse_stat(void **state) {
  (void)state;
  kc_proc_stat_fields f;
  parse_ok("1234 (kctrld)" AFTER_COMM, &f);
  assert_int_equal(f.utime_ticks, 250);
  assert_int_equal(f.stime_ticks, 50);
  assert_int_equal(f.starttime_ticks, 12345);
  assert_int_equal(f.vsize_bytes, 409600);
  assert_int_equal(f.rss_pages, 100);
  /* A command name may hold spaces and parentheses: the last ')' ends it. */
  parse_ok("1234 (a) b (c)) 1 2)" AFTER_COMM, &f);
  assert_int_equal(f.utime_ticks, 250);
  assert_int_equal(f.rss_pages, 100);
  /* Without the trailing newline, and a negative rss. */
  parse_ok("7 (x) S 1 1 1 0 -1 0 0 0 0 0 9 8 0 0 20 0 1 0 77 4096 -1", &f);
  assert_int_equal(f.utime_ticks, 9);
  assert_int_equal(f.starttime_ticks, 77);
  assert_int_equal(f.rss_pages, -1);
}

static void test_parse_stat_rejects(void **state) {
  (void)state;
  kc_proc_stat_fields f;
  const char *bad[] = {
      "",
      "1234 kctrld S 1",                                             /* no parentheses */
      "1234 (kctrld) S 1 1234 1234 0 -1 4194560 1517 0 0 0 250 50", /* too short */
      "1234 (kctrld) S 1 1234 1234 0 -1 4194560 1517 0 0 0 x 50 0 0 20 0 3 0 1 2 3",
      "1234 (kctrld) S 1 1234 1234 0 -1 4194560 1517 0 0 0 -5 50 0 0 20 0 3 0 1 2 3",
      "1234 (kctrld) S 1 1234 1234 0 -1 4194560 1517 0 0 0 99999999999999999999 50 0 0 20 0 3 0 1 2 3",
      "1234 (kctrld) S 1 1234 1234 0 -1 4194560 1517 0 0 0 1 50 0 0 20 0 3 0 1 2 3x",
      ") 1234 (kctrld S 1 1234 1234 0 -1 4194560 1517 0 0 0 1 50 0 0 20 0 3 0 1 2 3",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (kc_procstat_parse_stat(bad[i], strlen(bad[i]), &f) != -EINVAL) fail_msg("accepted %s", bad[i]);
}

static void test_parse_btime(void **state) {
  (void)state;
  const char *text = "cpu  10 0 20 300 0 0 0 0 0 0\ncpu0 10 0 20 300 0 0 0 0 0 0\n"
                     "intr 12345 1 2 3 4 5\nctxt 999\nbtime 1764979200\nprocesses 4242\n";
  uint64_t bt = 0;
  assert_int_equal(kc_procstat_parse_btime(text, strlen(text), &bt), 0);
  assert_int_equal(bt, 1764979200);
  assert_int_equal(kc_procstat_parse_btime("btime 5", 7, &bt), 0);
  assert_int_equal(bt, 5);
  assert_int_equal(kc_procstat_parse_btime("cpu 1\n", 6, &bt), -EINVAL);
  assert_int_equal(kc_procstat_parse_btime("btime x\n", 8, &bt), -EINVAL);
  assert_int_equal(kc_procstat_parse_btime("xbtime 5\n", 9, &bt), -EINVAL);
  assert_int_equal(kc_procstat_parse_btime("btime 5 6\n", 10, &bt), -EINVAL);
}

/* This process, as the kernel sees it. */
static void test_live_figures(void **state) {
  (void)state;
  kc_process_stats a, b;
  assert_int_equal(kc_process_stats_read(&a), 0);
  time_t now = time(NULL);
  assert_true(a.start_time_seconds <= (double)now + 1);
  assert_true(a.start_time_seconds > (double)now - 3600);
  assert_true(a.resident_bytes > 0);
  assert_true(a.virtual_bytes >= a.resident_bytes);
  assert_true(a.cpu_seconds >= 0);
  struct rlimit rl;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_cur == RLIM_INFINITY)
    assert_true(isinf(a.max_fds));
  else
    assert_true(a.max_fds == (double)rl.rlim_cur);
  /* Descriptors are counted as they are now. */
  int fd1 = open("/dev/null", O_RDONLY | O_CLOEXEC), fd2 = open("/dev/null", O_RDONLY | O_CLOEXEC);
  assert_true(fd1 >= 0 && fd2 >= 0);
  assert_int_equal(kc_process_stats_read(&b), 0);
  assert_true(b.open_fds == a.open_fds + 2);
  close(fd1);
  close(fd2);
  /* The soft limit as it is at the read. */
  struct rlimit lower = {rl.rlim_cur > 512 ? 512 : rl.rlim_cur, rl.rlim_max};
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &lower), 0);
  assert_int_equal(kc_process_stats_read(&b), 0);
  assert_true(b.max_fds == (double)lower.rlim_cur);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
  /* The start time does not move; CPU time does not go back. */
  assert_true(b.start_time_seconds == a.start_time_seconds);
  assert_true(b.cpu_seconds >= a.cpu_seconds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_stat),
      cmocka_unit_test(test_parse_stat_rejects),
      cmocka_unit_test(test_parse_btime),
      cmocka_unit_test(test_live_figures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
