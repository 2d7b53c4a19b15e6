/* SPDX-License-Identifier: Apache-2.0 */
/* workqueue: one controller's queue of keys, with client-go's semantics
 * (docs/api-contract.md section 10): a key is queued at most once, a key that
 * is added while it is being processed is handed out again only after Done
 * (never twice at once), delayed adds wait in a min-heap of ready times
 * (keeping the earlier time), rate-limited adds use kc_ratelimit, and
 * ShutDown still hands out what was queued before reporting shutdown.
 *
 * Priorities: a key is queued at one of KC_WQ_LEVELS levels, one FIFO each.
 * Get hands out the head of the highest non-empty level, except that a
 * head which has waited its level's max wait (KC_WQ_LOW_MAX_WAIT_NS,
 * KC_WQ_NORMAL_MAX_WAIT_NS) is aged: while an aged head exists, at least
 * every other Get hands out the oldest aged head, whatever its level
 * (docs/design.md "Workqueue priorities" derives the bound on a key's
 * wait). Adding a key that is queued already at a higher level raises it
 * (one entry still: the add is deduplicated); a lower level never lowers
 * it. Delays, backoff and the token bucket do not depend on the level.
 *
 * Owns: every key it has seen, interned once in one record (key text, state
 * bits, level, failure count, heap slot, metric timestamps). Memory is bounded by the
 * number of distinct keys, never by the number of events: repeated adds of a
 * key cost no allocation. Records of keys that are idle (not queued, not
 * processing, not waiting, no failure history) are reclaimed once they
 * outnumber the live ones, so churning object names do not leak; the sweep
 * that frees them, like the key table's growth, is spread over calls (a
 * 256th of the table per call), so no single call holds the loop for a
 * walk over every record.
 *
 * Non-blocking by design: the loop owns the queue, so Get returns a key or
 * "nothing now" instead of blocking, and the owner arms one uv_timer from
 * kc_workqueue_next_ready() and calls kc_workqueue_tick() when it fires.
 *
 * Clock: kc_clock_now_ns (base/clock.h); tests run it as the manual clock,
 * so every time here is exact.
 *
 * Threads: loop thread only, every function. Worker threads never touch a
 * workqueue (they get a copy of the key from daemon/workers).
 * Errors: 0 or a negative errno. Ownership: key arguments are borrowed for
 * the call (the queue copies them); returned key pointers are owned by the
 * queue and valid until Done for that key (or kc_workqueue_free).
 */
#ifndef KC_WORKQUEUE_H
#define KC_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ratelimit.h"

/* controller-runtime histogram buckets: 1e-8 s .. 1e3 s, factor 10. Upper
 * bounds in ns are 10, 100, ... 1e12; counts[12] is the +Inf bucket. */
#define KC_WQ_HIST_BUCKETS 12

typedef struct kc_wq_histogram {
  uint64_t counts[KC_WQ_HIST_BUCKETS + 1]; /* per bucket, NOT cumulative */
  uint64_t count;
  uint64_t sum_ns;
} kc_wq_histogram;

/* Upper bound of bucket i (0..11) in ns. */
uint64_t kc_wq_histogram_bound_ns(unsigned i);
void kc_wq_histogram_observe(kc_wq_histogram *h, uint64_t ns);

/* Priority levels, lowest first. */
enum kc_wq_priority {
  KC_WQ_LOW = 0,    /* catch-up: initial list, relist, resync, cache repair, a shard range taken */
  KC_WQ_NORMAL = 1, /* a real change seen by a watch; kc_workqueue_add */
  KC_WQ_HIGH = 2,   /* asked for: an operator, a reconcile's requeue at high priority */
};
#define KC_WQ_LEVELS 3
/* For the _at functions: the key's own level, the one it was last queued
 * at (KC_WQ_NORMAL for a key never queued). */
#define KC_WQ_KEEP (-1)
/* Max waits: a head that entered its level this long ago is aged. HIGH has
 * none (it is the top level already). */
#define KC_WQ_LOW_MAX_WAIT_NS (30 * KC_NS_PER_SEC)
#define KC_WQ_NORMAL_MAX_WAIT_NS (10 * KC_NS_PER_SEC)

