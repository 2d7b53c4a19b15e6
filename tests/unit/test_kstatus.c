/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/kube/kstatus: reading a Status body (what counts as
 * one, nesting and size limits, members out of range, cutting long
 * strings) and the member rules the object builder shares with it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/kstatus.h"
#include "watch/decode.h"

static void assert_cleared(const kc_status *st) {
  assert_int_equal(st->code, 0);
  assert_string_equal(st->status, "");
  assert_string_equal(st->reason, "");
  assert_string_equal(st->message, "");
  assert_int_equal(st->retry_after_seconds, -1);
  assert_false(st->from_body);
  assert_false(st->rv_too_large);
}

static int parse(kc_status *st, const char *s) { return kc_status_parse(st, s, strlen(s), NULL, 0); }

static void test_status_bodies(void **state) {
  (void)state;
  kc_status st;
  const char *s404 = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                     "\"Failure\",\"message\":\"pods \\\"x\\\" not found\",\"reason\":\"NotFound\","
                     "\"details\":{\"name\":\"x\",\"kind\":\"pods\"},\"code\":404}";
  assert_int_equal(parse(&st, s404), 0);
  assert_true(st.from_body);
  assert_int_equal(st.code, 404);
  assert_string_equal(st.status, "Failure");
  assert_string_equal(st.reason, "NotFound");
  assert_string_equal(st.message, "pods \"x\" not found");
  assert_int_equal(st.retry_after_seconds, -1);
  assert_false(st.rv_too_large);
  assert_string_equal(st.details_name, "x"); /* a 404 about an object names it */
  assert_string_equal(st.cause_field, "");

  /* 422: the first cause that names a field, with its message. */
  const char *s422 = "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Invalid\",\"code\":422,"
                     "\"details\":{\"name\":\"x\",\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":"
                     "\"no field\"},{\"field\":\"\",\"message\":\"empty field\"},{\"reason\":"
                     "\"FieldValueInvalid\",\"message\":\"Invalid value: \\\"a b\\\"\",\"field\":"
                     "\"metadata.labels\"},{\"message\":\"second\",\"field\":\"spec\"}]}}";
  assert_int_equal(parse(&st, s422), 0);
  assert_string_equal(st.cause_field, "metadata.labels");
  assert_string_equal(st.cause_message, "Invalid value: \"a b\"");
  /* A route the server does not have: a NotFound naming no object. */
  assert_int_equal(parse(&st, "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"details\":{},\"code\":404}"), 0);
  assert_string_equal(st.details_name, "");

  const char *s500 = " \r\n\t{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                     "\"Failure\",\"reason\":\"ServerTimeout\",\"details\":{\"retryAfterSeconds\":2,"
                     "\"causes\":[{\"reason\":\"FieldValueInvalid\"},7,{\"reason\":"
                     "\"ResourceVersionTooLarge\"}]},\"code\":500} ";
  assert_int_equal(parse(&st, s500), 0);
  assert_int_equal(st.code, 500);
  assert_int_equal(st.retry_after_seconds, 2);
  assert_true(st.rv_too_large);
  assert_string_equal(st.message, "");

  /* A Status without any member the daemon reads. */
  assert_int_equal(parse(&st, "{\"kind\":\"Status\"}"), 0);
  assert_true(st.from_body);
  assert_int_equal(st.code, 0);
  assert_int_equal(st.retry_after_seconds, -1);

  /* Not a Status: nothing is left behind. */
  static const char *const not_status[] = {
      "",
      "   ",
      "Too many requests, please try again later.\n",
      "<html><body>502</body></html>",
      "[{\"kind\":\"Status\"}]",
      "{\"kind\":\"Pod\",\"code\":3,\"reason\":\"NotFound\"}",
      "{\"code\":404,\"reason\":\"NotFound\"}",
      "{\"kind\":\"status\",\"code\":404}",
      "{\"kind\":[\"Status\"],\"code\":404}",
      "{\"kind\":\"Status\",\"code\":404",
      "{\"kind\":\"Status\"} trailing",
  };
  for (size_t i = 0; i < sizeof not_status / sizeof not_status[0]; i++) {
    memset(&st, 0x5a, sizeof st);
    assert_int_equal(parse(&st, not_status[i]), -EBADMSG);
    assert_cleared(&st);
  }
  /* NULL body with no length: not a Status either. */
  assert_int_equal(kc_status_parse(&st, NULL, 0, NULL, 0), -EBADMSG);
  assert_cleared(&st);
}

