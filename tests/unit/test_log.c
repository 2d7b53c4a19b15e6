/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/log: the journald test (JOURNAL_STREAM against
 * fstat of fd 2), the text format as logfmt (RFC 3339 ts, quoting and
 * escapes), the json format (read back with yajl; zap's field names,
 * numbers as numbers), key=value fields, the thread's reconcile fields,
 * reconcile IDs and the redaction of bearer tokens and private keys. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "base/log.h"
#include "testutil.h"

static int setup(void **state) {
  (void)state;
  unsetenv("JOURNAL_STREAM");
  kc_log_set_format(KC_LOG_FORMAT_TEXT);
  kc_log_set_level(KC_LOG_INFO);
  kc_log_set_reconcile(NULL, NULL, NULL);
  kc_log_set_context(NULL);
  return 0;
}

static void begin(void) {
  tu_stderr_begin();
  kc_log_detect_sink();
}

static char *end(void) {
  char *text = tu_stderr_end();
  kc_log_detect_sink();
  return text;
}

static bool is_digits(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

/* "2026-01-02T03:04:05.678Z " */
static void assert_rfc3339_ms(const char *s) {
  assert_true(is_digits(s, 4) && s[4] == '-' && is_digits(s + 5, 2) && s[7] == '-' &&
              is_digits(s + 8, 2) && s[10] == 'T' && is_digits(s + 11, 2) && s[13] == ':' &&
              is_digits(s + 14, 2) && s[16] == ':' && is_digits(s + 17, 2) && s[19] == '.' &&
              is_digits(s + 20, 3) && s[23] == 'Z');
}

static void test_text_outside_journald(void **state) {
  (void)state;
  begin(); /* a file, no JOURNAL_STREAM */
  kc_info("daemon", "hello port=%d", 8080);
  kc_error("daemon", "bad");
  char *log = end();
  /* No literal "<6>" in a file; logfmt: ts, level, logger, msg, fields. */
  assert_null(strchr(log, '<'));
  assert_int_equal(strncmp(log, "ts=", 3), 0);
  assert_rfc3339_ms(log + 3);
  assert_int_equal(strncmp(log + 27, " level=info logger=daemon msg=hello port=8080\n", 46), 0);
  const char *second = strchr(log, '\n') + 1;
  assert_rfc3339_ms(second + 3);
  assert_string_equal(second + 27, " level=error logger=daemon msg=bad\n");
  free(log);
}

static void test_journald_by_journal_stream(void **state) {
  (void)state;
  begin();
  struct stat st;
  assert_int_equal(fstat(2, &st), 0);
  char js[64];
  /* Another stream (an inherited variable, stderr redirected): no prefix. */
  snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino + 1);
  setenv("JOURNAL_STREAM", js, 1);
  assert_false(kc_log_detect_sink());
  setenv("JOURNAL_STREAM", "garbage", 1);
  assert_false(kc_log_detect_sink());
  snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
  setenv("JOURNAL_STREAM", js, 1);
  assert_true(kc_log_detect_sink());
  kc_warn("informer", "watch restarted resource=pods");
  kc_log_set_format(KC_LOG_FORMAT_JSON);
  kc_error("daemon", "json too");
  kc_log_set_format(KC_LOG_FORMAT_TEXT);
  unsetenv("JOURNAL_STREAM");
  char *log = end();
  /* journald: the priority prefix, no timestamp (journald stamps the entry). */
  const char *nl = strchr(log, '\n');
  assert_non_null(nl);
  assert_int_equal(strncmp(log, "<4>level=warn logger=informer msg=\"watch restarted\" resource=pods\n",
                           (size_t)(nl - log + 1)),
                   0);
  assert_int_equal(strncmp(nl + 1, "<3>{\"ts\":\"", 10), 0);
  free(log);
}

static const char *jstr(yajl_val obj, const char *name) {
  const char *path[] = {name, NULL};
  yajl_val v = yajl_tree_get(obj, path, yajl_t_string);
  return v ? YAJL_GET_STRING(v) : NULL;
}

