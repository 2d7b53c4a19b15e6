/* SPDX-License-Identifier: Apache-2.0 */
/* store: the indexed in-memory cache of one informer.
 *
 * Owns the map "namespace/name" -> kc_obj and its indexes:
 *   - namespace (always),
 *   - labels, as an inverted index: (key, value) -> set of objects and
 *     key -> set of objects, so that a label-selector list costs
 *     O(size of the most selective requirement's set), not O(objects),
 *   - named field indexes declared at creation, name -> path(s), where a
 *     path may visit a list ("metadata.ownerReferences[].uid",
 *     "spec.volumes[].configMap.name") and an index may have several paths
 *     (its values are the union): one object can have several values.
 * Index memory is a few bytes per (object, index value): sets hold 32-bit
 * slot numbers (a bit per slot where a set holds many of the slots: idset.h),
 * and label/namespace strings point into the text of a stored
 * object instead of being copied (re-pointed when that object leaves).
 * Field-index values are copied once per distinct value. They are read from
 * the object's field capture when it was built with this store's
 * (kc_store_capture), else found by scanning the object's text.
 *
 * Threads: written by the loop thread only (upsert, delete, replace, free);
 * a store handed over whole to another thread, with nothing else referring
 * to it any more (snapwriter.h), is read and freed there.
 * Read functions (get, list, by_index, count, bytes, index_bytes) may be
 * called from any thread, concurrently with the writer. A pthread rwlock is
 * held only for the map/index operation itself; JSON scans for field-index
 * values happen outside it. Readers receive kc_obj references (zero-copy,
 * immutable objects); nothing they get can change under them.
 *
 * Errors: 0 or a negative errno (-ENOMEM, -ENOENT, -EINVAL). A failed write
 * leaves the store unchanged.
 *
 * Ownership: the store holds one reference per stored object. Objects it
 * hands out (get, list, old versions from upsert/delete) carry a reference
 * the caller owns and must drop with kc_obj_unref (kc_obj_vec_release for
 * vectors).
 */
#ifndef KC_STORE_H
#define KC_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/kbuild.h"
#include "kube/selector.h"

typedef struct kc_store kc_store;

/* A field index: objects by the text value(s) found at its path(s)
 * (kc_obj_get syntax, "[]" for every list element; values rendered as by
 * kc_json_scalar_text). With several paths the index holds the union of
 * their values: an object is listed once under a value however many of its
 * paths hold it (e.g. a workload by every ConfigMap it references through
 * volumes, env and envFrom). Absent and null values are not indexed;
 * objects and arrays are skipped. All strings are copied. */
#define KC_STORE_MAX_INDEX_PATHS 32
typedef struct kc_store_index_spec {
  const char *name;
  const char *path;         /* the one path, when npaths == 0 */
  const char *const *paths; /* else paths[0..npaths), 1..KC_STORE_MAX_INDEX_PATHS */
  size_t npaths;
} kc_store_index_spec;

/* A growable array of object references, reusable across calls. */
typedef struct kc_obj_vec {
  kc_obj **v;
  size_t n;
  size_t cap;
} kc_obj_vec;

/* Drops the references held by the vector and sets n to 0; keeps the
 * array for reuse. */
void kc_obj_vec_clear(kc_obj_vec *vec);
/* Clears and frees the array. */
void kc_obj_vec_release(kc_obj_vec *vec);

/* Creates a store with nidx field indexes (specs copied; names must be
 * unique and paths valid; a path repeated within one index is harmless).
 * Returns NULL on bad specs or out of memory.
 * Context: loop thread. */
kc_store *kc_store_new(const kc_store_index_spec *specs, size_t nidx);
/* Frees the store and drops its references. No reader may be using it. */
void kc_store_free(kc_store *s);

/* Inserts or replaces the object with obj's namespace/name. The store takes
 * its own reference (the caller keeps its own). When `old` is not NULL it
 * receives the previous object (with the store's former reference, caller
 * unrefs) or NULL when the key was new: ADDED vs MODIFIED. When `old` is
 * NULL the previous object is unreferenced by the store.
 * Returns 0, -EINVAL (object without name), -ENOMEM (store unchanged).
 * Context: loop thread. */
