/* SPDX-License-Identifier: Apache-2.0 */
/* fieldmgr: server-side apply and metadata.managedFields bookkeeping, after
 * kube-apiserver's fieldmanager and structured-merge-diff:
 *
 *  - Apply (application/apply-patch+yaml): the intent is merged into the
 *    live object (structs and maps by field, keyed lists by their keys,
 *    set lists by value, everything else replaced), the applier then owns
 *    exactly the intent's fields; fields it owned before and no longer lists
 *    are removed unless another manager owns them; a field another manager
 *    owns whose value the apply changes is a conflict (409) unless forced,
 *    then that manager loses it.
 *  - Update (POST, PUT, merge/JSON/strategic patches): the writer owns what
 *    its write changed or added; every other manager loses those fields and
 *    everyone loses removed ones. No conflicts.
 *
 * Types come from field names, not from OpenAPI schemas (docs/apisim.md
 * lists them): keyed lists (containers, env, ports, volumes, volumeMounts,
 * conditions, ...), set lists (finalizers), granular maps (labels,
 * annotations, data, ...), atomic selectors; other objects are structs and
 * other lists atomic.
 *
 * Threads: any (pure functions over trees the caller owns).
 * Errors: sim_fm_apply returns 0, -EBUSY for conflicts (*status is the
 * 409 Status JSON) or -EINVAL with *err (a malformed intent: 422/400 per
 * *code). sim_fm_update has no errors: undecodable managedFields are reset.
 * Ownership: live, old and config are borrowed; *out, *status and *err are
 * the caller's; sim_fm_update rewrites nd's metadata.managedFields in place.
 */
#ifndef APISIM_FIELDMGR_H
#define APISIM_FIELDMGR_H

#include <stdbool.h>

#include "json.h"

struct sim_fm_opts {
  const char *api_version; /* the request's group/version, e.g. "apps/v1" */
  const char *sub;         /* "status" or NULL */
  bool ignore_status;      /* main resource of a kind with a status subresource */
  bool builtin;            /* a built-in kind (create skeleton has spec/status) */
};

int sim_fm_apply(const struct sim_fm_opts *o, const jv *live, const jv *config,
                 const char *manager, bool force, jv **out, char **status, int *code,
                 char **err);
/* old NULL: a create. */
void sim_fm_update(const struct sim_fm_opts *o, const jv *old, jv *nd, const char *manager);

/* The default manager of a non-apply write: the User-Agent up to its first
 * '/', printable characters only, at most 128 (malloc'd). */
char *sim_fm_manager_from_ua(const char *ua);

#endif
