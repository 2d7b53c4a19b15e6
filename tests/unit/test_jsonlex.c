/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/json/jsonlex.c: yajl 2.1's grammar edge cases (accepted
 * and refused, with the callbacks delivered), every error message, every
 * split of small documents (two feeds at each offset, and 1-byte feeds),
 * the skip protocol, positions, limits and the consumer's stop. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json/jsonlex.h"

/* The callbacks as text: "{ k:a [ #1 s:x T F n ] }", strings with their
 * bytes (a NUL as \0); "@N" after a token when positions are logged. */
typedef struct lg {
  char t[4096];
  size_t n;
  bool pos;
  kc_jsonlex *lx;
  /* skip policy */
  const char *skip_key;  /* map_key answers SKIP for this key */
  int skip_container;    /* the n-th container opened answers SKIP (1-based) */
  int opens;
  int stop_after;        /* the n-th callback returns STOP */
  int calls;
} lg;

static void add(lg *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(lg *l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(l->t + l->n, sizeof l->t - l->n, fmt, ap);
  va_end(ap);
  assert_true(k >= 0 && (size_t)k < sizeof l->t - l->n);
  l->n += (size_t)k;
}

static void add_bytes(lg *l, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (s[i] == 0) add(l, "\\0");
    else add(l, "%c", s[i]);
  }
}

static int done(lg *l, int rc) {
  if (l->pos) add(l, "@%zu", kc_jsonlex_pos(l->lx));
  add(l, " ");
  if (l->stop_after && ++l->calls == l->stop_after) return KC_JSONLEX_STOP;
  return rc;
}

static int c_null(void *u) { add(u, "n"); return done(u, KC_JSONLEX_GO); }
static int c_bool(void *u, int v) { add(u, v ? "T" : "F"); return done(u, KC_JSONLEX_GO); }
static int c_num(void *u, const char *s, size_t n) {
  add(u, "#");
  add_bytes(u, s, n);
  return done(u, KC_JSONLEX_GO);
}
static int c_str(void *u, const char *s, size_t n) {
  add(u, "s:");
  add_bytes(u, s, n);
  return done(u, KC_JSONLEX_SKIP); /* SKIP from a string callback means GO */
}
static int c_key(void *u, const char *s, size_t n) {
  lg *l = u;
  add(l, "k:");
  add_bytes(l, s, n);
  bool skip = l->skip_key && strlen(l->skip_key) == n && memcmp(l->skip_key, s, n) == 0;
  return done(l, skip ? KC_JSONLEX_SKIP : KC_JSONLEX_GO);
}
static int c_open(lg *l, const char *what) {
  add(l, "%s", what);
  return done(l, ++l->opens == l->skip_container ? KC_JSONLEX_SKIP : KC_JSONLEX_GO);
}
static int c_smap(void *u) { return c_open(u, "{"); }
static int c_sarr(void *u) { return c_open(u, "["); }
static int c_emap(void *u) { add(u, "}"); return done(u, KC_JSONLEX_GO); }
static int c_earr(void *u) { add(u, "]"); return done(u, KC_JSONLEX_GO); }

static const kc_jsonlex_callbacks cbs = {c_null, c_bool, c_num,  c_str, c_key,
                                         c_smap, c_emap, c_sarr, c_earr};

/* Parses text in feeds at the given split points (sorted, < len; n = 0:
 * one feed), into l; returns the result and the message in err. */
static int parse_split(const char *text, size_t len, unsigned flags, const size_t *cuts,
                       size_t ncuts, lg *l, char *err, size_t errlen) {
  kc_jsonlex *lx = kc_jsonlex_new(&cbs, l, flags);
  assert_non_null(lx);
  l->lx = lx;
  l->n = 0;
  l->t[0] = '\0';
  l->opens = l->calls = 0;
  size_t off = 0;
  int rc = 0;
  for (size_t c = 0; c <= ncuts && !rc; c++) {
    size_t end = c < ncuts ? cuts[c] : len;
    rc = kc_jsonlex_feed(lx, text + off, end - off);
    off = end;
  }
  if (!rc) rc = kc_jsonlex_finish(lx);
  snprintf(err, errlen, "%s", kc_jsonlex_error(lx));
  if (rc) assert_true(err[0]);
  else assert_string_equal(err, "");
  assert_int_equal(kc_jsonlex_result(lx), rc);
  kc_jsonlex_free(lx);
  return rc;
}

