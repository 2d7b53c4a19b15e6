/* SPDX-License-Identifier: Apache-2.0 */
/* consistency: the periodic check that one reflector's cache (a store)
 * still equals what the API server holds for the same scope, and its
 * repair.
 *
 * Why: a watch only carries changes. An event the server never sent (a
 * watch cache bug, a history swapped under a resumed watch that the
 * reflector's history check could not see, a decoder that skipped an
 * object) leaves the cache wrong until the next relist, which may be never.
 *
 * What: every period (jittered by up to +10 %) one paginated metadata-only
 * LIST of the reflector's scope (same path and selectors, `limit` = its
 * page size, Accept PartialObjectMetadataList, no resourceVersion: a
 * consistent read, so the answer is the server's current state and never
 * older than the cache), compared with the store by key, uid and
 * resourceVersion. Objects changed while the check ran are not differences:
 * the comparison waits (polling, at most 2 min) until the reflector has
 * seen the list's resourceVersion (events or a bookmark), then skips keys
 * whose cached resourceVersion is newer than the list's and keys deleted
 * meanwhile. This needs numeric resourceVersions (etcd's revisions, as
 * every kube-apiserver serves): with others the check is skipped, logged
 * once. Any difference is logged with up to KC_CONSISTENCY_EXAMPLES keys,
 * counted, and repaired by kc_reflector_relist. A relist while a check
 * runs ends that check (the relist is the fresher comparison).
 *
 * Cost on the loop: pages are decoded on the decode pool like the
 * reflector's responses; the list's items are kept as small metadata objects
 * (managedFields, annotations, labels and ownerReferences dropped); the
 * comparison runs in slices of KC_CONSISTENCY_SLICE keys per loop turn,
 * plus one kc_store_list of the whole store (a reference per object, under
 * the store's read lock).
 *
 * Context: loop thread only (every function; callbacks run on the loop). Errors: 0 or a negative
 * errno. Ownership: the reflector and the store are borrowed and must
 * outlive the check (close it first).
 */
#ifndef KC_CONSISTENCY_H
#define KC_CONSISTENCY_H

#include <stdint.h>
#include <uv.h>

#include "client/apiclient.h"
#include "kube/kobj.h"
#include "watch/reflector.h"
#include "cache/store.h"

#define KC_CONSISTENCY_EXAMPLES 5
#define KC_CONSISTENCY_SLICE 2000

typedef struct kc_consistency kc_consistency;

typedef struct kc_consistency_stats {
  uint64_t checks;   /* comparisons completed */
  uint64_t diffs;    /* differing keys found, summed over checks */
  uint64_t repairs;  /* relists started because of differences */
  uint64_t skipped;  /* checks given up (list failed, RV never reached, relist meanwhile) */
} kc_consistency_stats;

/* period_ms 0: never runs (until kc_consistency_set_period). The list's
 * pages are decoded on `pool` (decodepool.h; NULL: inline on the loop). */
struct kc_decode_pool;
int kc_consistency_new(uv_loop_t *loop, kc_api *api, struct kc_decode_pool *pool, kc_reflector *r,
                       kc_store *s, uint64_t period_ms, kc_consistency **out);
/* Changes the period; a running check finishes, the next waits the new one. */
void kc_consistency_set_period(kc_consistency *c, uint64_t period_ms);
/* The sink tells about deletions and relists (see above). */
void kc_consistency_note_delete(kc_consistency *c, kc_str ns, kc_str name);
void kc_consistency_note_relist(kc_consistency *c);
/* Cancels any request and timer; freed once the loop ran the close callback. */
void kc_consistency_close(kc_consistency *c);
const kc_consistency_stats *kc_consistency_stats_get(const kc_consistency *c);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Starts a check now (unless one runs): -EBUSY, or 0. */
int kc_consistency_run(kc_consistency *c);

#endif
