/* SPDX-License-Identifier: Apache-2.0 */
/* clock: see clock.h. The manual clock keeps its armed timers in one list
 * sorted by due time; the list is short (a test's few components). */
#include "base/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static atomic_bool manual;
static _Atomic uint64_t manual_ns;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static kc_timer *armed; /* manual clock: linked timers, earliest first */

uint64_t kc_clock_now_ns(void) {
  if (atomic_load_explicit(&manual, memory_order_acquire))
    return atomic_load_explicit(&manual_ns, memory_order_acquire);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail for CLOCK_MONOTONIC with a valid pointer */
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t kc_clock_now_ms(void) { return kc_clock_now_ns() / 1000000u; }

static void unlink_locked(kc_timer *t) {
  if (!t->linked) return;
  if (t->prev) t->prev->next = t->next;
  else armed = t->next;
  if (t->next) t->next->prev = t->prev;
  t->prev = t->next = NULL;
  t->linked = false;
}

/* After the timers due no later than t (equal due times keep arming order). */
static void link_locked(kc_timer *t) {
  kc_timer *prev = NULL, *cur = armed;
  while (cur && cur->due_ns <= t->due_ns) {
    prev = cur;
    cur = cur->next;
  }
  t->prev = prev;
  t->next = cur;
  if (prev) prev->next = t;
  else armed = t;
  if (cur) cur->prev = t;
  t->linked = true;
}

int kc_timer_init(uv_loop_t *loop, kc_timer *t) {
  t->cb = NULL;
  t->due_ns = t->repeat_ns = 0;
  t->prev = t->next = NULL;
  t->linked = false;
  return uv_timer_init(loop, &t->uv);
}

void kc_timer_start(kc_timer *t, uv_timer_cb cb, uint64_t timeout_ms, uint64_t repeat_ms) {
  if (!atomic_load_explicit(&manual, memory_order_acquire)) {
    uv_update_time(t->uv.loop);
    uv_timer_start(&t->uv, cb, timeout_ms, repeat_ms);
    return;
  }
  uv_timer_stop(&t->uv); /* a firing still pending from an earlier due time */
  pthread_mutex_lock(&mu);
  unlink_locked(t);
  t->cb = cb;
  t->repeat_ns = repeat_ms * 1000000u;
  uint64_t now = atomic_load(&manual_ns);
  if (timeout_ms == 0) { /* due now: the loop's next iteration, as uv does */
    uv_timer_start(&t->uv, cb, 0, 0);
    t->due_ns = now + t->repeat_ns;
    if (t->repeat_ns) link_locked(t);
  } else {
    t->due_ns = now + timeout_ms * 1000000u;
    link_locked(t);
  }
  pthread_mutex_unlock(&mu);
}

void kc_timer_stop(kc_timer *t) {
  if (t->linked) {
    pthread_mutex_lock(&mu);
    unlink_locked(t);
    pthread_mutex_unlock(&mu);
  }
  uv_timer_stop(&t->uv);
}

bool kc_timer_active(const kc_timer *t) {
  return t->linked || uv_is_active((const uv_handle_t *)&t->uv);
}

void kc_timer_close(kc_timer *t, uv_close_cb close_cb) {
  kc_timer_stop(t);
  uv_close((uv_handle_t *)&t->uv, close_cb);
}

void kc_clock_set_manual(uint64_t start_ns) {
  atomic_store_explicit(&manual_ns, start_ns, memory_order_release);
  atomic_store_explicit(&manual, true, memory_order_release);
}

void kc_clock_advance(uint64_t delta_ns) {
  if (!atomic_load_explicit(&manual, memory_order_acquire)) return;
  uint64_t now = atomic_fetch_add(&manual_ns, delta_ns) + delta_ns;
  pthread_mutex_lock(&mu);
  kc_timer *due = NULL, **tail = &due; /* the due timers in due order */
  while (armed && armed->due_ns <= now) {
    kc_timer *t = armed;
    unlink_locked(t);
    *tail = t;
    tail = &t->next;
  }
  for (kc_timer *t = due, *next; t; t = next) {
    next = t->next;
    t->next = NULL;
    uv_timer_start(&t->uv, t->cb, 0, 0);
    if (t->repeat_ns) {
      t->due_ns = now + t->repeat_ns;
      link_locked(t);
    }
  }
  pthread_mutex_unlock(&mu);
}

void kc_clock_set_real(void) { atomic_store_explicit(&manual, false, memory_order_release); }

bool kc_clock_is_manual(void) { return atomic_load_explicit(&manual, memory_order_acquire); }

bool kc_clock_next_due(uint64_t *due_ns) {
  pthread_mutex_lock(&mu);
  bool any = armed != NULL;
  if (any) *due_ns = armed->due_ns;
  pthread_mutex_unlock(&mu);
  return any && kc_clock_is_manual();
}

int64_t kc_clock_civil_to_unix(int64_t year, unsigned month, unsigned day, unsigned hour, unsigned minute,
                               unsigned second) {
  /* Days from 1970-01-01 by eras of 400 years (146097 days each), with the
   * year starting in March so that the leap day comes last. */
  int64_t y = year - (month <= 2);
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  int64_t days = era * 146097 + doe - 719468;
  return days * 86400 + (int64_t)hour * 3600 + (int64_t)minute * 60 + second;
}
