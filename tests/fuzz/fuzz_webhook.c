/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for what hook_webhook.c parses of a webhook's answer
 * before the response parser (fuzz_hook_response.c) sees the body: the
 * status line's reason phrase (kc_hook_webhook_status_reason), the error
 * body excerpt (kc_hook_webhook_excerpt), and the URL redaction
 * (kc_hook_webhook_redact, on the input as a URL). Outputs must be NUL
 * terminated, printable and within their buffers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hook_webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void printable(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *in = malloc(size + 1); /* a copy, so reads past the end are caught */
  if (!in) return 0;
  memcpy(in, data, size);
  in[size] = '\0';
  char out[64];
  kc_hook_webhook_status_reason(in, size, out, sizeof out);
  if (strlen(out) >= sizeof out) abort();
  printable(out);
  char ex[208];
  kc_hook_webhook_excerpt(in, size, ex, sizeof ex);
  if (strlen(ex) > 200) abort();
  printable(ex);
  if (!memchr(data, '\0', size)) {
    char u[512];
    kc_hook_webhook_redact(in, u, sizeof u);
    if (strchr(u, '?') || strchr(u, '#')) abort(); /* never the query or the fragment */
  }
  free(in);
  return 0;
}
