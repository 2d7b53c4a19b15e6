/* SPDX-License-Identifier: Apache-2.0 */
/* sharding: one controller's share of the key space, claimed through Leases
 * (docs/design.md "Sharding", docs/operations.md "Sharding").
 *
 * The 2^64 hash space is cut into N ranges (shardsel.h,
 * kc_shard_ranges_split); range i is owned through the coordination.k8s.io/v1
 * Lease "<leasePrefix>-<i>" in leaseNamespace, and each replica holds a
 * membership Lease "<leasePrefix>-member-<16 hex digits of the identity's
 * hash>" while it runs, so replicas count each other through Leases only.
 * Every Lease is held with leader.c's elector (the same acquire / renew /
 * release code, timing and fencing as leader election): one elector per
 * range, created at start and restarted for each claim, and one for the
 * membership.
 *
 * Owns: the range slots (local state, elector, in-flight reconciles, the
 * renew deadline mirrored for the write fence), the observed view of every
 * Lease of the prefix (holder and when its content last changed on OUR
 * monotonic clock, as leader.c measures expiry), the claim loop (a LIST of
 * the namespace's Leases every retryPeriod, or earlier when an observed
 * Lease expires), the tombstones of deleted `for` objects (the last known
 * uid, until their key was dequeued) and the in-flight key table.
 *
 * Claim rule (kc_shard_plan, pure): with L live replicas (membership Leases
 * valid on our clock, us included) target = ceil(N / L). A replica below
 * target claims free or expired ranges up to target; above target it gives
 * up the excess; at target with a surplus of one while another live replica
 * is short by more and no range is free, the replica with the most ranges
 * (ties: the greatest identity) gives one. Conflicts between claimers are
 * settled by the Lease's resourceVersion (a 409 means someone else won).
 *
 * Hand-off: a range given up or lost stops admitting its keys
 * (kc_sharding_admit), waits until its in-flight reconciles ended (at most
 * shutdownTimeout), and only then releases its Lease (holderIdentity "").
 * A range is admitted only while its elector leads it with a valid renew
 * deadline; writes of a reconcile are fenced by the same deadline
 * (kc_sharding_fence_ok, checked by the daemon's may_write on the calling
 * worker thread), so a replica resumed after SIGSTOP whose range expired
 * cannot write.
 *
 * Threads: everything is loop thread only, except kc_sharding_fence_* (any
 * thread: they read atomics; the object is retained between enter and
 * leave, and by a captured kc_shard_fence until dropped) and the pure
 * kc_shard_* planner functions (any thread).
 * Errors: 0 or a negative errno.
 * Ownership: the caller owns the kc_sharding (kc_sharding_close); cfg and
 * identity are copied; the informer is borrowed and must outlive it.
 */
#ifndef KC_SHARDING_H
#define KC_SHARDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "client/apiclient.h"
#include "base/buf.h"
#include "config/config.h"
#include "cache/informer.h"
#include "kube/kobj.h"
#include "lease/leader.h"
#include "lease/shardsel.h"

/* ---- the planner (pure; unit-tested with a fake clock and Lease store) ---- */

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

/* ---- the component (loop thread) ------------------------------------------ */

typedef struct kc_sharding kc_sharding;

typedef struct kc_sharding_callbacks {
  /* Range `index` was acquired: its keys are admitted from now on; the
   * caller enqueues the cached keys of that range. May be NULL. */
  void (*on_acquired)(unsigned index, void *ud);
  /* The set of owned or held ranges changed (acquired, no longer admitted,
   * released). May be NULL. */
  void (*on_changed)(void *ud);
} kc_sharding_callbacks;

typedef struct kc_sharding_stats {
  unsigned shards, owned, members;
  uint64_t handoffs; /* ranges given up or lost after being owned */
  uint64_t acquisitions;
} kc_sharding_stats;

/* Creates the component for one controller (spec->shards > 0). identity:
 * the replica identity (the one leader election uses). for_inf: the
 * controller's `for` informer (uids of cached objects). drain_ms: the bound
 * of a hand-off's wait for in-flight reconciles (shutdownTimeout). Nothing
 * happens before kc_sharding_start. */
int kc_sharding_new(uv_loop_t *loop, kc_api *api, const char *controller,
                    const kc_sharding_spec *spec, const char *identity, kc_informer *for_inf,
                    uint64_t drain_ms, const kc_sharding_callbacks *cb, void *ud,
                    kc_sharding **out);
