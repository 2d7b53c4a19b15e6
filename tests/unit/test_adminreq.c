/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/ops/adminreq: the admin socket's request line:
 * every command with the fields it needs, the refusals (each naming what is
 * wrong), the length bound, and format -> parse. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ops/adminreq.h"

static int parse(const char *line, kc_admin_request *r, char *err, size_t cap) {
  err[0] = '\0';
  return kc_admin_request_parse(line, strlen(line), r, err, cap);
}

static void test_commands(void **state) {
  (void)state;
  kc_admin_request r;
  char err[256];
  assert_int_equal(parse("{\"command\":\"queues\"}", &r, err, sizeof err), 0);
  assert_int_equal(r.command, KC_ADMIN_QUEUES);
  assert_string_equal(r.controller, "");
  assert_int_equal(parse("{\"command\":\"keys\",\"controller\":\"web\",\"state\":\"failing\"}", &r,
                         err, sizeof err),
                   0);
  assert_int_equal(r.command, KC_ADMIN_KEYS);
  assert_string_equal(r.controller, "web");
  assert_int_equal(r.state, KC_ADMIN_STATE_FAILING);
  assert_int_equal(parse(" { \"key\" : \"default/a\", \"controller\":\"web\", \"command\":\"trace\" } ",
                         &r, err, sizeof err),
                   0);
  assert_int_equal(r.command, KC_ADMIN_TRACE);
  assert_string_equal(r.key, "default/a");
  assert_int_equal(parse("{\"command\":\"requeue\",\"controller\":\"w\",\"key\":\"n\\u00e9\"}", &r,
                         err, sizeof err),
                   0);
  assert_string_equal(r.key, "n\xc3\xa9");
  assert_int_equal(parse("{\"command\":\"pause\",\"controller\":\"w\"}", &r, err, sizeof err), 0);
  assert_int_equal(parse("{\"command\":\"resume\",\"controller\":\"w\"}", &r, err, sizeof err), 0);
  assert_int_equal(r.command, KC_ADMIN_RESUME);
  assert_int_equal(parse("{\"command\":\"informers\"}", &r, err, sizeof err), 0);
  assert_int_equal(r.command, KC_ADMIN_INFORMERS);
}

static void refused(const char *line, const char *why) {
  kc_admin_request r;
  char err[256];
  assert_int_equal(parse(line, &r, err, sizeof err), -EINVAL);
  if (!strstr(err, why)) fail_msg("%s: got \"%s\", want \"%s\"", line, err, why);
  static const kc_admin_request zero;
  assert_memory_equal(&r, &zero, sizeof r);
}

static void test_refusals_name_what_is_wrong(void **state) {
  (void)state;
  refused("", "request is not JSON");
  refused("{\"command\":", "request is not JSON");
  refused("[\"queues\"]", "must be a JSON object");
  refused("{}", "\"command\" is required");
  refused("{\"command\":\"status\"}", "unknown command \"status\"");
  refused("{\"command\":1}", "\"command\" must be a string");
  refused("{\"command\":\"keys\"}", "keys needs \"controller\"");
  refused("{\"command\":\"trace\",\"controller\":\"w\"}", "trace needs \"key\"");
  refused("{\"command\":\"queues\",\"controller\":\"w\"}", "queues takes no \"controller\"");
  refused("{\"command\":\"pause\",\"controller\":\"w\",\"key\":\"k\"}", "pause takes no \"key\"");
  refused("{\"command\":\"pause\",\"controller\":\"w\",\"state\":\"queued\"}", "pause takes no \"state\"");
  refused("{\"command\":\"keys\",\"controller\":\"w\",\"state\":\"asleep\"}", "unknown state \"asleep\"");
  refused("{\"command\":\"keys\",\"controller\":\"\"}", "\"controller\" must be 1..255 bytes");
  refused("{\"command\":\"keys\",\"controller\":\"a\\nb\"}", "control character");
  refused("{\"command\":\"keys\",\"controller\":\"a\",\"controller\":\"b\"}", "given twice");
  refused("{\"command\":\"queues\",\"verbose\":true}", "unknown field \"verbose\"");
  refused("{\"command\":\"trace\",\"controller\":\"w\",\"key\":\"\xc0\xbf\"}", "not valid UTF-8");
}

static void test_bounds(void **state) {
  (void)state;
  kc_admin_request r;
  char err[256];
  static char line[KC_ADMIN_REQUEST_MAX + 16];
  /* A key of KC_ADMIN_KEY_MAX - 1 bytes fits; one more does not. */
  int n = snprintf(line, sizeof line, "{\"command\":\"trace\",\"controller\":\"w\",\"key\":\"");
  memset(line + n, 'k', KC_ADMIN_KEY_MAX - 1);
  strcpy(line + n + KC_ADMIN_KEY_MAX - 1, "\"}");
  assert_int_equal(parse(line, &r, err, sizeof err), 0);
  assert_int_equal(strlen(r.key), KC_ADMIN_KEY_MAX - 1);
  memset(line + n, 'k', KC_ADMIN_KEY_MAX);
  strcpy(line + n + KC_ADMIN_KEY_MAX, "\"}");
  assert_int_equal(parse(line, &r, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "\"key\" must be 1..511 bytes"));
  /* The line itself: KC_ADMIN_REQUEST_MAX - 1 bytes at most. */
  memset(line, ' ', KC_ADMIN_REQUEST_MAX);
  memcpy(line, "{\"command\":\"queues\"}", 20);
  assert_int_equal(kc_admin_request_parse(line, KC_ADMIN_REQUEST_MAX - 1, &r, err, sizeof err), 0);
  assert_int_equal(kc_admin_request_parse(line, KC_ADMIN_REQUEST_MAX, &r, err, sizeof err), -E2BIG);
  assert_non_null(strstr(err, "longer than 4095 bytes"));
}

static void test_format_parses_back(void **state) {
  (void)state;
  kc_admin_request r = {.command = KC_ADMIN_KEYS, .state = KC_ADMIN_STATE_BACKOFF}, back;
  strcpy(r.controller, "we\"b");
  kc_buf b = {0};
  kc_admin_request_format(&r, &b);
  assert_string_equal(b.p, "{\"command\":\"keys\",\"controller\":\"we\\\"b\",\"state\":\"backoff\"}\n");
  char err[256];
  assert_int_equal(kc_admin_request_parse(b.p, b.len - 1, &back, err, sizeof err), 0);
  assert_memory_equal(&r, &back, sizeof r);
  kc_buf_free(&b);
  enum kc_admin_command c;
  assert_int_equal(kc_admin_command_parse("informers", &c), 0);
  assert_int_equal(c, KC_ADMIN_INFORMERS);
  assert_int_equal(kc_admin_command_parse("", &c), -EINVAL);
  enum kc_admin_state s;
  assert_int_equal(kc_admin_state_parse("", &s), -EINVAL);
  assert_string_equal(kc_admin_state_name(KC_ADMIN_STATE_INFLIGHT), "inflight");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_commands),
      cmocka_unit_test(test_refusals_name_what_is_wrong),
      cmocka_unit_test(test_bounds),
      cmocka_unit_test(test_format_parses_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