int kc_store_upsert(kc_store *s, kc_obj *obj, kc_obj **old);

/* Removes namespace/name (ns empty for cluster-scoped). `old` (may be NULL)
 * receives the removed object; returns 0 or -ENOENT. Context: loop thread. */
int kc_store_delete(kc_store *s, kc_str ns, kc_str name, kc_obj **old);

enum kc_store_event {
  KC_STORE_ADDED = 0,
  KC_STORE_MODIFIED,
  KC_STORE_DELETED,
  KC_STORE_UNCHANGED, /* relist saw the same uid and resourceVersion */
};

/* Called by kc_store_replace after the store has been updated (handlers
 * see the new state). old/new_ are borrowed for the call (ref to keep):
 * ADDED (NULL, new), MODIFIED (old, new), DELETED (old, NULL) with the last
 * state the store had, UNCHANGED (old, old): the stored object is kept
 * (no index work) and the list's copy is not stored. */
typedef void (*kc_store_change_cb)(void *ud, enum kc_store_event ev, kc_obj *old, kc_obj *new_);

/* Relist: makes the store's content equal to objs[0..n) (the store takes
 * its own references), then reports every change through cb (may be NULL)
 * in list order, deletions last. Objects whose uid and resourceVersion are
 * unchanged keep their stored instance. If the list holds a key twice, the
 * later item wins (the earlier one is reported as ADDED/MODIFIED then the
 * later one as MODIFIED). All index changes happen under one write lock, so
 * readers see either the old or the new content, never a mix; the JSON
 * scans for field-index values happen before it is taken.
 * Returns 0; -EINVAL (an object without name: store unchanged, cb not
 * called); -ENOMEM: before any change the store is unchanged and cb is not
 * called, and if memory runs out while applying, every object is either
 * fully applied or untouched, cb reports exactly what was applied, and the
 * caller should relist again.
 * Context: loop thread. */
int kc_store_replace(kc_store *s, kc_obj *const *objs, size_t n, kc_store_change_cb cb,
                     void *ud);

/* Returns a new reference to namespace/name, or NULL. Context: any thread. */
kc_obj *kc_store_get(kc_store *s, kc_str ns, kc_str name);

/* Appends references to every object in namespace `ns` (absent kc_str =
 * all namespaces; "" = cluster-scoped objects) that matches `sel` (NULL =
 * everything) to `out`. Order is unspecified. Cost: the smallest candidate
 * set among the namespace and the selector's =, in, exists, >, <
 * requirements, times the number of requirements.
 * Returns the number appended, or -ENOMEM (out unchanged).
 * Context: any thread. */
int kc_store_list(kc_store *s, kc_str ns, const kc_label_selector *sel, kc_obj_vec *out);

/* The field capture (kbuild.h) of this store's index paths, or NULL when
 * there are no indexes or they cannot be captured (more than
 * KC_CAPTURE_MAX_PATHS paths, ...). Give it to the decoder (kc_transform
 * .capture) that builds the objects stored here: their index values are
 * then taken from the object instead of scanning its text again (the
 * result is the same; objects without capture are scanned). Owned by the
 * store, valid until kc_store_free. Context: any thread. */
const kc_capture_spec *kc_store_capture(const kc_store *s);

/* Appends references to the objects whose index `index` has `value`.
 * Returns the number appended, -ENOENT for an unknown index, -ENOMEM.
 * Context: any thread. */
int kc_store_by_index(kc_store *s, const char *index, kc_str value, kc_obj_vec *out);

/* Number of objects; sum of kc_obj_mem_size over them. Context: any
 * thread. */
size_t kc_store_count(kc_store *s);
size_t kc_store_bytes(kc_store *s);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Bytes used by the map and all indexes (tables, sets, copied field
 * values), excluding the objects themselves. Context: any thread. */
size_t kc_store_index_bytes(kc_store *s);

/* Debug check of every index against a recomputation from the objects
 * (O(objects)). Returns 0 or -EINVAL with a description in msg.
 * Context: loop thread (tests). */
int kc_store_verify(kc_store *s, char *msg, size_t cap);

#endif
