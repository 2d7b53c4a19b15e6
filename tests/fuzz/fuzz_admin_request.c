/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the admin socket's request line: adminreq.c's
 * kc_admin_request_parse. Input = the line. A request it accepts has NUL-
 * terminated fields within their bounds, a known command with the fields
 * that command needs, and formats (kc_admin_request_format) to a line that
 * parses back to the same request; a refused one leaves a zeroed request
 * and a reason. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/adminreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy, so reads past the end are caught by ASan. */
  char *line = malloc(size ? size : 1);
  if (!line) abort();
  memcpy(line, data, size);
  kc_admin_request r;
  char err[256];
  err[0] = '\0';
  int rc = kc_admin_request_parse(line, size, &r, err, sizeof err);
  if (rc < 0) {
    static const kc_admin_request zero;
    if (memcmp(&r, &zero, sizeof r) != 0 || !err[0]) abort();
  } else {
    if (strnlen(r.controller, sizeof r.controller) == sizeof r.controller ||
        strnlen(r.key, sizeof r.key) == sizeof r.key || (unsigned)r.command >= KC_ADMIN_NCOMMANDS)
      abort();
    bool needs_controller = r.command != KC_ADMIN_QUEUES && r.command != KC_ADMIN_INFORMERS;
    bool needs_key = r.command == KC_ADMIN_TRACE || r.command == KC_ADMIN_REQUEUE;
    if (needs_controller != (r.controller[0] != '\0') || needs_key != (r.key[0] != '\0')) abort();
    if (r.state != KC_ADMIN_STATE_ANY && r.command != KC_ADMIN_KEYS) abort();
    kc_buf b = {0};
    kc_admin_request_format(&r, &b);
    if (b.err || !b.p || b.len < 2 || b.p[b.len - 1] != '\n') abort();
    kc_admin_request back;
    if (kc_admin_request_parse(b.p, b.len - 1, &back, err, sizeof err) != 0 ||
        memcmp(&back, &r, sizeof r) != 0)
      abort();
    kc_buf_free(&b);
  }
  free(line);
  return 0;
}
