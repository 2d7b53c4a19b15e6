/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the hook response parser (daemon/hooks/hook_proto.c,
 * kc_hook_response_parse): any bytes either parse into a response (actions
 * or desired state, never both) whose slices lie inside the input and whose strings are terminated, or are
 * refused with a one-line reason; never a crash, a leak or a read past the
 * end. The first byte picks the size limit (0: none, else byte * 16). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hook_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(kc_str s, const char *base, size_t len) {
  if (!s.ptr) return;
  if (s.ptr < base || s.ptr + s.len > base + len) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t limit = (size_t)data[0] * 16;
  size_t len = size - 1;
  char *b = malloc(len ? len : 1); /* a copy: reads past the end are caught */
  if (!b) abort();
  memcpy(b, data + 1, len);
  kc_hook_response r;
  char err[256];
  int rc = kc_hook_response_parse(b, len, limit, &r, err, sizeof err);
  if (rc == 0) {
    if (r.result > KC_HOOK_TERMINAL || !r.message) abort();
    for (size_t i = 0; i < r.nactions; i++) {
      const kc_hook_action *a = &r.actions[i];
      if (a->type < KC_HOOK_APPLY || a->type > KC_HOOK_EVENT) abort();
      inside(a->object, b, len);
      inside(a->patch, b, len);
      if (a->type == KC_HOOK_PATCH && (!a->patch.ptr || !a->ref.name || !a->ref.kind)) abort();
      if (a->type == KC_HOOK_CREATE && !a->object.ptr) abort();
      if (a->type == KC_HOOK_EVENT && (!a->reason || !*a->reason)) abort();
      (void)strlen(kc_hook_action_name(a->type));
    }
    if (r.desired && r.nactions) abort();
    for (size_t i = 0; i < r.nchildren; i++) {
      inside(r.children[i], b, len);
      if (!r.children[i].ptr || r.children[i].ptr[0] != '{') abort();
    }
    if (!r.desired && (r.nchildren || r.status.ptr)) abort();
    inside(r.status, b, len);
  } else {
    if (rc != -EBADMSG && rc != -E2BIG && rc != -ENOMEM) abort();
    if (!memchr(err, '\0', sizeof err) || r.actions || r.nactions || r.children || r.nchildren) abort();
  }
  kc_hook_response_free(&r);
  free(b);
  return 0;
}
