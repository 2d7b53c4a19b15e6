/* SPDX-License-Identifier: Apache-2.0 */
/* Specification of daemon/base/nextturn.{c,h} and of the loop-lag probe's
 * "time between polls" (daemon/ops/looplag.{c,h}). What it pins down:
 *  - a chain of next-turn callbacks, each starting the next, runs one link
 *    per loop iteration: a check handle (it runs after every poll) runs
 *    between any two links, and an I/O event that became ready during the
 *    chain is delivered before the chain ends;
 *  - stop cancels a pending run; start replaces the callback of a pending
 *    one; close runs its callback with the owner's data on the handle;
 *  - the probe samples a stretch of loop work that never polls, even when
 *    it is made of 0 ms timers each started from the one before (which a
 *    late probe timer alone does not show: the probe runs in the same timer
 *    phase, on time). Checked with a lower bound (the chain busy-waits for
 *    its length), so load can only make the sample larger;
 *  - the probe samples an I/O callback that holds the loop and ends before
 *    the probe is due (the probe is not late for it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "base/nextturn.h"
#include "ops/looplag.h"

static struct {
  uv_loop_t loop;
  uv_check_t check;
  unsigned polls;       /* check callbacks so far */
  unsigned links, want; /* chain links run, links wanted */
  unsigned polls_at_link[64];
  bool async_seen;
  unsigned async_at_link;
  uv_async_t async;
} T;

static void on_check(uv_check_t *h) { T.polls++; }

static void on_link(kc_next_turn *nt) {
  T.polls_at_link[T.links++] = T.polls;
  if (T.links == 3) uv_async_send(&T.async); /* ready from now on */
  if (T.links < T.want) kc_next_turn_start(nt, on_link);
}

static void on_async(uv_async_t *a) {
  T.async_seen = true;
  T.async_at_link = T.links;
  uv_close((uv_handle_t *)a, NULL);
}

static void test_chain_one_link_per_iteration(void **state) {
  memset(&T, 0, sizeof T);
  assert_int_equal(uv_loop_init(&T.loop), 0);
  assert_int_equal(uv_check_init(&T.loop, &T.check), 0);
  assert_int_equal(uv_check_start(&T.check, on_check), 0);
  uv_unref((uv_handle_t *)&T.check);
  assert_int_equal(uv_async_init(&T.loop, &T.async, on_async), 0);
  kc_next_turn nt;
  assert_int_equal(kc_next_turn_init(&T.loop, &nt, &T), 0);
  T.want = 20;
  kc_next_turn_start(&nt, on_link);
  assert_true(kc_next_turn_pending(&nt));
  while (T.links < T.want || !T.async_seen) uv_run(&T.loop, UV_RUN_ONCE);
  assert_false(kc_next_turn_pending(&nt));
  for (unsigned i = 1; i < T.want; i++)
    if (T.polls_at_link[i] <= T.polls_at_link[i - 1])
      fail_msg("links %u and %u ran without a poll between them", i - 1, i);
  assert_true(T.async_seen);
  assert_true(T.async_at_link < T.want); /* delivered while the chain still ran */
  kc_next_turn_close(&nt, NULL);
  uv_close((uv_handle_t *)&T.check, NULL);
  uv_run(&T.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&T.loop), 0);
}

static unsigned runs_a, runs_b;
static void count_a(kc_next_turn *nt) { runs_a++; }
static void count_b(kc_next_turn *nt) { runs_b++; }
static bool closed;
static void *closed_data;
static void on_closed(uv_handle_t *h) {
  closed = true;
  closed_data = h->data;
}

