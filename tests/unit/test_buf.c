/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/buf: growth and NUL termination, the sticky error
 * (size limit, fixed memory), printf, and the JSON string and URL writers
 * (every JSON string read back with yajl). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <yajl/yajl_parse.h>

#include "base/buf.h"

static void test_append_grow(void **state) {
  (void)state;
  kc_buf b = {0};
  for (int i = 0; i < 1000; i++) kc_buf_printf(&b, "%d,", i);
  assert_int_equal(b.err, 0);
  assert_int_equal(strncmp(b.p, "0,1,2,", 6), 0);
  assert_int_equal(b.len, strlen(b.p));
  assert_true(b.cap > b.len);
  size_t cap = b.cap;
  kc_buf_reset(&b);
  assert_int_equal(b.len, 0);
  assert_string_equal(b.p, "");
  assert_int_equal(b.cap, cap); /* memory kept */
  kc_buf_puts(&b, "x");
  kc_buf_putc(&b, 'y');
  kc_buf_add(&b, "zzz", 1);
  assert_string_equal(b.p, "xyz");
  kc_buf_set(&b, "abc", 2);
  assert_string_equal(b.p, "ab");
  char *t = kc_buf_take(&b);
  assert_string_equal(t, "ab");
  free(t);
  assert_null(b.p);
  assert_int_equal(b.len, 0);
  kc_buf_add(&b, "", 0); /* an empty append still makes a string */
  assert_non_null(b.p);
  assert_string_equal(b.p, "");
  kc_buf_free(&b);
}

