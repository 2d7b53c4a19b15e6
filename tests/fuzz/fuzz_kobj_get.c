/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: path lookups. Input = "path\n" + JSON text. The path is
 * looked up on the raw (unvalidated) text with kc_json_get, and, when the
 * text is an object, on the built object with kc_obj_get/kc_obj_get_each;
 * every value found is rendered with the kc_json_* helpers. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void render(const kc_json_value *v) {
  char buf[64];
  int64_t i;
  kc_json_string(v, buf, sizeof buf);
  kc_json_int64(v, &i);
  kc_json_scalar_text(v, buf, sizeof buf);
  (void)kc_json_true(v);
  if (v->type != KC_JSON_ABSENT && (v->raw.ptr == NULL || v->raw.len == 0)) abort();
}

static bool each_cb(const kc_json_value *v, void *ud) {
  (void)ud;
  render(v);
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nl = memchr(data, '\n', size);
  if (!nl) return 0;
  size_t plen = (size_t)(nl - data);
  char *path = malloc(plen + 1);
  if (!path) return 0;
  memcpy(path, data, plen);
  path[plen] = '\0';
  /* Copy the text so reads past its end are caught by ASan. */
  size_t tlen = size - plen - 1;
  char *text = malloc(tlen ? tlen : 1);
  if (!text) abort();
  memcpy(text, nl + 1, tlen);
  kc_json_value v;
  if (kc_json_get((kc_str){text, tlen}, path, &v) == 0) render(&v);
  char err[128];
  kc_obj *o = kc_obj_parse(text, tlen, NULL, err, sizeof err);
  if (o) {
    if (kc_obj_get(o, path, &v) == 0) render(&v);
    kc_obj_get_each(o, path, each_cb, NULL);
    char key[64];
    kc_obj_key(o, key, sizeof key);
    /* The stored text is valid JSON that builds the identical object. */
    kc_obj *again = kc_obj_parse(o->json, o->json_len, NULL, err, sizeof err);
    if (!again || again->json_len != o->json_len || memcmp(again->json, o->json, o->json_len))
      abort();
    kc_obj_unref(again);
    kc_obj_unref(o);
  } else if (!err[0]) {
    abort();
  }
  free(text);
  free(path);
  return 0;
}
