/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_decode_common: the harness shared by the decoder fuzz targets
 * (fuzz_decode_list.c, fuzz_decode_watch.c). Header-only with static
 * functions: the fuzz rule builds each target from its one .c file.
 *
 * fuzz_decode() takes libFuzzer's input: the first byte picks the transform
 * and a split point; the rest is the body. The body is decoded three times
 * (one feed; two feeds split at the chosen point; pieces of 1-16 bytes);
 * all runs must agree on the outcome and on the hash of all the target's
 * callbacks delivered (fuzz_mix, fuzz_check_obj), and a finished body must
 * have been handed to the lexer exactly once (linear in any chunking),
 * else it aborts.
 *
 * Threads: libFuzzer's one. Errors: a failed check aborts. Ownership: the
 * callbacks borrow what the decoder hands them.
 */
#ifndef KC_FUZZ_DECODE_COMMON_H
#define KC_FUZZ_DECODE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "watch/decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool typed; /* this input decodes with a kind/apiVersion to stamp */

/* What one run delivered; ud of the target's callbacks. */
typedef struct acc {
  uint64_t hash;
  uint64_t n;
} acc;

static inline uint64_t fuzz_mix(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
  return h;
}

/* Hashes a delivered object into a and checks it against its own text. */
static inline void fuzz_check_obj(acc *a, kc_obj *o) {
  a->hash = fuzz_mix(a->hash, o->json, o->json_len);
  char key[512];
  int k = kc_obj_key(o, key, sizeof key);
  if (k >= 0) a->hash = fuzz_mix(a->hash, key, (size_t)k);
  for (uint32_t i = 0; i < o->nlabels; i++) {
    kc_str v = kc_obj_label(o, kc_obj_label_key(o, i));
    if (!v.ptr) abort(); /* every stored label must be found */
  }
  kc_json_value v;
  if (kc_obj_get(o, "metadata.ownerReferences[0].uid", &v) != 0) abort();
  /* The raw text (cuts included) must be valid JSON that yields the same
   * identity, labels and size once minified. */
  char err[128];
  kc_obj *m = kc_obj_parse(o->json, o->json_len, NULL, err, sizeof err);
  if (!m) abort();
  /* With a type every object has one, also found in its own text. */
  if (typed && (!kc_obj_kind(o).ptr || !kc_obj_api_version(o).ptr ||
                !kc_str_eq(kc_obj_kind(m), kc_obj_kind(o))))
    abort();
  if (m->nlabels != o->nlabels || m->json_len > o->json_len) abort();
  if (!memchr(kc_obj_name(o).ptr ? kc_obj_name(o).ptr : "", '\\', kc_obj_name(o).len) &&
      !kc_str_eq(kc_obj_name(m), kc_obj_name(o)))
    abort();
  bool plain = true; /* no escapes, no whitespace: minifying changes nothing */
  for (uint32_t i = 0; i < o->json_len && plain; i++)
    plain = o->json[i] != 0 && !strchr("\\ \t\n\r\v\f", o->json[i]);
  if (plain && (m->json_len != o->json_len || memcmp(m->json, o->json, o->json_len))) abort();
  kc_obj_unref(m);
}

/* piece 0: two feeds split at `split`; else feeds of `piece` bytes. */
static inline int fuzz_run(enum kc_decode_mode mode, const kc_decoder_callbacks *cb,
                           const char *body, size_t len, size_t split, size_t piece,
                           const kc_transform *t, acc *a) {
  kc_decoder *d = kc_decoder_new(mode, t, cb, a);
  if (!d) abort();
  int rc = 0;
  if (!piece) {
    rc = kc_decoder_feed(d, body, split);
    if (rc == 0) rc = kc_decoder_feed(d, body + split, len - split);
  } else {
    for (size_t off = 0; off < len && rc == 0; off += piece)
      rc = kc_decoder_feed(d, body + off, len - off < piece ? len - off : piece);
  }
  if (rc == 0) rc = kc_decoder_finish(d);
  if (rc && !kc_decoder_error(d)[0]) abort(); /* every error has a message */
  if (rc == 0 && kc_decoder_lexed_bytes(d) != len) abort();
  kc_decoder_free(d);
  return rc;
}

static inline int fuzz_decode(enum kc_decode_mode mode, const kc_decoder_callbacks *cb,
                              const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t ctl = data[0];
  const char *body = (const char *)data + 1;
  size_t len = size - 1;
  static const char *drop[] = {"metadata.managedFields", "spec.containers[].env",
                               "metadata.annotations[\"a.b/c\"]"};
  typed = (ctl & 5) == 5; /* the type only comes with a transform */
  kc_transform t = {.drop = drop, .ndrop = 3, .metadata_only = (ctl & 2) != 0,
                    .kind = typed ? "Pod" : NULL, .api_version = typed ? "v1" : NULL};
  const kc_transform *tp = (ctl & 1) ? &t : NULL;
  acc a1 = {14695981039346656037ull, 0}, a2 = a1, a3 = a1;
  int r1 = fuzz_run(mode, cb, body, len, len, 0, tp, &a1);
  int r2 = fuzz_run(mode, cb, body, len, len ? (ctl * 7919u) % (len + 1) : 0, 0, tp, &a2);
  int r3 = fuzz_run(mode, cb, body, len, 0, 1 + (ctl >> 4), tp, &a3);
  if ((r1 == 0) != (r2 == 0) || a1.n != a2.n || a1.hash != a2.hash) abort();
  if ((r1 == 0) != (r3 == 0) || a1.n != a3.n || a1.hash != a3.hash) abort();
  return 0;
}

#endif