static bool jnum(yajl_val obj, const char *name, long long *out) {
  const char *path[] = {name, NULL};
  yajl_val v = yajl_tree_get(obj, path, yajl_t_number);
  if (!v || !YAJL_IS_INTEGER(v)) return false;
  *out = YAJL_GET_INTEGER(v);
  return true;
}

static yajl_val parse_line(const char *line) {
  char err[256];
  yajl_val v = yajl_tree_parse(line, err, sizeof err);
  if (!v) fail_msg("not JSON (%s): %s", err, line);
  assert_true(YAJL_IS_OBJECT(v));
  return v;
}

static void test_json_fields(void **state) {
  (void)state;
  kc_log_set_format(KC_LOG_FORMAT_JSON);
  kc_log_set_context("podset/podset");
  begin();
  kc_info("httpserver", "serving /metrics bind=%s port=%u error=\"%s\" note=a \"quoted\" word", "127.0.0.1:0",
          8080u, "No such file or directory");
  kc_warn("x", "tab\there \"q\" \x01 no fields");
  char *log = end();
  char *nl = strchr(log, '\n');
  assert_non_null(nl);
  *nl = '\0';
  yajl_val v = parse_line(log);
  assert_rfc3339_ms(jstr(v, "ts"));
  assert_string_equal(jstr(v, "level"), "info");
  assert_string_equal(jstr(v, "logger"), "httpserver");
  assert_null(jstr(v, "component"));
  assert_string_equal(jstr(v, "context"), "podset/podset");
  assert_string_equal(jstr(v, "msg"), "serving /metrics");
  assert_string_equal(jstr(v, "bind"), "127.0.0.1:0");
  long long port = 0;
  assert_true(jnum(v, "port", &port)); /* a number, as zap writes one */
  assert_int_equal(port, 8080);
  assert_string_equal(jstr(v, "error"), "No such file or directory");
  assert_string_equal(jstr(v, "note"), "a \"quoted\" word");
  yajl_tree_free(v);
  v = parse_line(nl + 1);
  assert_string_equal(jstr(v, "msg"), "tab\there \"q\" \x01 no fields");
  assert_string_equal(jstr(v, "level"), "warn");
  yajl_tree_free(v);
  free(log);
}

static void test_split_fields(void **state) {
  (void)state;
  kc_log_field f[2];
  size_t text;
  const char *m = "a b=c x=1 y=two words z";
  assert_int_equal(kc_log_split_fields(m, strlen(m), &text, f, 2), 2);
  assert_int_equal(text, 1);
  assert_int_equal(f[0].name_len, 1);
  assert_memory_equal(f[0].name, "b", 1);
  assert_int_equal(f[0].value_len, 1);
  /* The last one that fits takes the rest. */
  assert_memory_equal(f[1].name, "x", 1);
  assert_int_equal(f[1].value_len, strlen("1 y=two words z"));
  m = "no=";
  assert_int_equal(kc_log_split_fields(m, 3, &text, f, 2), 1);
  assert_int_equal(text, 0);
  assert_int_equal(f[0].value_len, 0);
  m = "url=/x?a=b 9x=1";
  assert_int_equal(kc_log_split_fields(m, strlen(m), &text, f, 2), 1);
  assert_int_equal(f[0].value_len, strlen("/x?a=b 9x=1"));
}

