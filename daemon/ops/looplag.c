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

static void on_probe(uv_timer_t *t) {
  kc_looplag *l = t->data;
  uint64_t now = uv_hrtime();
  double late = now > l->due_ns ? (double)(now - l->due_ns) / 1e9 : 0;
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
  int rc = uv_timer_init(loop, &l->timer);
  if (rc < 0) return rc;
  l->timer.data = l;
  /* The probe alone must not keep the loop running. */
  uv_unref((uv_handle_t *)&l->timer);
  l->due_ns = uv_hrtime() + l->period_ns;
  uint64_t ms = l->period_ns / 1000000ull;
  return uv_timer_start(&l->timer, on_probe, ms, ms);
}

void kc_looplag_close(kc_looplag *l, uv_close_cb cb) {
  uv_timer_stop(&l->timer);
  uv_close((uv_handle_t *)&l->timer, cb);
}
