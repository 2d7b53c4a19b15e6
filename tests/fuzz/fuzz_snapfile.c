/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/watch/snapfile.c: arbitrary bytes as a
 * snapshot's header block. A header that parses renders back to a block
 * that parses to the same header (the body is an ordinary JSON list, which
 * fuzz_decode_list covers). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "watch/snapfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kc_snapfile_header h, back;
  char why[256];
  if (kc_snapfile_parse_header((const char *)data, size, &h, why, sizeof why) != 0) return 0;
  char block[KC_SNAPFILE_HEADER_BYTES];
  if (kc_snapfile_render_header(&h, block, why, sizeof why) != 0) return 0;
  if (kc_snapfile_parse_header(block, sizeof block, &back, why, sizeof why) != 0 ||
      memcmp(&h, &back, sizeof h) != 0)
    abort();
  return 0;
}