/* "low", "normal", "high" (metric labels, logs); "?" for anything else. */
const char *kc_wq_priority_name(int level);

/* Prometheus workqueue_* metrics (docs/api-contract.md 10.3), kept in the queue.
 * Render: workqueue_depth = depth, workqueue_adds_total = adds_total,
 * workqueue_retries_total = retries_total, the two histograms in seconds;
 * workqueue_depth_by_priority = depth_by_priority, kctrld_workqueue_aged_total
 * = aged_total. */
typedef struct kc_wq_metrics {
  uint64_t depth;        /* keys marked dirty (queued or re-added while processing) */
  uint64_t depth_by_priority[KC_WQ_LEVELS]; /* depth split by the level each key is queued at */
  uint64_t aged_total;   /* Gets that handed out an aged head ahead of a higher level's */
  uint64_t adds_total;   /* adds that inserted into dirty */
  uint64_t retries_total;/* AddAfter / AddRateLimited calls */
  uint64_t deduped_total;/* adds that were no-ops because already dirty (not in client-go) */
  kc_wq_histogram queue_duration; /* first add -> Get */
  kc_wq_histogram work_duration;  /* Get -> Done */
} kc_wq_metrics;

typedef struct kc_workqueue kc_workqueue;

/* Creates a queue. `name` is copied (metrics label). `rl` may be NULL for
 * the defaults (5 ms..1000 s backoff, 10/s burst 100).
 * Returns NULL on allocation failure or invalid rate limits (errno set). */
kc_workqueue *kc_workqueue_new(const char *name, const kc_ratelimit_config *rl);
/* Frees the queue and every key. kc_workqueue_free(NULL) is a no-op. */
void kc_workqueue_free(kc_workqueue *wq);

/* client-go Add, at KC_WQ_NORMAL. Returns 0 (also for deduplicated adds and
 * adds after ShutDown, which are ignored), -ENOMEM, or -EINVAL for an empty
 * key. */
int kc_workqueue_add(kc_workqueue *wq, const char *key);
/* Add at `level` (enum kc_wq_priority, or KC_WQ_KEEP). A key queued already
 * at a lower level moves to the tail of `level` (its wait there counts from
 * now); a key being processed comes back at the highest level asked for
 * meanwhile. Returns as kc_workqueue_add, and -EINVAL for a bad level. */
int kc_workqueue_add_at(kc_workqueue *wq, const char *key, int level);

/* client-go AddAfter: delay_ns 0 adds now; otherwise the key waits in the
 * heap until now + delay; a key already waiting keeps the earlier time.
 * Counts a retry. Ignored after ShutDown. Returns 0 or -ENOMEM/-EINVAL. */
int kc_workqueue_add_after(kc_workqueue *wq, const char *key, uint64_t delay_ns);

/* client-go AddRateLimited: AddAfter(key, limiter.When(key)). */
int kc_workqueue_add_rate_limited(kc_workqueue *wq, const char *key);

/* The two above at `level`; without _at they keep the key's own level
 * (KC_WQ_KEEP), so a key that fails comes back at the level it ran at. A
 * key waiting already keeps the earlier time and the higher level. */
int kc_workqueue_add_after_at(kc_workqueue *wq, const char *key, uint64_t delay_ns, int level);
int kc_workqueue_add_rate_limited_at(kc_workqueue *wq, const char *key, int level);

/* client-go Forget: clears the key's failure history (Done is still due). */
void kc_workqueue_forget(kc_workqueue *wq, const char *key);

/* client-go NumRequeues: failures recorded since the last Forget. */
uint32_t kc_workqueue_num_requeues(const kc_workqueue *wq, const char *key);

enum kc_wq_get {
  KC_WQ_KEY = 0,      /* *key is set; the key is now processing */
  KC_WQ_EMPTY = 1,    /* nothing ready now */
  KC_WQ_SHUTDOWN = 2, /* shut down and nothing queued: stop asking */
};

/* client-go Get without blocking: moves the queue head to processing.
 * Ownership: *key points into the queue's record, valid until Done. */
enum kc_wq_get kc_workqueue_get(kc_workqueue *wq, const char **key);

/* The key's own level (queued at, or last handed out at), or -ENOENT for a
 * key the queue does not hold. */
int kc_workqueue_priority(const kc_workqueue *wq, const char *key);

