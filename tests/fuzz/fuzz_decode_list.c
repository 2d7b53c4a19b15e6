/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the LIST decoder, through the shared harness
 * (fuzz_decode_common.h): both runs must agree on the outcome and on every
 * item and the list metadata. */
#include "fuzz_decode_common.h"

static int on_item(void *ud, kc_obj *o) {
  acc *a = ud;
  a->n++;
  fuzz_check_obj(a, o);
  return 0;
}

static int on_end(void *ud, const kc_list_meta *m) {
  acc *a = ud;
  a->hash = fuzz_mix(a->hash, m->resource_version, strlen(m->resource_version));
  a->hash = fuzz_mix(a->hash, m->continue_token, strlen(m->continue_token));
  a->hash = fuzz_mix(a->hash, m->kind, strlen(m->kind));
  a->hash = fuzz_mix(a->hash, &m->remaining_item_count, sizeof m->remaining_item_count);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const kc_decoder_callbacks cb = {.item = on_item, .list_end = on_end};
  return fuzz_decode(KC_DECODE_LIST, &cb, data, size);
}