/* Members out of their range or of the wrong type are ignored; a Status
 * keeps the rest. */
static void test_member_ranges(void **state) {
  (void)state;
  kc_status st;
  static const char *const ignored_code[] = {"0", "-1", "1000", "404.0", "4e2", "\"404\"",
                                             "99999999999999999999", "null", "true"};
  char body[256];
  for (size_t i = 0; i < sizeof ignored_code / sizeof ignored_code[0]; i++) {
    snprintf(body, sizeof body, "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"code\":%s}",
             ignored_code[i]);
    assert_int_equal(parse(&st, body), 0);
    assert_int_equal(st.code, 0);
    assert_string_equal(st.reason, "Conflict");
  }
  assert_int_equal(parse(&st, "{\"kind\":\"Status\",\"code\":1}"), 0);
  assert_int_equal(st.code, 1);
  assert_int_equal(parse(&st, "{\"kind\":\"Status\",\"code\":999}"), 0);
  assert_int_equal(st.code, 999);

  static const struct {
    const char *v;
    int want;
  } retry[] = {{"0", 0}, {"86399", 86399}, {"86400", -1}, {"-1", -1}, {"1.5", -1}, {"\"3\"", -1}};
  for (size_t i = 0; i < sizeof retry / sizeof retry[0]; i++) {
    snprintf(body, sizeof body, "{\"kind\":\"Status\",\"details\":{\"retryAfterSeconds\":%s}}",
             retry[i].v);
    assert_int_equal(parse(&st, body), 0);
    assert_int_equal(st.retry_after_seconds, retry[i].want);
  }
  /* retryAfterSeconds counts only inside details; strings only as strings. */
  assert_int_equal(parse(&st, "{\"kind\":\"Status\",\"retryAfterSeconds\":5,\"reason\":7,"
                              "\"message\":{\"a\":1},\"details\":[]}"),
                   0);
  assert_int_equal(st.retry_after_seconds, -1);
  assert_string_equal(st.reason, "");
  assert_string_equal(st.message, "");
  /* A cause's reason must be a string and match exactly. */
  assert_int_equal(parse(&st, "{\"kind\":\"Status\",\"details\":{\"causes\":[{\"reason\":"
                              "\"ResourceVersionTooLargeX\"},{\"reason\":1}]}}"),
                   0);
  assert_false(st.rv_too_large);

  /* The setters directly: a string for a number member (and the other way
   * round) is ignored, a later value replaces an earlier one. */
  kc_status_clear(&st);
  kc_status_set_string(&st, KC_STATUS_CODE, "404", 3);
  kc_status_set_number(&st, KC_STATUS_REASON, "404", 3);
  assert_cleared(&st);
  kc_status_set_number(&st, KC_STATUS_CODE, "404", 3);
  kc_status_set_number(&st, KC_STATUS_CODE, "409", 3);
  kc_status_set_number(&st, KC_STATUS_CODE, "x", 1);
  assert_int_equal(st.code, 409);
  kc_status_set_string(&st, KC_STATUS_REASON, "NotFoundXYZ", 8);
  assert_string_equal(st.reason, "NotFound");
  kc_status_set_string(&st, KC_STATUS_REASON, "", 0);
  assert_string_equal(st.reason, "");
}

/* Long strings are cut to the member's size, NUL-terminated. */
static void test_long_strings(void **state) {
  (void)state;
  kc_status st;
  size_t n = 3000;
  char *body = malloc(n + 200);
  assert_non_null(body);
  char *w = body;
  w += sprintf(w, "{\"kind\":\"Status\",\"status\":\"FailureFailureFailure\",\"reason\":\"");
  memset(w, 'r', 100);
  w += 100;
  w += sprintf(w, "\",\"message\":\"");
  memset(w, 'm', n);
  w += n;
  w += sprintf(w, "\"}");
  assert_int_equal(kc_status_parse(&st, body, (size_t)(w - body), NULL, 0), 0);
  free(body);
  assert_int_equal(strlen(st.status), sizeof st.status - 1);
  assert_int_equal(strlen(st.reason), sizeof st.reason - 1);
  assert_int_equal(strlen(st.message), sizeof st.message - 1);
  assert_int_equal(st.message[0], 'm');
}

