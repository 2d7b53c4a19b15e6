/* SPDX-License-Identifier: Apache-2.0 */
/* discovery: apiVersion + kind -> resource (plural, namespaced), from the
 * APIResourceList of /api/v1 or /apis/G/V (docs/api-contract.md section 2).
 *
 * Lists are fetched asynchronously through apiclient and cached per
 * group/version; entries whose name contains '/' (subresources) are skipped.
 * kc_discovery_resolve always fetches the group/version again (one fetch in
 * flight per group/version, however many callers wait), which is how a
 * kind that was not found (a CRD installed later) gets picked up;
 * kc_discovery_lookup answers from the cache only.
 * coordination.k8s.io/v1 Lease is known statically (leader election needs
 * no discovery).
 *
 * Context: loop thread only.
 * Errors: 0 or a negative errno. kc_discovery_resolve never calls its
 * callback from inside itself, and never when it fails.
 * Ownership: kc_resource_info is a value (copied strings).
 */
#ifndef KC_DISCOVERY_H
#define KC_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>

#include "client/apiclient.h"

typedef struct kc_discovery kc_discovery;

typedef struct kc_resource_info {
  char group[254];  /* "" for core */
  char version[64];
  char plural[64];  /* the URL segment */
  char kind[64];
  bool namespaced;
} kc_resource_info;

/* `api` is borrowed and must outlive the discovery. */
int kc_discovery_new(kc_api *api, kc_discovery **out);
/* Cancels fetches in flight without calling back. NULL is a no-op. */
void kc_discovery_free(kc_discovery *d);

/* err: 0 (info valid), -ENOENT (the group/version exists but has no such
 * kind, or the group/version is unknown: 404), or the transport / HTTP
 * error (-EIO for a non-404 HTTP error; status has the details). info and
 * status are borrowed for the duration of the call. */
typedef void (*kc_discovery_cb)(int err, const kc_resource_info *info,
                                const kc_status *status, void *ud);

/* Refreshes the group/version of api_version and answers for kind. Returns
 * 0, -EINVAL (bad apiVersion), -ENOMEM, or an apiclient error. */
int kc_discovery_resolve(kc_discovery *d, const char *api_version, const char *kind,
                         kc_discovery_cb cb, void *ud);

/* The served kind of api_version's group/version closest to `kind`, from
 * the cache only (kc_discovery_kind_suggest's rules), for "did you mean"
 * messages. Returns 0 with the kind in out, or -ENOENT (nothing cached or
 * nothing close), -EINVAL. */
int kc_discovery_suggest(kc_discovery *d, const char *api_version, const char *kind, char *out,
                         size_t cap);

/* The name among names[0..n) a misspelt kind most likely meant: the same
 * name in another case, the singular of a plural ("ConfigMaps",
 * "Ingresses", "NetworkPolicies"), else the closest within edit distance
 * 2 (yamltree.h kc_yaml_closest). NULL when none. Context: any thread. */
const char *kc_discovery_kind_suggest(const char *kind, const char *const *names, size_t n);

/* Offline check for --check-config: when api_version is a built-in
 * Kubernetes group/version (v1, apps/v1, batch/v1, networking.k8s.io/v1,
 * ...) and kind is not one of its kinds, returns -ENOENT with "kind K is
 * not served by GV (did you mean X?)" in msg. 0 when the kind is built in
 * or the group/version is not (a CRD: only the server knows). */
int kc_discovery_builtin_check(const char *api_version, const char *kind, char *msg, size_t cap);

/* Parses an APIResourceList body (through jsontree.h: nesting deeper than
 * KC_JSONTREE_MAX_DEPTH is refused before a tree is built) and calls cb for
 * every resource that is not a subresource. Returns 0, -EINVAL for a body
 * that is not JSON or not an APIResourceList, -E2BIG for one nested too
 * deep, or -ENOMEM; on failure err (may be NULL) says why, e.g. "offset 41:
 * nesting deeper than KC_OBJ_MAX_DEPTH (256) levels". Context: any thread.
 * Exposed for tests and fuzzing. */
int kc_discovery_parse(const char *json, size_t len,
                       void (*cb)(const char *plural, const char *kind, bool namespaced, void *ud),
                       void *ud, char *err, size_t errlen);

/* --- Test seam: for tests only, not called by the daemon --- */
/* From the cache only: 0 and *out, or -ENOENT (not cached or not there). */
int kc_discovery_lookup(kc_discovery *d, const char *api_version, const char *kind,
                        kc_resource_info *out);

#endif
