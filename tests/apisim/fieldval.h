/* SPDX-License-Identifier: Apache-2.0 */
/* fieldval: server-side field validation of create and update bodies
 * (the fieldValidation query parameter kubectl sends as Strict): unknown
 * fields against the CRD version's structural schema (properties,
 * additionalProperties, x-kubernetes-preserve-unknown-fields, items,
 * x-kubernetes-embedded-resource), and for built-in kinds against their
 * top-level fields and ObjectMeta (the envelope tests/apisim/openapi.c
 * publishes; fields under spec/status are not checked). Merge, strategic
 * merge and apply patch bodies are checked as partial objects ("$" keys
 * skipped), JSON patches are not. Without the parameter nothing is
 * checked (kube-apiserver defaults to Warn).
 *
 * Threads: any MHD connection thread; takes sim_mu for the CRD lookup, so
 * callers must not hold it.
 * Errors: sim_fieldval_unknown returns the number of unknown fields found
 * and *out (malloc'd, NULL when none): `unknown field "spec.x", unknown
 * field "y"` in document order.
 * Ownership: obj stays the caller's.
 */
#ifndef APISIM_FIELDVAL_H
#define APISIM_FIELDVAL_H

#include <stddef.h>

#include "json.h"
#include "types.h"

size_t sim_fieldval_unknown(const struct sim_rtype *rt, const jv *obj, char **out);

#endif
