/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the Lease reading of daemon/lease/leader.c
 * (kc_leader_parse_lease: the parse every answer goes through, then the
 * election record from spec). Input = the body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lease/leader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *b = malloc(size ? size : 1); /* exact size: ASan sees over-reads */
  if (!b) abort();
  memcpy(b, data, size);
  kc_lease_record r;
  char err[160];
  int rc = kc_leader_parse_lease(b, size, &r, err, sizeof err);
  if (rc < 0 && (r.holder[0] || r.duration_s || r.transitions)) abort();
  if (strnlen(r.holder, sizeof r.holder) == sizeof r.holder ||
      strnlen(r.acquire, sizeof r.acquire) == sizeof r.acquire ||
      strnlen(r.renew, sizeof r.renew) == sizeof r.renew)
    abort();
  free(b);
  return 0;
}
