/* SPDX-License-Identifier: Apache-2.0 */
/* fieldset: sets of field paths, the unit of server-side apply ownership,
 * and their wire form, metadata.managedFields[].fieldsV1.
 *
 * A path is a sequence of path elements written as in fieldsV1:
 *   "f:spec"                            a struct field or map key
 *   "k:{\"name\":\"nginx\"}"            an associative-list item by its keys
 *                                       (JSON object, keys sorted by name)
 *   "v:\"example.com/fin\""             a set-list item by its JSON value
 *   "i:3"                               a list item by index
 * A set is a trie of path elements; a node is a *member* when the path
 * itself is in the set (fieldsV1 writes a member that also has children as
 * the child ".": {}, and a member without children as {}).
 *
 * Threads: any (sets are plain values, not shared while mutated).
 * Errors: sim_fset_from_v1 returns 0 or -EINVAL with *err (malloc'd);
 * allocation failure aborts (util.h).
 * Ownership: sets returned by new/copy/intersect/from_v1 are the caller's
 * (sim_fset_free); path arrays passed in are borrowed.
 */
#ifndef APISIM_FIELDSET_H
#define APISIM_FIELDSET_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"

struct sim_fset {
  char *pe;     /* NULL at the root */
  bool member;  /* the path ending here is in the set */
  struct sim_fset **kid; /* sorted (sim_fset_pe_cmp) */
  size_t n, cap;
};

struct sim_fset *sim_fset_new(void);
void sim_fset_free(struct sim_fset *s);
struct sim_fset *sim_fset_copy(const struct sim_fset *s);
bool sim_fset_empty(const struct sim_fset *s);
size_t sim_fset_count(const struct sim_fset *s);
bool sim_fset_equal(const struct sim_fset *a, const struct sim_fset *b);

void sim_fset_insert(struct sim_fset *s, char *const *pe, size_t n);
bool sim_fset_has(const struct sim_fset *s, char *const *pe, size_t n);
/* True when the path or any path below it is a member. */
bool sim_fset_has_at_or_under(const struct sim_fset *s, char *const *pe, size_t n);
/* Removes the path and everything below it. */
void sim_fset_remove_tree(struct sim_fset *s, char *const *pe, size_t n);

void sim_fset_union(struct sim_fset *dst, const struct sim_fset *src);
/* Removes src's members from dst (children of a removed member stay). */
void sim_fset_subtract(struct sim_fset *dst, const struct sim_fset *src);
struct sim_fset *sim_fset_intersect(const struct sim_fset *a, const struct sim_fset *b);

/* Calls fn for every member in fieldsV1 order. */
typedef void (*sim_fset_fn)(char *const *pe, size_t n, void *ud);
void sim_fset_each(const struct sim_fset *s, sim_fset_fn fn, void *ud);

/* Order of path elements: field names, then keys, values, indexes (each
 * group by its text), as structured-merge-diff sorts them. */
int sim_fset_pe_cmp(const char *a, const char *b);

jv *sim_fset_to_v1(const struct sim_fset *s);
int sim_fset_from_v1(const jv *v, struct sim_fset **out, char **err);

/* The path as kube-apiserver prints it in conflicts:
 * .spec.containers[name="nginx"].image, .metadata.finalizers[="a"], .x[0]
 * (malloc'd). */
char *sim_fset_path_string(char *const *pe, size_t n);

#endif