/* One document: the same outcome and callbacks for one feed, every
 * two-feed split and 1-byte feeds. */
static void expect_doc(const char *text, size_t len, unsigned flags, int want_rc,
                       const char *want_log, const char *want_err) {
  lg l = {0};
  char err[200], err1[200];
  int rc = parse_split(text, len, flags, NULL, 0, &l, err, sizeof err);
  if (rc != want_rc || (want_log && strcmp(l.t, want_log)) || (want_err && !strstr(err, want_err)))
    fail_msg("'%.*s': rc %d log '%s' err '%s'; wanted %d '%s' '%s'", (int)len, text, rc, l.t, err,
             want_rc, want_log ? want_log : "", want_err ? want_err : "");
  char first[4096];
  snprintf(first, sizeof first, "%s", l.t);
  for (size_t cut = 1; cut < len; cut++) {
    int r2 = parse_split(text, len, flags, &cut, 1, &l, err1, sizeof err1);
    if (r2 != rc || strcmp(l.t, first) || strcmp(err1, err) != 0)
      fail_msg("'%.*s' cut at %zu: rc %d log '%s' err '%s'", (int)len, text, cut, r2, l.t, err1);
  }
  size_t *cuts = malloc(len * sizeof *cuts);
  assert_non_null(cuts);
  for (size_t i = 1; i < len; i++) cuts[i - 1] = i;
  int r3 = parse_split(text, len, flags, cuts, len ? len - 1 : 0, &l, err1, sizeof err1);
  free(cuts);
  if (r3 != rc || strcmp(l.t, first) || strcmp(err1, err) != 0) fail_msg("'%.*s' in 1-byte feeds: rc %d log '%s'", (int)len, text, r3, l.t);
}

#define OK(text, log) expect_doc(text, sizeof(text) - 1, 0, 0, log, NULL)
#define OKM(text, log) expect_doc(text, sizeof(text) - 1, KC_JSONLEX_MULTIPLE, 0, log, NULL)
#define BAD(text, msg) expect_doc(text, sizeof(text) - 1, 0, -EBADMSG, NULL, msg)
#define BADM(text, msg) expect_doc(text, sizeof(text) - 1, KC_JSONLEX_MULTIPLE, -EBADMSG, NULL, msg)

static void test_values(void **state) {
  (void)state;
  OK("{}", "{ } ");
  OK("[]", "[ ] ");
  OK(" {\"a\" : [1, -2.5e+3, 0, -0, 0.5E-7, 1e9, true, false, null]}\n",
     "{ k:a [ #1 #-2.5e+3 #0 #-0 #0.5E-7 #1e9 T F n ] } ");
  OK("\"top\"", "s:top ");
  OK("12345", "#12345 ");
  OK("-0.0", "#-0.0 ");
  OK("true", "T ");
  OK("null", "n ");
  /* yajl's white space includes \v and \f */
  OK("\v\f\t\r\n [ 1 ] \v", "[ #1 ] ");
  OK("[[[[]]],{}]", "[ [ [ [ ] ] ] { } ] ");
  OK("{\"a\":{\"b\":{}},\"a\":2}", "{ k:a { k:b { } } k:a #2 } ");
  /* a string cut off after a complete value is ignored, as yajl does */
  OK("{} \"abc", "{ } ");
  OKM("{} \"abc", "{ } ");
}

