/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/lease/shardplan.c's reading of a LeaseList
 * (kc_shard_scan_leases: the parse, the range / membership name rules, the
 * record of each item) and its claim planner (kc_shard_plan) on the
 * records read, observed on a fake clock. Input = the LIST body. Checks:
 * ranges within bounds, membership names under the prefix, a plan that
 * claims only ranges free to us and never more than the target. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lease/shardplan.h"

#define N 6

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct view {
  kc_shard_obs obs[N];
  char members[8][256];
  size_t nmembers;
} view;

static void on_item(const kc_shard_lease_item *it, void *ud) {
  view *v = ud;
  if (it->range >= N) abort();
  if (it->range < 0) {
    if (strncmp(it->name, "p-member-", 9) != 0) abort();
    if (v->nmembers < 8) memcpy(v->members[v->nmembers++], it->rec->holder, 256);
    return;
  }
  kc_shard_observe(&v->obs[it->range], it->rec->holder, it->rec->duration_s % 100000, it->content,
                   1000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *b = malloc(size ? size : 1); /* exact size: ASan sees over-reads */
  if (!b) abort();
  memcpy(b, data, size);
  view v;
  memset(&v, 0, sizeof v);
  char err[160];
  int rc = kc_shard_scan_leases(b, size, "p", N, on_item, &v, err, sizeof err);
  free(b);
  if (rc < 0) return 0;
  kc_shard_plan_range pr[N];
  for (unsigned i = 0; i < N; i++)
    pr[i] =
        (kc_shard_plan_range){(enum kc_shard_state)(i % 3 == 0 ? KC_SHARD_OWNED : KC_SHARD_FREE),
                              v.obs[i].holder, kc_shard_obs_live(&v.obs[i], 1500)};
  const char *m[8];
  for (size_t i = 0; i < v.nmembers; i++)
    m[i] = v.members[i];
  unsigned claim[N], give[N];
  kc_shard_plan_out out = {.claim = claim, .give = give};
  if (kc_shard_plan("me", m, v.nmembers, pr, N, &out) != 0) abort();
  if (out.target == 0 || out.target > N || out.nclaim > N || out.ngive > N) abort();
  unsigned mine = 2; /* ranges 0 and 3 */
  if (out.nclaim && mine + out.nclaim > out.target) abort();
  for (size_t k = 0; k < out.nclaim; k++) {
    unsigned i = claim[k];
    if (i >= N || pr[i].state != KC_SHARD_FREE) abort();
    if (pr[i].live && pr[i].holder[0] && strcmp(pr[i].holder, "me") != 0) abort();
  }
  for (size_t k = 0; k < out.ngive; k++)
    if (give[k] >= N || pr[give[k]].state != KC_SHARD_OWNED) abort();
  return 0;
}