static void test_printf_long(void **state) {
  (void)state;
  kc_buf b = {0};
  char big[3000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  kc_buf_puts(&b, "<");
  kc_buf_printf(&b, "%s|%d", big, 42); /* longer than what is left: reserves, prints again */
  assert_int_equal(b.err, 0);
  assert_int_equal(b.len, 1 + 2999 + 3);
  assert_string_equal(b.p + 1 + 2999, "|42");
  kc_buf_free(&b);
}

static void test_limit_sticky(void **state) {
  (void)state;
  kc_buf b = {0};
  kc_buf_set_max(&b, 10);
  kc_buf_puts(&b, "0123456789"); /* exactly the limit */
  assert_int_equal(b.err, 0);
  assert_int_equal(kc_buf_reserve(&b, 1), -E2BIG);
  kc_buf_puts(&b, "x");
  assert_int_equal(b.err, -E2BIG);
  assert_string_equal(b.p, "0123456789"); /* the text before the failure stays */
  kc_buf_set_max(&b, 0);
  kc_buf_puts(&b, "y"); /* sticky until reset */
  assert_int_equal(b.err, -E2BIG);
  assert_int_equal(b.len, 10);
  kc_buf_reset(&b);
  kc_buf_puts(&b, "01234567890123456789");
  assert_int_equal(b.err, 0);
  /* A lowered limit applies to a buffer that already has the room. */
  kc_buf_reset(&b);
  kc_buf_set_max(&b, 4);
  kc_buf_puts(&b, "abcde");
  assert_int_equal(b.err, -E2BIG);
  kc_buf_free(&b);
}

static void test_fixed(void **state) {
  (void)state;
  char mem[8];
  kc_buf b = kc_buf_fixed(mem, sizeof mem);
  assert_string_equal(mem, "");
  kc_buf_puts(&b, "abc");
  kc_buf_printf(&b, "%d", 12);
  assert_int_equal(b.err, 0);
  assert_string_equal(mem, "abc12");
  kc_buf_puts(&b, "xyz"); /* 8 bytes would not fit with the NUL: cut */
  assert_int_equal(b.err, -ENOSPC);
  assert_string_equal(mem, "abc12xy");
  kc_buf_puts(&b, "q");
  assert_string_equal(mem, "abc12xy");
  kc_buf_reset(&b);
  kc_buf_printf(&b, "%s", "0123456789"); /* printf cuts too */
  assert_int_equal(b.err, -ENOSPC);
  assert_string_equal(mem, "0123456");
  assert_int_equal(b.len, 7);
  assert_null(kc_buf_take(&b)); /* never the caller's memory */
  char one[1];
  kc_buf z = kc_buf_fixed(one, 1);
  kc_buf_puts(&z, "a");
  assert_int_equal(z.err, -ENOSPC);
  assert_string_equal(one, "");
}

/* yajl reads back one JSON string. */
typedef struct got {
  char s[256];
  size_t n;
  int count;
} got;

static int on_string(void *ud, const unsigned char *s, size_t n) {
  got *g = ud;
  if (n > sizeof g->s) return 0;
  memcpy(g->s, s, n);
  g->n = n;
  g->count++;
  return 1;
}

static void parses_to(const char *json, size_t len, const char *want, size_t wn) {
  static const yajl_callbacks cbs = {.yajl_string = on_string};
  got g = {0};
  yajl_handle h = yajl_alloc(&cbs, NULL, &g);
  assert_non_null(h);
  yajl_status st = yajl_parse(h, (const unsigned char *)json, len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  if (st != yajl_status_ok) fail_msg("yajl rejects %.*s", (int)len, json);
  yajl_free(h);
  assert_int_equal(g.count, 1);
  assert_int_equal(g.n, wn);
  assert_memory_equal(g.s, want, wn);
}

static void json_case(const char *in, size_t n, const char *want_json, const char *want_back,
                      size_t back_n) {
  kc_buf b = {0};
  kc_buf_json(&b, in, n);
  assert_int_equal(b.err, 0);
  assert_string_equal(b.p, want_json);
  parses_to(b.p, b.len, want_back, back_n);
  kc_buf_free(&b);
}
#define SAME(lit, json) json_case(lit, sizeof lit - 1, json, lit, sizeof lit - 1)
#define BACK(lit, json, back) json_case(lit, sizeof lit - 1, json, back, sizeof back - 1)

static void test_json(void **state) {
  (void)state;
  SAME("", "\"\"");
  SAME("plain text", "\"plain text\"");
  SAME("q\"b\\s/", "\"q\\\"b\\\\s/\"");
  SAME("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"");
  SAME("\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"");
  SAME("a\0b", "\"a\\u0000b\"");
  SAME("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""); /* é € 😀 */
  SAME("\xef\xbf\xbf\xf4\x8f\xbf\xbf", "\"\xef\xbf\xbf\xf4\x8f\xbf\xbf\""); /* U+FFFF, U+10FFFF */
  /* Invalid UTF-8: one U+FFFD per byte that does not start a valid sequence. */
  BACK("\x80", "\"\xef\xbf\xbd\"", "\xef\xbf\xbd");
  BACK("a\xc3", "\"a\xef\xbf\xbd\"", "a\xef\xbf\xbd");                                /* truncated */
  BACK("\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\"", "\xef\xbf\xbd\xef\xbf\xbd");             /* overlong */
  BACK("\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"",
       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");                                   /* surrogate */
  BACK("\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"",
       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");                       /* > U+10FFFF */
  BACK("\xe2\x82x", "\"\xef\xbf\xbd\xef\xbf\xbdx\"", "\xef\xbf\xbd\xef\xbf\xbdx");          /* cut short */
  BACK("\xff\"", "\"\xef\xbf\xbd\\\"\"", "\xef\xbf\xbd\"");

  kc_buf b = {0};
  kc_buf_json_c(&b, NULL);
  kc_buf_putc(&b, ',');
  kc_buf_json_c(&b, "x\n");
  kc_buf_putc(&b, ',');
  kc_buf_json_body(&b, "\"", 1);
  assert_string_equal(b.p, "\"\",\"x\\n\",\\\"");
  kc_buf_free(&b);
}

static void test_url(void **state) {
  (void)state;
  kc_buf b = {0};
  const char in[] = "aZ09-._~ /%:?&=+\xc3\xa9";
  kc_buf_url(&b, in, sizeof in - 1);
  assert_string_equal(b.p, "aZ09-._~%20%2F%25%3A%3F%26%3D%2B%C3%A9");
  kc_buf_reset(&b);
  kc_buf_url(&b, NULL, 0);
  kc_buf_url(&b, "", 0);
  assert_int_equal(b.len, 0);
  kc_buf_free(&b);
}

static void test_utf8_len(void **state) {
  (void)state;
  const struct {
    const char *s;
    size_t n, want;
  } cases[] = {
      {"a", 1, 1},          {"\xc2\x80", 2, 2},      {"\xc1\xbf", 2, 0},     {"\xdf\xbf", 2, 2},
      {"\xe0\xa0\x80", 3, 3}, {"\xe0\x9f\xbf", 3, 0}, {"\xed\x9f\xbf", 3, 3}, {"\xed\xa0\x80", 3, 0},
      {"\xf0\x90\x80\x80", 4, 4}, {"\xf0\x8f\xbf\xbf", 4, 0}, {"\xf4\x8f\xbf\xbf", 4, 4},
      {"\xf5\x80\x80\x80", 4, 0}, {"\xe2\x82", 2, 0},  {"\x80", 1, 0},        {"\xc3\x28", 2, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_int_equal(kc_utf8_len((const unsigned char *)cases[i].s, cases[i].n), cases[i].want);
}

static void test_errf(void **state) {
  (void)state;
  char e[8];
  kc_errf(e, sizeof e, "offset %d: %s", 17, "bad");
  assert_string_equal(e, "offset "); /* cut to fit */
  kc_errf(e, sizeof e, "%s", "ok");
  assert_string_equal(e, "ok");
  kc_errf(NULL, 0, "%s", "nothing");
  kc_errf(e, 0, "%s", "nothing");
  assert_string_equal(e, "ok");
}

/* KC_ARRAY_ROOM: doubles from `first` only when full, keeps the elements,
 * and refuses a size that overflows without touching the array. */
static void test_array_room(void **state) {
  (void)state;
  long *a = NULL;
  size_t n = 0, cap = 0;
  for (long i = 0; i < 9; i++) {
    assert_int_equal(KC_ARRAY_ROOM(a, cap, n, 4), 0);
    a[n++] = i;
    assert_int_equal(cap, i < 4 ? 4 : 8 + 8 * (i >= 8));
  }
  for (long i = 0; i < 9; i++) assert_int_equal(a[i], i);
  assert_int_equal(KC_ARRAY_ROOM(a, cap, 3, 4), 0); /* room: nothing changes */
  assert_int_equal(cap, 16);
  struct big { char b[16]; } *p = (struct big *)a;
  size_t huge = SIZE_MAX / 16;
  assert_int_equal(KC_ARRAY_ROOM(p, huge, huge, 4), -ENOMEM);
  assert_ptr_equal(p, (struct big *)a);
  assert_int_equal(huge, SIZE_MAX / 16);
  /* A capacity whose doubling would wrap is refused the same way. */
  char *c = NULL;
  size_t half = SIZE_MAX / 2 + 1;
  assert_int_equal(KC_ARRAY_RESERVE(c, half, SIZE_MAX, 1), -ENOMEM);
  assert_null(c);
  assert_int_equal(half, SIZE_MAX / 2 + 1);
  /* KC_ARRAY_RESERVE: doubles as often as `need` asks, in one step. */
  assert_int_equal(KC_ARRAY_RESERVE(a, cap, 100, 4), 0);
  assert_int_equal(cap, 128);
  assert_int_equal(a[8], 8);
  size_t none = 0;
  long *b = NULL;
  assert_int_equal(KC_ARRAY_RESERVE(b, none, 3, 0), 0); /* first 0: from 1 */
  assert_int_equal(none, 4);
  free(b);
  free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_append_grow), cmocka_unit_test(test_array_room), cmocka_unit_test(test_printf_long),
      cmocka_unit_test(test_limit_sticky), cmocka_unit_test(test_fixed),
      cmocka_unit_test(test_json),        cmocka_unit_test(test_url),
      cmocka_unit_test(test_utf8_len),    cmocka_unit_test(test_errf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
