/* SPDX-License-Identifier: Apache-2.0 */
/* openapi: the /openapi/v3 discovery document and the per group-version
 * OpenAPI 3 documents kubectl reads before apply, create -f, edit and
 * explain (docs/apisim.md "Using kubectl"). Built from the type registry on
 * every request: built-in kinds get an envelope schema (apiVersion, kind,
 * metadata as ObjectMeta, their top-level fields as open objects), CRD
 * versions get their spec.versions[].schema.openAPIV3Schema with the
 * envelope fields added. Every operation carries
 * x-kubernetes-group-version-kind and the write operations declare the
 * dryRun, fieldManager and fieldValidation query parameters, so kubectl
 * leaves field validation to the server (fieldValidation=Strict). /openapi/v2
 * is a Swagger document without definitions (protobuf or JSON): kubectl
 * reads it only for kinds v3 does not describe (a CR whose CRD the same
 * apply creates) and then skips client-side validation, as a real server
 * that does not know the kind yet makes it do.
 *
 * Threads: any MHD connection thread; takes sim_mu internally.
 * Errors: always fills resp (404 Status or plain text for unknown paths).
 * Ownership: nothing retained.
 */
#ifndef APISIM_OPENAPI_H
#define APISIM_OPENAPI_H

#include <stdint.h>

#include "server.h"
#include "types.h"

/* path: the URL path starting with "/openapi". */
void sim_openapi_handle(struct sim_req *req, const char *path, struct sim_resp *resp);

/* Top-level fields of a built-in kind besides apiVersion/kind/metadata:
 * "name:type,..." with type obj (an open object), smap (map of strings),
 * bmap (map of base64 strings), arr (array of open objects), str, bool,
 * int, time. Sorted by name. */
const char *sim_openapi_builtin_fields(const struct sim_rtype *rt);

/* FNV-1a 64 of the bytes: the ?hash= of a group-version document. */
uint64_t sim_openapi_hash(const void *p, size_t n);

#endif
