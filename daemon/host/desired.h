/* SPDX-License-Identifier: Apache-2.0 */
/* desired: desired-state reconciling, shared by C plugins (the desired_*
 * host functions of kctrld/plugin.h) and hooks with `style: desired`
 * (hook_host.h): a reconcile names the children its object should have
 * and the object's status; this component makes it so, and keeps a
 * controller's `finalizer:` on the objects it reconciles.
 *
 * A commit, for the object of the ctx's key (the parent, read from the
 * cache):
 *  - checks every child first (JSON object with apiVersion, kind,
 *    metadata.name; a kind of the controller's `owns`; in the parent's
 *    namespace when the parent is namespaced; no kind/namespace/name
 *    twice; no other controller in its ownerReferences): one bad child
 *    fails the commit, naming it, before anything is written;
 *  - applies each child with server-side apply (field manager: the
 *    controller's name, force: the controller owns what it lists) with the
 *    parent's controller ownerReference (blockOwnerDeletion) added, and
 *    the parent's namespace when the child names none;
 *  - except a child left unchanged since this controller's last apply of
 *    it (applymemo.h): cached with the resourceVersion that apply answered
 *    with, and the same apply body (hash and length); the apply it is
 *    spared is counted (kc_applymemo_count_skip). A create is never left
 *    out, and nothing is remembered in dry-run mode;
 *  - deletes (uid precondition) the observed children, those whose
 *    controller ownerReference is the parent's uid, that the set does not
 *    list;
 *  - creates and deletes only when the key's expectations are satisfied,
 *    setting them first (a lagging cache never creates or deletes twice);
 *    applies to children already cached and the status write go on;
 *  - writes the status through the status subresource (PUT guarded by the
 *    cached resourceVersion: a 409 requeues) only when it differs from the
 *    cached one;
 *  - a child the server refuses as immutable (422 naming an immutable
 *    field) is an error, or with `updateStrategy: Recreate` for its kind
 *    is deleted (uid precondition) and created again by the next
 *    reconcile, which its delete event starts.
 * While the parent is being deleted, only a finalizing reconcile (below)
 * writes children: the set is what must remain.
 *
 * Finalizer (kc_desired_finalize_before/after around every reconcile of a
 * controller with `finalizer:`): before, the finalizer is added to a live
 * parent that lacks it (JSON patch guarded by its resourceVersion); a
 * parent being deleted that still holds it is reconciled with
 * ctx->finalizing set; one that no longer holds it is not reconciled.
 * After a reconcile that said result_finalized and succeeded, the
 * finalizer is removed.
 *
 * Owns: kc_desired_spec (a controller's copy of what a commit needs, with
 * its apply memo) and kc_desired_set (one reconcile's children and status,
 * copied in).
 * Threads: the reconcile's worker thread, with its ctx; specs are
 * immutable once built and read by any worker, but for their apply memo,
 * which its mutex guards.
 * Errors: kc_desired_commit and the finalize functions return a
 * KCTRLD_RESULT_* value, an error's message set with host->result_error;
 * the set functions 0, -EINVAL, -ENOMEM.
 * Ownership: json handed to the set is copied; host and ctx borrowed.
 */
#ifndef KC_DESIRED_H
#define KC_DESIRED_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "host/applymemo.h"
#include "kctrld/plugin.h"

typedef struct kc_desired_kind {
  char *api_version;
  char *kind;
  enum kc_update_strategy strategy;
} kc_desired_kind;

/* What one controller's commits and finalizers need, copied from its spec. */
typedef struct kc_desired_spec {
  kc_desired_kind parent;  /* the `for` kind */
  kc_desired_kind *owns;   /* the `owns` kinds, the only kinds a child may have */
  size_t nowns;
  char *finalizer;         /* NULL: none */
  kc_applymemo *applied;   /* the controller's last applies (locked inside) */
} kc_desired_spec;

/* A copy of spec's kinds, strategies and finalizer, with an empty apply
 * memo; NULL on ENOMEM. */
kc_desired_spec *kc_desired_spec_new(const kc_controller_spec *spec);
void kc_desired_spec_free(kc_desired_spec *s);

typedef struct kc_desired_set kc_desired_set;

kc_desired_set *kc_desired_set_new(void);
void kc_desired_set_free(kc_desired_set *set);
/* Adds one child's JSON (copied; checked at commit). 0, -EINVAL (empty), -ENOMEM. */
int kc_desired_set_add_child(kc_desired_set *set, const char *json, size_t len);
/* Sets the parent's desired status (a JSON object, copied; the last call
 * wins; never called: the status is left alone). 0, -EINVAL, -ENOMEM. */
int kc_desired_set_status(kc_desired_set *set, const char *json, size_t len);

/* Makes the ctx's key's parent and children match set (see the top).
 * Returns KCTRLD_RESULT_DONE, KCTRLD_RESULT_REQUEUE (a conflict: 409 or
 * AlreadyExists) or KCTRLD_RESULT_ERROR (message: the child or write that
 * failed). A ctx without a spec (ctx->sync) is an error. */
int kc_desired_commit(const struct kctrld_host_api *h, kctrld_ctx *ctx, const kc_desired_set *set);

/* The observed children of parent: every cached object of an `owns` kind
 * (in parent's namespace when it has one) whose controller ownerReference
 * has parent's uid, in owns order, then namespace/name order. fn returns
 * 0 to go on, anything else stops and is returned. Returns 0, fn's value,
 * or a negative errno of the cache (-ENOTSUP: a kind not cached yet). */
int kc_desired_observed(const struct kctrld_host_api *h, kctrld_ctx *ctx,
                        const kctrld_object *parent,
                        int (*fn)(void *ud, size_t owns_index, const kctrld_object *child),
                        void *ud);

/* Before a reconcile of a controller with a finalizer (ctx->sync->finalizer;
 * without one: true and nothing done). Returns true when the reconcile is
 * to run (ctx->finalizing set when it finalizes), false when not: then
 * *result is the reconcile's result. */
bool kc_desired_finalize_before(const struct kctrld_host_api *h, kctrld_ctx *ctx, int *result);

/* After the reconcile (its result): removes the finalizer when the
 * reconcile finalized and said so (ctx->finalized) and succeeded. Returns
 * the reconcile's result, or the finalizer write's REQUEUE/ERROR. */
int kc_desired_finalize_after(const struct kctrld_host_api *h, kctrld_ctx *ctx, int result);

/* The host functions of kctrld/plugin.h built on this component (the
 * table of hostapi.c points at them): ctx_finalizing, result_finalized,
 * desired_begin (a fresh set in ctx->desired; -ENOTSUP outside a
 * reconcile or without a spec), desired_add_child, desired_set_status
 * (-EINVAL without a begin) and desired_commit (kc_desired_commit through
 * kc_hostapi_table(), then the set is freed). */
/* Frees what a reconcile left in ctx (a set begun, never committed). */
void kc_desired_ctx_done(kctrld_ctx *ctx);

bool kc_desired_host_finalizing(const kctrld_ctx *ctx);
void kc_desired_host_finalized(kctrld_ctx *ctx);
int kc_desired_host_begin(kctrld_ctx *ctx);
int kc_desired_host_add_child(kctrld_ctx *ctx, const char *json, size_t len);
int kc_desired_host_set_status(kctrld_ctx *ctx, const char *json, size_t len);
int kc_desired_host_commit(kctrld_ctx *ctx);

#endif
