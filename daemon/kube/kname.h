/* SPDX-License-Identifier: Apache-2.0 */
/* kname: the Kubernetes name rules the daemon checks, in one place.
 *
 * Owns the predicates (and apimachinery's error texts) for:
 *   DNS-1123 label      namespaces: 1-63 bytes of [a-z0-9-], starting and
 *                       ending with [a-z0-9] (IsDNS1123Label)
 *   DNS-1123 subdomain  object names such as a Lease's, API groups, label key
 *                       prefixes: at most 253 bytes, dot-separated labels
 *                       as above (each label non-empty; IsDNS1123Subdomain)
 *   qualified name      label and annotation keys: [prefix/]name, prefix a
 *                       DNS-1123 subdomain, name 1-63 bytes matching
 *                       ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] (IsQualifiedName)
 *   label value         "" or at most 63 bytes matching the name pattern
 *                       above (IsValidLabelValue)
 *   path segment        what every resource's metadata.name/namespace obeys:
 *                       not "." or "..", no '/', '%' (ValidatePathSegmentName),
 *                       and here also no NUL byte
 * and the one splitter of each compound name: an apiVersion into group and
 * version, an object key into namespace and name.
 * Used by config validation (config.c), selector parsing (selector.c), the
 * object builder's shape checks (kbuild.c), and wherever an apiVersion or a
 * key is taken apart (config, discovery, informer, controller, sharding,
 * hooks).
 *
 * Threads: any (no state). Inputs are byte ranges (s, n), not NUL-terminated.
 */
#ifndef KC_KNAME_H
#define KC_KNAME_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/kstr.h"

bool kc_name_is_dns_label(const char *s, size_t n);
bool kc_name_is_dns_subdomain(const char *s, size_t n);
bool kc_name_is_qualified(const char *s, size_t n);

/* NULL for a valid path segment name, else apimachinery's phrase to put
 * before the quoted name: "may not be" (for "." and ".."), "may not contain
 * '/':", "may not contain '%':", "may not contain NUL:". */
const char *kc_name_path_segment_problem(const char *s, size_t n);

/* Splits an apiVersion: "group/version", or a version alone for the core
 * group ("v1"). Returns true with slices of s in *group ("" for the core
 * group) and *version; false, with both empty, when s is not of that shape:
 * empty, an empty group ("/v1"), an empty version ("apps/"), or a second
 * '/' ("a/b/v1"). The characters are not checked here (config validation
 * wants a DNS-1123 subdomain group and a [a-z0-9]+ version). */
bool kc_name_split_api_version(const char *s, size_t n, kc_str *group, kc_str *version);

/* Splits an object key: "namespace/name", or "name" alone for a
 * cluster-scoped object (what kc_obj_key writes, kobj.h). Returns true with
 * slices of s in *ns ("" for a cluster-scoped key) and *name. Accepts
 * exactly a non-empty name without '/', optionally preceded by a non-empty
 * namespace and one '/'; anything else returns false with both empty: ""
 * (no name), "ns/" (an empty name), "/name" (an empty namespace),
 * "a/b/c" (a name never holds '/': path segment rule above). The
 * characters are not checked otherwise. */
bool kc_name_split_key(const char *s, size_t n, kc_str *ns, kc_str *name);

/* Append to b the "; "-joined errors apimachinery's IsQualifiedName /
 * IsValidLabelValue report for s, in its words; return how many (0: valid). */
int kc_name_qualified_errors(kc_buf *b, const char *s, size_t n);
int kc_name_label_value_errors(kc_buf *b, const char *s, size_t n);

/* --- Test seam: for tests only, not called by the daemon --- */
bool kc_name_is_label_value(const char *s, size_t n);

#endif
