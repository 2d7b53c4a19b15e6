/* SPDX-License-Identifier: Apache-2.0 */
/* patch: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the common
 * cases of strategic merge patch, applied to a DOM in place.
 *
 * Threads: any (pure functions over trees the caller owns).
 * Errors: 0, or -EINVAL with *err (malloc'd) for a failed operation
 * (kube-apiserver: 422), -EBADMSG for an undecodable patch (400),
 * -E2BIG for more than 10000 JSON patch operations (413).
 * Ownership: target is modified in place; patch is only read.
 */
#ifndef APISIM_PATCH_H
#define APISIM_PATCH_H

#include "json.h"

/* Returns the merged value: target may be freed/replaced; use the result. */
jv *sim_merge_patch(jv *target, const jv *patch);
int sim_json_patch(jv **target, const jv *patch, char **err);
jv *sim_strategic_patch(jv *target, const jv *patch);

#endif