static void test_reconcile_fields(void **state) {
  (void)state;
  char rid[KC_LOG_RECONCILE_ID_SIZE];
  kc_log_new_reconcile_id(rid);
  begin();
  kc_log_set_reconcile("podset", "ns/a", rid);
  kc_info("plugin", "scaled replicas=3");
  kc_info("plugin", "already keyed key=ns/a");
  kc_log_set_format(KC_LOG_FORMAT_JSON);
  kc_info("plugin", "scaled replicas=3 key=ns/a");
  kc_log_set_reconcile(NULL, NULL, NULL);
  kc_info("plugin", "after");
  char *log = end();
  char want[256];
  snprintf(want, sizeof want,
           " level=info logger=plugin msg=scaled controller=podset key=ns/a reconcileID=%s replicas=3\n", rid);
  char *l1 = log, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1, *l4 = strchr(l3, '\n') + 1;
  assert_int_equal(strncmp(l1 + 27, want, strlen(want)), 0);
  /* A field the message has already is not repeated. */
  snprintf(want, sizeof want,
           " level=info logger=plugin msg=\"already keyed\" controller=podset reconcileID=%s key=ns/a\n", rid);
  assert_int_equal(strncmp(l2 + 27, want, strlen(want)), 0);
  l4[-1] = '\0';
  yajl_val v = parse_line(l3);
  assert_string_equal(jstr(v, "controller"), "podset");
  assert_string_equal(jstr(v, "key"), "ns/a");
  assert_string_equal(jstr(v, "reconcileID"), rid);
  long long replicas = 0;
  assert_true(jnum(v, "replicas", &replicas));
  assert_int_equal(replicas, 3);
  assert_string_equal(jstr(v, "msg"), "scaled");
  assert_int_equal(YAJL_GET_OBJECT(v)->len, 8); /* ts level logger msg + 3 + replicas; key once */
  yajl_tree_free(v);
  v = parse_line(l4);
  assert_null(jstr(v, "controller"));
  assert_null(jstr(v, "reconcileID"));
  yajl_tree_free(v);
  free(log);
}

static void test_reconcile_id(void **state) {
  (void)state;
  char a[KC_LOG_RECONCILE_ID_SIZE], b[KC_LOG_RECONCILE_ID_SIZE];
  kc_log_new_reconcile_id(a);
  kc_log_new_reconcile_id(b);
  assert_int_equal(strlen(a), 36);
  assert_string_not_equal(a, b);
  for (int i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23)
      assert_int_equal(a[i], '-');
    else
      assert_non_null(strchr("0123456789abcdef", a[i]));
  }
  assert_int_equal(a[14], '4');
  assert_non_null(strchr("89ab", a[19]));
}

static void test_redaction_at_debug(void **state) {
  (void)state;
  kc_log_set_level(KC_LOG_DEBUG);
  begin();
  kc_debug("apiclient", "request header Authorization: Bearer eyJhbGciOi.sekrit-1 sent");
  kc_debug("apiclient", "header=\"authorization: bearer sekrit-2\"");
  kc_error("kubeconfig", "bad key -----BEGIN RSA PRIVATE KEY-----\nMIIsekrit3\n-----END RSA PRIVATE KEY----- here");
  kc_error("kubeconfig", "cut -----BEGIN PRIVATE KEY-----\nMIIsekrit4");
  kc_warn("fileperm", "kubeconfig holding a bearer token /k is readable");
  kc_info("x", "certificate -----BEGIN CERTIFICATE-----\nMIIpublic\n-----END CERTIFICATE----- kept");
  char *log = end();
  assert_null(strstr(log, "sekrit"));
  assert_non_null(strstr(log, "Authorization: Bearer [REDACTED] sent"));
  assert_non_null(strstr(log, "bearer [REDACTED]"));
  assert_non_null(strstr(log, "bad key [REDACTED] here"));
  assert_non_null(strstr(log, "MIIpublic"));
  assert_non_null(strstr(log, "holding a bearer token /k is readable"));
  free(log);
}

