/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/notify against a real AF_UNIX datagram socket set as
 * NOTIFY_SOCKET (path and abstract namespace), with a real libuv loop for
 * the watchdog pings. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ops/notify.h"

typedef struct sock {
  int fd;
  char path[108];
} sock;

/* abstract: bind in the abstract namespace ("@name" in NOTIFY_SOCKET). */
static void sock_open(sock *s, bool abstract) {
  s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  assert_true(s->fd >= 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  socklen_t len;
  if (abstract) {
    snprintf(s->path, sizeof s->path, "@kctrld-test-notify-%d", (int)getpid());
    a.sun_path[0] = '\0';
    memcpy(a.sun_path + 1, s->path + 1, strlen(s->path) - 1);
    len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(s->path));
  } else {
    snprintf(s->path, sizeof s->path, "/tmp/kctrld-test-notify-%d.sock", (int)getpid());
    unlink(s->path);
    memcpy(a.sun_path, s->path, strlen(s->path) + 1);
    len = sizeof a;
  }
  assert_int_equal(bind(s->fd, (struct sockaddr *)&a, len), 0);
  assert_int_equal(setenv("NOTIFY_SOCKET", s->path, 1), 0);
}

static void sock_close(sock *s) {
  close(s->fd);
  if (s->path[0] == '/') unlink(s->path);
}

/* Next datagram, or NULL when none is queued. */
static const char *recv_msg(sock *s, char *buf, size_t cap) {
  ssize_t n = recv(s->fd, buf, cap - 1, 0);
  if (n < 0) return NULL;
  buf[n] = '\0';
  return buf;
}

static void expect_msg(sock *s, const char *want) {
  char buf[1024];
  const char *got = recv_msg(s, buf, sizeof buf);
  assert_non_null(got);
  assert_string_equal(got, want);
}

static void expect_none(sock *s) {
  char buf[1024];
  const char *got = recv_msg(s, buf, sizeof buf);
  if (got) fail_msg("unexpected datagram: %s", got);
}

static void close_loop(uv_loop_t *loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

static void run_messages(bool abstract) {
  sock s;
  sock_open(&s, abstract);
  unsetenv("WATCHDOG_USEC");
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_notify *n;
  assert_int_equal(kc_notify_new(&loop, &n), 0);
  assert_int_equal(kc_notify_watchdog_period_us(n), 0);
  assert_false(kc_notify_is_ready(n));

  assert_int_equal(kc_notify_status(n, "waiting: informer v1 Pod"), 0);
  expect_msg(&s, "STATUS=waiting: informer v1 Pod");
  assert_int_equal(kc_notify_status(n, "waiting: informer v1 Pod"), 0); /* unchanged: nothing */
  expect_none(&s);

  assert_int_equal(kc_notify_ready(n, "leading; informers 2/2 synced"), 0);
  expect_msg(&s, "READY=1\nSTATUS=leading; informers 2/2 synced");
  assert_true(kc_notify_is_ready(n));
  assert_int_equal(kc_notify_ready(n, "leading; informers 2/2 synced"), 0); /* once only */
  expect_none(&s);
  assert_int_equal(kc_notify_status(n, "two\nlines"), 0);
  expect_msg(&s, "STATUS=two lines");

  /* RELOADING=1 and MONOTONIC_USEC in the same datagram, then READY=1. */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t before = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
  assert_int_equal(kc_notify_reloading(n, "reloading"), 0);
  char buf[1024];
  const char *got = recv_msg(&s, buf, sizeof buf);
  assert_non_null(got);
  uint64_t usec = 0;
  char status[64];
  assert_int_equal(sscanf(got, "RELOADING=1\nMONOTONIC_USEC=%" SCNu64 "\nSTATUS=%63[^\n]", &usec, status), 2);
  assert_string_equal(status, "reloading");
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t after = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
  assert_true(usec >= before && usec <= after);
  assert_int_equal(kc_notify_reloaded(n, "reload applied"), 0);
  expect_msg(&s, "READY=1\nSTATUS=reload applied");

  assert_int_equal(kc_notify_stopping(n, "stopping"), 0);
  expect_msg(&s, "STOPPING=1\nSTATUS=stopping");
  assert_int_equal(kc_notify_stopping(n, "stopping"), 0);
  expect_none(&s);

  /* NOTIFY_SOCKET is never unset. */
  assert_non_null(getenv("NOTIFY_SOCKET"));
  assert_string_equal(getenv("NOTIFY_SOCKET"), s.path);
  kc_notify_close(n);
  close_loop(&loop);
  sock_close(&s);
}

static void test_messages_path(void **state) {
  (void)state;
  run_messages(false);
}

static void test_messages_abstract(void **state) {
  (void)state;
  run_messages(true);
}

typedef struct stopper {
  uv_timer_t t;
  kc_notify *n;
} stopper;

static void on_stop(uv_timer_t *t) {
  stopper *st = t->data;
  kc_notify_close(st->n);
  uv_close((uv_handle_t *)t, NULL);
}

static void test_watchdog(void **state) {
  (void)state;
  sock s;
  sock_open(&s, false);
  setenv("WATCHDOG_USEC", "100000", 1); /* 100 ms: ping every 50 ms */
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  setenv("WATCHDOG_PID", pid, 1);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_notify *n;
  assert_int_equal(kc_notify_new(&loop, &n), 0);
  assert_int_equal(kc_notify_watchdog_period_us(n), 50000);
  stopper st = {.n = n};
  uv_timer_init(&loop, &st.t);
  st.t.data = &st;
  uv_timer_start(&st.t, on_stop, 275, 0);
  close_loop(&loop);
  /* First ping at once, then every 50 ms: 0, 50, ..., 250 = 6 (allow jitter). */
  int pings = 0;
  char buf[256];
  while (recv_msg(&s, buf, sizeof buf)) {
    assert_string_equal(buf, "WATCHDOG=1");
    pings++;
  }
  assert_in_range(pings, 4, 7);

  /* WATCHDOG_PID of another process: no watchdog for us. */
  setenv("WATCHDOG_PID", "1", 1);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(kc_notify_new(&loop, &n), 0);
  assert_int_equal(kc_notify_watchdog_period_us(n), 0);
  kc_notify_close(n);
  close_loop(&loop);
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  sock_close(&s);
}

/* Without NOTIFY_SOCKET every call succeeds and does nothing. */
static void test_no_socket(void **state) {
  (void)state;
  unsetenv("NOTIFY_SOCKET");
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_notify *n;
  assert_int_equal(kc_notify_new(&loop, &n), 0);
  assert_int_equal(kc_notify_ready(n, "x"), 0);
  assert_int_equal(kc_notify_reloading(n, NULL), 0);
  assert_int_equal(kc_notify_stopping(n, NULL), 0);
  kc_notify_close(n);
  kc_notify_close(NULL);
  close_loop(&loop);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_messages_path),
      cmocka_unit_test(test_messages_abstract),
      cmocka_unit_test(test_watchdog),
      cmocka_unit_test(test_no_socket),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
