/* SPDX-License-Identifier: Apache-2.0 */
/* shardplan: the pure side of sharding (sharding.h): how a replica sees one
 * Lease on its own monotonic clock (kc_shard_obs), the claim rule that turns
 * those observations into ranges to claim and to give up (kc_shard_plan),
 * the Lease names of ranges and members, and the scan of a LeaseList for
 * the Leases of a prefix. Unit-tested with a fake clock and Lease store.
 *
 * Claim rule: with L live replicas (membership Leases valid on our clock,
 * us included) target = ceil(N / L). A replica below target claims free or
 * expired ranges up to target; above target it gives up the excess; at
 * target with a surplus of one while another live replica is short by more
 * and no range is free, the replica with the most ranges (ties: the
 * greatest identity) gives one.
 *
 * Threads: no state of its own; any thread.
 * Errors: 0 or a negative errno.
 */
#ifndef KC_SHARDPLAN_H
#define KC_SHARDPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/kobj.h"
#include "lease/leader.h"

/* Local state of one range. */
enum kc_shard_state {
  KC_SHARD_FREE = 0,  /* not ours, nothing running */
  KC_SHARD_CLAIMING,  /* our elector tries to acquire it */
  KC_SHARD_OWNED,     /* we hold it: its keys are admitted */
  KC_SHARD_DRAINING,  /* given up or lost: waiting for in-flight reconciles */
  KC_SHARD_RELEASING, /* releasing the Lease */
};

/* One Lease as a replica observed it, on its own monotonic clock. */
typedef struct kc_shard_obs {
  bool present;
  char holder[256]; /* "" = nobody */
  int64_t duration_s;
  uint64_t content;    /* fingerprint of the spec fields (changes on every renewal) */
  uint64_t changed_ms; /* when `content` was first seen */
} kc_shard_obs;

/* Folds one observation (from a LIST or GET) into o. */
void kc_shard_observe(kc_shard_obs *o, const char *holder, int64_t duration_s, uint64_t content,
                      uint64_t now_ms);
/* Marks a Lease seen as absent (deleted or never created). */
void kc_shard_observe_absent(kc_shard_obs *o);
/* True when o has a holder whose record is valid at now_ms: its content
 * changed less than duration_s ago on our clock. */
bool kc_shard_obs_live(const kc_shard_obs *o, uint64_t now_ms);
/* When o's current record expires (UINT64_MAX: no holder, nothing expires). */
uint64_t kc_shard_obs_expiry(const kc_shard_obs *o);

typedef struct kc_shard_plan_range {
  enum kc_shard_state state; /* ours */
  const char *holder;        /* observed holder, "" = none */
  bool live;                 /* the holder's record is valid on our clock */
} kc_shard_plan_range;

typedef struct kc_shard_plan_out {
  unsigned *claim; /* ranges to claim (caller's array of n entries) */
  size_t nclaim;
  unsigned *give; /* ranges to give up (caller's array of n entries) */
  size_t ngive;
  unsigned target; /* ceil(n / live replicas) */
  unsigned members;
} kc_shard_plan_out;

/* Decides one step of the claim loop for `self`. members[0..nmembers) are
 * the identities of the other live replicas (duplicates and self ignored).
 * Returns 0 or -EINVAL (n == 0). */
int kc_shard_plan(const char *self, const char *const *members, size_t nmembers,
                  const kc_shard_plan_range *ranges, unsigned n, kc_shard_plan_out *out);

/* The membership Lease's name for identity: "<prefix>-member-<16 hex>".
 * Returns the length or -ENOSPC. */
int kc_shard_member_lease_name(const char *prefix, const char *identity, char *buf, size_t cap);
/* Range index of a Lease name "<prefix>-<i>" with i < n, or -1. */
int kc_shard_range_of_lease(const char *prefix, unsigned n, const char *name);

/* One Lease of a LIST answer that belongs to the prefix. */
typedef struct kc_shard_lease_item {
  const char *name;
  int range;                  /* its range index, or -1 for a membership Lease */
  const kc_lease_record *rec; /* leader.h */
  uint64_t content;           /* fingerprint of the spec fields */
  kc_obj *lease;              /* the item as an object (borrowed: ref it to keep) */
} kc_shard_lease_item;

/* Reads a LeaseList body (kc_obj_parse limits) and calls cb for every item
 * named "<prefix>-<i>" (i < n) or "<prefix>-member-..."; other items are
 * skipped. Returns 0, -EBADMSG (not a JSON object; why in err) or -ENOMEM.
 * Any thread. For tests/fuzz/fuzz_shard_leases.c. */
int kc_shard_scan_leases(const char *json, size_t len, const char *prefix, unsigned n,
                         void (*cb)(const kc_shard_lease_item *item, void *ud), void *ud, char *err,
                         size_t errlen);

#endif
