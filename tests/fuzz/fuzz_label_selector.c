/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: label selector parser, canonical rendering and matcher.
 * Properties: never crashes; a parsed selector renders to a string that
 * parses again to the same canonical string and matches the same labels. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define L(k, v) {{k, sizeof k - 1}, {v, sizeof v - 1}}
static const kc_label labels[] = {
    L("a", "b"), L("app", "web"), L("example.com/x", ""), L("in", "notin"), L("n", "42"),
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kc_label_selector *sel = NULL;
  kc_sel_error err;
  int rc = kc_label_selector_parse((const char *)data, size, &sel, &err);
  if (rc) {
    if (sel || err.pos > size || !memchr(err.msg, '\0', sizeof err.msg)) abort();
    return 0;
  }
  int n = kc_label_selector_string(sel, NULL, 0);
  if (n != -ENOSPC && n != 0) abort();
  char *buf = malloc(size * 2 + 16);
  if (!buf) abort();
  n = kc_label_selector_string(sel, buf, size * 2 + 16);
  if (n < 0) abort();
  kc_label_selector *again = NULL;
  if (kc_label_selector_parse(buf, (size_t)n, &again, &err) != 0) {
    fprintf(stderr, "canonical form does not parse: '%s': %s\n", buf, err.msg);
    abort();
  }
  char *buf2 = malloc((size_t)n + 1);
  if (!buf2) abort();
  if (kc_label_selector_string(again, buf2, (size_t)n + 1) != n || memcmp(buf, buf2, (size_t)n))
    abort();
  for (size_t k = 0; k <= sizeof labels / sizeof *labels; k++) {
    /* every prefix of the sorted label array is itself a sorted label set */
    if (kc_label_selector_matches(sel, labels, k) != kc_label_selector_matches(again, labels, k))
      abort();
  }
  free(buf2);
  free(buf);
  kc_label_selector_free(again);
  kc_label_selector_free(sel);
  return 0;
}