static void test_stop_replace_close(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_next_turn nt;
  int owner;
  assert_int_equal(kc_next_turn_init(&loop, &nt, &owner), 0);
  assert_ptr_equal(nt.data, &owner);
  runs_a = runs_b = 0;
  kc_next_turn_start(&nt, count_a);
  kc_next_turn_stop(&nt);
  assert_false(kc_next_turn_pending(&nt));
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(runs_a, 0);
  kc_next_turn_start(&nt, count_a);
  kc_next_turn_start(&nt, count_b); /* replaces */
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(runs_a, 0);
  assert_int_equal(runs_b, 1);
  closed = false;
  kc_next_turn_start(&nt, count_a);
  kc_next_turn_close(&nt, on_closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(closed);
  assert_ptr_equal(closed_data, &owner); /* the owner's data, as its other handles have */
  assert_int_equal(runs_a, 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- the probe and a chain of 0 ms timers ------------------------------- */

#define CHAIN_MS 300
#define LINK_MS 5
static uint64_t chain_end_ns;

static void busy_ms(unsigned ms) {
  uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000u;
  while (uv_hrtime() < end) {
  }
}

static void on_chain_timer(uv_timer_t *t) {
  busy_ms(LINK_MS);
  if (uv_hrtime() >= chain_end_ns) {
    uv_close((uv_handle_t *)t, NULL);
    return;
  }
  uv_update_time(t->loop); /* as kc_timer_start does */
  uv_timer_start(t, on_chain_timer, 0, 0);
}

static void on_stop_timer(uv_timer_t *t) { uv_close((uv_handle_t *)t, NULL); }

static void test_probe_sees_a_chain_of_zero_timers(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_looplag lag;
  assert_int_equal(kc_looplag_start(&loop, &lag, 20), 0);
  uv_timer_t chain, stop;
  assert_int_equal(uv_timer_init(&loop, &chain), 0);
  assert_int_equal(uv_timer_init(&loop, &stop), 0);
  chain_end_ns = uv_hrtime() + (uint64_t)CHAIN_MS * 1000000u;
  assert_int_equal(uv_timer_start(&chain, on_chain_timer, 0, 0), 0);
  /* Keeps the loop going for a few probe periods after the chain. */
  assert_int_equal(uv_timer_start(&stop, on_stop_timer, CHAIN_MS + 100, 0), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  print_message("# chain of %d ms: largest loop-lag sample %.1f ms over %llu samples\n", CHAIN_MS,
                lag.max_seconds * 1e3, (unsigned long long)lag.samples);
  /* The chain never polls: at least its length less one probe period
   * (the part before the first sample taken inside it) is one sample. */
  assert_true(lag.max_seconds * 1e3 >= CHAIN_MS - 20 - LINK_MS);
  kc_looplag_close(&lag, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- an I/O callback between two probe ticks ---------------------------- */

#define IO_MS 60
static uv_async_t io_async;

static void on_io(uv_async_t *a) {
  busy_ms(IO_MS);
  uv_close((uv_handle_t *)a, NULL);
}

static void on_kick(uv_timer_t *t) {
  uv_async_send(&io_async);
  uv_close((uv_handle_t *)t, NULL);
}

static void test_probe_sees_an_io_callback_between_ticks(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_looplag lag;
  /* 300 ms period: the callback (at 10 ms, 60 ms long) ends long before
   * the probe is due. */
  assert_int_equal(kc_looplag_start(&loop, &lag, 300), 0);
  uv_timer_t kick, stop;
  assert_int_equal(uv_async_init(&loop, &io_async, on_io), 0);
  assert_int_equal(uv_timer_init(&loop, &kick), 0);
  assert_int_equal(uv_timer_init(&loop, &stop), 0);
  assert_int_equal(uv_timer_start(&kick, on_kick, 10, 0), 0);
  assert_int_equal(uv_timer_start(&stop, on_stop_timer, 700, 0), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  print_message("# I/O callback of %d ms: largest loop-lag sample %.1f ms over %llu samples\n", IO_MS,
                lag.max_seconds * 1e3, (unsigned long long)lag.samples);
  assert_true(lag.samples >= 2);
  assert_true(lag.max_seconds * 1e3 >= IO_MS);
  kc_looplag_close(&lag, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_one_link_per_iteration),
      cmocka_unit_test(test_stop_replace_close),
      cmocka_unit_test(test_probe_sees_a_chain_of_zero_timers),
      cmocka_unit_test(test_probe_sees_an_io_callback_between_ticks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
