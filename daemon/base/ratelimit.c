/* SPDX-License-Identifier: Apache-2.0 */
/* ratelimit: see ratelimit.h. */
#include "base/ratelimit.h"

#include <errno.h>
#include <math.h>

#define NT_PER_TOKEN 1000000000ll /* nano-tokens: integer arithmetic keeps 1/qps exact */

void kc_ratelimit_config_default(kc_ratelimit_config *cfg) {
  cfg->base_delay_ns = KC_BACKOFF_DEFAULT_BASE_NS;
  cfg->max_delay_ns = KC_BACKOFF_DEFAULT_MAX_NS;
  cfg->qps = KC_BUCKET_DEFAULT_QPS;
  cfg->burst = KC_BUCKET_DEFAULT_BURST;
}

uint64_t kc_backoff_when(const kc_backoff *b, uint32_t *failures) {
  uint32_t n = *failures;
  if (n < UINT32_MAX) *failures = n + 1;
  if (b->base_ns == 0) return 0;
  /* base << n overflows once n reaches the number of leading zero bits. */
  if (n >= 64 || (unsigned)__builtin_clzll(b->base_ns) < n) return b->max_ns;
  uint64_t d = b->base_ns << n;
  return d > b->max_ns ? b->max_ns : d;
}

void kc_bucket_init(kc_bucket *bk, double qps, uint32_t burst) {
  bk->qps = qps;
  bk->burst_nt = (int64_t)(burst ? burst : 1) * NT_PER_TOKEN;
  bk->tokens_nt = bk->burst_nt;
  bk->last_ns = 0;
  bk->started = 0;
}

/* Tokens at now_ns, refilled since last_ns and capped at the burst. */
static int64_t advance(const kc_bucket *bk, uint64_t now_ns) {
  if (!bk->started) return bk->burst_nt;
  if (now_ns <= bk->last_ns) return bk->tokens_nt;
  double add = (double)(now_ns - bk->last_ns) * bk->qps; /* ns * tokens/s = nano-tokens */
  double t = (double)bk->tokens_nt + add;
  if (t >= (double)bk->burst_nt) return bk->burst_nt;
  return (int64_t)t;
}

uint64_t kc_bucket_reserve(kc_bucket *bk, uint64_t now_ns) {
  if (!(bk->qps > 0)) return 0;
  int64_t t = advance(bk, now_ns) - NT_PER_TOKEN;
  if (!bk->started || now_ns > bk->last_ns) bk->last_ns = now_ns;
  bk->started = 1;
  bk->tokens_nt = t;
  if (t >= 0) return 0;
  return (uint64_t)ceil((double)-t / bk->qps);
}

int kc_ratelimit_init(kc_ratelimit *rl, const kc_ratelimit_config *cfg) {
  if (cfg->max_delay_ns < cfg->base_delay_ns || isnan(cfg->qps)) return -EINVAL;
  rl->backoff.base_ns = cfg->base_delay_ns;
  rl->backoff.max_ns = cfg->max_delay_ns;
  kc_bucket_init(&rl->bucket, cfg->qps, cfg->burst);
  return 0;
}

uint64_t kc_ratelimit_when(kc_ratelimit *rl, uint32_t *failures, uint64_t now_ns) {
  uint64_t a = kc_backoff_when(&rl->backoff, failures);
  uint64_t b = kc_bucket_reserve(&rl->bucket, now_ns);
  return a > b ? a : b;
}
