/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for kube-apisim's protobuf request-body decoder
 * (tests/apisim/protobuf.c): the input is the whole body, "k8s\0" magic
 * included. A successful decode is serialized to JSON and parsed back, so
 * strings that jv_write cannot round-trip are caught too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../apisim/protobuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* A copy, so reads past the end are caught by ASan. */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  jv *dom = NULL;
  char *err = NULL;
  int rc = sim_pb_decode(buf, size, &dom, &err);
  if (rc == 0) {
    if (!dom || err) abort();
    size_t n;
    char *json = jv_dump(dom, &n);
    char perr[128];
    jv *back = jv_parse(json, n, perr, sizeof perr);
    if (!back) abort();
    jv_free(back);
    free(json);
  } else if (dom || !err) {
    abort();
  }
  jv_free(dom);
  free(err);
  free(buf);
  return 0;
}
