/* SPDX-License-Identifier: Apache-2.0 */
/* kurl: the URL paths and query strings of Kubernetes API requests
 * (docs/api-contract.md section 1), built in one place.
 *
 * Owns the layout
 *   group/version   /api/VERSION for the core group (""), else
 *                   /apis/GROUP/VERSION
 *   resource        API_PATH[/namespaces/NS]/RESOURCE[/NAME][/SUBRESOURCE]
 *   query           ?NAME=VALUE&NAME=VALUE...
 * and its escaping: group, version, namespace, resource, name, subresource
 * and query values are percent-encoded (kc_buf_url: every byte but
 * [A-Za-z0-9-._~]), so that no value can add a path segment, a parameter or
 * a fragment. Valid Kubernetes names come out unchanged. API_PATH (what
 * kc_url_group_version wrote) and parameter names are written as given.
 *
 * Threads: any (no state). Errors: the kc_buf's sticky error (buf.h): a
 * fixed buffer that is too small holds a cut path and -ENOSPC.
 */
#ifndef KC_KURL_H
#define KC_KURL_H

#include <stdint.h>

#include "base/buf.h"
#include "base/kstr.h"

/* Appends the path prefix of a group/version: "/api/v1" for group "" (the
 * core group), "/apis/apps/v1" for group "apps". */
void kc_url_group_version(kc_buf *b, kc_str group, kc_str version);

/* Appends the path of a collection or an object: api_path, then
 * "/namespaces/NS" when ns is not empty (len 0: all namespaces, or a
 * cluster-scoped resource), "/RESOURCE", "/NAME" unless name is absent
 * (ptr NULL: the collection), and "/SUBRESOURCE" when subresource is not
 * NULL. */
void kc_url_resource(kc_buf *b, const char *api_path, const char *resource, kc_str ns,
                     kc_str name, const char *subresource);

/* Appends one query parameter: *sep ('?' before the first parameter, which
 * the caller sets), name, '=', the value percent-encoded; *sep becomes '&'.
 * kc_url_param_uint writes a number in decimal. */
void kc_url_param(kc_buf *b, char *sep, const char *name, const char *value);
void kc_url_param_uint(kc_buf *b, char *sep, const char *name, uint64_t value);

#endif
