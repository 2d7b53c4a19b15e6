/* SPDX-License-Identifier: Apache-2.0 */
/* jsontree: see jsontree.h. */
#include "json/jsontree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

int kc_jsontree_check(const char *json, size_t len, unsigned max_depth, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  size_t depth = 0;
  const char *end = json + len;
  for (const char *p = json; p < end; p++) {
    switch (*p) {
    case '\0': kc_errf(err, errlen, "offset %zu: NUL byte", (size_t)(p - json)); return -EBADMSG;
    case '"': {
      /* jsonlex's rules, yajl's own: a string they refuse (or that the
       * end cuts off) is where yajl stops building, so nothing after it
       * matters but a NUL, which would cut yajl's copy short first. */
      const char *q = kc_json_scan_string(p, end);
      if (!q) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        if (!nul) return 0;
        kc_errf(err, errlen, "offset %zu: NUL byte", (size_t)(nul - json));
        return -EBADMSG;
      }
      p = q - 1;
      break;
    }
    case '[':
    case '{':
      if (++depth > max_depth) {
        kc_errf(err, errlen, "offset %zu: nesting deeper than KC_OBJ_MAX_DEPTH (%u) levels",
                (size_t)(p - json), max_depth);
        return -E2BIG;
      }
      break;
    case ']':
    case '}':
      if (depth) depth--; /* unbalanced: yajl says so */
      break;
    case '/':
      kc_errf(err, errlen, "offset %zu: comments are not JSON", (size_t)(p - json));
      return -EBADMSG;
    default: break;
    }
  }
  return 0;
}

int kc_jsontree_parse(const char *json, size_t len, yajl_val *out, char *err, size_t errlen) {
  *out = NULL;
  int rc = kc_jsontree_check(json, len, KC_JSONTREE_MAX_DEPTH, err, errlen);
  if (rc < 0) return rc;
  /* yajl_tree_parse needs a NUL-terminated string. */
  char *copy = malloc(len + 1);
  if (!copy) {
    kc_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  memcpy(copy, json, len);
  copy[len] = '\0';
  char ebuf[256];
  ebuf[0] = '\0';
  *out = yajl_tree_parse(copy, ebuf, sizeof ebuf);
  free(copy);
  if (*out) return 0;
  /* yajl's message is verbose (a quote of the text over several lines):
   * keep its first line. */
  ebuf[strcspn(ebuf, "\n")] = '\0';
  if (strstr(ebuf, "memory")) {
    kc_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  kc_errf(err, errlen, "invalid JSON: %s", ebuf[0] ? ebuf : "?");
  return -EBADMSG;
}
