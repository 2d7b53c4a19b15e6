/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/json/yamltree.c: loading, positions, rejection rules,
 * typed getters with their exact `file:line:col: message` errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "json/yamltree.h"

static char err[512];

static kc_yaml_doc *load(const char *text) {
  kc_yaml_doc *d = NULL;
  int rc = kc_yaml_load_buffer("t.yaml", text, strlen(text), &d, err, sizeof err);
  if (rc) fprintf(stderr, "unexpected error: %s\n", err);
  assert_int_equal(rc, 0);
  return d;
}

static void load_fails(const char *text, const char *want) {
  kc_yaml_doc *d = (kc_yaml_doc *)1;
  int rc = kc_yaml_load_buffer("t.yaml", text, strlen(text), &d, err, sizeof err);
  assert_int_equal(rc, -EINVAL);
  assert_null(d);
  assert_string_equal(err, want);
}

static void test_positions(void **state) {
  (void)state;
  kc_yaml_doc *d = load("# comment\n"
                        "kind: Pod\n"
                        "meta:\n"
                        "  name: 'web'\n"
                        "  list: [a, \"b\"]\n"
                        "block: |\n"
                        "  text\n");
  const kc_yaml_node *r = kc_yaml_root(d);
  assert_non_null(r);
  assert_int_equal(r->type, KC_YAML_MAPPING);
  assert_int_equal(r->u.map.len, 3);
  assert_string_equal(kc_yaml_file(d), "t.yaml");
  const kc_yaml_pair *p = kc_yaml_map_pair(r, "kind");
  assert_int_equal(p->key.line, 2);
  assert_int_equal(p->key.column, 1);
  assert_int_equal(p->value.line, 2);
  assert_int_equal(p->value.column, 7);
  assert_string_equal(p->value.u.scalar.text, "Pod");
  assert_true(p->value.u.scalar.plain);
  const kc_yaml_node *meta = kc_yaml_map_get(r, "meta");
  const kc_yaml_node *name = kc_yaml_map_get(meta, "name");
  assert_string_equal(name->u.scalar.text, "web");
  assert_false(name->u.scalar.plain);
  assert_int_equal(name->line, 4);
  assert_int_equal(name->column, 9);
  const kc_yaml_node *list = kc_yaml_map_get(meta, "list");
  assert_int_equal(list->type, KC_YAML_SEQUENCE);
  assert_int_equal(list->u.seq.len, 2);
  assert_int_equal(list->u.seq.items[1].column, 13);
  assert_false(list->u.seq.items[1].u.scalar.plain);
  const kc_yaml_node *block = kc_yaml_map_get(r, "block");
  assert_string_equal(block->u.scalar.text, "text\n");
  assert_false(block->u.scalar.plain);
  assert_null(kc_yaml_map_get(r, "missing"));
  assert_null(kc_yaml_map_get(list, "a")); /* not a mapping */
  kc_yaml_free(d);
}