/* A Status whose member "x" holds `levels` nested arrays. */
static char *nested(size_t levels, size_t *len) {
  static const char head[] = "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"x\":";
  size_t n = sizeof head - 1 + 2 * levels + 1;
  char *doc = malloc(n);
  assert_non_null(doc);
  memcpy(doc, head, sizeof head - 1);
  memset(doc + sizeof head - 1, '[', levels);
  memset(doc + sizeof head - 1 + levels, ']', levels);
  doc[n - 1] = '}';
  *len = n;
  return doc;
}

/* Nesting is limited as for every built object (256 levels, the root
 * included), before a tree is built; a body longer than
 * KC_STATUS_MAX_BYTES is not read at all. */
static void test_limits(void **state) {
  (void)state;
  kc_status st;
  char why[128];
  size_t n;
  char *doc = nested(255, &n);
  assert_int_equal(kc_status_parse(&st, doc, n, why, sizeof why), 0);
  assert_string_equal(why, "");
  assert_int_equal(st.code, 410);
  assert_string_equal(st.reason, "Expired");
  free(doc);

  doc = nested(256, &n);
  assert_int_equal(kc_status_parse(&st, doc, n, why, sizeof why), -E2BIG);
  assert_string_equal(why, "offset 306: nesting deeper than KC_OBJ_MAX_DEPTH (256) levels");
  assert_cleared(&st);
  assert_int_equal(kc_status_parse(&st, doc, n, NULL, 0), -E2BIG);
  free(doc);

  doc = nested(1000000, &n);
  assert_int_equal(kc_status_parse(&st, doc, n, why, sizeof why), -EMSGSIZE);
  assert_string_equal(why, "");
  assert_cleared(&st);
  free(doc);

  /* Exactly KC_STATUS_MAX_BYTES is read; one byte more is not. */
  static const char head[] = "{\"kind\":\"Status\",\"code\":409,\"message\":\"";
  doc = malloc(KC_STATUS_MAX_BYTES + 1);
  assert_non_null(doc);
  memcpy(doc, head, sizeof head - 1);
  memset(doc + sizeof head - 1, 'm', KC_STATUS_MAX_BYTES - (sizeof head - 1) - 2);
  memcpy(doc + KC_STATUS_MAX_BYTES - 2, "\"}", 2);
  assert_int_equal(kc_status_parse(&st, doc, KC_STATUS_MAX_BYTES, why, sizeof why), 0);
  assert_int_equal(st.code, 409);
  doc[KC_STATUS_MAX_BYTES] = ' ';
  assert_int_equal(kc_status_parse(&st, doc, KC_STATUS_MAX_BYTES + 1, why, sizeof why), -EMSGSIZE);
  free(doc);
}

/* The object builder (a watch ERROR event's object) reads the members with
 * the same rules: the same values as kc_status_parse, except the causes it
 * does not look at. */
static void test_builder_agrees(void **state) {
  (void)state;
  static const char *const bodies[] = {
      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
      "\"message\":\"too old resource version: 1200 (3400)\",\"reason\":\"Expired\","
      "\"details\":{\"retryAfterSeconds\":3},\"code\":410}",
      "{\"kind\":\"Status\",\"code\":0,\"details\":{\"retryAfterSeconds\":86400}}",
      "{\"kind\":\"Status\",\"code\":1000,\"reason\":\"Expired\",\"details\":{\"retryAfterSeconds\":-2}}",
      "{\"kind\":\"Status\",\"code\":504,\"reason\":\"Timeout\",\"details\":{\"causes\":"
      "[{\"reason\":\"ResourceVersionTooLarge\"}]}}",
  };
  kc_transform mo = {.metadata_only = true};
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
    kc_status a, b;
    assert_int_equal(parse(&a, bodies[i]), 0);
    char err[128];
    kc_obj *o = kc_obj_parse_status(bodies[i], strlen(bodies[i]), &mo, &b, err, sizeof err);
    assert_non_null(o);
    kc_obj_unref(o);
    assert_int_equal(b.code, a.code);
    assert_string_equal(b.status, a.status);
    assert_string_equal(b.reason, a.reason);
    assert_string_equal(b.message, a.message);
    assert_int_equal(b.retry_after_seconds, a.retry_after_seconds);
    assert_false(b.from_body);
    assert_false(b.rv_too_large);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_bodies), cmocka_unit_test(test_member_ranges),
      cmocka_unit_test(test_long_strings),  cmocka_unit_test(test_limits),
      cmocka_unit_test(test_builder_agrees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
