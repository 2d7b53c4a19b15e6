/* SPDX-License-Identifier: Apache-2.0 */
/* kobj: one cached Kubernetes object, immutable once built, reference counted.
 *
 * Representation (docs/design.md "Objects"): one allocation holding a small
 * header, the sorted labels, the captured field values when a field capture
 * was asked for (kbuild.h "Field capture") and the object's JSON text (NUL-terminated):
 * minified when built by kc_obj_parse, the bytes as received (minus dropped
 * members) when built by the streaming decoder (decode.h); the API server
 * sends compact JSON, so both are about the wire size. The identity
 * fields (namespace, name, uid, resourceVersion, ...) and the labels are
 * slices into that text, found once when the object is built, stored as
 * 32-bit offsets and lengths (kc_obj_sref, kc_obj_lrec) and read through
 * accessors (kc_obj_name, kc_obj_label_at, ...). Memory per cached object is
 * therefore its JSON size plus 88 bytes of header plus 16 bytes per label,
 * instead of a parsed tree (3-5x). Any other field is read with a
 * path lookup that scans the text without allocating (kc_obj_get).
 *
 * Shared pieces: a value that many objects carry byte for byte (the
 * streaming decoder shares metadata.managedFields[].fieldsV1, kbuild.h
 * "Shared values") is kept once, in the process-wide pool (sharedtext.h):
 * the object's json[] holds the single byte KC_JSON_HOLE where the value
 * was, and a table after the text says which piece each hole stands for.
 * json[] is then not the whole text: read the whole text with kc_obj_text
 * (contiguous: made once on first use and kept with the object),
 * kc_obj_text_each (span by span, no copy) or kc_obj_text_len; path
 * lookups (kc_obj_get) follow the holes themselves. Identity fields,
 * labels and captured values are never inside a piece. An object without
 * pieces (nshared 0, every object kc_obj_parse builds) has its whole text
 * in json[], as before.
 *
 * Threads: built by one thread at a time (the decoder's: a decode pool
 * thread, decodepool.h, or the loop; kc_obj_parse: any). Once built, and
 * handed over through a mutex, every function here may be called from any
 * thread; ref/unref are
 * atomic. Nobody may write through the pointers returned: they point into
 * shared immutable memory.
 *
 * Objects are built by kbuild.h (the streaming builder, transforms and field
 * capture) and parsed from a whole JSON text by kc_obj_parse (decode.h);
 * paths follow jsonpath.h.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef KC_KOBJ_H
#define KC_KOBJ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json/jsonpath.h"
#include "base/kstr.h"

/* A label as it appears in metadata.labels. Label keys and values may only
 * contain [A-Za-z0-9._/-], so the JSON text needs no unescaping and the
 * slices point straight into the object's text. (The stored text escapes only
 * '"', '\\' and control characters, writing everything else, UTF-8 included,
 * raw; a value outside that alphabet is seen in that escaped form. The same
 * holds for the identity slices in kc_obj.) Non-string label values are
 * ignored; a duplicated JSON key keeps its last value.
 *
 * kc_label is the form readers get (kc_obj_label_at) and free-standing label
 * sets use (selector.h); an object stores kc_obj_lrec instead. */
typedef struct kc_label {
  kc_str key;
  kc_str value;
} kc_label;

/* How an object stores one label: offsets and lengths into its json[]
 * (16 bytes instead of a kc_label's 32). Read it with kc_obj_label_key,
 * kc_obj_label_value or kc_obj_label_at. */
typedef struct kc_obj_lrec {
  uint32_t key_off, key_len;
  uint32_t value_off, value_len;
} kc_obj_lrec;

/* The identity fields of an object, found once when it is built: each a
 * slice of its text (kc_obj_sref), read through the accessors below. */
enum kc_obj_field {
  KC_OBJ_KIND,        /* kind and apiVersion: set on every object the decoder */
  KC_OBJ_API_VERSION, /* builds for an informer (kbuild.h "Object type") */
  KC_OBJ_NAMESPACE,   /* absent for cluster-scoped objects */
  KC_OBJ_NAME,
  KC_OBJ_UID,
  KC_OBJ_RESOURCE_VERSION,
  KC_OBJ_CREATION_TIMESTAMP,
  KC_OBJ_NFIELDS
};

