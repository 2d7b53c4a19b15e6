/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for kube-apisim's shardSelector parser
 * (tests/apisim/shardsel.c): the input is the selector text. An accepted
 * selector must hold at least one non-empty range on a supported field, and
 * its canonical rendering (16-digit bounds, " || ") must parse back to the
 * same ranges; a refused one must come with a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../apisim/shardsel.h"
#include "../apisim/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 8192) return 0;
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = 0; /* a NUL inside ends the text, as in a query value */
  struct sim_shardsel sel;
  char *err = NULL;
  int rc = sim_shardsel_parse(s, &sel, &err);
  if (rc == 0) {
    if (err || sel.n == 0 || !sel.field || !sel.text) abort();
    if (strcmp(sel.field, "metadata.uid") != 0 && strcmp(sel.field, "metadata.namespace") != 0) abort();
    struct sim_buf b = {0};
    for (size_t i = 0; i < sel.n; i++) {
      if (!sel.r[i].end_max && sel.r[i].start >= sel.r[i].end) abort();
      if (i) sim_buf_puts(&b, " || ");
      sim_buf_printf(&b, "shardRange(object.%s, '0x%016llx', ", sel.field, (unsigned long long)sel.r[i].start);
      if (sel.r[i].end_max) sim_buf_puts(&b, "'0x10000000000000000')");
      else sim_buf_printf(&b, "'0x%016llx')", (unsigned long long)sel.r[i].end);
    }
    size_t n;
    char *canon = sim_buf_steal(&b, &n);
    struct sim_shardsel back;
    char *err2 = NULL;
    if (sim_shardsel_parse(canon, &back, &err2) != 0) abort();
    if (back.n != sel.n || strcmp(back.field, sel.field) != 0) abort();
    for (size_t i = 0; i < sel.n; i++)
      if (back.r[i].start != sel.r[i].start || back.r[i].end_max != sel.r[i].end_max ||
          (!back.r[i].end_max && back.r[i].end != sel.r[i].end))
        abort();
    sim_shardsel_free(&back);
    free(canon);
    sim_shardsel_free(&sel);
  } else if (!err || !*err) {
    abort();
  }
  free(err);
  free(s);
  return 0;
}
