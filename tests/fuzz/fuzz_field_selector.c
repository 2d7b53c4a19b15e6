/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: field selector parser and canonical rendering.
 * Properties: never crashes; the canonical string parses again to the same
 * terms and renders identically. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kc_field_selector *sel = NULL;
  kc_sel_error err;
  int rc = kc_field_selector_parse((const char *)data, size, &sel, &err);
  if (rc) {
    if (sel || err.pos > size || !memchr(err.msg, '\0', sizeof err.msg)) abort();
    return 0;
  }
  (void)kc_field_selector_check(sel, "", "pods", true, &err);
  size_t cap = size * 2 + 16;
  char *buf = malloc(cap);
  if (!buf) abort();
  int n = kc_field_selector_string(sel, buf, cap);
  if (n < 0) abort();
  kc_field_selector *again = NULL;
  if (kc_field_selector_parse(buf, (size_t)n, &again, &err) != 0) {
    fprintf(stderr, "canonical form does not parse: '%s': %s\n", buf, err.msg);
    abort();
  }
  if (again->nreqs != sel->nreqs) abort();
  for (uint32_t i = 0; i < sel->nreqs; i++) {
    const kc_field_req *a = &sel->reqs[i], *b = &again->reqs[i];
    if (a->op != b->op || !kc_str_eq(a->field, b->field) || !kc_str_eq(a->value, b->value))
      abort();
  }
  free(buf);
  kc_field_selector_free(again);
  kc_field_selector_free(sel);
  return 0;
}
