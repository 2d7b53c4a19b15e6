/* SPDX-License-Identifier: Apache-2.0 */
/* ownwrites: read your own writes for one controller (docs/design.md "Read
 * your own writes"): the writes its reconciles made through the host, and
 * the keys that wait until the informers the controller reads have
 * observed them.
 *
 * Sources: the informers the controller reads (its `for`, `owns` and
 * `watches` informers, one slot each), told by where their objects live
 * (API path, resource plural, scope). A write answered with 2xx whose URL
 * path names an object of a source is recorded for the reconciled key:
 *  - create, update, status update, patch, apply: the object's uid and the
 *    resourceVersion of the answer;
 *  - delete: a tombstone (the uid when the answer carries the object),
 *    unless the answer is the object still there (finalizers or a grace
 *    period keep it: deletionTimestamp set): then the write is an update.
 * Per key and slot only the last write is kept: within one informer a later
 * write has a larger resourceVersion, and observing it implies observing
 * the earlier ones (a watch delivers in resourceVersion order).
 *
 * Records go when observed (kc_ownwrites_ready, kc_ownwrites_recheck),
 * with their object (kc_ownwrites_drop_object) or key (kc_ownwrites_drop_key),
 * on a relist of their informer (kc_ownwrites_relisted), when older than
 * the timeout (a key never waits longer than that after a write), and, past
 * the cap, oldest first (counted in stats.overflow).
 *
 * Whether a record is observed is the caller's test (observe_fn: the
 * controller reads its informers); this component only keeps and bounds.
 *
 * Threads: kc_ownwrites_record from worker threads (inside a reconcile);
 * everything else on the loop thread; a mutex guards the table.
 * kc_ownwrites_ref/unref: any thread (the plugin instance holds a reference
 * and may be freed on an abandoned reconcile's thread).
 * Errors: 0 or a negative errno. Ownership: strings are copied.
 * Time: kc_clock_now_ns (base/clock.h: tests drive it by hand).
 */
#ifndef KC_OWNWRITES_H
#define KC_OWNWRITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/metrics.h"
#include "kube/kobj.h"

/* The longest a key waits for its writes to be observed. */
#define KC_OWNWRITES_TIMEOUT_NS (10ull * 1000000000ull)
/* Records kept at most (the oldest go first). */
#define KC_OWNWRITES_CAP 65536u

typedef struct kc_ownwrites kc_ownwrites;

/* Where the objects of one source live (kc_resource_ref of its informer). */
typedef struct kc_ownwrites_source {
  const char *api_path; /* "/api/v1" or "/apis/G/V" */
  const char *resource; /* plural */
  bool namespaced;
} kc_ownwrites_source;

/* One record, as the observe test sees it (strings borrowed for the call). */
typedef struct kc_ownwrite {
  unsigned slot;   /* index into the sources */
  const char *ns;  /* "" for a cluster-scoped object */
  const char *name;
  const char *uid; /* "" when unknown */
  uint64_t rv;     /* the answer's resourceVersion (0: none or not a number) */
  bool tombstone;  /* deleted */
} kc_ownwrite;

/* What the caller's test says of one record. */
enum kc_ownwrite_state {
  KC_OWNWRITE_PENDING = 0, /* the informer still holds an older state */
  KC_OWNWRITE_OBSERVED,    /* the informer has seen it (or something later) */
};
typedef enum kc_ownwrite_state (*kc_ownwrites_observe_fn)(void *ud, const kc_ownwrite *w);

typedef struct kc_ownwrites_stats {
  uint64_t recorded;  /* writes recorded */
  uint64_t waits;     /* keys that had to wait before they ran */
  uint64_t timeouts;  /* waits that ended because a record timed out */
  uint64_t overflow;  /* records dropped unobserved because the table was full */
  size_t records, parked;
  kc_reconcile_histogram wait_time; /* seconds each wait lasted */
} kc_ownwrites_stats;

/* sources are copied. timeout_ns 0: KC_OWNWRITES_TIMEOUT_NS; cap 0:
 * KC_OWNWRITES_CAP. NULL on ENOMEM. The caller holds one reference. */
kc_ownwrites *kc_ownwrites_new(const kc_ownwrites_source *sources, size_t nsources, size_t cap,
                               uint64_t timeout_ns);
void kc_ownwrites_ref(kc_ownwrites *w);
void kc_ownwrites_unref(kc_ownwrites *w); /* NULL ok */

/* A write of key's reconcile got a 2xx answer: method ("POST", "PUT",
 * "PATCH", "DELETE"), the request's URL path (a query is ignored) and the
 * answer's body (NULL or unparsable: no uid, no resourceVersion; a create
 * then names no object and is not recorded). Writes to objects no source
 * holds are ignored. Any thread. */
void kc_ownwrites_record(kc_ownwrites *w, const char *key, const char *method, const char *path,
                         const char *body, size_t len);

/* Whether key may run now: drops its records that are observed (or timed
 * out); true when none is left (a parked key's wait then ends: it is no
 * longer parked). Loop thread. */
bool kc_ownwrites_ready(kc_ownwrites *w, const char *key, kc_ownwrites_observe_fn fn, void *ud);

/* key waits (it was not ready): remembered until kc_ownwrites_recheck
 * releases it; counted in stats.waits. 0, -EALREADY, -ENOMEM. */
int kc_ownwrites_park(kc_ownwrites *w, const char *key);

/* Expires records older than the timeout, then releases every parked key
 * that is ready (ready(ud2, key) runs for each, after the key left the
 * table; the key is borrowed for the call). Loop thread. */
void kc_ownwrites_recheck(kc_ownwrites *w, kc_ownwrites_observe_fn fn, void *ud,
                          void (*ready)(void *ud2, const char *key), void *ud2);

/* When the next record of a parked key times out: true with *when_ns
 * (kc_clock time), false when no key waits. */
bool kc_ownwrites_next_timeout(kc_ownwrites *w, uint64_t *when_ns);

/* Drops every record of slot (its informer listed anew: what the cache
 * holds now is the server's state at that list). */
void kc_ownwrites_relisted(kc_ownwrites *w, unsigned slot);
/* Drops every record of key (the object the key names was deleted). */
void kc_ownwrites_drop_key(kc_ownwrites *w, const char *key);
/* Drops key's record of slot when it is about ns/name (that object was deleted). */
void kc_ownwrites_drop_object(kc_ownwrites *w, const char *key, unsigned slot, const char *ns,
                              const char *name);

/* Forgets every parked key without releasing it (the controller stops). */
void kc_ownwrites_unpark_all(kc_ownwrites *w);

void kc_ownwrites_stats_get(kc_ownwrites *w, kc_ownwrites_stats *out);

/* The source and object a URL path names: 1 with *slot (the first source
 * matching), ns and name written into the buffers ("" when the path names a
 * collection or a cluster-scoped object), 0 when no source holds it.
 * Exposed for tests. */
int kc_ownwrites_match(const kc_ownwrites *w, const char *path, unsigned *slot, char *ns,
                       size_t ns_cap, char *name, size_t name_cap);

#endif