/* A slice of an object's json[] as a 32-bit offset and length (8 bytes
 * instead of a kc_str's 16). off 0 means absent: offset 0 is the text's
 * '{', never the start of a string value. */
typedef struct kc_obj_sref {
  uint32_t off, len;
} kc_obj_sref;

typedef struct kc_obj {
  atomic_uint refs;
  uint32_t json_len;    /* bytes of json[], without the NUL */
  kc_obj_sref field[KC_OBJ_NFIELDS]; /* by enum kc_obj_field; kc_obj_name() etc. */
  int64_t generation;   /* 0 when absent */
  bool deleting;        /* metadata.deletionTimestamp is set */
  bool captured;        /* built with a field capture (kbuild.h kc_obj_capture_open) */
  uint16_t nshared;     /* holes in json[] ("Shared pieces"); table: kc_obj_shared_at */
  uint32_t nlabels;
  const kc_obj_lrec *labels; /* sorted by key (bytewise), inside this allocation;
                                read through kc_obj_label_key/_value/_at */
  char json[];          /* JSON text of the object as stored (see above) */
} kc_obj;

/* Where the object's allocation continues after json[] and its NUL (8-byte
 * aligned): the shared-piece table when nshared > 0, then the capture
 * record, then the labels. Layout known to kbuild.c (which writes it) and
 * kobj.c (which reads the table). */
static inline size_t kc_obj_tail_offset(size_t json_len) {
  return (offsetof(kc_obj, json) + json_len + 1 + 7) & ~(size_t)7;
}
struct kc_shared_text;
/* One hole of json[]: the byte at offset `at` stands for `text`'s bytes. */
typedef struct kc_obj_shared {
  struct kc_shared_text *text;
  uint32_t at;
  uint32_t reserved;
} kc_obj_shared;
/* The table: the contiguous copy's slot (kc_obj_text) and the holes in
 * text order. */
typedef struct kc_obj_shared_table {
  _Atomic(char *) flat;
  kc_obj_shared hole[];
} kc_obj_shared_table;
static inline size_t kc_obj_shared_table_size(unsigned nshared) {
  return nshared ? sizeof(kc_obj_shared_table) + nshared * sizeof(kc_obj_shared) : 0;
}
/* The table of an object whose text is json_len bytes (meaningful when
 * nshared > 0; the builder calls it before nshared is set). */
static inline kc_obj_shared_table *kc_obj_shared_table_at(const kc_obj *obj, size_t json_len) {
  return (kc_obj_shared_table *)(void *)((char *)obj + kc_obj_tail_offset(json_len));
}

/* An identity field as a slice of the object's text (valid as long as the
 * object), {NULL, 0} when the object has none; "" (non-NULL, length 0)
 * when it is the empty string. */
static inline kc_str kc_obj_field(const kc_obj *obj, enum kc_obj_field f) {
  kc_obj_sref r = obj->field[f];
  return r.off ? (kc_str){obj->json + r.off, r.len} : (kc_str){NULL, 0};
}
static inline kc_str kc_obj_kind(const kc_obj *obj) {
  return kc_obj_field(obj, KC_OBJ_KIND);
}
static inline kc_str kc_obj_api_version(const kc_obj *obj) {
  return kc_obj_field(obj, KC_OBJ_API_VERSION);
}
static inline kc_str kc_obj_namespace(const kc_obj *obj) {
  return kc_obj_field(obj, KC_OBJ_NAMESPACE);
}
static inline kc_str kc_obj_name(const kc_obj *obj) {
  return kc_obj_field(obj, KC_OBJ_NAME);
}
static inline kc_str kc_obj_uid(const kc_obj *obj) {
  return kc_obj_field(obj, KC_OBJ_UID);
}
static inline kc_str kc_obj_resource_version(const kc_obj *obj) {
  return kc_obj_field(obj, KC_OBJ_RESOURCE_VERSION);
}

/* A resourceVersion as a number, for comparing two of one collection (the
 * API promises nothing of their form, so every caller must cope with 0):
 * the decimal value, or 0 when empty, not all digits, with a leading zero,
 * or beyond 63 bits. */