static void test_strings(void **state) {
  (void)state;
  OK("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", "[ s:\"\\/\b\f\n\r\t ] ");
  OK("[\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\"]", "[ s:A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 ] ");
  OK("[\"a\\u0000b\"]", "[ s:a\\0b ] ");
  /* yajl_string_decode: a lone high surrogate gives "?", a lone low one is
   * encoded as is, a high one combines with any \u after it */
  OK("[\"\\uD800x\\uDC00\"]", "[ s:?x\xed\xb0\x80 ] ");
  OK("[\"\\uD800\\n\"]", "[ s:?\n ] ");
  OK("[\"\\uD800\\u0041\"]", "[ s:\xf0\x90\x81\x81 ] ");
  /* raw UTF-8, checked as yajl checks it (lead and continuation bits only) */
  OK("[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]", "[ s:\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 ] ");
  OK("[\"\xc0\x80\xed\xa0\x80\xf7\xbf\xbf\xbf\"]", "[ s:\xc0\x80\xed\xa0\x80\xf7\xbf\xbf\xbf ] ");
  OK("[\"\x7f\"]", "[ s:\x7f ] ");
  /* keys are unescaped the same way */
  OK("{\"\\u006b\\\"\":1}", "{ k:k\" #1 } ");
  /* a long string (the SIMD scan) with the stop bytes at every position */
  char doc[200];
  for (int at = 0; at < 40; at++) {
    int n = snprintf(doc, sizeof doc, "[\"%.*s\\n%.*s\"]", at, "0123456789012345678901234567890123456789",
                     39 - at, "0123456789012345678901234567890123456789");
    char want[200];
    snprintf(want, sizeof want, "[ s:%.*s\n%.*s ] ", at, "0123456789012345678901234567890123456789",
             39 - at, "0123456789012345678901234567890123456789");
    expect_doc(doc, (size_t)n, 0, 0, want, NULL);
  }
}

static void test_multiple_values(void **state) {
  (void)state;
  OKM("{}{}", "{ } { } ");
  OKM("1 2", "#1 #2 ");
  OKM("01", "#0 #1 ");          /* "01" is two numbers */
  OKM("truefalse", "T F ");
  OKM("1[]\"a\"{}", "#1 [ ] s:a { } ");
  OKM("{\"type\":\"ADDED\"}\n{\"type\":\"DELETED\"}\n", "{ k:type s:ADDED } { k:type s:DELETED } ");
  BADM("", "parse error: premature EOF");
  BADM("  \n", "parse error: premature EOF");
  BADM("{} {", "parse error: premature EOF");
  BADM("{}nul", "lexical error: invalid string in json text.");
  BADM("{} ,", "parse error: unallowed token at this point in JSON text");
}

