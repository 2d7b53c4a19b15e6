/* SPDX-License-Identifier: Apache-2.0 */
/* informer: a shared, indexed cache of one watched scope, fed by reflectors,
 * with handler fan-out.
 *
 * One informer per distinct scope (kc_informer_spec identity: resource,
 * namespaces, selectors, transform, metadataOnly) however many controllers
 * use it. Each namespace in the spec gets its own reflector and store (one
 * store per reflector, so a relist replaces exactly its own part); an
 * informer over all namespaces has one of each.
 *
 * Each part also runs the periodic consistency check (consistency.h) at
 * the spec's consistencyCheck period (0 = off).
 *
 * Handlers run on the loop, after the store has been written, and must only
 * turn events into keys (the workqueue deduplicates them): a slow consumer
 * therefore costs memory per distinct key, never per event.
 *
 * Shard selector (KEP-5866): kc_informer_set_shard_selector hands a
 * `shardSelector` to every part's reflector (reflector.h "Shard selector"):
 * where the server filters, the cache holds only the selected hash ranges;
 * where it does not (support NONE), the cache holds the whole scope and the
 * caller must filter with the same hash (shardsel.h). The caller must not
 * call it from inside one of this informer's handlers (the reflector would
 * drop the response it is delivering).
 *
 * Context: new/start/close/add_handler/remove_handler, the shard selector
 * and the stats: loop thread only. get/list/by_index: any thread (store reads are locked
 * briefly; results are refcounted objects the caller unrefs).
 * Errors: 0 or a negative errno.
 */
#ifndef KC_INFORMER_H
#define KC_INFORMER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "client/apiclient.h"
#include "config/config.h"
#include "kube/kobj.h"
#include "watch/reflector.h"
#include "kube/selector.h"
#include "cache/store.h"
#include "cache/snapwriter.h"

typedef struct kc_informer kc_informer;

/* old/new_ are borrowed for the call. A resync delivers on_update(obj, obj).
 * on_progress (optional) runs after the resourceVersion a part observed
 * advanced (kc_informer_observed_rv): after every watch event and bookmark,
 * and with relisted true after every complete list (the first one, a
 * relist, a consistency repair), once its events were delivered. */
typedef struct kc_informer_handler {
  void (*on_add)(void *ud, kc_informer *inf, kc_obj *obj);
  void (*on_update)(void *ud, kc_informer *inf, kc_obj *old, kc_obj *new_);
  void (*on_delete)(void *ud, kc_informer *inf, kc_obj *obj);
  void *ud;
  void (*on_progress)(void *ud, kc_informer *inf, bool relisted);
} kc_informer_handler;

/* Why the handlers are being called: consumers that queue work rank a
 * catch-up (LIST, RELIST, RESYNC) below a change the watch saw (EVENT). */
enum kc_informer_cause {
  KC_INFORMER_EVENT = 0, /* a watch event: the object changed on the server */
  KC_INFORMER_LIST,      /* a part's first complete list, or the replay to a handler added late */
  KC_INFORMER_RELIST,    /* a later complete list (an expired watch, a new shard selector, a
                          * consistency check's repair): only the differences are delivered */
  KC_INFORMER_RESYNC,    /* the periodic resync: on_update(obj, obj) */
};

/* Inside a handler of inf: why it is being called (KC_INFORMER_EVENT
 * outside one). Loop thread. */
enum kc_informer_cause kc_informer_cause(const kc_informer *inf);

/* Where the resource lives, as discovery found it. */
typedef struct kc_resource_ref {
  const char *api_path; /* "/api/v1" or "/apis/G/V" */
  const char *resource; /* plural */
  bool namespaced;
} kc_resource_ref;

/* `spec` is borrowed for the informer's lifetime (it lives in the config);
 * `res` is copied. */
/* `pool` (may be NULL: decode on the loop) is where the reflectors decode
 * response bodies (decodepool.h); borrowed, it must outlive the informer. */
int kc_informer_new(uv_loop_t *loop, kc_api *api, struct kc_decode_pool *pool,
                    const kc_informer_spec *spec, const kc_resource_ref *res, kc_informer **out);
/* Called on the loop once, when every part has delivered its first complete
 * list (kc_informer_synced turned true), so that controllers start at once. */
void kc_informer_on_synced(kc_informer *inf, void (*cb)(void *ud, kc_informer *inf), void *ud);
int kc_informer_start(kc_informer *inf);
/* Stops reflectors and timers; frees the stores once every handle closed. */
void kc_informer_close(kc_informer *inf);

/* Every part's reflector checks the cluster identity before resuming a
 * watch (reflector.h "Cluster identity"); `id` is borrowed and must outlive
 * the informer. Before start only: 0, -EALREADY, -ENOMEM. */
int kc_informer_set_cluster_identity(kc_informer *inf, kc_clusterid *id);

/* Registers a handler; returns a handle id > 0 or -ENOMEM. Late-subscriber
 * replay: before it returns, the new handler (only it) gets on_add for every
 * object cached now, part by part in store order, on the calling (loop)
 * thread, so h->ud must be ready before the call. Why (client-go's
 * AddEventHandler does the same): a handler added after the sync (a
 * controller created at reload, or when its plugin loaded on a retry) would
 * otherwise hear of an existing object only when it next changes; so it
 * starts level-triggered like the first ones. Nothing runs in between on the
 * loop: every later change comes as a normal event, none twice. Before the
 * sync it gets what is cached so far, the rest of the first list as on_add.
 * A part whose store cannot be listed (-ENOMEM) is not replayed. */
int kc_informer_add_handler(kc_informer *inf, const kc_informer_handler *h);
void kc_informer_remove_handler(kc_informer *inf, int id);

