/* SPDX-License-Identifier: Apache-2.0 */
/* json: the simulator's own JSON DOM (parsed with yajl_parse callbacks,
 * written by hand with Go-compatible escaping).
 *
 * Numbers keep their source text so values round-trip byte for byte.
 * Objects keep key order (the real server writes typed objects in field
 * order; we keep whatever order the client or seed used).
 * Threads: any thread; a jv tree is not shared while being mutated.
 * Errors: jv_parse returns NULL and fills err.
 * Ownership: setters take ownership of the value passed in; getters return
 * borrowed pointers into the tree.
 */
#ifndef APISIM_JSON_H
#define APISIM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

enum jt { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv jv;
struct jkv {
  char *k;
  jv *v;
};
struct jv {
  enum jt t;
  size_t n, cap; /* items / members, or string length */
  union {
    char *s; /* J_STR and J_NUM (number text) */
    jv **a;
    struct jkv *o;
  } u;
};

jv *jv_parse(const char *buf, size_t len, char *err, size_t errlen);
void jv_free(jv *v);
jv *jv_copy(const jv *v);
bool jv_equal(const jv *a, const jv *b);

jv *jv_new(enum jt t);
jv *jv_str_new(const char *s);
jv *jv_strn_new(const char *s, size_t n);
jv *jv_int_new(int64_t i);
jv *jv_bool_new(bool b);

jv *jv_get(const jv *obj, const char *key);
/* Walks keys (NULL-terminated) through objects. */
jv *jv_geta(const jv *obj, ...) __attribute__((sentinel));
const char *jv_str(const jv *v);                /* NULL unless J_STR */
const char *jv_gets(const jv *obj, const char *key); /* string member or NULL */
bool jv_int(const jv *v, int64_t *out);         /* integral J_NUM */
void jv_set(jv *obj, const char *key, jv *val); /* replaces or appends */
void jv_set_str(jv *obj, const char *key, const char *s);
bool jv_del(jv *obj, const char *key);
/* Returns obj[key], replacing a missing or non-object member by {}. */
jv *jv_obj_ensure(jv *obj, const char *key);
void jv_push(jv *arr, jv *val);
void jv_arr_remove(jv *arr, size_t i);
void jv_arr_insert(jv *arr, size_t i, jv *val);

/* Appends the JSON text of v. With skip_type, top-level "kind" and
 * "apiVersion" are left out. */
void jv_write(struct sim_buf *b, const jv *v);
void jv_write_skip_type(struct sim_buf *b, const jv *v);
char *jv_dump(const jv *v, size_t *len);

#endif