static void test_errors(void **state) {
  (void)state;
  /* lexical */
  BAD("x", "lexical error: invalid char in json text.");
  BAD("[1,x]", "lexical error: invalid char in json text.");
  BAD("/* c */ {}", "lexical error: probable comment found in input text, comments are not enabled.");
  BAD("[1,/]", "lexical error: probable comment found in input text, comments are not enabled.");
  BAD("{} // c", "parse error: trailing garbage");
  BAD("tru", "lexical error: invalid string in json text.");
  BAD("[trUe]", "lexical error: invalid string in json text.");
  BAD("[nulL]", "lexical error: invalid string in json text.");
  BAD("[fals]", "lexical error: invalid string in json text.");
  BAD("[\"a\x01\"]", "lexical error: invalid character inside string.");
  BAD("[\"a\tb\"]", "lexical error: invalid character inside string.");
  BAD("[\"\\x\"]", "lexical error: inside a string, '\\' occurs before a character which it may not.");
  BAD("[\"\\u12g4\"]", "lexical error: invalid (non-hex) character occurs after '\\u' inside string.");
  BAD("[\"\\u12\"]", "lexical error: invalid (non-hex) character occurs after '\\u' inside string.");
  BAD("[\"\x80\"]", "lexical error: invalid bytes in UTF8 string.");
  BAD("[\"\xff\"]", "lexical error: invalid bytes in UTF8 string.");
  BAD("[\"\xf8\x80\x80\x80\x80\"]", "lexical error: invalid bytes in UTF8 string.");
  BAD("[\"\xc3\"]", "lexical error: invalid bytes in UTF8 string.");
  BAD("[\"\xe2\x82x\"]", "lexical error: invalid bytes in UTF8 string.");
  BAD("[\"\xf0\x9f\x98\"]", "lexical error: invalid bytes in UTF8 string.");
  BAD("[-]", "lexical error: malformed number, a digit is required after the minus sign.");
  BAD("-", "lexical error: malformed number, a digit is required after the minus sign.");
  BAD("[-a]", "lexical error: malformed number, a digit is required after the minus sign.");
  BAD("[1.]", "lexical error: malformed number, a digit is required after the decimal point.");
  BAD("1.", "lexical error: malformed number, a digit is required after the decimal point.");
  BAD("[1e]", "lexical error: malformed number, a digit is required after the exponent.");
  BAD("[1e+]", "lexical error: malformed number, a digit is required after the exponent.");
  BAD("1E-", "lexical error: malformed number, a digit is required after the exponent.");
  BAD("[+1]", "lexical error: invalid char in json text.");
  BAD("[.5]", "lexical error: invalid char in json text.");
  BAD("[1.5.2]", "lexical error: invalid char in json text.");
  BAD("[0x1]", "lexical error: invalid char in json text.");
  /* parse */
  BAD("", "parse error: premature EOF");
  BAD("   ", "parse error: premature EOF");
  BAD("{", "parse error: premature EOF");
  BAD("[1,", "parse error: premature EOF");
  BAD("{\"a\"", "parse error: premature EOF");
  BAD("\"abc", "parse error: premature EOF");
  BAD("[\"a\\", "lexical error: inside a string, '\\' occurs before a character which it may not.");
  BAD("{} {}", "parse error: trailing garbage");
  BAD("{}x", "parse error: trailing garbage");
  BAD("1 2", "parse error: trailing garbage");
  BAD("{} \"a\"", "parse error: trailing garbage");
  BAD("[01]", "parse error: after array element, I expect ',' or ']'");
  BAD("01", "parse error: trailing garbage");
  BAD("[1 2]", "parse error: after array element, I expect ',' or ']'");
  BAD("[1,]", "parse error: unallowed token at this point in JSON text");
  BAD("[,1]", "parse error: unallowed token at this point in JSON text");
  BAD("[}", "parse error: unallowed token at this point in JSON text");
  BAD(":", "parse error: unallowed token at this point in JSON text");
  BAD("]", "parse error: unallowed token at this point in JSON text");
  BAD("{\"a\":1,}", "parse error: invalid object key (must be a string)");
  BAD("{1:2}", "parse error: invalid object key (must be a string)");
  BAD("{]", "parse error: invalid object key (must be a string)");
  BAD("{\"a\" 1}", "parse error: object key and value must be separated by a colon (':')");
  BAD("{\"a\"}", "parse error: object key and value must be separated by a colon (':')");
  BAD("{\"a\":}", "parse error: unallowed token at this point in JSON text");
  BAD("{\"a\":1 \"b\"}", "parse error: after key and value, inside map, I expect ',' or '}'");
  BAD("{\"a\":1]", "parse error: after key and value, inside map, I expect ',' or '}'");
  BAD("[1}", "parse error: after array element, I expect ',' or ']'");
}

