/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/client/execcred.c: parse arbitrary bytes as an exec
 * plugin's stdout (ExecCredential JSON of either apiVersion, RFC 3339
 * expiry), and run the stderr redaction over them as one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/execcred.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  kc_exec_cred c;
  if (kc_execcred_parse((const char *)data, size, KC_EXEC_V1, &c, err, sizeof err) == 0)
    kc_exec_cred_clear(&c);
  if (kc_execcred_parse((const char *)data, size, KC_EXEC_V1BETA1, &c, err, sizeof err) == 0)
    kc_exec_cred_clear(&c);
  char *line = malloc(size + 1);
  if (!line) return 0;
  memcpy(line, data, size);
  line[size] = '\0';
  int64_t t;
  (void)kc_rfc3339_parse(line, &t);
  char secret[9] = "";
  if (size > 8) memcpy(secret, data + size - 8, 8);
  kc_execcred_redact(line, size > 8 ? secret : NULL);
  free(line);
  return 0;
}
