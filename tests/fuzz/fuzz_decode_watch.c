/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the WATCH decoder, through the shared harness
 * (fuzz_decode_common.h): both runs must agree on the outcome and on every
 * event delivered. */
#include "fuzz_decode_common.h"

static int on_event(void *ud, const kc_watch_event *ev) {
  acc *a = ud;
  a->n++;
  a->hash = fuzz_mix(a->hash, ev->type_name, strlen(ev->type_name));
  if (ev->obj) fuzz_check_obj(a, ev->obj);
  if (ev->status) a->hash = fuzz_mix(a->hash, &ev->status->code, sizeof ev->status->code);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const kc_decoder_callbacks cb = {.event = on_event};
  return fuzz_decode(KC_DECODE_WATCH, &cb, data, size);
}
