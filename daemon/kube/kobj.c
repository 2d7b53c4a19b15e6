/* SPDX-License-Identifier: Apache-2.0 */
/* kobj: see kobj.h. Reference counting, the accessors, the whole text
 * over shared pieces and the path lookups over an object's text (the
 * scanner itself is jsonpath.c). */
#include "kube/kobj.h"

#include "base/sharedtext.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


kc_obj *kc_obj_ref(kc_obj *obj) {
  if (obj) atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed);
  return obj;
}

static kc_obj_shared_table *shared_table(const kc_obj *obj) {
  return kc_obj_shared_table_at(obj, obj->json_len);
}

void kc_obj_unref(kc_obj *obj) {
  if (!obj) return;
  if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) != 1) return;
  if (obj->nshared) {
    kc_obj_shared_table *t = shared_table(obj);
    for (unsigned i = 0; i < obj->nshared; i++) kc_shared_text_put(t->hole[i].text);
    free(atomic_load_explicit(&t->flat, memory_order_acquire));
  }
  free(obj);
}

size_t kc_obj_text_len(const kc_obj *obj) {
  size_t n = obj->json_len;
  if (obj->nshared) {
    const kc_obj_shared_table *t = shared_table(obj);
    for (unsigned i = 0; i < obj->nshared; i++) n += t->hole[i].text->len - 1;
  }
  return n;
}

int kc_obj_text_each(const kc_obj *obj, int (*cb)(void *ud, const char *p, size_t n), void *ud) {
  int rc;
  size_t from = 0;
  if (obj->nshared) {
    const kc_obj_shared_table *t = shared_table(obj);
    for (unsigned i = 0; i < obj->nshared; i++) {
      const kc_obj_shared *h = &t->hole[i];
      if (h->at > from && (rc = cb(ud, obj->json + from, h->at - from))) return rc;
      if ((rc = cb(ud, h->text->text, h->text->len))) return rc;
      from = h->at + 1;
    }
  }
  if (obj->json_len > from && (rc = cb(ud, obj->json + from, obj->json_len - from))) return rc;
  return 0;
}

static int append_span(void *ud, const char *p, size_t n) {
  char **w = ud;
  memcpy(*w, p, n);
  *w += n;
  return 0;
}

kc_str kc_obj_text(const kc_obj *obj) {
  if (!obj->nshared) return (kc_str){obj->json, obj->json_len};
  kc_obj_shared_table *t = shared_table(obj);
  size_t n = kc_obj_text_len(obj);
  char *flat = atomic_load_explicit(&t->flat, memory_order_acquire);
  if (flat) return (kc_str){flat, n};
  char *mine = malloc(n + 1), *w = mine;
  if (!mine) return (kc_str){NULL, 0};
  kc_obj_text_each(obj, append_span, &w);
  *w = '\0';
  /* Two readers may race to make it: one copy wins, the other is freed. */
  if (!atomic_compare_exchange_strong_explicit(&t->flat, &flat, mine, memory_order_acq_rel,
                                               memory_order_acquire)) {
    free(mine);
    return (kc_str){flat, n};
  }
  return (kc_str){mine, n};
}

/* jsonpath.h kc_json_doc's hole: the piece whose byte is at `at`. */
static kc_str hole_text(const void *ud, const char *at) {
  const kc_obj *obj = ud;
  const kc_obj_shared_table *t = shared_table(obj);
  uint32_t off = (uint32_t)(at - obj->json);
  for (unsigned i = 0; i < obj->nshared; i++)
    if (t->hole[i].at == off) return (kc_str){t->hole[i].text->text, t->hole[i].text->len};
  return (kc_str){NULL, 0};
}

static kc_json_doc obj_doc(const kc_obj *obj) {
  return (kc_json_doc){{obj->json, obj->json_len}, obj->nshared ? hole_text : NULL, obj};
}

size_t kc_obj_mem_size(const kc_obj *obj) {
  /* What malloc really hands out plus its per-chunk header. */
  return malloc_usable_size((void *)obj) + sizeof(size_t);
}

int kc_obj_key(const kc_obj *obj, char *buf, size_t cap) {
  size_t ns = kc_obj_namespace(obj).len, n = kc_obj_name(obj).len;
  size_t need = (ns ? ns + 1 : 0) + n;
  if (need + 1 > cap || need > INT32_MAX) return -ENOSPC;
  char *w = buf;
  if (ns) {
    memcpy(w, kc_obj_namespace(obj).ptr, ns);
    w[ns] = '/';
    w += ns + 1;
  }
  if (n) memcpy(w, kc_obj_name(obj).ptr, n);
  w[n] = '\0';
  return (int)need;
}

bool kc_obj_label_find(const kc_obj *obj, kc_str key, uint32_t *index) {
  size_t lo = 0, hi = obj->nlabels;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = kc_str_cmp(kc_obj_label_key(obj, (uint32_t)mid), key);
    if (c == 0) {
      *index = (uint32_t)mid;
      return true;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

kc_str kc_obj_label(const kc_obj *obj, kc_str key) {
  uint32_t i;
  return kc_obj_label_find(obj, key, &i) ? kc_obj_label_value(obj, i) : (kc_str){NULL, 0};
}

/* A value found in json[] whose text encloses holes (a container around
 * managedFields: "metadata", "metadata.managedFields") is moved to the
 * same bytes in the whole text, so the caller never sees a hole. Values
 * inside a piece or without holes stay where they are. */
static int whole_value(const kc_obj *obj, kc_json_value *v) {
  if (!obj->nshared || v->type == KC_JSON_ABSENT || v->raw.ptr < obj->json ||
      v->raw.ptr >= obj->json + obj->json_len)
    return 0;
  const kc_obj_shared_table *t = shared_table(obj);
  size_t start = (size_t)(v->raw.ptr - obj->json), end = start + v->raw.len;
  size_t before = 0, inside = 0;
  for (unsigned i = 0; i < obj->nshared; i++) {
    size_t at = t->hole[i].at, grow = t->hole[i].text->len - 1;
    if (at < start) before += grow;
    else if (at < end) inside += grow;
  }
  if (!inside) return 0;
  kc_str whole = kc_obj_text(obj);
  if (!whole.ptr) return -ENOMEM;
  v->raw = (kc_str){whole.ptr + start + before, v->raw.len + inside};
  return 0;
}

int kc_obj_get(const kc_obj *obj, const char *path, kc_json_value *out) {
  kc_json_doc d = obj_doc(obj);
  int rc = kc_json_doc_get(&d, path, out);
  return rc ? rc : whole_value(obj, out);
}

typedef struct each_whole {
  const kc_obj *obj;
  bool (*cb)(const kc_json_value *v, void *ud);
  void *ud;
} each_whole;

static bool each_whole_cb(const kc_json_value *v, void *ud) {
  each_whole *w = ud;
  kc_json_value x = *v;
  if (whole_value(w->obj, &x) < 0) return true; /* out of memory: not visited */
  return w->cb(&x, w->ud);
}

int kc_obj_get_each(const kc_obj *obj, const char *path,
                    bool (*cb)(const kc_json_value *v, void *ud), void *ud) {
  kc_json_doc d = obj_doc(obj);
  if (!obj->nshared) return kc_json_doc_get_each(&d, path, cb, ud);
  each_whole w = {obj, cb, ud};
  return kc_json_doc_get_each(&d, path, each_whole_cb, &w);
}
