/* SPDX-License-Identifier: Apache-2.0 */
/* kobj: see kobj.h. Reference counting, the accessors and the path
 * lookups over an object's text (the scanner itself is jsonpath.c). */
#include "kobj.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


kc_obj *kc_obj_ref(kc_obj *obj) {
  if (obj) atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed);
  return obj;
}

void kc_obj_unref(kc_obj *obj) {
  if (!obj) return;
  if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) == 1) free(obj);
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

int kc_obj_get(const kc_obj *obj, const char *path, kc_json_value *out) {
  return kc_json_get((kc_str){obj->json, obj->json_len}, path, out);
}

int kc_obj_get_each(const kc_obj *obj, const char *path,
                    bool (*cb)(const kc_json_value *v, void *ud), void *ud) {
  return kc_json_get_each((kc_str){obj->json, obj->json_len}, path, cb, ud);
}
