/* SPDX-License-Identifier: Apache-2.0 */
/* kstr: kc_str, a borrowed byte slice (pointer and length, not
 * NUL-terminated), the currency of the object and JSON path code.
 *
 * Owns nothing: a kc_str points into memory someone else owns (an object's
 * text, a config string) and is valid as long as that is. Threads: any.
 * len 0 with ptr NULL means "absent"; len 0 with a pointer is "". */
#ifndef KC_KSTR_H
#define KC_KSTR_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct kc_str {
  const char *ptr;
  size_t len;
} kc_str;

static inline kc_str kc_str_c(const char *s) {
  kc_str r = {s, 0};
  if (s)
    while (s[r.len]) r.len++;
  return r;
}

static inline bool kc_str_eq(kc_str a, kc_str b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static inline bool kc_str_eq_c(kc_str a, const char *b) { return kc_str_eq(a, kc_str_c(b)); }

/* Bytewise order, a prefix first: -1, 0 or 1. */
static inline int kc_str_cmp(kc_str a, kc_str b) {
  size_t n = a.len < b.len ? a.len : b.len;
  int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
  if (c) return c < 0 ? -1 : 1;
  return a.len < b.len ? -1 : a.len > b.len;
}

#endif
