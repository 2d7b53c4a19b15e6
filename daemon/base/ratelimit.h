/* SPDX-License-Identifier: Apache-2.0 */
/* ratelimit: the workqueue's rate limiters, as pure logic over an injected
 * clock (client-go's default controller rate limiter).
 *
 * Owns: the per-item exponential backoff rule, the overall token bucket and
 * their max-of combination. Time is passed in as monotonic nanoseconds, so the
 * results are exact and tests need no sleeping.
 *
 * Per-item state is a single uint32_t failure counter that the caller keeps
 * next to its own interned key (the workqueue keeps it in its key record), so
 * the limiter needs no map of its own: When/Forget/NumRequeues are
 * kc_ratelimit_when / kc_backoff_forget / *failures.
 *
 * Threads: a kc_ratelimit is owned by one thread (the loop); nothing here
 * locks. Errors: 0 or a negative errno. No function here allocates.
 */
#ifndef KC_RATELIMIT_H
#define KC_RATELIMIT_H

#include <stdint.h>

#define KC_NS_PER_MS 1000000ull
#define KC_NS_PER_SEC 1000000000ull

/* Defaults of client-go's DefaultTypedControllerRateLimiter. */
#define KC_BACKOFF_DEFAULT_BASE_NS (5 * KC_NS_PER_MS)
#define KC_BACKOFF_DEFAULT_MAX_NS (1000 * KC_NS_PER_SEC)
#define KC_BUCKET_DEFAULT_QPS 10.0
#define KC_BUCKET_DEFAULT_BURST 100

typedef struct kc_ratelimit_config {
  uint64_t base_delay_ns; /* first backoff delay; 0 disables per-item backoff */
  uint64_t max_delay_ns;  /* backoff cap */
  double qps;             /* token refill rate; <= 0 disables the bucket */
  uint32_t burst;         /* bucket size; 0 is treated as 1 */
} kc_ratelimit_config;

/* Fills *cfg with the defaults above. */
void kc_ratelimit_config_default(kc_ratelimit_config *cfg);

/* Per-item exponential failure backoff. */
typedef struct kc_backoff {
  uint64_t base_ns;
  uint64_t max_ns;
} kc_backoff;

/* Returns base * 2^(*failures), capped at max, and records one more failure
 * (*failures saturates at UINT32_MAX). With the defaults: 5, 10, 20, 40 ms ...
 * the cap of 1000 s is first returned by the 19th call. */
uint64_t kc_backoff_when(const kc_backoff *b, uint32_t *failures);

/* Clears an item's failure history (client-go Forget). */
static inline void kc_backoff_forget(uint32_t *failures) { *failures = 0; }

/* Token bucket with reservation semantics of golang.org/x/time/rate as
 * client-go's BucketRateLimiter uses it: every call takes one token even
 * when none is left; the returned delay is how long until that token exists.
 * The bucket starts full. */
typedef struct kc_bucket {
  double qps;           /* <= 0: unlimited */
  int64_t burst_nt;     /* capacity in nano-tokens (1 token = 1e9) */
  int64_t tokens_nt;    /* may be negative: tokens owed by reservations */
  uint64_t last_ns;     /* time tokens_nt was computed at */
  int started;
} kc_bucket;

void kc_bucket_init(kc_bucket *bk, double qps, uint32_t burst);

/* Reserves one token at now_ns and returns the delay (ns) until it may be
 * used: 0 while the burst lasts, then 1/qps apart. A clock that goes
 * backwards is treated as not advancing. */
uint64_t kc_bucket_reserve(kc_bucket *bk, uint64_t now_ns);

/* The default controller limiter: max of the per-item backoff and the
 * overall bucket (both are consulted, so every call takes a token). */
typedef struct kc_ratelimit {
  kc_backoff backoff;
  kc_bucket bucket;
} kc_ratelimit;

/* Returns 0, or -EINVAL when max_delay_ns < base_delay_ns or qps is NaN. */
int kc_ratelimit_init(kc_ratelimit *rl, const kc_ratelimit_config *cfg);

/* client-go When(item): the delay before the item may be retried, in ns.
 * `failures` is the item's counter (updated). */
uint64_t kc_ratelimit_when(kc_ratelimit *rl, uint32_t *failures, uint64_t now_ns);

#endif
