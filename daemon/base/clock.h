/* SPDX-License-Identifier: Apache-2.0 */
/* clock: the daemon's one monotonic clock, and the timers that count on it.
 *
 * Owns the time every component measures intervals and computes deadlines
 * with: kc_clock_now_ns / kc_clock_now_ms read CLOCK_MONOTONIC (the clock of
 * uv_hrtime) in production. The wall clock is not here: it is read only for
 * timestamps written out (Lease renewTime, log lines, Events), which nobody
 * compares with this clock. Transport guards that libuv runs on its own loop
 * time (HTTP idle and request timeouts) stay on the loop's clock, and what
 * measures or reports the real clock itself (the loop-lag probe, sd_notify's
 * MONOTONIC_USEC) reads it directly.
 *
 * kc_timer is a uv timer whose delay counts on this clock: with the real
 * clock it is a plain uv timer started from the current time (the loop time
 * is refreshed first, so the delay counts from the call, not from the last
 * loop wakeup). Its callback gets &timer->uv, so uv.data is the owner's.
 *
 * Test seam: kc_clock_set_manual(start_ns) stops the clock at start_ns;
 * from then on it moves only by kc_clock_advance, and a kc_timer fires once
 * the clock has reached its due time: a 0 ms timer in the loop's next
 * iteration, as a uv timer; a later one once kc_clock_advance got there,
 * which re-arms each due timer as a 0 ms uv timer, so its callback runs in
 * its loop's next iteration (never inside kc_clock_advance), in due order.
 * A repeating
 * timer fires once per advance however many periods passed, as uv timers
 * do after a stall. kc_clock_set_real returns to CLOCK_MONOTONIC. Production
 * never calls these three; a test calls kc_clock_set_manual before it
 * creates the components whose time it drives.
 *
 * Context: kc_clock_now_* from any thread (the manual time is atomic).
 * kc_timer_* on the thread of the timer's loop. kc_clock_set_manual,
 * kc_clock_advance and kc_clock_set_real on the thread of the loops whose
 * kc_timers are armed (tests run one loop on their main thread).
 * Ownership: a kc_timer is embedded in its owner; kc_timer_close stops it
 * and closes the uv handle (the owner frees its memory in close_cb).
 */
#ifndef KC_CLOCK_H
#define KC_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* Monotonic time in ns / ms. Any thread. */
uint64_t kc_clock_now_ns(void);
uint64_t kc_clock_now_ms(void);

/* Seconds since the Unix epoch of a UTC civil time (proleptic Gregorian,
 * any year; no time zone, unlike timegm): for timestamps read from text
 * (RFC 3339, X.509). Fields are not range-checked: callers validate. */
int64_t kc_clock_civil_to_unix(int64_t year, unsigned month, unsigned day, unsigned hour, unsigned minute,
                               unsigned second);

typedef struct kc_timer {
  uv_timer_t uv;  /* uv.data belongs to the owner */
  uv_timer_cb cb; /* the callbacks below: manual clock only */
  uint64_t due_ns, repeat_ns;
  struct kc_timer *prev, *next; /* armed under the manual clock */
  bool linked;
} kc_timer;

/* uv_timer_init. 0 or a uv error. */
int kc_timer_init(uv_loop_t *loop, kc_timer *t);
/* Arms t: cb(&t->uv) after timeout_ms on this clock, then every repeat_ms
 * (0: once). Re-arming replaces the previous due time. */
void kc_timer_start(kc_timer *t, uv_timer_cb cb, uint64_t timeout_ms, uint64_t repeat_ms);
void kc_timer_stop(kc_timer *t);
/* Armed and not yet fired (or repeating). */
bool kc_timer_active(const kc_timer *t);
/* Stops t and uv_close()s its handle; close_cb may be NULL. */
void kc_timer_close(kc_timer *t, uv_close_cb close_cb);

/* --- test seam ------------------------------------------------------------ */

/* The clock stands at start_ns (ns) until kc_clock_advance moves it. */
void kc_clock_set_manual(uint64_t start_ns);
/* Moves the manual clock forward by delta_ns and fires the kc_timers due by
 * then (in their loops' next iteration). No-op with the real clock. */
void kc_clock_advance(uint64_t delta_ns);
/* Back to CLOCK_MONOTONIC; kc_timers still armed on the manual clock are
 * left as they are (stop them first). */
void kc_clock_set_real(void);
bool kc_clock_is_manual(void);
/* Under the manual clock: the earliest due time (ns) of an armed kc_timer
 * in *due_ns and true; false when none is armed (or the clock is real). */
bool kc_clock_next_due(uint64_t *due_ns);

#endif