/* client-go Done: ends processing; a key re-added meanwhile is queued again.
 * Returns 0, or -ENOENT if the key is not processing (a caller bug).
 * The Done that drains the queue (nothing queued, nothing processing; keys
 * waiting in the delay heap do not count) gives the freed records back to
 * the OS (daemon/base/memtrim.h) when at least KC_WQ_TRIM_KEYS keys were queued
 * or processing at once since the last such trim and that trim is
 * KC_WQ_TRIM_INTERVAL_NS old or there was none: a burst (the initial sync's
 * 10k keys) is returned, a stream of single events never pays the trim. */
int kc_workqueue_done(kc_workqueue *wq, const char *key);

#define KC_WQ_TRIM_KEYS 1024u
#define KC_WQ_TRIM_INTERVAL_NS (10 * KC_NS_PER_SEC)

/* Moves every waiting key whose time has come into the queue. Call it when
 * the timer armed from kc_workqueue_next_ready fires. Returns keys moved. */
size_t kc_workqueue_tick(kc_workqueue *wq);

/* Earliest ready time (monotonic ns, same clock) of a waiting key; returns
 * false when none waits. The owner arms one timer for it. */
bool kc_workqueue_next_ready(const kc_workqueue *wq, uint64_t *when_ns);

/* client-go ShutDown: further adds are ignored, waiting (delayed) keys are
 * dropped, queued keys are still handed out by Get, then KC_WQ_SHUTDOWN. */
void kc_workqueue_shutdown(kc_workqueue *wq);

size_t kc_workqueue_len(const kc_workqueue *wq); /* queued, not processing */
size_t kc_workqueue_len_at(const kc_workqueue *wq, int level); /* queued at level */

const kc_wq_metrics *kc_workqueue_metrics(const kc_workqueue *wq);
/* workqueue_unfinished_work_seconds: sum of ages of processing keys (ns). */
uint64_t kc_workqueue_unfinished_work_ns(const kc_workqueue *wq);
/* workqueue_longest_running_processor_seconds: age of the oldest (ns). */
uint64_t kc_workqueue_longest_running_ns(const kc_workqueue *wq);

/* One key's state, as kc_workqueue_each reports it (the admin socket's
 * `kctrld ctl keys` and `queues`). key points into the queue's record:
 * valid during the callback only. */
typedef struct kc_wq_key_state {
  const char *key;
  bool queued;        /* waiting in the queue for a worker */
  bool processing;    /* handed out, no Done yet */
  bool waiting;       /* in the delay heap (backoff or AddAfter) until ready_ns */
  uint32_t failures;  /* NumRequeues */
  int level;          /* enum kc_wq_priority: queued at; else the level it was last queued at */
  uint64_t ready_ns;  /* waiting: when it is queued (monotonic, kc_clock_now_ns) */
  uint64_t added_ns;  /* queued: its first add not yet taken (0: none) */
  uint64_t started_ns;/* processing: when it was handed out */
} kc_wq_key_state;

/* Calls fn for every key that is queued, processing, waiting or has
 * failures (idle records are skipped). O(keys); the loop is held for the
 * walk, so it is for operators' requests, not for a hot path. */
void kc_workqueue_each(const kc_workqueue *wq, void (*fn)(const kc_wq_key_state *st, void *ud),
                       void *ud);
/* The state of one key, O(1); false when the queue knows nothing of it
 * (idle). out->key points into the record: valid until the next call. */
bool kc_workqueue_key_state(const kc_workqueue *wq, const char *key, kc_wq_key_state *out);

/* --- Test seam: for tests only, not called by the daemon --- */
bool kc_workqueue_shutting_down(const kc_workqueue *wq);
size_t kc_workqueue_processing(const kc_workqueue *wq); /* handed out, no Done yet */
size_t kc_workqueue_waiting(const kc_workqueue *wq);    /* in the delay heap */
size_t kc_workqueue_keys(const kc_workqueue *wq);       /* interned key records */
size_t kc_workqueue_mem_bytes(const kc_workqueue *wq);  /* records + tables */
/* Trims done by kc_workqueue_done since kc_workqueue_new. */
uint64_t kc_workqueue_trims(const kc_workqueue *wq);

#endif
