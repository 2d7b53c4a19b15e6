/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for Status parsing: apiclient.c's kc_api_status_parse
 * (a Status body or whatever else a non-2xx answer carries, plus the
 * Retry-After header) and kstatus.c's kc_status_parse (the body alone).
 * Input = first byte: HTTP code choice, then the Retry-After value up to
 * the first '\n', then the body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/apiclient.h"
#include "kube/kstatus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const long codes[] = {200, 400, 401, 403, 404, 405, 406, 409, 410,
                             415, 422, 429, 500, 502, 503, 504, 418, 0};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  long code = codes[data[0] % (sizeof codes / sizeof codes[0])];
  const char *method = (data[0] & 0x80) ? "POST" : "PUT";
  const char *rest = (const char *)data + 1;
  size_t n = size - 1;
  const char *nl = memchr(rest, '\n', n);
  size_t ra_len = nl ? (size_t)(nl - rest) : 0;
  const char *body = nl ? nl + 1 : rest;
  size_t len = n - (size_t)(body - rest);
  /* Copies, so reads past the end are caught by ASan. */
  char *ra = malloc(ra_len ? ra_len : 1);
  char *b = malloc(len ? len : 1);
  if (!ra || !b) abort();
  memcpy(ra, rest, ra_len);
  memcpy(b, body, len);

  kc_status st;
  kc_api_status_parse(&st, code, method, len ? b : NULL, len, nl ? ra : NULL, ra_len);
  if (strnlen(st.reason, sizeof st.reason) == sizeof st.reason ||
      strnlen(st.message, sizeof st.message) == sizeof st.message)
    abort();
  if (st.retry_after_seconds < -1 || st.code < 0 || st.code >= 1000) abort();
  if (!st.from_body && st.code != code) abort();
  (void)kc_api_is_retryable(&st);
  (void)kc_api_is_too_large_rv(&st);
  (void)kc_api_is_gone(&st);

  kc_status ds;
  char why[120];
  if (kc_status_parse(&ds, b, len, why, sizeof why) == 0) {
    if (strnlen(ds.reason, sizeof ds.reason) == sizeof ds.reason ||
        strnlen(ds.message, sizeof ds.message) == sizeof ds.message || !ds.from_body ||
        strnlen(ds.details_name, sizeof ds.details_name) == sizeof ds.details_name ||
        strnlen(ds.cause_field, sizeof ds.cause_field) == sizeof ds.cause_field ||
        strnlen(ds.cause_message, sizeof ds.cause_message) == sizeof ds.cause_message ||
        (!ds.cause_field[0] && ds.cause_message[0]))
      abort();
    /* apiclient reads a Status body the same way */
    if (len && (!st.from_body || strcmp(st.reason, ds.reason) || strcmp(st.message, ds.message)))
      abort();
  } else if (ds.code || ds.reason[0] || ds.from_body || ds.retry_after_seconds != -1) {
    abort(); /* a refused body leaves nothing behind */
  }
  free(ra);
  free(b);
  return 0;
}