static inline uint64_t kc_rv_number(kc_str rv) {
  uint64_t v = 0;
  if (!rv.ptr || rv.len == 0 || (rv.ptr[0] == '0' && rv.len > 1)) return 0;
  for (size_t i = 0; i < rv.len; i++) {
    char c = rv.ptr[i];
    if (c < '0' || c > '9' || v > (UINT64_MAX / 2 - 9) / 10) return 0;
    v = v * 10 + (uint64_t)(c - '0');
  }
  return v;
}
static inline kc_str kc_obj_creation_timestamp(const kc_obj *obj) {
  return kc_obj_field(obj, KC_OBJ_CREATION_TIMESTAMP);
}

/* The object's whole JSON text, contiguous and NUL-terminated, valid as
 * long as the object. json[] itself when the object has no shared pieces;
 * otherwise a copy made on the first call and kept until the object is
 * freed (one allocation of the text's size: readers that can take the
 * text in spans use kc_obj_text_each instead). {NULL, 0} when that copy
 * cannot be made (ENOMEM). */
kc_str kc_obj_text(const kc_obj *obj);
/* Bytes of the whole text (json_len when there are no pieces). */
size_t kc_obj_text_len(const kc_obj *obj);
/* Calls cb with the whole text span by span, in order (json[] runs and
 * pieces; no copy). Stops at cb's first non-zero return and returns it;
 * else 0. */
int kc_obj_text_each(const kc_obj *obj, int (*cb)(void *ud, const char *p, size_t n), void *ud);

/* Ownership: ref returns its argument; unref frees on the last reference.
 * kc_obj_unref(NULL) is a no-op. */
kc_obj *kc_obj_ref(kc_obj *obj);
void kc_obj_unref(kc_obj *obj);

/* Bytes this object costs in memory (header + labels + text). */
size_t kc_obj_mem_size(const kc_obj *obj);

/* Store key "namespace/name" (or "name" when cluster-scoped) into buf.
 * Returns the length written (without NUL), or -ENOSPC if cap is too small. */
int kc_obj_key(const kc_obj *obj, char *buf, size_t cap);

/* Returns the label's value, or an absent kc_str. */
kc_str kc_obj_label(const kc_obj *obj, kc_str key);
/* Finds the label with that key: true and *index set, or false. */
bool kc_obj_label_find(const kc_obj *obj, kc_str key, uint32_t *index);

/* Label i (0 <= i < nlabels, in key order) of the object: slices into its
 * text, valid as long as the object. */
static inline kc_str kc_obj_label_key(const kc_obj *obj, uint32_t i) {
  return (kc_str){obj->json + obj->labels[i].key_off, obj->labels[i].key_len};
}
static inline kc_str kc_obj_label_value(const kc_obj *obj, uint32_t i) {
  return (kc_str){obj->json + obj->labels[i].value_off, obj->labels[i].value_len};
}
static inline kc_label kc_obj_label_at(const kc_obj *obj, uint32_t i) {
  return (kc_label){kc_obj_label_key(obj, i), kc_obj_label_value(obj, i)};
}

/* Looks up a path (jsonpath.h syntax, without "[]") in the object's whole
 * text (shared pieces included): kc_json_doc_get on it. Returns 0 and fills *out (type KC_JSON_ABSENT when the path does not
 * exist), -EINVAL for a malformed path, or -ENOMEM. No allocation, but
 * for a container value that encloses shared pieces ("metadata",
 * "metadata.managedFields"): that value is a slice of kc_obj_text's copy. With a duplicated
 * JSON key the first occurrence is found. */
int kc_obj_get(const kc_obj *obj, const char *path, kc_json_value *out);

/* Like kc_obj_get for paths with "[]" (every element of an array), e.g.
 * "metadata.ownerReferences[].uid", "spec.volumes[].configMap.name"
 * (kc_json_doc_get_each). Calls cb for every value found (absent values are skipped); cb returns
 * false to stop. Returns the number of values visited, or -EINVAL. */
int kc_obj_get_each(const kc_obj *obj, const char *path,
                    bool (*cb)(const kc_json_value *v, void *ud), void *ud);

#endif
