/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/json/yamltree.c: load arbitrary bytes, then walk the
 * tree and run every typed getter on every node, so the getters' parsing and
 * error formatting are fuzzed along with the loader. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json/yamltree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const kc_yaml_node *n, int depth) {
  char err[256];
  const char *s;
  bool b;
  int64_t i;
  double d;
  const char **list;
  size_t count;
  (void)kc_yaml_get_string(n, "x", &s, err, sizeof err);
  (void)kc_yaml_get_bool(n, "x", &b, err, sizeof err);
  (void)kc_yaml_get_int(n, "x", -5, 1000000, &i, err, sizeof err);
  (void)kc_yaml_get_double(n, "x", -1, 1e6, &d, err, sizeof err);
  (void)kc_yaml_get_duration_ms(n, "x", 0, INT64_MAX, &i, err, sizeof err);
  if (kc_yaml_get_string_list(n, "x", &list, &count, err, sizeof err) == 0) free(list);
  (void)kc_yaml_is_null(n);
  (void)kc_yaml_equal(n, n);
  if (n->type == KC_YAML_SEQUENCE) {
    for (size_t k = 0; k < n->u.seq.len; k++) walk(&n->u.seq.items[k], depth + 1);
  } else if (n->type == KC_YAML_MAPPING) {
    static const char *const allowed[] = {"apiVersion", "kind", "name"};
    (void)kc_yaml_check_keys(n, allowed, 3, "m", err, sizeof err);
    (void)kc_yaml_map_get(n, "kind");
    for (size_t k = 0; k < n->u.map.len; k++) walk(&n->u.map.pairs[k].value, depth + 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kc_yaml_doc *doc = NULL;
  char err[512];
  if (kc_yaml_load_buffer("fuzz.yaml", (const char *)data, size, &doc, err, sizeof err) == 0) {
    const kc_yaml_node *root = kc_yaml_root(doc);
    if (root) walk(root, 0);
    kc_yaml_free(doc);
  } else if (doc) {
    abort(); /* a failed load must not hand out a document */
  }
  if (memchr(err, '\0', sizeof err) == NULL) abort();
  return 0;
}
