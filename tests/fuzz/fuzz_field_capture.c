/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: field capture (kobj builder, decode.c) against the
 * store's scan of the stored text (store.c fv_extract). The input's first
 * byte picks a drop transform and a split point; the rest is a LIST body
 * decoded with the capture spec of a store that has list, nested and
 * bracketed index paths. Every decoded list goes into the store, and
 * kc_store_verify (which compares each captured object's values with a scan
 * of its text, and every index with the objects) must pass, else abort. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch/decode.h"
#include "cache/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct items {
  kc_obj *v[256];
  size_t n;
} items;

static int on_item(void *ud, kc_obj *o) {
  items *it = ud;
  if (it->n == sizeof it->v / sizeof it->v[0]) return -1; /* enough for one input */
  it->v[it->n++] = kc_obj_ref(o);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t ctl = data[0];
  const char *body = (const char *)data + 1;
  size_t len = size - 1;
  static const char *const owner_paths[] = {"metadata.ownerReferences[].uid", "metadata.ownerReferences[].kind"};
  kc_store_index_spec idx[] = {
      {.name = "node", .path = "spec.nodeName"},
      {.name = "owner", .paths = owner_paths, .npaths = 2},
      {.name = "image", .path = "spec.containers[].image"},
      {.name = "annotation", .path = "metadata.annotations[\"a.b/c\"]"},
      {.name = "first", .path = "spec.volumes[0].configMap.name"},
  };
  kc_store *st = kc_store_new(idx, sizeof idx / sizeof idx[0]);
  if (!st) abort();
  static const char *drop[] = {"metadata.managedFields", "spec.containers[].env", "status"};
  kc_transform t = {.capture = kc_store_capture(st),
                    .drop = (ctl & 1) ? drop : NULL,
                    .ndrop = (ctl & 1) ? 3 : 0,
                    .metadata_only = (ctl & 6) == 6};
  items it = {.n = 0};
  kc_decoder_callbacks cb = {.item = on_item};
  kc_decoder *d = kc_decoder_new(KC_DECODE_LIST, &t, &cb, &it);
  if (!d) abort();
  size_t split = len ? (ctl * 7919u) % (len + 1) : 0;
  int rc = kc_decoder_feed(d, body, split);
  if (rc == 0) rc = kc_decoder_feed(d, body + split, len - split);
  if (rc == 0) rc = kc_decoder_finish(d);
  kc_decoder_free(d);
  if (rc == 0 && kc_store_replace(st, it.v, it.n, NULL, NULL) == 0) {
    char msg[512];
    if (kc_store_verify(st, msg, sizeof msg) != 0) {
      fprintf(stderr, "store verify: %s\n", msg);
      abort();
    }
  }
  for (size_t i = 0; i < it.n; i++) kc_obj_unref(it.v[i]);
  kc_store_free(st);
  return 0;
}
