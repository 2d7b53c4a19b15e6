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
 * Claim rule: kc_shard_plan (shardplan.h, pure) decides each step of the
 * claim loop. Conflicts between claimers are settled by the Lease's
 * resourceVersion (a 409 means someone else won).
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
 * leave, and by a captured kc_shard_fence until dropped). The pure
 * kc_shard_* planner functions are shardplan.h's (any thread).
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
#include "lease/shardplan.h"
#include "lease/shardsel.h"

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