int kc_sharding_start(kc_sharding *sh);

/* The hash of an object (uid or namespace). */
uint64_t kc_sharding_obj_hash(const kc_sharding *sh, const kc_obj *obj);
/* Remembers a deleted `for` object's range under its key until the key was
 * dropped (kc_sharding_admit) or ran without being queued again
 * (kc_sharding_end). -ENOMEM. */
int kc_sharding_note_deleted(kc_sharding *sh, const kc_obj *obj);
/* True when the key's range is owned now (enqueue filter). */
bool kc_sharding_owns_key(kc_sharding *sh, const char *key);
/* True when the object's range is owned now. */
bool kc_sharding_owns_obj(const kc_sharding *sh, const kc_obj *obj);
/* Range index of a hash. */
unsigned kc_sharding_range_of(const kc_sharding *sh, uint64_t hash);

/* Dequeue: true when key may run now; it is then in flight (its range
 * cannot be released before kc_sharding_end). false: drop the key. */
bool kc_sharding_admit(kc_sharding *sh, const char *key);
/* The reconcile of an admitted key ended; requeued: the key goes back to
 * the queue (a deleted object's remembered range is kept for it). */
void kc_sharding_end(kc_sharding *sh, const char *key, bool requeued);

/* Worker thread, around one reconcile of an admitted key: the fence of the
 * calling thread is the key's range until leave. */
void kc_sharding_fence_enter(kc_sharding *sh, const char *key);
void kc_sharding_fence_leave(void);
/* True when the calling thread has no fence, or its range is held with a
 * renew deadline in the future. Any thread. */
bool kc_sharding_fence_ok(void);
/* True between kc_sharding_fence_enter and kc_sharding_fence_leave on the
 * calling thread: its writes are fenced by the range, not by leadership
 * (the daemon's may_write). Any thread. */
bool kc_sharding_fence_active(void);

/* The calling thread's fence, kept for later (an Event a reconcile records
 * is written by the loop after the reconcile ended). */
typedef struct kc_shard_fence {
  kc_sharding *sh; /* retained; NULL: empty */
  int range;       /* -1: the key was not admitted (never passes) */
  uint64_t epoch;  /* the range's acquisition at capture */
} kc_shard_fence;
/* Copies the calling thread's fence into out (retaining the component);
 * false (out empty) when the thread has none. Any thread. */
bool kc_sharding_fence_capture(kc_shard_fence *out);
/* True when f's range is still held from the same acquisition as at
 * capture, with a renew deadline in the future: a range lost (or lost and
 * claimed again) since fails. Any thread. */
bool kc_sharding_fence_check(const kc_shard_fence *f);
/* Releases f's reference and empties it. Any thread. */
void kc_sharding_fence_drop(kc_shard_fence *f);

/* The owned ranges: writes up to cap ranges, returns how many are owned. */
size_t kc_sharding_owned_ranges(const kc_sharding *sh, kc_shard_range *out, size_t cap);
/* The ranges whose objects must stay cached (for a shardSelector): owned
 * and draining (in-flight reconciles still read them). */
size_t kc_sharding_held_ranges(const kc_sharding *sh, kc_shard_range *out, size_t cap);
void kc_sharding_get_stats(const kc_sharding *sh, kc_sharding_stats *out);
/* Appends the /debug/shards JSON object of this controller: ranges (index,
 * start, end, state, holder, own, keys queued/cached), members, target. */
int kc_sharding_debug_json(kc_sharding *sh, kc_buf *out);
/* Cached `for` objects per range (the last count made by debug/metrics). */
int kc_sharding_count_cached(kc_sharding *sh, uint64_t *per_range, unsigned n);

/* Stops claiming and gives every range up, then releases the membership
 * Lease; done(ud) runs once on the loop when all is released or failed
 * (NULL: no callback). Call after the workers stopped: in-flight counts are
 * dropped (a reconcile still running was abandoned; clearing each range's
 * fence before its release refuses its writes). */
void kc_sharding_shutdown(kc_sharding *sh, void (*done)(void *ud), void *ud);
/* References for threads that may outlive the owner (the controller's
 * worker context). Any thread. */
void kc_sharding_retain(kc_sharding *sh);
void kc_sharding_unref(kc_sharding *sh);
/* Frees now without releasing (run the loop afterwards so handles close).
 * A worker still inside a fence keeps the memory alive (its fence reads
 * false). NULL is a no-op. */
void kc_sharding_close(kc_sharding *sh);

#endif