static void test_long_json_line_stays_json(void **state) {
  (void)state;
  char msg[4200];
  memset(msg, 1, sizeof msg - 1); /* each byte becomes \u0001: 6x */
  msg[sizeof msg - 1] = '\0';
  static char out[16384];
  kc_log_record r = {KC_LOG_INFO, "c", "ctx", "ctl", "ns/k", "id", msg};
  size_t n = kc_log_render(&r, KC_LOG_FORMAT_JSON, false, 0, out, sizeof out);
  assert_true(n < sizeof out);
  assert_int_equal(out[n - 1], '\n');
  out[n - 1] = '\0';
  yajl_val v = parse_line(out);
  assert_string_equal(jstr(v, "ts"), "1970-01-01T00:00:00.000Z");
  assert_string_equal(jstr(v, "key"), "ns/k");
  yajl_tree_free(v);
  /* text: cut, one line */
  char small[64];
  n = kc_log_render(&r, KC_LOG_FORMAT_TEXT, true, 0, small, sizeof small);
  assert_int_equal(n, 63);
  assert_int_equal(small[62], '\n');
  assert_null(memchr(small, '\n', 62));
}

/* logfmt values: bare when they can be, else quoted with go-logfmt's
 * escapes; JSON fields that are numbers become numbers, others stay strings. */
static void test_logfmt_quoting_and_json_numbers(void **state) {
  (void)state;
  static char out[4096];
  kc_log_record r = {KC_LOG_INFO, "hostapi", NULL, NULL, NULL, NULL,
                     "PUT failed code=403 message=\"a \"b\" c\" empty= eq=a=b tab=x\ty nl=l1\nl2 "
                     "utf=gr\xc3\xbc\xc3\x9f" "e bad=\xff rv=123456789012345678901 f=-1.5e3 z=007"};
  size_t n = kc_log_render(&r, KC_LOG_FORMAT_TEXT, false, 0, out, sizeof out);
  assert_int_equal(out[n - 1], '\n');
  out[n - 1] = '\0';
  assert_string_equal(out, "ts=1970-01-01T00:00:00.000Z level=info logger=hostapi msg=\"PUT failed\" code=403 "
                           "message=\"a \\\"b\\\" c\" empty=\"\" eq=\"a=b\" tab=\"x\\ty\" nl=\"l1\\nl2\" "
                           "utf=gr\xc3\xbc\xc3\x9f" "e bad=\"\xef\xbf\xbd\" rv=123456789012345678901 f=-1.5e3 z=007");
  n = kc_log_render(&r, KC_LOG_FORMAT_JSON, false, 0, out, sizeof out);
  out[n - 1] = '\0';
  yajl_val v = parse_line(out);
  long long code = 0;
  assert_true(jnum(v, "code", &code));
  assert_int_equal(code, 403);
  assert_string_equal(jstr(v, "f"), "-1.5e3"); /* decimals stay strings: 1.10 is no 1.1 */
  assert_string_equal(jstr(v, "rv"), "123456789012345678901"); /* too long for a float64 */
  assert_string_equal(jstr(v, "z"), "007");                    /* not JSON's number grammar */
  assert_string_equal(jstr(v, "empty"), "");
  assert_string_equal(jstr(v, "logger"), "hostapi");
  yajl_tree_free(v);
}

static void test_parse_format(void **state) {
  (void)state;
  enum kc_log_format f;
  assert_int_equal(kc_log_parse_format("json", &f), 0);
  assert_int_equal(f, KC_LOG_FORMAT_JSON);
  assert_int_equal(kc_log_parse_format("text", &f), 0);
  assert_int_equal(f, KC_LOG_FORMAT_TEXT);
  assert_int_equal(kc_log_parse_format("JSON", &f), -EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_text_outside_journald, setup),
      cmocka_unit_test_setup(test_journald_by_journal_stream, setup),
      cmocka_unit_test_setup(test_json_fields, setup),
      cmocka_unit_test_setup(test_logfmt_quoting_and_json_numbers, setup),
      cmocka_unit_test_setup(test_split_fields, setup),
      cmocka_unit_test_setup(test_reconcile_fields, setup),
      cmocka_unit_test_setup(test_reconcile_id, setup),
      cmocka_unit_test_setup(test_redaction_at_debug, setup),
      cmocka_unit_test_setup(test_long_json_line_stays_json, setup),
      cmocka_unit_test_setup(test_parse_format, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
