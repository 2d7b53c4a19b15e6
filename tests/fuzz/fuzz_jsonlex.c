/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/json/jsonlex.c, differential against the installed
 * yajl 2.1 with the options the streaming decoder used (UTF-8 validated, no
 * comments, multiple values or not). Input: the first byte picks the mode
 * (bit 0: KC_JSONLEX_MULTIPLE) and seeds the splits; the rest is the text.
 *   1. yajl parses the text in one call; its callbacks are logged.
 *   2. jsonlex parses it in one feed, in feeds split at pseudo-random points
 *      and in 1-byte feeds: every run must accept exactly when yajl accepts
 *      and log exactly yajl's callbacks (strings unescaped, numbers as
 *      text), also for refused text (up to the error).
 *   3. with a skip policy (some containers and keys answer SKIP), one feed
 *      and random splits: acceptance must still equal yajl's, the logs of
 *      the two runs must be equal, and the log must be yajl's with the
 *      skipped parts left out (checked by a filter over yajl's log).
 *   4. without multiple values, the in-place scanner (kc_json_scan_value)
 *      must accept a text as a whole exactly when yajl does.
 * The known difference (jsonlex.h) is excluded: text nesting deeper than
 * KC_JSONLEX_MAX_DEPTH.
 * Aborts on any difference. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "base/buf.h"
#include "json/jsonlex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The callback log: one record per callback, lengths included. */
typedef struct rlog {
  kc_buf b;
  unsigned depth, max_depth;
  /* skip policy (jsonlex runs only) */
  bool policy;
  uint64_t opens;
} rlog;

static void put(rlog *l, char tag, const void *s, size_t n) {
  char hdr[24];
  int k = snprintf(hdr, sizeof hdr, "%c%zu:", tag, n);
  kc_buf_add(&l->b, hdr, (size_t)k);
  if (n) kc_buf_add(&l->b, s, n);
}

static void opened(rlog *l) {
  if (++l->depth > l->max_depth) l->max_depth = l->depth;
}

/* yajl side */
static int y_null(void *c) { put(c, 'n', NULL, 0); return 1; }
static int y_bool(void *c, int v) { put(c, v ? 'T' : 'F', NULL, 0); return 1; }
static int y_num(void *c, const char *s, size_t n) { put(c, '#', s, n); return 1; }
static int y_str(void *c, const unsigned char *s, size_t n) { put(c, 's', s, n); return 1; }
static int y_key(void *c, const unsigned char *s, size_t n) { put(c, 'k', s, n); return 1; }
static int y_smap(void *c) { opened(c); put(c, '{', NULL, 0); return 1; }
static int y_emap(void *c) { ((rlog *)c)->depth--; put(c, '}', NULL, 0); return 1; }
static int y_sarr(void *c) { opened(c); put(c, '[', NULL, 0); return 1; }
static int y_earr(void *c) { ((rlog *)c)->depth--; put(c, ']', NULL, 0); return 1; }

static const yajl_callbacks ycb = {y_null, y_bool, NULL, NULL, y_num, y_str,
                                   y_smap, y_key,  y_emap, y_sarr, y_earr};
/* jsonlex side: the same records; with the policy, a container answers
 * SKIP when it is the 3rd, 6th, ... opened, a key when its length is odd
 * and its first byte is 's'. */
static int j_null(void *c) { put(c, 'n', NULL, 0); return KC_JSONLEX_GO; }
static int j_bool(void *c, int v) { put(c, v ? 'T' : 'F', NULL, 0); return KC_JSONLEX_GO; }
static int j_num(void *c, const char *s, size_t n) { put(c, '#', s, n); return KC_JSONLEX_GO; }
static int j_str(void *c, const char *s, size_t n) { put(c, 's', s, n); return KC_JSONLEX_GO; }
static int j_key(void *c, const char *s, size_t n) {
  rlog *l = c;
  put(l, 'k', s, n);
  if (l->policy && (n & 1) && s[0] == 's') {
    put(l, 'S', NULL, 0);
    return KC_JSONLEX_SKIP;
  }
  return KC_JSONLEX_GO;
}
static int j_open(rlog *l, char tag) {
  opened(l);
  put(l, tag, NULL, 0);
  if (l->policy && ++l->opens % 3 == 0) {
    put(l, 'S', NULL, 0);
    return KC_JSONLEX_SKIP;
  }
  return KC_JSONLEX_GO;
}
static int j_smap(void *c) { return j_open(c, '{'); }
static int j_sarr(void *c) { return j_open(c, '['); }
static int j_emap(void *c) { ((rlog *)c)->depth--; put(c, '}', NULL, 0); return KC_JSONLEX_GO; }
static int j_earr(void *c) { ((rlog *)c)->depth--; put(c, ']', NULL, 0); return KC_JSONLEX_GO; }

static const kc_jsonlex_callbacks jcb = {j_null, j_bool, j_num,  j_str, j_key,
                                         j_smap, j_emap, j_sarr, j_earr};

/* Splits: 0 = one feed; 1 = 1-byte feeds; else pseudo-random pieces. */
static int run_lex(const char *s, size_t n, bool multi, unsigned split, uint32_t seed, rlog *l) {
  kc_jsonlex *lx = kc_jsonlex_new(&jcb, l, multi ? KC_JSONLEX_MULTIPLE : 0);
  if (!lx) abort();
  int rc = 0;
  size_t off = 0;
  while (off < n && rc == 0) {
    size_t piece = n - off;
    if (split == 1) piece = 1;
    else if (split > 1) {
      seed = seed * 1103515245u + 12345u;
      piece = 1 + (seed >> 16) % (seed & 0x100 ? 97 : 7);
      if (piece > n - off) piece = n - off;
    }
    rc = kc_jsonlex_feed(lx, s + off, piece);
    off += piece;
  }
  if (rc == 0) rc = kc_jsonlex_finish(lx);
  if (rc && !kc_jsonlex_error(lx)[0]) abort();
  if (!rc && kc_jsonlex_error(lx)[0]) abort();
  kc_jsonlex_free(lx);
  return rc;
}

/* yajl's log with what a skip policy leaves out removed: replays the policy
 * over yajl's records. */
static void filter(const kc_buf *in, kc_buf *out) {
  const char *p = in->p ? in->p : "", *end = p + in->len;
  uint64_t opens = 0;
  unsigned skipping = 0; /* containers open inside the skipped part */
  bool emit_end = false, skip_next = false;
  while (p < end) {
    char tag = *p;
    char *q;
    size_t n = strtoul(p + 1, &q, 10);
    const char *body = q + 1;
    const char *next = body + n;
    bool open = tag == '{' || tag == '[', close = tag == '}' || tag == ']';
    if (skipping) {
      if (open) skipping++;
      else if (close && --skipping == 0 && emit_end) kc_buf_add(out, p, (size_t)(next - p));
    } else if (skip_next) { /* the skipped key's value: no callbacks at all */
      skip_next = false;
      if (open) {
        skipping = 1;
        emit_end = false;
      }
    } else {
      kc_buf_add(out, p, (size_t)(next - p));
      if (open && ++opens % 3 == 0) {
        kc_buf_add(out, "S0:", 3);
        skipping = 1;
        emit_end = true;
      } else if (tag == 'k' && (n & 1) && body[0] == 's') {
        kc_buf_add(out, "S0:", 3);
        skip_next = true;
      }
    }
    p = next;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 1 << 16) return 0;
  bool multi = data[0] & 1;
  uint32_t seed = data[0];
  const char *s = (const char *)data + 1;
  size_t n = size - 1;

  rlog y = {0};
  yajl_handle h = yajl_alloc(&ycb, NULL, &y);
  if (!h) abort();
  if (multi) yajl_config(h, yajl_allow_multiple_values, 1);
  yajl_status st = yajl_parse(h, (const unsigned char *)s, n);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  yajl_free(h);
  bool y_ok = st == yajl_status_ok;
  if (y.max_depth >= KC_JSONLEX_MAX_DEPTH) {
    kc_buf_free(&y.b);
    return 0;
  }

  /* The in-place scanner takes one whole value by the same rules: without
   * KC_JSONLEX_MULTIPLE it accepts exactly the texts yajl accepts. Left
   * out: a string after the value, which yajl ignores when the end cuts it
   * off (jsonlex.h). */
  if (!multi) {
    const char *end = s + n, *e = kc_json_scan_value(kc_json_skip_ws(s, end), end, -1);
    const char *q = e ? kc_json_skip_ws(e, end) : NULL;
    if (!(q && q < end && *q == '"') && (q == end) != y_ok) abort();
  }

  for (unsigned split = 0; split < 4; split++) {
    rlog l = {0};
    int rc = run_lex(s, n, multi, split, seed + split, &l);
    if ((rc == 0) != y_ok) abort();
    if ((l.b.len != y.b.len || (l.b.len && memcmp(l.b.p, y.b.p, l.b.len)))) abort();
    kc_buf_free(&l.b);
  }

  {
    kc_buf want = {0};
    filter(&y.b, &want);
    for (unsigned split = 0; split < 3; split += 2) {
      rlog l = {.policy = true};
      int rc = run_lex(s, n, multi, split, seed + 7, &l);
      if ((rc == 0) != y_ok) abort();
      if (l.b.len != want.len || (l.b.len && memcmp(l.b.p, want.p, l.b.len))) abort();
      kc_buf_free(&l.b);
    }
    kc_buf_free(&want);
  }
  kc_buf_free(&y.b);
  return 0;
}
