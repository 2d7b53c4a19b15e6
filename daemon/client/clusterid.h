/* SPDX-License-Identifier: Apache-2.0 */
/* clusterid: which cluster the API server endpoint leads to, shared by
 * every reflector of a daemon (reflector.h "Cluster identity").
 *
 * The identity is the uid of the `kube-system` Namespace: every cluster
 * has that namespace from its creation on, its uid is random and never
 * changes while the cluster lives, and a metadata-only GET of it is one
 * small request (the same identity other tools use to tell clusters
 * apart). It needs `get` on that one Namespace (`kctrld rbac` grants it).
 * A server that refuses it (403) or has no such namespace (404) leaves the
 * identity unknown: logged once, and every check answers UNKNOWN (the
 * history check and the consistency check still run).
 *
 * What it owns: the identity learnt first (the one the caches were built
 * from), one GET in flight at most, and the members (reflectors) that wait
 * for a check or want to hear of a change. A check is answered by a GET
 * that started after it was asked for, so an answer never predates the
 * reconnection that asked (a GET under way when a member asks serves the
 * members that asked before it started; the next one serves the others).
 * The GET starts in the loop turn after the first ask, so every member
 * that asks in the same turn (a cut that ends every watch at once) shares
 * it, and the members that ask while it runs share the next one: one or two
 * GETs per reconnection of all reflectors at once, not one per reflector.
 *
 * A changed identity is logged at warn with both uids, becomes the known
 * one, drops every member's pending check (without its callback) and then
 * calls every member's on_change: the member relists.
 *
 * What it holds on the loop: one timer (the deferred GET).
 *
 * Threads: loop thread only (every function; callbacks run on the loop,
 * never inside the call that asked). Errors: 0 or a negative errno.
 * Ownership: the api is borrowed and must outlive the component; members
 * leave before it is closed.
 */
#ifndef KC_CLUSTERID_H
#define KC_CLUSTERID_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "client/apiclient.h"

typedef struct kc_clusterid kc_clusterid;
typedef struct kc_clusterid_member kc_clusterid_member;

enum kc_clusterid_verdict {
  KC_CLUSTERID_SAME,    /* the known identity (or the first one, now learnt) */
  KC_CLUSTERID_UNKNOWN, /* the server does not tell it (403, 404, no uid): go on */
  KC_CLUSTERID_RETRY,   /* transport error, 429, 5xx: ask again after a wait */
  KC_CLUSTERID_AUTH,    /* 401: the credential was refused; ask again when a new one comes */
};

/* The path read for the identity. */
#define KC_CLUSTERID_PATH "/api/v1/namespaces/kube-system"

int kc_clusterid_new(uv_loop_t *loop, kc_api *api, kc_clusterid **out);
/* Cancels the GET and closes the component (freed once the loop ran the
 * close callback); every member must have left. NULL is a no-op. */
void kc_clusterid_close(kc_clusterid *id);

/* A member: on_change(ud, old_uid, new_uid) when the identity changed.
 * Joining starts learning the identity when nothing is known yet. NULL on
 * -ENOMEM. */
kc_clusterid_member *kc_clusterid_join(kc_clusterid *id,
                                       void (*on_change)(void *ud, const char *old_uid,
                                                         const char *new_uid),
                                       void *ud);
/* Drops the member and its pending check. NULL is a no-op. */
void kc_clusterid_leave(kc_clusterid_member *m);

/* Asks whether the server is still the known cluster; done(ud, verdict)
 * runs later (once), unless the identity changed (then on_change runs
 * instead) or the check is cancelled. A member has one check at most: a
 * second ask replaces the first. Returns 0 or -ENOMEM/-EIO (no request
 * could start: done will not run). */
int kc_clusterid_check(kc_clusterid_member *m,
                       void (*done)(void *ud, enum kc_clusterid_verdict v, const char *why));
void kc_clusterid_cancel(kc_clusterid_member *m);

typedef struct kc_clusterid_stats {
  uint64_t gets;    /* GETs of the namespace sent */
  uint64_t changes; /* identity changes seen */
  char uid[64];     /* the known identity; "" while unknown */
} kc_clusterid_stats;
void kc_clusterid_stats_get(const kc_clusterid *id, kc_clusterid_stats *out);

#endif