static void test_empty_and_null(void **state) {
  (void)state;
  kc_yaml_doc *d = load("");
  assert_null(kc_yaml_root(d));
  kc_yaml_free(d);
  d = load("# only a comment\n\n");
  assert_null(kc_yaml_root(d));
  kc_yaml_free(d);
  d = load("a:\nb: ~\nc: null\nd: 'null'\ne: \"\"\n");
  const kc_yaml_node *r = kc_yaml_root(d);
  assert_true(kc_yaml_is_null(kc_yaml_map_get(r, "a")));
  assert_true(kc_yaml_is_null(kc_yaml_map_get(r, "b")));
  assert_true(kc_yaml_is_null(kc_yaml_map_get(r, "c")));
  assert_false(kc_yaml_is_null(kc_yaml_map_get(r, "d")));
  assert_false(kc_yaml_is_null(kc_yaml_map_get(r, "e")));
  assert_true(kc_yaml_is_null(NULL));
  const char *s;
  assert_int_equal(kc_yaml_get_string(kc_yaml_map_get(r, "a"), "a", &s, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "t.yaml:1:3: a: expected a string, got null");
  assert_int_equal(kc_yaml_get_string(kc_yaml_map_get(r, "e"), "e", &s, err, sizeof err), 0);
  assert_string_equal(s, "");
  kc_yaml_free(d);
}

static void test_load_errors(void **state) {
  (void)state;
  load_fails("a: &x 1\nb: *x\n",
             "t.yaml:1:4: YAML anchors and aliases are not supported (this node is referenced "
             "again by an alias)");
  load_fails("a: *y\n", "t.yaml:1:4: found undefined alias");
  load_fails("&a [*a]\n",
             "t.yaml:1:1: YAML anchors and aliases are not supported (this node is referenced "
             "again by an alias)");
  load_fails("a: 1\n---\nb: 2\n", "t.yaml:2:1: more than one YAML document (only one is allowed)");
  load_fails("a: 1\nb: 2\na: 3\n", "t.yaml:3:1: duplicate key \"a\" (first at line 1)");
  load_fails("? [a]\n: 1\n", "t.yaml:1:3: mapping keys must be scalars, got a sequence");
  load_fails("a: [1, 2\n",
             "t.yaml:2:1: did not find expected ',' or ']' while parsing a flow sequence (from "
             "line 1 column 4)");
  load_fails("a: b: c\n", "t.yaml:1:5: mapping values are not allowed in this context");
  load_fails("a: 1\nb: \xff\n", "t.yaml:2:4: invalid leading UTF-8 octet (byte 0xff)");
  /* A tab where indentation goes: libyaml's "found character that cannot
   * start any token" gets a hint, at the tab's position. */
  load_fails("informers:\n\t- apiVersion: v1\n",
             "t.yaml:2:1: tabs are not allowed for indentation in YAML; use spaces");
  load_fails("a:\n  b: 1\n  \tc: 2\n",
             "t.yaml:3:3: tabs are not allowed for indentation in YAML; use spaces");
  load_fails("a: 1\nb: @x\n", "t.yaml:2:4: found character that cannot start any token while "
             "scanning for the next token (from line 2 column 4)");
  /* A big mapping takes the sort-based duplicate check. */
  char big[4096];
  size_t o = 0;
  for (int i = 0; i < 40; i++) o += (size_t)snprintf(big + o, sizeof big - o, "k%d: %d\n", i, i);
  snprintf(big + o, sizeof big - o, "k7: again\n");
  load_fails(big, "t.yaml:41:1: duplicate key \"k7\" (first at line 8)");
}

static void test_depth_limit(void **state) {
  (void)state;
  char deep[2 * KC_YAML_MAX_DEPTH + 16];
  size_t n = KC_YAML_MAX_DEPTH + 2;
  for (size_t i = 0; i < n; i++) deep[i] = '[';
  for (size_t i = 0; i < n; i++) deep[n + i] = ']';
  deep[2 * n] = '\0';
  kc_yaml_doc *d = NULL;
  assert_int_equal(kc_yaml_load_buffer("t.yaml", deep, strlen(deep), &d, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "t.yaml:1:130: nesting deeper than 128 levels");
  /* Exactly at the limit is fine. */
  n = KC_YAML_MAX_DEPTH + 1;
  for (size_t i = 0; i < n; i++) deep[i] = '[';
  for (size_t i = 0; i < n; i++) deep[n + i] = ']';
  deep[2 * n] = '\0';
  d = load(deep);
  kc_yaml_free(d);
}

static void test_embedded_nul(void **state) {
  (void)state;
  kc_yaml_doc *d = load("a: \"x\\0y\"\n");
  const kc_yaml_node *a = kc_yaml_map_get(kc_yaml_root(d), "a");
  assert_int_equal(a->u.scalar.len, 3);
  const char *s;
  assert_int_equal(kc_yaml_get_string(a, "a", &s, err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:1:4: a: contains a NUL byte");
  kc_yaml_free(d);
}

static void test_bool(void **state) {
  (void)state;
  kc_yaml_doc *d = load("t: true\nT: TRUE\nf: False\ny: yes\nq: \"true\"\nm: {}\n");
  const kc_yaml_node *r = kc_yaml_root(d);
  bool b = false;
  assert_int_equal(kc_yaml_get_bool(kc_yaml_map_get(r, "t"), "t", &b, err, sizeof err), 0);
  assert_true(b);
  assert_int_equal(kc_yaml_get_bool(kc_yaml_map_get(r, "T"), "T", &b, err, sizeof err), 0);
  assert_true(b);
  assert_int_equal(kc_yaml_get_bool(kc_yaml_map_get(r, "f"), "f", &b, err, sizeof err), 0);
  assert_false(b);
  assert_int_equal(kc_yaml_get_bool(kc_yaml_map_get(r, "y"), "y", &b, err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:4:4: y: expected true or false, got \"yes\"");
  assert_int_equal(kc_yaml_get_bool(kc_yaml_map_get(r, "q"), "q", &b, err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:5:4: q: expected true or false, got the quoted string \"true\"");
  assert_int_equal(kc_yaml_get_bool(kc_yaml_map_get(r, "m"), "m", &b, err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:6:4: m: expected true or false, got a mapping");
  kc_yaml_free(d);
}

static void test_int_and_double(void **state) {
  (void)state;
  kc_yaml_doc *d = load("a: 42\nb: -7\nc: 1e3\nd: '5'\ne: 99999999999999999999\nf: 0.5\n"
                        "g: .inf\nh: 0x10\n");
  const kc_yaml_node *r = kc_yaml_root(d);
  int64_t v;
  assert_int_equal(kc_yaml_get_int(kc_yaml_map_get(r, "a"), "a", 0, 100, &v, err, sizeof err), 0);
  assert_int_equal(v, 42);
  assert_int_equal(kc_yaml_get_int(kc_yaml_map_get(r, "b"), "b", -10, 10, &v, err, sizeof err), 0);
  assert_int_equal(v, -7);
  assert_int_equal(kc_yaml_get_int(kc_yaml_map_get(r, "a"), "a", 1, 10, &v, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "t.yaml:1:4: a: must be between 1 and 10, got \"42\"");
  assert_int_equal(kc_yaml_get_int(kc_yaml_map_get(r, "c"), "c", 0, 10000, &v, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "t.yaml:3:4: c: expected an integer, got \"1e3\"");
  assert_int_equal(kc_yaml_get_int(kc_yaml_map_get(r, "d"), "d", 0, 10, &v, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "t.yaml:4:4: d: expected an integer, got the quoted string \"5\"");
  assert_int_equal(
      kc_yaml_get_int(kc_yaml_map_get(r, "e"), "e", INT64_MIN, INT64_MAX, &v, err, sizeof err),
      -EINVAL);
  assert_string_equal(err, "t.yaml:5:4: e: must be between -9223372036854775808 and "
                           "9223372036854775807, got \"99999999999999999999\"");
  assert_int_equal(kc_yaml_get_int(kc_yaml_map_get(r, "h"), "h", 0, 100, &v, err, sizeof err),
                   -EINVAL);
  double x;
  assert_int_equal(kc_yaml_get_double(kc_yaml_map_get(r, "f"), "f", 0, 1, &x, err, sizeof err), 0);
  assert_true(x == 0.5);
  assert_int_equal(kc_yaml_get_double(kc_yaml_map_get(r, "a"), "a", 0, 100, &x, err, sizeof err),
                   0);
  assert_true(x == 42.0);
  assert_int_equal(kc_yaml_get_double(kc_yaml_map_get(r, "c"), "c", 0, 1e4, &x, err, sizeof err),
                   0);
  assert_true(x == 1000.0);
  assert_int_equal(kc_yaml_get_double(kc_yaml_map_get(r, "g"), "g", 0, 1e9, &x, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "t.yaml:7:4: g: expected a number, got \".inf\"");
  assert_int_equal(kc_yaml_get_double(kc_yaml_map_get(r, "a"), "a", 0, 1, &x, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "t.yaml:1:4: a: must be between 0 and 1, got \"42\"");
  kc_yaml_free(d);
}

static void test_parse_duration(void **state) {
  (void)state;
  static const struct {
    const char *in;
    int rc;
    int64_t ns;
  } cases[] = {
      {"0", 0, 0},
      {"15s", 0, 15000000000LL},
      {"10m", 0, 600000000000LL},
      {"2h", 0, 7200000000000LL},
      {"500ms", 0, 500000000LL},
      {"1h30m", 0, 5400000000000LL},
      {"1.5s", 0, 1500000000LL},
      {".5s", 0, 500000000LL},
      {"1s500ms", 0, 1500000000LL},
      {"100us", 0, 100000LL},
      {"100\xc2\xb5s", 0, 100000LL},
      {"7ns", 0, 7},
      {"2562047h", 0, 2562047LL * 3600000000000LL},
      {"2562048h", -ERANGE, 0},
      {"99999999999999999999s", -ERANGE, 0},
      {"15", -EINVAL, 0},
      {"", -EINVAL, 0},
      {"s", -EINVAL, 0},
      {"-1s", -EINVAL, 0},
      {"1x", -EINVAL, 0},
      {"1s ", -EINVAL, 0},
      {"1.s", 0, 1000000000LL},
      {"1d", -EINVAL, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t ns = -1;
    int rc = kc_yaml_parse_duration(cases[i].in, &ns);
    if (rc != cases[i].rc) fprintf(stderr, "case %s\n", cases[i].in);
    assert_int_equal(rc, cases[i].rc);
    if (rc == 0) assert_int_equal(ns, cases[i].ns);
  }
}

static void test_duration_getter(void **state) {
  (void)state;
  kc_yaml_doc *d = load("a: 15s\nb: 15\nc: 1.5ms\nd: 1y\ne: 2h\nf: 3000000h\ng: [1s]\n");
  const kc_yaml_node *r = kc_yaml_root(d);
  int64_t ms;
  assert_int_equal(
      kc_yaml_get_duration_ms(kc_yaml_map_get(r, "a"), "x.a", 0, 60000, &ms, err, sizeof err), 0);
  assert_int_equal(ms, 15000);
  assert_int_equal(
      kc_yaml_get_duration_ms(kc_yaml_map_get(r, "b"), "x.b", 0, 60000, &ms, err, sizeof err),
      -EINVAL);
  assert_string_equal(err, "t.yaml:2:4: x.b: duration \"15\" has no unit (write e.g. \"15s\" or "
                           "\"15ms\")");
  assert_int_equal(
      kc_yaml_get_duration_ms(kc_yaml_map_get(r, "c"), "x.c", 0, 60000, &ms, err, sizeof err),
      -EINVAL);
  assert_string_equal(err,
                      "t.yaml:3:4: x.c: duration \"1.5ms\" is not a whole number of milliseconds");
  assert_int_equal(
      kc_yaml_get_duration_ms(kc_yaml_map_get(r, "d"), "x.d", 0, 60000, &ms, err, sizeof err),
      -EINVAL);
  assert_string_equal(
      err, "t.yaml:4:4: x.d: invalid duration \"1y\" (use e.g. 500ms, 15s, 10m, 2h, 1h30m)");
  assert_int_equal(
      kc_yaml_get_duration_ms(kc_yaml_map_get(r, "e"), "x.e", 1, 60000, &ms, err, sizeof err),
      -EINVAL);
  assert_string_equal(err, "t.yaml:5:4: x.e: must be between 1ms and 60000ms, got \"2h\"");
  assert_int_equal(
      kc_yaml_get_duration_ms(kc_yaml_map_get(r, "f"), "x.f", 0, INT64_MAX, &ms, err, sizeof err),
      -EINVAL);
  assert_string_equal(err, "t.yaml:6:4: x.f: duration \"3000000h\" is too large");
  assert_int_equal(
      kc_yaml_get_duration_ms(kc_yaml_map_get(r, "g"), "x.g", 0, 1, &ms, err, sizeof err),
      -EINVAL);
  assert_string_equal(err, "t.yaml:7:4: x.g: expected a duration, got a sequence");
  kc_yaml_free(d);
}

static void test_string_list(void **state) {
  (void)state;
  kc_yaml_doc *d = load("a: [x, 'y', 3]\nb:\n  - ok\n  - {k: v}\nc: []\nd: x\n");
  const kc_yaml_node *r = kc_yaml_root(d);
  const char **v = NULL;
  size_t n = 0;
  assert_int_equal(
      kc_yaml_get_string_list(kc_yaml_map_get(r, "a"), "a", &v, &n, err, sizeof err), 0);
  assert_int_equal(n, 3);
  assert_string_equal(v[0], "x");
  assert_string_equal(v[1], "y");
  assert_string_equal(v[2], "3");
  free(v);
  assert_int_equal(
      kc_yaml_get_string_list(kc_yaml_map_get(r, "b"), "b", &v, &n, err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:4:5: b[1]: expected a string, got a mapping");
  assert_null(v);
  assert_int_equal(
      kc_yaml_get_string_list(kc_yaml_map_get(r, "c"), "c", &v, &n, err, sizeof err), 0);
  assert_int_equal(n, 0);
  assert_null(v);
  assert_int_equal(
      kc_yaml_get_string_list(kc_yaml_map_get(r, "d"), "d", &v, &n, err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:6:4: d: expected a sequence, got a scalar");
  kc_yaml_free(d);
}

static void test_check_keys(void **state) {
  (void)state;
  static const char *const allowed[] = {"enabled", "namespace", "leaseDuration"};
  kc_yaml_doc *d = load("le:\n  enabled: true\n  leaseDuraton: 1s\n"
                        "other:\n  namespace: x\n  zzz: 1\n"
                        "ci:\n  Enabled: true\n");
  const kc_yaml_node *r = kc_yaml_root(d);
  assert_int_equal(kc_yaml_check_keys(kc_yaml_map_get(r, "le"), allowed, 3, "leaderElection", err,
                                      sizeof err),
                   -EINVAL);
  assert_string_equal(
      err, "t.yaml:3:3: unknown key \"leaseDuraton\" in leaderElection (did you mean "
           "\"leaseDuration\"?)");
  assert_int_equal(
      kc_yaml_check_keys(kc_yaml_map_get(r, "other"), allowed, 3, "x", err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:6:3: unknown key \"zzz\" in x (known keys: enabled, "
                           "namespace, leaseDuration)");
  assert_int_equal(
      kc_yaml_check_keys(kc_yaml_map_get(r, "ci"), allowed, 3, "y", err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:8:3: unknown key \"Enabled\" in y (did you mean \"enabled\"?)");
  assert_int_equal(kc_yaml_expect(kc_yaml_map_get(r, "le"), KC_YAML_SEQUENCE, "le", err,
                                  sizeof err),
                   -EINVAL);
  assert_string_equal(err, "t.yaml:2:3: le: expected a sequence, got a mapping");
  kc_yaml_free(d);
}

static void test_equal(void **state) {
  (void)state;
  kc_yaml_doc *a = load("x: {a: 1, b: [1, 2]}\n");
  kc_yaml_doc *b = load("\n\nx:\n  a: 1\n  b:\n  - 1\n  - 2\n");
  kc_yaml_doc *c = load("x: {a: 1, b: [1, '2']}\n");
  kc_yaml_doc *e = load("x: {b: [1, 2], a: 1}\n");
  assert_true(kc_yaml_equal(kc_yaml_root(a), kc_yaml_root(b)));
  assert_false(kc_yaml_equal(kc_yaml_root(a), kc_yaml_root(c)));
  assert_false(kc_yaml_equal(kc_yaml_root(a), kc_yaml_root(e)));
  assert_false(kc_yaml_equal(kc_yaml_root(a), NULL));
  assert_true(kc_yaml_equal(NULL, NULL));
  kc_yaml_free(a);
  kc_yaml_free(b);
  kc_yaml_free(c);
  kc_yaml_free(e);
}

static void test_load_file(void **state) {
  (void)state;
  kc_yaml_doc *d = NULL;
  assert_int_equal(kc_yaml_load_file("/nonexistent/x.yaml", &d, err, sizeof err), -ENOENT);
  assert_string_equal(err, "/nonexistent/x.yaml: cannot open: No such file or directory");
  assert_int_equal(kc_yaml_load_file("/tmp", &d, err, sizeof err), -EINVAL);
  char path[] = "/tmp/kc-yamltree-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "token: s3cr3t\nlist:\n  - [oops\n";
  assert_int_equal(write(fd, text, strlen(text)), (int)strlen(text));
  close(fd);
  assert_int_equal(kc_yaml_load_file(path, &d, err, sizeof err), -EINVAL);
  char want[256];
  snprintf(want, sizeof want,
           "%s:4:1: did not find expected ',' or ']' while parsing a flow sequence (from line 3 "
           "column 5)",
           path);
  assert_string_equal(err, want);
  fd = open(path, O_WRONLY | O_TRUNC);
  assert_true(fd >= 0);
  text = "token: s3cr3t\n";
  assert_int_equal(write(fd, text, strlen(text)), (int)strlen(text));
  close(fd);
  assert_int_equal(kc_yaml_load_file(path, &d, err, sizeof err), 0);
  const kc_yaml_node *t = kc_yaml_map_get(kc_yaml_root(d), "token");
  assert_string_equal(t->u.scalar.text, "s3cr3t");
  assert_string_equal(t->file, path);
  kc_yaml_free(d);
  unlink(path);
}

static void test_fixture_kubeconfig_shape(void **state) {
  (void)state;
  /* The shape kubeconfigs have: sequences of named mappings, dashes in keys,
   * base64 data. */
  kc_yaml_doc *d = load("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                        "    server: https://127.0.0.1:6443\n"
                        "    certificate-authority-data: LS0tLS1CRUdJTg==\n"
                        "current-context: ctx\n");
  const kc_yaml_node *cl = kc_yaml_map_get(kc_yaml_root(d), "clusters");
  assert_int_equal(cl->u.seq.len, 1);
  const kc_yaml_node *c = kc_yaml_map_get(&cl->u.seq.items[0], "cluster");
  const char *s;
  assert_int_equal(
      kc_yaml_get_string(kc_yaml_map_get(c, "certificate-authority-data"), "ca", &s, err, sizeof err),
      0);
  assert_string_equal(s, "LS0tLS1CRUdJTg==");
  assert_int_equal(cl->u.seq.items[0].line, 4);
  assert_int_equal(cl->u.seq.items[0].column, 3);
  kc_yaml_free(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_positions),      cmocka_unit_test(test_empty_and_null),
      cmocka_unit_test(test_load_errors),    cmocka_unit_test(test_depth_limit),
      cmocka_unit_test(test_embedded_nul),   cmocka_unit_test(test_bool),
      cmocka_unit_test(test_int_and_double), cmocka_unit_test(test_parse_duration),
      cmocka_unit_test(test_duration_getter), cmocka_unit_test(test_string_list),
      cmocka_unit_test(test_check_keys),     cmocka_unit_test(test_equal),
      cmocka_unit_test(test_load_file),      cmocka_unit_test(test_fixture_kubeconfig_shape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