/* The position during callbacks, and the error offset. */
static void test_positions(void **state) {
  (void)state;
  lg l = {.pos = true};
  char err[200];
  const char *t = "{\"ab\":[12,true,null],\"c\":\"x\\ny\"} ";
  assert_int_equal(parse_split(t, strlen(t), 0, NULL, 0, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{@1 k:ab@5 [@7 #12@9 T@14 n@19 ]@20 k:c@24 s:x\ny@31 }@32 ");
  /* split inside tokens: positions are in the current feed */
  size_t cuts[] = {3, 8, 12};
  assert_int_equal(parse_split(t, strlen(t), 0, cuts, 3, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{@1 k:ab@2 [@4 #12@1 T@2 n@7 ]@8 k:c@12 s:x\ny@19 }@20 ");
  /* a number that ends at the end of a feed is delivered at the next byte */
  size_t cut2[] = {9};
  assert_int_equal(parse_split(t, strlen(t), 0, cut2, 1, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{@1 k:ab@5 [@7 #12@0 T@5 n@10 ]@11 k:c@15 s:x\ny@22 }@23 ");
  /* at finish there is no feed */
  assert_int_equal(parse_split("7", 1, 0, NULL, 0, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "#7@0 ");

  /* error offsets: the offending byte */
  kc_jsonlex *lx = kc_jsonlex_new(&cbs, &l, 0);
  assert_non_null(lx);
  l.lx = lx;
  assert_int_equal(kc_jsonlex_feed(lx, "[1,", 3), 0);
  assert_int_equal(kc_jsonlex_feed(lx, " \"a\x01", 4), -EBADMSG);
  assert_int_equal(kc_jsonlex_pos(lx), 3);
  assert_int_equal(kc_jsonlex_offset(lx), 7);
  /* the first error is final */
  assert_int_equal(kc_jsonlex_feed(lx, "]", 1), -EBADMSG);
  assert_int_equal(kc_jsonlex_finish(lx), -EBADMSG);
  assert_string_equal(kc_jsonlex_error(lx), "lexical error: invalid character inside string.");
  kc_jsonlex_free(lx);
}

static void test_skip(void **state) {
  (void)state;
  lg l = {0};
  char err[200];
  const char *t = "{\"a\":{\"x\":[1,{\"y\":2}]},\"s\":[3,[4]],\"t\":5,\"u\":\"v\",\"b\":{\"z\":1}}";
  /* the 2nd container (a's value) skipped: its end is delivered */
  l.skip_container = 2;
  assert_int_equal(parse_split(t, strlen(t), 0, NULL, 0, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{ k:a { } k:s [ #3 [ #4 ] ] k:t #5 k:u s:v k:b { k:z #1 } } ");
  /* a key skipped: nothing for its value, container or scalar */
  l.skip_container = 0;
  l.skip_key = "s";
  assert_int_equal(parse_split(t, strlen(t), 0, NULL, 0, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{ k:a { k:x [ #1 { k:y #2 } ] } k:s k:t #5 k:u s:v k:b { k:z #1 } } ");
  l.skip_key = "t";
  assert_int_equal(parse_split(t, strlen(t), 0, NULL, 0, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{ k:a { k:x [ #1 { k:y #2 } ] } k:s [ #3 [ #4 ] ] k:t k:u s:v k:b { k:z #1 } } ");
  l.skip_key = "u";
  assert_int_equal(parse_split(t, strlen(t), 0, NULL, 0, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{ k:a { k:x [ #1 { k:y #2 } ] } k:s [ #3 [ #4 ] ] k:t #5 k:u k:b { k:z #1 } } ");
  /* the same in 1-byte feeds */
  size_t cuts[200];
  size_t len = strlen(t);
  for (size_t i = 1; i < len; i++) cuts[i - 1] = i;
  assert_int_equal(parse_split(t, len, 0, cuts, len - 1, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{ k:a { k:x [ #1 { k:y #2 } ] } k:s [ #3 [ #4 ] ] k:t #5 k:u k:b { k:z #1 } } ");
  /* the root skipped: only its start and end */
  l.skip_key = NULL;
  l.skip_container = 1;
  assert_int_equal(parse_split(t, len, 0, cuts, len - 1, &l, err, sizeof err), 0);
  assert_string_equal(l.t, "{ } ");
  /* skipped content is still validated */
  const char *bad[] = {"[{\"a\":[1,]}]", "[{\"a\":\"\xff\"}]", "[{\"a\":01}]", "[{\"a\" 1}]",
                       "[{\"a\":tru}]", "[{\"a\":[}]", "[{\"a\":\"\\q\"}]", "[{\"a\":1}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    l.skip_container = 2;
    assert_int_equal(parse_split(bad[i], strlen(bad[i]), 0, NULL, 0, &l, err, sizeof err), -EBADMSG);
    l.skip_container = 0;
    l.skip_key = "a";
    assert_int_equal(parse_split(bad[i], strlen(bad[i]), 0, NULL, 0, &l, err, sizeof err), -EBADMSG);
    l.skip_key = NULL;
  }
}

static void test_limits(void **state) {
  (void)state;
  lg l = {0};
  char deep[KC_JSONLEX_MAX_DEPTH + 2];
  memset(deep, '[', sizeof deep);
  kc_jsonlex *lx = kc_jsonlex_new(&cbs, &l, 0);
  assert_non_null(lx);
  l.lx = lx;
  assert_int_equal(kc_jsonlex_feed(lx, deep, KC_JSONLEX_MAX_DEPTH), 0);
  assert_int_equal(kc_jsonlex_depth(lx), KC_JSONLEX_MAX_DEPTH);
  assert_int_equal(kc_jsonlex_feed(lx, deep, 1), -E2BIG);
  assert_non_null(strstr(kc_jsonlex_error(lx), "nesting deeper than 1024 levels"));
  kc_jsonlex_free(lx);
  /* a lower limit, also inside skipped containers */
  lx = kc_jsonlex_new(&cbs, &l, 0);
  assert_non_null(lx);
  kc_jsonlex_set_max_depth(lx, 3);
  l.skip_container = 1;
  assert_int_equal(kc_jsonlex_feed(lx, "[[[]]]", 6), 0);
  assert_int_equal(kc_jsonlex_feed(lx, "[[[[", 4), -EBADMSG); /* trailing garbage first */
  kc_jsonlex_free(lx);
  lx = kc_jsonlex_new(&cbs, &l, KC_JSONLEX_MULTIPLE);
  assert_non_null(lx);
  kc_jsonlex_set_max_depth(lx, 3);
  assert_int_equal(kc_jsonlex_feed(lx, "[[[]]]", 6), 0);
  assert_int_equal(kc_jsonlex_feed(lx, "[[[[", 4), -E2BIG);
  assert_string_equal(kc_jsonlex_error(lx), "nesting deeper than 3 levels");
  kc_jsonlex_free(lx);

  /* a delivered token spanning feeds is bounded; a skipped one is not kept */
  l.skip_container = 0;
  for (int skip = 0; skip < 2; skip++) {
    lx = kc_jsonlex_new(&cbs, &l, 0);
    assert_non_null(lx);
    l.lx = lx;
    l.n = 0;
    l.opens = 0;
    l.skip_container = skip;
    kc_jsonlex_set_max_token(lx, 100);
    assert_int_equal(kc_jsonlex_feed(lx, "[\"", 2), 0);
    int rc = 0;
    for (int i = 0; i < 20 && !rc; i++) rc = kc_jsonlex_feed(lx, "0123456789", 10);
    if (skip) {
      assert_int_equal(rc, 0);
      assert_int_equal(kc_jsonlex_feed(lx, "\"]", 2), 0);
      assert_int_equal(kc_jsonlex_finish(lx), 0);
    } else {
      assert_int_equal(rc, -E2BIG);
      assert_string_equal(kc_jsonlex_error(lx), "token larger than the limit of 100 bytes");
    }
    kc_jsonlex_free(lx);
  }
}

static void test_stop(void **state) {
  (void)state;
  const char *t = "{\"a\":[1,\"s\",true,null,{}]}";
  for (int k = 1; k <= 10; k++) {
    lg l = {.stop_after = k};
    char err[200];
    assert_int_equal(parse_split(t, strlen(t), 0, NULL, 0, &l, err, sizeof err), -ECANCELED);
    assert_int_equal(l.calls, k); /* nothing after the stop */
    assert_string_equal(err, "client cancelled parse via callback return value");
  }
  /* no callbacks at all: only validation */
  kc_jsonlex *lx = kc_jsonlex_new(NULL, NULL, 0);
  assert_non_null(lx);
  assert_int_equal(kc_jsonlex_feed(lx, t, strlen(t)), 0);
  assert_int_equal(kc_jsonlex_finish(lx), 0);
  assert_int_equal(kc_jsonlex_finish(lx), 0);
  assert_int_equal(kc_jsonlex_feed(lx, "1", 1), -EBADMSG);
  kc_jsonlex_free(lx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values),   cmocka_unit_test(test_strings),
      cmocka_unit_test(test_multiple_values), cmocka_unit_test(test_errors),
      cmocka_unit_test(test_positions), cmocka_unit_test(test_skip),
      cmocka_unit_test(test_limits),   cmocka_unit_test(test_stop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
