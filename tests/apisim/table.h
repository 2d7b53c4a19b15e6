/* SPDX-License-Identifier: Apache-2.0 */
/* table: meta.k8s.io/v1 Table answers for `kubectl get` (Accept:
 * application/json;as=Table;v=v1;g=meta.k8s.io). Columns: Name, the
 * per-kind columns of kube-apiserver's printers where they are simple
 * (pods Ready/Status/Restarts, deployments Ready/Up-to-date/Available,
 * configmaps/secrets Data, ...), Age; for custom resources the CRD
 * version's additionalPrinterColumns (jsonPath of plain .a.b.c fields) or
 * Name/Age. Rows carry the object as includeObject says (None, Metadata =
 * PartialObjectMetadata (default), Object). Watches get one Table per
 * event, with the column definitions in the first only.
 *
 * Threads: any MHD connection thread. sim_table_write takes sim_mu for the
 * CRD lookup, so callers must not hold it.
 * Errors: sim_table_write returns 0 or -EINVAL (bad includeObject, with
 * resp filled in as the 400 Status kube-apiserver sends).
 * Ownership: items stay the caller's.
 */
#ifndef APISIM_TABLE_H
#define APISIM_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "server.h"
#include "store.h"
#include "types.h"

/* True when the first acceptable media type of the Accept header is the
 * Table (meta.k8s.io v1 or v1beta1; the answer is v1 either way). */
bool sim_table_wanted(struct sim_req *req);

/* Writes a Table of n items into resp->body (code 200). list: the answer
 * to a list (metadata carries rv, cont and remaining when cont is set);
 * otherwise the single row of a get (metadata.resourceVersion of it). */
int sim_table_write(struct sim_req *req, struct sim_resp *resp, const struct sim_rtype *rt,
                    struct sim_obj *const *items, size_t n, bool list, uint64_t rv,
                    const char *cont, long long remaining);

/* includeObject of the request: SIM_TABLE_METADATA (default), _OBJECT or
 * _NONE; -EINVAL with resp filled in (400) for anything else. */
enum { SIM_TABLE_NONE = 1, SIM_TABLE_METADATA, SIM_TABLE_OBJECT };
int sim_table_include(struct sim_req *req, struct sim_resp *resp);

/* The Table JSON of n items into b: metadata is the text inside the
 * Table's metadata braces; headers = false leaves columnDefinitions null
 * (watch events after the first). Takes sim_mu for a CR's columns. */
void sim_table_json(struct sim_buf *b, const struct sim_rtype *rt, struct sim_obj *const *items,
                    size_t n, int include, bool headers, const char *metadata);

/* duration.HumanDuration of apimachinery: "45s", "5m3s", "3h10m", "2d5h". */
void sim_human_duration(int64_t seconds, char *out, size_t n);

#endif
