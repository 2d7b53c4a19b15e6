/* SPDX-License-Identifier: Apache-2.0 */
/* cacheview: the plugins' read view of one kind (cache_get, cache_list,
 * cache_by_index of kctrld/plugin.h) when several informers cache it, e.g.
 * one per team namespace (docs/config.md "informers", `name:` and
 * `namespaces:`): the union of the informers, as controller-runtime's
 * multi-namespace cache. A read finds an object in whichever informer holds
 * it, not only in the first one declared. Where scopes overlap (the same
 * namespace with other selectors or transforms) the first informer in the
 * array that holds an object answers for it, and a list holds it once.
 *
 * Owns nothing: infs are the kind's informers in config order (borrowed;
 * NULL entries, informers not started yet, are skipped); daemon.c passes
 * them under its registry lock.
 * Threads: any thread (the informers' reads are thread-safe).
 * Errors: as the kc_informer read of each function; -ENOTSUP when infs
 * holds no informer (the kind is not cached, yet).
 * Ownership: objects returned are references the caller drops
 * (kc_obj_unref, kc_obj_vec_release).
 */
#ifndef KC_CACHEVIEW_H
#define KC_CACHEVIEW_H

#include <stddef.h>

#include "cache/informer.h"
#include "kube/kobj.h"
#include "kube/selector.h"
#include "cache/store.h"

/* ns/name from the first informer holding it: 0 with a reference in *out,
 * -ENOENT when none does, -ENOTSUP. */
int kc_cacheview_get(kc_informer *const *infs, size_t n, kc_str ns, kc_str name, kc_obj **out);
/* Appends the objects in ns (absent slice: all) that sel matches (NULL:
 * all), each once. Returns the number appended, -ENOTSUP, -ENOMEM. */
int kc_cacheview_list(kc_informer *const *infs, size_t n, kc_str ns, const kc_label_selector *sel,
                      kc_obj_vec *out);
/* Appends the objects whose field index `index` holds value, each once,
 * from every informer that declares the index. Returns the number
 * appended, -ENOENT when no informer declares it, -ENOTSUP, -ENOMEM. */
int kc_cacheview_by_index(kc_informer *const *infs, size_t n, const char *index, kc_str value,
                          kc_obj_vec *out);

#endif
