/* SPDX-License-Identifier: Apache-2.0 */
/* looplag: measures how long the event loop keeps timers and sockets waiting.
 *
 * A probe timer fires every period (100 ms); each time, one sample of
 * kctrld_loop_lag_seconds (histogram buckets below, plus the largest value
 * seen) is the larger of two measurements over the period just ended:
 *   - how late the probe itself ran (I/O callbacks and timers before it);
 *   - the longest stretch the loop worked without waiting for I/O: from one
 *     prepare handle (it runs before each poll) to the next, less the time
 *     libuv spent waiting in the kernel (uv_metrics_idle_time). It covers
 *     I/O callbacks that end before the probe is due and timers that run in
 *     the same timer phase as the probe, one after the other, while no
 *     socket is read (see base/nextturn.h), neither of which makes the
 *     probe late.
 * A loop that a callback holds for longer than one second is also logged
 * once it runs again ("event loop was blocked for N ms"), so a stall leaves
 * a line in the journal even when nobody scrapes /metrics.
 *
 * Context: loop thread only; kc_looplag_start turns on the loop's
 * UV_METRICS_IDLE_TIME. Errors: 0 or a negative errno.
 */
#ifndef KC_LOOPLAG_H
#define KC_LOOPLAG_H

#include <stdint.h>
#include <uv.h>

#define KC_LOOPLAG_BUCKETS 13
extern const double kc_looplag_bounds[KC_LOOPLAG_BUCKETS];

typedef struct kc_looplag {
  uv_loop_t *loop;
  uv_timer_t timer;
  uv_prepare_t before_poll;
  uint64_t period_ns;
  uint64_t due_ns;         /* uv_hrtime() at which the probe should fire */
  uint64_t mark_ns;         /* start of the current stretch of work (uv_hrtime) */
  uint64_t mark_idle_ns;    /* uv_metrics_idle_time() then */
  uint64_t max_busy_ns;     /* longest stretch of work since the last sample */
  int open_handles;
  uv_close_cb close_cb;
  /* counts[i]: samples in (bounds[i-1], bounds[i]]; counts[B]: above the
   * last bound (the per-bucket form kc_metrics_set_histogram takes). */
  uint64_t counts[KC_LOOPLAG_BUCKETS + 1];
  uint64_t samples;
  double sum_seconds;
  double max_seconds;
} kc_looplag;

/* Starts the probe (period_ms 0: 100). The struct must stay in place until
 * the close callback ran. */
int kc_looplag_start(uv_loop_t *loop, kc_looplag *l, uint64_t period_ms);
/* Stops and closes the probe's handles; cb (may be NULL) runs once all are
 * closed, with &l->timer. */
void kc_looplag_close(kc_looplag *l, uv_close_cb cb);

#endif