/* Live reload: points the informer at an equivalent spec of a new config
 * (same identity and indexes) and applies a changed resync period. */
void kc_informer_rebind(kc_informer *inf, const kc_informer_spec *spec);

/* loop thread. NULL or "" clears. Copies the string. When it changes, the
 * informer relists with the new selector (an atomic replace, as a relist is
 * today) and watches with it. Returns 0 or -errno (-ENOMEM; the old
 * selector stays on parts not yet switched, which then relist on the next
 * call). Before start it is only remembered (the first list carries it). */
int kc_informer_set_shard_selector(kc_informer *inf, const char *selector);
/* The selector set (NULL: none); borrowed until the next set. */
const char *kc_informer_shard_selector(const kc_informer *inf);
/* loop thread: SERVER once a list/streaming-list response echoed shardInfo
 * (every part's); NONE when the server rejected the parameter (400/422:
 * then the informer lists and watches without it, caching everything, and
 * logs once why) or answered a list without shardInfo (ignored it), on any
 * part; else UNKNOWN (also when no selector was ever sent). */
enum kc_shard_support kc_informer_shard_support(const kc_informer *inf);

bool kc_informer_synced(const kc_informer *inf);
/* loop thread: the first part's configuration error (reflector.h
 * "Configuration errors": the server refuses to list the scope, e.g. a
 * field selector it does not support), or NULL. Borrowed until the loop
 * runs again. */
const char *kc_informer_config_error(const kc_informer *inf);
const kc_informer_spec *kc_informer_spec_get(const kc_informer *inf);
const char *kc_informer_resource(const kc_informer *inf); /* "pods", "deployments.apps" */
/* Whether the resource is namespaced (discovery's answer, kc_resource_ref):
 * its objects' keys are "namespace/name", else "name". */
bool kc_informer_namespaced(const kc_informer *inf);

/* The resourceVersion the part holding namespace ns (absent: the only
 * part) has observed: the last watch event or bookmark, or the last
 * complete list. Compared as a number (docs/design.md "Read your own
 * writes"), so only within this informer. Returns 1 with *rv, 0 when
 * nothing was observed yet, -ENOENT when no part watches ns, -ENOTSUP when
 * the server's resourceVersions are not decimal numbers (logged once per
 * informer). Loop thread. */
int kc_informer_observed_rv(kc_informer *inf, kc_str ns, uint64_t *rv);
/* Where the informer's objects live (strings borrowed from the informer). */
void kc_informer_resource_ref(const kc_informer *inf, kc_resource_ref *out);

kc_obj *kc_informer_get(kc_informer *inf, kc_str ns, kc_str name);
int kc_informer_list(kc_informer *inf, kc_str ns, const kc_label_selector *sel, kc_obj_vec *out);
int kc_informer_by_index(kc_informer *inf, const char *index, kc_str value, kc_obj_vec *out);

typedef struct kc_informer_stats {
  size_t objects;
  size_t bytes;
  uint64_t lists, watches, relists, events, errors, rejected;
  uint64_t history_checks, history_changes; /* reflector.h "History check" */
  uint64_t identity_checks, identity_changes; /* reflector.h "Cluster identity" */
  uint64_t consistency_checks, consistency_diffs, consistency_skipped; /* consistency.h */
  uint64_t streaming_lists, streaming_attempts, streaming_fallbacks, decode_pauses;
  uint64_t restores, restored, restore_failures; /* reflector.h "Warm start" */
  char resource_version[64]; /* last seen (of the first reflector) */
} kc_informer_stats;
void kc_informer_stats_get(kc_informer *inf, kc_informer_stats *out);
/* A new credential is in use: every reflector of the informer that waits
 * after a 401/403 retries at once (reflector.h). Loop thread. */
void kc_informer_credentials_changed(kc_informer *inf);

/* Snapshots (docs/design.md "Snapshots and warm restarts"): each part
 * (one reflector and its store) has its own file in `dir`, named by the
 * hash of its identity (the config's informer identity: apiVersion, kind,
 * namespaces, selectors, transform, metadataOnly; and the part's
 * namespace). The identity written in the file also names the shard
 * selector its content follows, when it follows one (the selector of the
 * part's last complete list; none where the server does not filter).
 * kc_informer_start reads a part's file when there is one whose identity,
 * shard selector (the one set when the informer starts), format and
 * cluster match and whose age is within max_age_ms,
 * and warm-starts the part's reflector from it (reflector.h "Warm start",
 * which also holds the snapshot's cluster identity against the server's
 * when the informer has kc_informer_set_cluster_identity);
 * anything else is logged (a warning naming the file and the reason, an
 * info line for a missing or too old one or one of other shard ranges) and
 * the part lists as usual. */
typedef struct kc_informer_snapshots {
  const char *dir;      /* NULL or "": off */
  const char *cluster;  /* the cluster identity snapshots are bound to */
  uint64_t max_age_ms;  /* 0: no bound */
} kc_informer_snapshots;
/* Before kc_informer_start; strings copied. 0 or -ENOMEM. */
int kc_informer_set_snapshots(kc_informer *inf, const kc_informer_snapshots *s);
/* Closes the informer as kc_informer_close does, first handing each synced
 * part's store to `w` (snapwriter.h) as that part's snapshot file, so that
 * the files are written off the loop while nothing can change the stores
 * any more (the reflectors are closed with the informer). Without snapshots
 * set, or with w NULL, only closes. Returns the number of files handed
 * over, or the first error (logged; the other parts are still handed). */
int kc_informer_close_saving(kc_informer *inf, kc_snapwriter *w);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Starts a consistency check of every part now:
 * 0, or -EBUSY when one already runs. */
int kc_informer_check_consistency(kc_informer *inf);

#endif
