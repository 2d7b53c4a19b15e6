/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/base/x509validity.c: arbitrary bytes as a PEM
 * bundle. */
#include <stdint.h>
#include <stdlib.h>

#include "base/x509validity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int64_t nb, na;
  (void)kc_x509_pem_validity((const char *)data, size, &nb, &na);
  return 0;
}
