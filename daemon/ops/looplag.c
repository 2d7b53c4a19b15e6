/* SPDX-License-Identifier: Apache-2.0 */
/* looplag: see looplag.h. */
#include "ops/looplag.h"

#include <string.h>

#include "base/log.h"

const double kc_looplag_bounds[KC_LOOPLAG_BUCKETS] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                      0.2,   0.5,   1,     2,    5,    10};

static void kc_looplag_observe(kc_looplag *l, double seconds) {
  if (seconds < 0) seconds = 0;
  size_t i = 0;
  while (i < KC_LOOPLAG_BUCKETS && seconds > kc_looplag_bounds[i]) i++;
  l->counts[i]++;
  l->samples++;
  l->sum_seconds += seconds;
  if (seconds > l->max_seconds) l->max_seconds = seconds;
}

/* Time the loop has been at work since the mark: wall time less what it
 * spent waiting in the kernel for I/O. */
static uint64_t busy_since_mark(const kc_looplag *l, uint64_t now) {
  uint64_t wall = now > l->mark_ns ? now - l->mark_ns : 0;
  uint64_t idle = uv_metrics_idle_time(l->loop) - l->mark_idle_ns;
  return wall > idle ? wall - idle : 0;
}

static void set_mark(kc_looplag *l, uint64_t now) {
  l->mark_ns = now;
  l->mark_idle_ns = uv_metrics_idle_time(l->loop);
}

static void on_before_poll(uv_prepare_t *h) {
  kc_looplag *l = h->data;
  uint64_t now = uv_hrtime(), busy = busy_since_mark(l, now);
  if (busy > l->max_busy_ns) l->max_busy_ns = busy;
  set_mark(l, now);
}

static void on_probe(uv_timer_t *t) {
  kc_looplag *l = t->data;
  uint64_t now = uv_hrtime();
  uint64_t late_ns = now > l->due_ns ? now - l->due_ns : 0;
  /* The stretch this timer phase is part of counts too: it has not reached
   * a prepare yet. */
  uint64_t running = busy_since_mark(l, now);
  if (running > l->max_busy_ns) l->max_busy_ns = running;
  if (l->max_busy_ns > late_ns) late_ns = l->max_busy_ns;
  l->max_busy_ns = 0;
  double late = (double)late_ns / 1e9;
  kc_looplag_observe(l, late);
  if (late >= 1.0)
    kc_warn("loop", "event loop was blocked for %.0f ms (timers, watches and Lease renewal waited)",
            late * 1e3);
  /* The next due moment counts from now: one long stall is one sample. */
  l->due_ns = now + l->period_ns;
}

int kc_looplag_start(uv_loop_t *loop, kc_looplag *l, uint64_t period_ms) {
  memset(l, 0, sizeof *l);
  l->loop = loop;
  l->period_ns = (period_ms ? period_ms : 100) * 1000000ull;
  /* The loop's idle time (libuv's metrics) tells a busy iteration from one
   * that waited for I/O. */
  int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
  if (rc < 0) return rc;
  if ((rc = uv_timer_init(loop, &l->timer)) < 0) return rc;
  l->open_handles = 1;
  l->timer.data = l;
  /* The probe alone must not keep the loop running. */
  uv_unref((uv_handle_t *)&l->timer);
  if ((rc = uv_prepare_init(loop, &l->before_poll)) < 0) return rc;
  l->open_handles++;
  l->before_poll.data = l;
  uv_unref((uv_handle_t *)&l->before_poll);
  if ((rc = uv_prepare_start(&l->before_poll, on_before_poll)) < 0) return rc;
  /* Counted from now, as if the loop had just polled. */
  set_mark(l, uv_hrtime());
  l->due_ns = l->mark_ns + l->period_ns;
  uint64_t ms = l->period_ns / 1000000ull;
  return uv_timer_start(&l->timer, on_probe, ms, ms);
}

static void on_handle_closed(uv_handle_t *h) {
  kc_looplag *l = h->data;
  if (--l->open_handles > 0) return;
  if (l->close_cb) l->close_cb((uv_handle_t *)&l->timer);
}

void kc_looplag_close(kc_looplag *l, uv_close_cb cb) {
  l->close_cb = cb;
  uv_timer_stop(&l->timer);
  int handles = l->open_handles;
  if (handles >= 2) {
    uv_prepare_stop(&l->before_poll);
    uv_close((uv_handle_t *)&l->before_poll, on_handle_closed);
  }
  if (handles >= 1) uv_close((uv_handle_t *)&l->timer, on_handle_closed);
}
