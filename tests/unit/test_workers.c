/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/workers: the loop/worker hand-off, with a real
 * libuv loop and real threads. Also run under TSan (build-tsan). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/controller.h"
#include "base/log.h"
#include "testutil.h"
#include "runtime/workers.h"

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void close_loop(uv_loop_t *loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

/* ---- a full controller loop: producer, queue, pool, retries ---- */

#define NKEYS 200
#define ROUNDS 5

struct ctl {
  uv_loop_t loop;
  kc_workqueue *wq;
  kc_workers *pool;
  uv_timer_t producer;
  uv_timer_t delay;
  int round;
  bool stopping;
  bool stopped;
  unsigned results;
  atomic_int current_round;
  atomic_int in_flight[NKEYS];
  atomic_int seen_round[NKEYS];
  atomic_int attempts[NKEYS];
  atomic_int violations;
  atomic_int max_parallel;
  atomic_int running;
};

static int key_index(const char *key) {
  int i = -1;
  if (sscanf(key, "default/pod-%d", &i) != 1 || i < 0 || i >= NKEYS) return -1;
  return i;
}

static void ctl_reconcile(void *ud, const char *key, kc_reconcile_result *res) {
  struct ctl *c = ud;
  int i = key_index(key);
  if (i < 0) {
    atomic_fetch_add(&c->violations, 1);
    return;
  }
  if (atomic_fetch_add(&c->in_flight[i], 1) != 0) atomic_fetch_add(&c->violations, 1);
  int r = atomic_fetch_add(&c->running, 1) + 1;
  int m = atomic_load(&c->max_parallel);
  while (r > m && !atomic_compare_exchange_weak(&c->max_parallel, &m, r)) {
  }
  int round = atomic_load(&c->current_round);
  if (round > atomic_load(&c->seen_round[i])) atomic_store(&c->seen_round[i], round);
  int attempt = atomic_fetch_add(&c->attempts[i], 1);
  usleep(200);
  if (i % 10 == 0 && attempt == 0) {
    res->kind = KC_RESULT_ERROR;
    snprintf(res->message, sizeof res->message, "transient failure of %s", key);
  } else if (i % 10 == 1 && attempt == 0) {
    res->kind = KC_RESULT_REQUEUE_AFTER;
    res->after_ms = 5;
  }
  atomic_fetch_sub(&c->running, 1);
  atomic_fetch_sub(&c->in_flight[i], 1);
}

static void ctl_arm(struct ctl *c);

/* The controller's dispatch loop (controller.c pump), on this queue. */
static void ctl_pump(struct ctl *c) {
  const char *key;
  while (kc_workers_idle(c->pool) > 0 && kc_workqueue_get(c->wq, &key) == KC_WQ_KEY)
    assert_int_equal(kc_workers_dispatch(c->pool, key, kc_workqueue_num_requeues(c->wq, key) + 1), 0);
}

static void ctl_stopped(kc_workers *pool, unsigned abandoned, void *ud) {
  struct ctl *c = ud;
  assert_int_equal(abandoned, 0);
  c->stopped = true;
  uv_close((uv_handle_t *)&c->delay, NULL);
}

static void ctl_maybe_finish(struct ctl *c) {
  if (c->stopping || c->round < ROUNDS) return;
  if (kc_workqueue_len(c->wq) || kc_workqueue_processing(c->wq) || kc_workqueue_waiting(c->wq))
    return;
  c->stopping = true;
  kc_workqueue_shutdown(c->wq);
  kc_workers_stop(c->pool, 5000, ctl_stopped, c);
}

static void ctl_on_result(kc_workers *pool, const char *key, const kc_reconcile_result *res,
                          uint64_t duration_ns, void *ud) {
  struct ctl *c = ud;
  c->results++;
  if (res->kind == KC_RESULT_ERROR) assert_non_null(strstr(res->message, "transient failure"));
  assert_int_equal(kc_controller_apply_result(c->wq, key, res), 0);
}

static void ctl_on_idle(kc_workers *pool, void *ud) {
  struct ctl *c = ud;
  ctl_pump(c);
  ctl_arm(c);
  ctl_maybe_finish(c);
}

static void ctl_on_delay(uv_timer_t *t) {
  struct ctl *c = t->data;
  kc_workqueue_tick(c->wq);
  ctl_pump(c);
  ctl_arm(c);
}

/* One timer for the queue's earliest waiting key. */
static void ctl_arm(struct ctl *c) {
  uint64_t when;
  if (c->stopping || !kc_workqueue_next_ready(c->wq, &when)) return;
  uint64_t now = uv_hrtime();
  uint64_t ms = when > now ? (when - now + 999999) / 1000000 : 0;
  uv_timer_start(&c->delay, ctl_on_delay, ms, 0);
}

static void ctl_produce(uv_timer_t *t) {
  struct ctl *c = t->data;
  c->round++;
  atomic_store(&c->current_round, c->round);
  char key[64];
  for (int i = 0; i < NKEYS; i++) {
    snprintf(key, sizeof key, "default/pod-%d", i);
    assert_int_equal(kc_workqueue_add(c->wq, key), 0);
  }
  ctl_pump(c);
  ctl_arm(c);
  if (c->round == ROUNDS) uv_close((uv_handle_t *)t, NULL);
}

static void test_controller_loop(void **state) {
  (void)state;
  static struct ctl c;
  memset(&c, 0, sizeof c);
  assert_int_equal(uv_loop_init(&c.loop), 0);
  kc_ratelimit_config rl;
  kc_ratelimit_config_default(&rl);
  c.wq = kc_workqueue_new("podset", &rl);
  assert_non_null(c.wq);
  kc_workers_config cfg = {
      .name = "podset", .nworkers = 4, .timeout_ms = 10000,
      .reconcile = ctl_reconcile, .reconcile_ud = &c,
      .on_result = ctl_on_result, .on_idle = ctl_on_idle, .ud = &c,
  };
  assert_int_equal(kc_workers_start(&c.loop, &cfg, &c.pool), 0);
  assert_int_equal(kc_workers_size(c.pool), 4);
  uv_timer_init(&c.loop, &c.producer);
  uv_timer_init(&c.loop, &c.delay);
  c.producer.data = c.delay.data = &c;
  uv_timer_start(&c.producer, ctl_produce, 0, 3);
  close_loop(&c.loop);
  assert_true(c.stopped);
  assert_int_equal(atomic_load(&c.violations), 0);
  assert_true(atomic_load(&c.max_parallel) <= 4);
  for (int i = 0; i < NKEYS; i++) {
    assert_int_equal(atomic_load(&c.seen_round[i]), ROUNDS);
    if (i % 10 <= 1) assert_true(atomic_load(&c.attempts[i]) >= 2);
  }
  assert_true(c.results >= NKEYS + NKEYS / 5);
  kc_workqueue_free(c.wq);
}

/* ---- timeout is reported, the loop keeps running ---- */

struct slow {
  uv_loop_t loop;
  kc_workers *pool;
  uv_timer_t heartbeat;
  unsigned beats;
  unsigned timeouts;
  unsigned results;
  uint64_t duration_ns;
  char timeout_key[64];
};

static void slow_reconcile(void *ud, const char *key, kc_reconcile_result *res) { sleep_ms(150); }

static void slow_stopped(kc_workers *pool, unsigned abandoned, void *ud) {
  struct slow *s = ud;
  assert_int_equal(abandoned, 0);
  uv_close((uv_handle_t *)&s->heartbeat, NULL);
}

static void slow_result(kc_workers *pool, const char *key, const kc_reconcile_result *res,
                        uint64_t duration_ns, void *ud) {
  struct slow *s = ud;
  s->results++;
  s->duration_ns = duration_ns;
  assert_string_equal(key, "ns/slow");
  assert_int_equal(res->kind, KC_RESULT_DONE);
  kc_workers_stop(pool, 1000, slow_stopped, s);
}

static void slow_timeout(kc_workers *pool, const char *key, uint64_t running_ns, void *ud) {
  struct slow *s = ud;
  s->timeouts++;
  snprintf(s->timeout_key, sizeof s->timeout_key, "%s", key);
  assert_true(running_ns >= 20 * 1000000ull);
}

static void slow_beat(uv_timer_t *t) {
  struct slow *s = t->data;
  s->beats++;
}

static void test_timeout_reported_loop_not_stalled(void **state) {
  (void)state;
  static struct slow s;
  memset(&s, 0, sizeof s);
  assert_int_equal(uv_loop_init(&s.loop), 0);
  kc_workers_config cfg = {
      .name = "slow", .nworkers = 1, .timeout_ms = 20, .reconcile = slow_reconcile,
      .on_result = slow_result, .on_timeout = slow_timeout, .ud = &s,
  };
  assert_int_equal(kc_workers_start(&s.loop, &cfg, &s.pool), 0);
  uv_timer_init(&s.loop, &s.heartbeat);
  s.heartbeat.data = &s;
  uv_timer_start(&s.heartbeat, slow_beat, 5, 5);
  assert_int_equal(kc_workers_dispatch(s.pool, "ns/slow", 0), 0);
  assert_int_equal(kc_workers_dispatch(s.pool, "ns/other", 0), -EBUSY);
  assert_int_equal(kc_workers_active(s.pool), 1);
  close_loop(&s.loop);
  assert_int_equal(s.results, 1);
  assert_int_equal(s.timeouts, 1); /* once per reconcile, not per tick */
  assert_string_equal(s.timeout_key, "ns/slow");
  assert_true(s.duration_ns >= 150 * 1000000ull);
  assert_true(s.beats >= 10); /* the loop kept ticking every 5 ms meanwhile */
}

/* ---- graceful stop drains in-flight work ---- */

struct drain {
  uv_loop_t loop;
  kc_workers *pool;
  unsigned results;
  unsigned results_at_stop;
  bool stopped;
};

static void drain_reconcile(void *ud, const char *key, kc_reconcile_result *res) {
  sleep_ms(40);
  res->kind = KC_RESULT_REQUEUE_AFTER;
  res->after_ms = 7;
}

static void drain_result(kc_workers *pool, const char *key, const kc_reconcile_result *res,
                         uint64_t duration_ns, void *ud) {
  struct drain *d = ud;
  assert_false(d->stopped);
  assert_int_equal(res->kind, KC_RESULT_REQUEUE_AFTER);
  assert_int_equal(res->after_ms, 7);
  d->results++;
}

static void drain_stopped(kc_workers *pool, unsigned abandoned, void *ud) {
  struct drain *d = ud;
  assert_int_equal(abandoned, 0);
  d->results_at_stop = d->results;
  d->stopped = true;
}

static void test_stop_drains(void **state) {
  (void)state;
  static struct drain d;
  memset(&d, 0, sizeof d);
  assert_int_equal(uv_loop_init(&d.loop), 0);
  kc_workers_config cfg = {
      .name = "drain", .nworkers = 3, .reconcile = drain_reconcile, .on_result = drain_result,
      .ud = &d,
  };
  assert_int_equal(kc_workers_start(&d.loop, &cfg, &d.pool), 0);
  assert_int_equal(kc_workers_dispatch(d.pool, "a/1", 0), 0);
  assert_int_equal(kc_workers_dispatch(d.pool, "a/2", 0), 0);
  assert_int_equal(kc_workers_idle(d.pool), 1);
  kc_workers_stop(d.pool, 5000, drain_stopped, &d);
  assert_int_equal(kc_workers_dispatch(d.pool, "a/3", 0), -ESHUTDOWN);
  kc_workers_stop(d.pool, 5000, drain_stopped, &d); /* second call: no-op */
  close_loop(&d.loop);
  assert_true(d.stopped);
  assert_int_equal(d.results_at_stop, 2);
}

/* ---- a stuck reconcile is abandoned after the bound ---- */

static pthread_mutex_t stuck_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stuck_cond = PTHREAD_COND_INITIALIZER;
static bool stuck_release;
static atomic_int stuck_entered;

static void stuck_reconcile(void *ud, const char *key, kc_reconcile_result *res) {
  atomic_store(&stuck_entered, 1);
  pthread_mutex_lock(&stuck_mu);
  while (!stuck_release) pthread_cond_wait(&stuck_cond, &stuck_mu);
  pthread_mutex_unlock(&stuck_mu);
}

struct stuck {
  uint64_t stopped_at, stop_called_at;
  unsigned abandoned;
  unsigned results;
  bool stopped;
};

static void stuck_result(kc_workers *pool, const char *key, const kc_reconcile_result *res,
                         uint64_t duration_ns, void *ud) {
  ((struct stuck *)ud)->results++;
}

static void stuck_stopped(kc_workers *pool, unsigned abandoned, void *ud) {
  struct stuck *s = ud;
  s->abandoned = abandoned;
  s->stopped = true;
  s->stopped_at = uv_hrtime();
}

static void test_stop_bound_abandons_stuck(void **state) {
  (void)state;
  uv_loop_t loop;
  struct stuck s = {0};
  kc_workers *pool;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_workers_config cfg = {
      .name = "stuck", .nworkers = 2, .reconcile = stuck_reconcile, .on_result = stuck_result,
      .ud = &s,
  };
  assert_int_equal(kc_workers_start(&loop, &cfg, &pool), 0);
  assert_int_equal(kc_workers_dispatch(pool, "ns/stuck", 0), 0);
  while (!atomic_load(&stuck_entered)) sleep_ms(1);
  s.stop_called_at = uv_hrtime();
  kc_workers_stop(pool, 30, stuck_stopped, &s);
  close_loop(&loop);
  assert_true(s.stopped);
  assert_int_equal(s.abandoned, 1);
  assert_int_equal(s.results, 0);
  /* libuv timers count in whole milliseconds of a truncated clock, so a
   * 30 ms timer may fire up to 1 ms early by uv_hrtime. */
  assert_true(s.stopped_at - s.stop_called_at >= 29 * 1000000ull);
  assert_true(s.stopped_at - s.stop_called_at < 1000 * 1000000ull);
  assert_int_equal(kc_workers_abandoned_running(), 1);
  /* The plugin returns much later: the thread cleans up after itself. */
  pthread_mutex_lock(&stuck_mu);
  stuck_release = true;
  pthread_cond_broadcast(&stuck_cond);
  pthread_mutex_unlock(&stuck_mu);
  for (int i = 0; i < 2000 && kc_workers_abandoned_running() > 0; i++) sleep_ms(1);
  assert_int_equal(kc_workers_abandoned_running(), 0);
  sleep_ms(5); /* let the detached thread finish returning */
}

/* ---- log fields of a reconcile ---- */

struct logged {
  uv_loop_t loop;
  kc_workqueue *wq;
  kc_workers *pool;
  uv_timer_t tick;
  int results;
  bool stopped;
};

static void logged_reconcile(void *ud, const char *key, kc_reconcile_result *res) {
  static atomic_int calls;
  int n = atomic_fetch_add(&calls, 1);
  kc_error("plugin", "inside call=%d", n);
  if (n < 3) {
    res->kind = n < 2 ? KC_RESULT_ERROR : KC_RESULT_TERMINAL;
    snprintf(res->message, sizeof res->message, "boom %d", n);
  }
}

static void logged_stopped(kc_workers *pool, unsigned abandoned, void *ud) {
  ((struct logged *)ud)->stopped = true;
}

static void logged_result(kc_workers *pool, const char *key, const kc_reconcile_result *res,
                          uint64_t duration_ns, void *ud) {
  struct logged *l = ud;
  l->results++;
  kc_controller_apply_result(l->wq, key, res);
  if (l->results == 3) {
    uv_close((uv_handle_t *)&l->tick, NULL);
    kc_workqueue_shutdown(l->wq);
    kc_workers_stop(pool, 5000, logged_stopped, l);
  }
}

static void logged_tick(uv_timer_t *t) {
  struct logged *l = t->data;
  kc_workqueue_tick(l->wq);
  const char *key;
  while (kc_workers_idle(l->pool) > 0 && kc_workqueue_get(l->wq, &key) == KC_WQ_KEY)
    assert_int_equal(kc_workers_dispatch(l->pool, key, kc_workqueue_num_requeues(l->wq, key) + 1), 0);
}

/* Two failures then a terminal one: every line of the reconcile carries
 * controller/key/reconcileID (a new ID each time), the failures are logged
 * at error level as "Reconciler error" with attempt=1 and attempt=2, the
 * terminal one with terminal=true attempt=3; it is not retried. */
static void test_reconcile_log_fields(void **state) {
  (void)state;
  static struct logged l;
  memset(&l, 0, sizeof l);
  assert_int_equal(uv_loop_init(&l.loop), 0);
  kc_ratelimit_config rl = {0}; /* no backoff, no bucket: retried at once */
  l.wq = kc_workqueue_new("logged", &rl);
  assert_non_null(l.wq);
  kc_workers_config cfg = {.name = "logged", .nworkers = 1, .reconcile = logged_reconcile,
                           .on_result = logged_result, .ud = &l};
  assert_int_equal(kc_workers_start(&l.loop, &cfg, &l.pool), 0);
  assert_int_equal(uv_timer_init(&l.loop, &l.tick), 0);
  l.tick.data = &l;
  uv_timer_start(&l.tick, logged_tick, 0, 1);
  assert_int_equal(kc_workqueue_add(l.wq, "ns/a"), 0);
  kc_log_set_format(KC_LOG_FORMAT_TEXT);
  tu_stderr_begin();
  kc_log_detect_sink();
  uv_run(&l.loop, UV_RUN_DEFAULT);
  char *log = tu_stderr_end();
  kc_log_detect_sink();
  assert_true(l.stopped);
  assert_int_equal(l.results, 3);
  assert_int_equal(uv_loop_close(&l.loop), 0);
  kc_workqueue_free(l.wq);
  char ids[3][KC_LOG_RECONCILE_ID_SIZE];
  for (int n = 0; n < 3; n++) {
    char want[128];
    snprintf(want, sizeof want,
             "level=error logger=plugin context=logged msg=inside controller=logged key=ns/a reconcileID=");
    char *line = strstr(log, want);
    if (!line) fail_msg("no line \"%s\" in:\n%s", want, log);
    line[strlen("level=error logger=plugin context=logged msg=")] = 'I'; /* find the next one next time */
    line += strlen(want);
    memcpy(ids[n], line, 36);
    ids[n][36] = '\0';
    assert_int_equal(strncmp(line + 36, " call=", 6), 0);
    assert_int_equal(line[42], '0' + n);
    {
      char failed[512];
      snprintf(failed, sizeof failed,
               "level=error logger=controller context=logged msg=\"Reconciler error\" controller=logged "
               "key=ns/a reconcileID=%s %sattempt=%d error=\"boom %d\"\n",
               ids[n], n == 2 ? "terminal=true " : "", n + 1, n);
      if (!strstr(log, failed)) fail_msg("no line \"%s\" in:\n%s", failed, log);
    }
  }
  assert_string_not_equal(ids[0], ids[1]);
  assert_string_not_equal(ids[1], ids[2]);
  assert_null(strstr(log, "attempt=4"));
  free(log);
}

static void test_start_invalid(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_workers *pool = NULL;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_workers_config cfg = {.name = "x", .nworkers = 0, .reconcile = stuck_reconcile,
                           .on_result = stuck_result};
  assert_int_equal(kc_workers_start(&loop, &cfg, &pool), -EINVAL);
  cfg.nworkers = 1;
  cfg.on_result = NULL;
  assert_int_equal(kc_workers_start(&loop, &cfg, &pool), -EINVAL);
  assert_null(pool);
  close_loop(&loop);
}

int main(void) {
  kc_log_set_level(KC_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_controller_loop),
      cmocka_unit_test(test_timeout_reported_loop_not_stalled),
      cmocka_unit_test(test_stop_drains),
      cmocka_unit_test(test_stop_bound_abandons_stuck),
      cmocka_unit_test(test_start_invalid),
      cmocka_unit_test(test_reconcile_log_fields),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
