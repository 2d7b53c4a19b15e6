/* SPDX-License-Identifier: Apache-2.0 */
/* controller: turns informer events into keys and keys into reconcile calls.
 *
 * Owns one workqueue (dedup, backoff, token bucket, delay heap), its timer,
 * and the worker pool that runs the plugin's reconcile. Event mapping:
 *  - `for` kind: the object's own key "namespace/name" ("name" for a
 *    cluster-scoped kind);
 *  - `owns` kinds: the controller ownerReference whose kind and API group match
 *    the `for` kind: "namespace/name" in the owned object's namespace when the
 *    `for` kind is namespaced, "name" when it is cluster-scoped (discovery's
 *    scope of the `for` informer; a Namespace owning ConfigMaps); adds and
 *    deletes are observed in the owner key's expectations;
 *  - `watches` kinds: the mapping of the config (label, annotation, field,
 *    index), by the same scope rule.
 * Predicates (GenerationChanged, LabelsChanged, ...) filter updates, resyncs
 * included (old == new: dropped by every predicate); adds and deletes always
 * enqueue (docs/config.md "predicates").
 *
 * Priorities (workqueue.h): keys from a watch event are queued at NORMAL,
 * keys from a list, relist, resync or an acquired shard range at LOW
 * (kc_informer_cause), so a start-up backlog does not delay news.
 * Read your own writes (the spec's readYourOwnWrites, docs/design.md): a
 * key taken from the queue while an informer the controller reads has not
 * observed a write of the key's last reconcile (host/ownwrites.h) is not
 * run: it waits off the queue, and is queued again once an event, bookmark
 * or list of those informers shows the writes observed, or its wait timed
 * out (the queue's timer). No worker waits.
 *
 * While not active (not leading yet), events are still mapped and queued but
 * nothing is dispatched to workers; activation starts dispatching and
 * enqueues every cached `for` object once (level-triggered start).
 *
 * Context: loop thread only. Errors: 0 or a negative errno.
 */
#ifndef KC_CONTROLLER_H
#define KC_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "cache/informer.h"
#include "base/metrics.h"
#include "host/plugin_host.h"
#include "runtime/keytrace.h"
#include "runtime/workqueue.h"
#include "runtime/workers.h"

typedef struct kc_controller kc_controller;

typedef struct kc_controller_stats {
  uint64_t success, error, requeue, requeue_after; /* controller_runtime_reconcile_total */
  uint64_t terminal; /* the errors among `error` that were terminal (not requeued) */
  uint64_t timeouts;
  unsigned workers, active_workers;
  double reconcile_seconds_sum;
  uint64_t reconcile_count;
} kc_controller_stats;

/* informers[i] is the informer of config informer i (borrowed). The plugin
 * instance is owned by the controller from now on (freed at close). */
int kc_controller_new(uv_loop_t *loop, const kc_controller_spec *spec, kc_informer *const *informers,
                      kc_plugin_instance *inst, kc_controller **out);
/* Live reload: points an unchanged controller (same name, kinds, mappings
 * and informers) at the equal spec of a new config. */
void kc_controller_rebind(kc_controller *c, const kc_controller_spec *spec);
/* Shards the controller (spec->sharding.shards > 0; daemon/lease/sharding.h):
 * from now on only keys of ranges this replica owns are queued and run,
 * each reconcile's writes fenced by its range; a range acquired queues its
 * cached keys. identity: the replica identity; drain_ms bounds a hand-off's
 * wait for in-flight reconciles. select_on_server: the `for` informer is
 * this controller's alone, so its shardSelector may follow the held ranges
 * (kc_informer_set_shard_selector; the filter stays on either way). The claim loop starts with the first
 * activation (or earlier: kc_controller_shard_start); stop gives every range back after the workers stopped. Call
 * before the first kc_controller_set_active. -EALREADY, -EINVAL (not
 * sharded), -ENOMEM. */
int kc_controller_shard(kc_controller *c, kc_api *api, const char *identity, uint64_t drain_ms,
                        bool select_on_server);
/* Starts the claim loop now rather than at the first activation (the
 * daemon claims before its `for` informer lists, so that the first list
 * carries the shardSelector). 0 (also when started already), -EINVAL (not
 * sharded or stopping), or kc_sharding_start's error. */
int kc_controller_shard_start(kc_controller *c);
/* NULL unless sharded. Borrowed. */
struct kc_sharding *kc_controller_sharding(kc_controller *c);
/* Starts or stops dispatching to workers (leader election). */
void kc_controller_set_active(kc_controller *c, bool active);
/* Graceful stop: no new keys, in-flight reconciles get bound_ms to finish;
 * then done(ud) runs and the controller is freed. */
void kc_controller_stop(kc_controller *c, uint64_t bound_ms, void (*done)(void *ud), void *ud);

/* The result-to-queue policy (docs/api-contract.md 10.2) for `key`, handed
 * out by wq, whose reconcile returned res, then Done: done -> Forget (the
 * backoff restarts from zero); requeue-after N ms -> Forget + AddAfter N ms
 * (held, the key not run at all: AddAfter only, its failures kept);
 * terminal -> nothing (as controller-runtime: not requeued, the backoff
 * kept; an add while it ran, or any later event for the key, runs it
 * again); requeue, error, unknown -> AddRateLimited. A requeue comes back
 * at res->priority when res->has_priority, else at the level the key ran
 * at. Returns Done's result (-ENOENT: key was not being processed). */
int kc_controller_apply_result(kc_workqueue *wq, const char *key, const kc_reconcile_result *res);

/* An operator's requeue: queues `key` now at `level` (enum kc_wq_priority),
 * raising it when it is queued lower, and logs it. 0, -EINVAL (empty key or
 * bad level), -ESRCH (sharded: another replica's key), -ECANCELED
 * (stopping), -ENOMEM. */
int kc_controller_requeue(kc_controller *c, const char *key, int level);
/* Read your own writes: false when off for this controller, else true
 * with its counters (host/ownwrites.h). */
bool kc_controller_own_writes_stats(const kc_controller *c, kc_ownwrites_stats *out);

/* kctrld ctl pause/resume: while paused, workers take no keys from this
 * controller; events keep queueing (and deduplicating) keys. */
void kc_controller_set_paused(kc_controller *c, bool paused);
bool kc_controller_paused(const kc_controller *c);
/* Dispatching (leader election; kc_controller_set_active). */
bool kc_controller_active(const kc_controller *c);
/* The controller's key trace and last errors (keytrace.h). Borrowed. */
kc_keytrace *kc_controller_keytrace(kc_controller *c);

const char *kc_controller_name(const kc_controller *c);
kc_workqueue *kc_controller_queue(kc_controller *c);
void kc_controller_stats_get(const kc_controller *c, kc_controller_stats *out);
/* controller_runtime_reconcile_time_seconds distribution (loop thread). */
const kc_reconcile_histogram *kc_controller_reconcile_histogram(const kc_controller *c);
const kc_controller_spec *kc_controller_spec_get(const kc_controller *c);

/* --- Test seam: for tests only, not called by the daemon --- */
/* The controller's read-your-own-writes table (NULL when off). Borrowed. */
kc_ownwrites *kc_controller_own_writes(kc_controller *c);

#endif
