/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/client/kubeconfig.c: parse arbitrary bytes as a
 * kubeconfig (YAML walking, merge tables, base64 data fields, path joins and
 * every positioned error), with and without an explicit context. */
#include <stdint.h>
#include <stdlib.h>

#include "client/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kc_kube_creds *c = NULL;
  char err[512];
  if (kc_kubeconfig_parse("/fuzz/kubeconfig", (const char *)data, size, NULL, &c, err,
                          sizeof err) == 0)
    kc_kube_creds_free(c);
  c = NULL;
  if (kc_kubeconfig_parse("fuzz.yaml", (const char *)data, size, "dev", &c, err, sizeof err) ==
      0)
    kc_kube_creds_free(c);
  char *out;
  size_t n;
  if (kc_base64_decode((const char *)data, size, &out, &n) == 0) free(out);
  return 0;
}
