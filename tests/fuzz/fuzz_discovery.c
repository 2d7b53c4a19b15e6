/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/client/discovery.c's APIResourceList parser
 * (kc_discovery_parse) and the jsontree.h pre-scan under it. Input = the
 * body. Besides crashes it checks the pre-scan against yajl: with a small
 * limit taken from the input, every tree yajl builds from text the scan let
 * through is no deeper than that limit. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "client/discovery.h"
#include "json/jsontree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_res(const char *plural, const char *kind, bool namespaced, void *ud) {
  (void)namespaced;
  (void)ud;
  if (!*plural || !*kind || strchr(plural, '/')) abort(); /* subresources are skipped */
}

/* Depth of a tree, stopping below `limit` + 1 (so it recurses boundedly). */
static unsigned depth_of(yajl_val v, unsigned limit) {
  if (!v || limit == 0) return 0;
  size_t n = 0;
  yajl_val *kids = NULL;
  if (YAJL_IS_OBJECT(v)) {
    n = v->u.object.len;
    kids = v->u.object.values;
  } else if (YAJL_IS_ARRAY(v)) {
    n = v->u.array.len;
    kids = v->u.array.values;
  } else {
    return 0;
  }
  unsigned max = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned d = depth_of(kids[i], limit - 1);
    if (d > max) max = d;
  }
  return 1 + max;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[256];
  kc_discovery_parse((const char *)data, size, on_res, NULL, err, sizeof err);

  if (size < 1) return 0;
  unsigned limit = data[0] % 8;
  const char *json = (const char *)data + 1;
  size_t len = size - 1;
  if (kc_jsontree_check(json, len, limit, err, sizeof err) < 0) return 0;
  char *copy = malloc(len + 1);
  if (!copy) return 0;
  memcpy(copy, json, len);
  copy[len] = '\0';
  yajl_val root = yajl_tree_parse(copy, NULL, 0);
  free(copy);
  if (root && depth_of(root, limit + 1) > limit) abort(); /* the scan missed a level */
  yajl_tree_free(root);
  return 0;
}
