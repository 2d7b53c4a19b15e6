/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: path lookups. Input = "path\n" + JSON text. The path is
 * looked up on the raw (unvalidated) text with kc_json_get, and, when the
 * text is an object, on the built object with kc_obj_get/kc_obj_get_each;
 * every value found is rendered with the kc_json_* helpers. The text is
 * also decoded as a watch event by the streaming decoder twice, sharing
 * every managedFields[].fieldsV1 object and sharing none (kbuild.h "Shared
 * values"): both objects must have the same whole text and answer every
 * lookup with the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "watch/decode.h"

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

/* Every value found, as "type:raw|" (kc_buf, sticky error: a failed
 * append only makes the comparison fail later, which is not an error). */
static bool each_rec(const kc_json_value *v, void *ud) {
  kc_buf_printf(ud, "%d:%.*s|", (int)v->type, (int)v->raw.len, v->raw.ptr);
  return true;
}

static int on_event(void *ud, const kc_watch_event *ev) {
  kc_obj **slot = ud;
  if (!*slot && ev->obj) *slot = kc_obj_ref(ev->obj);
  return 0;
}

static kc_obj *decode_event(const char *ev, size_t len, size_t share_min) {
  kc_obj *o = NULL;
  kc_decoder_callbacks cbs = {.event = on_event};
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cbs, &o);
  if (!d) abort();
  kc_decoder_set_share_min(d, share_min);
  if (kc_decoder_feed(d, ev, len) == 0) (void)kc_decoder_finish(d);
  kc_decoder_free(d);
  return o;
}

static void same_lookups(const char *text, size_t tlen, const char *path) {
  kc_buf ev = {0};
  kc_buf_puts(&ev, "{\"type\":\"ADDED\",\"object\":");
  kc_buf_add(&ev, text, tlen);
  kc_buf_puts(&ev, "}\n");
  if (ev.err) abort();
  kc_obj *shared = decode_event(ev.p, ev.len, 2), *whole = decode_event(ev.p, ev.len, 0);
  if (!shared != !whole) abort();
  if (shared) {
    if (whole->nshared) abort();
    kc_str a = kc_obj_text(shared), b = kc_obj_text(whole);
    if (!a.ptr || a.len != b.len || memcmp(a.ptr, b.ptr, a.len) ||
        kc_obj_text_len(shared) != a.len) {
      fprintf(stderr, "A(%zu)=%.*s\nB(%zu)=%.*s\n", a.len, (int)a.len, a.ptr, b.len, (int)b.len, b.ptr);
      abort();
    }
    kc_json_value va, vb;
    int ra = kc_obj_get(shared, path, &va), rb = kc_obj_get(whole, path, &vb);
    if (ra != rb || (ra == 0 && (va.type != vb.type || va.raw.len != vb.raw.len ||
                                 (va.raw.len && memcmp(va.raw.ptr, vb.raw.ptr, va.raw.len))))) {
      fprintf(stderr, "ra %d rb %d ta %d tb %d A=%.*s\nB=%.*s\n", ra, rb, va.type, vb.type, (int)va.raw.len, va.raw.ptr, (int)vb.raw.len, vb.raw.ptr);
      abort();
    }
    kc_buf ea = {0}, eb = {0};
    int na = kc_obj_get_each(shared, path, each_rec, &ea);
    int nb = kc_obj_get_each(whole, path, each_rec, &eb);
    if (na != nb || (!ea.err && !eb.err && (ea.len != eb.len || (ea.len && memcmp(ea.p, eb.p, ea.len)))))
      abort();
    kc_buf_free(&ea);
    kc_buf_free(&eb);
  }
  kc_obj_unref(shared);
  kc_obj_unref(whole);
  kc_buf_free(&ev);
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
  same_lookups(text, tlen, path);
  free(text);
  free(path);
  return 0;
}
