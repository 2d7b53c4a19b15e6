/* SPDX-License-Identifier: Apache-2.0 */
/* cacheview: see cacheview.h. */
#include "cache/cacheview.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdlib.h>

int kc_cacheview_get(kc_informer *const *infs, size_t n, kc_str ns, kc_str name, kc_obj **out) {
  int rc = -ENOTSUP;
  *out = NULL;
  for (size_t i = 0; i < n && !*out; i++) {
    if (!infs[i]) continue;
    rc = -ENOENT;
    *out = kc_informer_get(infs[i], ns, name);
  }
  return *out ? 0 : rc;
}

/* One informer's read into out (number appended or a negative errno). */
typedef int (*read_fn)(kc_informer *inf, const void *args, kc_obj_vec *out);

/* Drops out->v[from..] that an informer before infs[upto] whose read
 * answered (answered[i]) holds: that one answers for them (and listed them
 * already when they matched). */
static int drop_shadowed(kc_informer *const *infs, const bool *answered, size_t upto,
                         kc_obj_vec *out, size_t from) {
  size_t keep = from;
  for (size_t k = from; k < out->n; k++) {
    kc_obj *o = out->v[k], *earlier = NULL;
    for (size_t i = 0; i < upto && !earlier; i++)
      if (answered[i]) earlier = kc_informer_get(infs[i], kc_obj_namespace(o), kc_obj_name(o));
    if (earlier) {
      kc_obj_unref(earlier);
      kc_obj_unref(o);
    } else {
      out->v[keep++] = o;
    }
  }
  out->n = keep;
  return (int)(keep - from);
}

#define SMALL 16 /* informers of one kind without an allocation */

/* The union of the reads of the informers; an informer whose read returns
 * `skip` does not take part (e.g. one without the index). Returns skip
 * when informers exist but none took part. */
static int union_of(kc_informer *const *infs, size_t n, read_fn read, const void *args, int skip,
                    kc_obj_vec *out) {
  bool small[SMALL] = {0}, *answered = n <= SMALL ? small : calloc(n, sizeof *answered);
  if (!answered) return -ENOMEM;
  int total = 0, rc = 0;
  bool any = false, some = false;
  for (size_t i = 0; i < n; i++) {
    if (!infs[i]) continue;
    any = true;
    size_t from = out->n;
    int got = read(infs[i], args, out);
    if (got == skip) continue;
    if (got < 0) {
      rc = got;
      break;
    }
    if (some) got = drop_shadowed(infs, answered, i, out, from);
    answered[i] = some = true;
    total += got;
  }
  if (answered != small) free(answered);
  return rc < 0 ? rc : !any ? -ENOTSUP : !some ? skip : total;
}

struct list_args {
  kc_str ns;
  const kc_label_selector *sel;
};

static int read_list(kc_informer *inf, const void *args, kc_obj_vec *out) {
  const struct list_args *a = args;
  return kc_informer_list(inf, a->ns, a->sel, out);
}

int kc_cacheview_list(kc_informer *const *infs, size_t n, kc_str ns, const kc_label_selector *sel,
                      kc_obj_vec *out) {
  const struct list_args a = {ns, sel};
  return union_of(infs, n, read_list, &a, INT_MIN /* lists always answer */, out);
}

struct index_args {
  const char *index;
  kc_str value;
};

static int read_index(kc_informer *inf, const void *args, kc_obj_vec *out) {
  const struct index_args *a = args;
  return kc_informer_by_index(inf, a->index, a->value, out);
}

int kc_cacheview_by_index(kc_informer *const *infs, size_t n, const char *index, kc_str value,
                          kc_obj_vec *out) {
  const struct index_args a = {index, value};
  return union_of(infs, n, read_index, &a, -ENOENT, out);
}
