/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/kube/selector.c: label selector grammar, error texts and
 * positions as kube-apiserver prints them, matching semantics, canonical
 * strings; field selector splitting, escapes, errors, matching on the real
 * fixtures and the supported-field check. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube/kobj.h"
#include "kube/selector.h"
#include "testutil.h"

/* ---- label selector: valid inputs and their canonical form --------------- */

static void check_canon(const char *in, const char *want, unsigned nreqs) {
  kc_label_selector *sel = NULL;
  kc_sel_error err;
  int rc = kc_label_selector_parse(in, strlen(in), &sel, &err);
  if (rc) fail_msg("parse '%s': rc %d pos %zu: %s", in, rc, err.pos, err.msg);
  assert_int_equal(sel->nreqs, nreqs);
  char buf[512];
  int n = kc_label_selector_string(sel, buf, sizeof buf);
  assert_int_equal(n, (int)strlen(want));
  assert_string_equal(buf, want);
  /* The canonical form parses back to the same canonical form. */
  kc_label_selector *again = NULL;
  assert_int_equal(kc_label_selector_parse(buf, (size_t)n, &again, NULL), 0);
  char buf2[512];
  assert_int_equal(kc_label_selector_string(again, buf2, sizeof buf2), n);
  assert_string_equal(buf, buf2);
  kc_label_selector_free(again);
  kc_label_selector_free(sel);
}

static void test_label_valid(void **state) {
  (void)state;
  check_canon("", "", 0);
  check_canon("   \t\r\n ", "", 0);
  check_canon("a=b", "a=b", 1);
  check_canon("a==b", "a=b", 1);
  check_canon("  a  ==  b  ,  c != d ", "a=b,c!=d", 2);
  check_canon("c!=d,a=b", "a=b,c!=d", 2); /* sorted by key */
  check_canon("a=", "a=", 1);
  check_canon("a=,b", "a=,b", 2);
  check_canon("a", "a", 1);
  check_canon("!a", "!a", 1);
  check_canon("! a", "!a", 1);
  check_canon("a,!b", "a,!b", 2);
  check_canon("x in (in)", "x in (in)", 1);
  check_canon("in in (notin)", "in in (notin)", 1);
  check_canon("notin notin (in,notin)", "notin notin (in,notin)", 1);
  check_canon("a in (c,b,c)", "a in (b,c)", 1);
  check_canon("a in ()", "a in ()", 1);       /* the set {""} */
  check_canon("a in (,)", "a in ()", 1);
  check_canon("a in (b,,c)", "a in (,b,c)", 1);
  check_canon("a in (,b)", "a in (,b)", 1);
  check_canon("a in (b,)", "a in (,b)", 1);
  check_canon("a notin (x)", "a notin (x)", 1);
  check_canon("a>5", "a>5", 1);
  check_canon("a < 10", "a<10", 1);
  check_canon("a>0123", "a>0123", 1);
  check_canon("example.com/key=v.1_2-3", "example.com/key=v.1_2-3", 1);
  check_canon("a=b,a=b,a==b", "a=b", 1); /* exact duplicates collapse */
  check_canon("a=b,a!=c", "a=b,a!=c", 2);
  check_canon("a=b,a=c", "a=b,a=c", 2); /* allowed, ANDed */
  check_canon("x in(a)", "x in (a)", 1);
  check_canon("x=a\n,\ny", "x=a,y", 2);
}

static void test_label_values_exposed(void **state) {
  (void)state;
  kc_label_selector *sel = NULL;
  const char *s = "tier in (web, db), app=x, n>3";
  assert_int_equal(kc_label_selector_parse(s, strlen(s), &sel, NULL), 0);
  assert_int_equal(sel->nreqs, 3);
  assert_true(kc_str_eq_c(sel->reqs[0].key, "app"));
  assert_int_equal(sel->reqs[0].op, KC_LABEL_EQ);
  assert_int_equal(sel->reqs[1].op, KC_LABEL_GT);
  assert_int_equal(sel->reqs[1].num, 3);
  assert_int_equal(sel->reqs[2].op, KC_LABEL_IN);
  assert_int_equal(sel->reqs[2].nvalues, 2);
  assert_true(kc_str_eq_c(sel->reqs[2].values[0], "db"));
  assert_true(kc_str_eq_c(sel->reqs[2].values[1], "web"));
  kc_label_selector_free(sel);
  /* Not NUL-terminated input: only len bytes are read. */
  char buf[8] = {'a', '=', 'b', 'X', 'X', 'X', 'X', 'X'};
  assert_int_equal(kc_label_selector_parse(buf, 3, &sel, NULL), 0);
  assert_true(kc_str_eq_c(sel->reqs[0].values[0], "b"));
  kc_label_selector_free(sel);
}

/* ---- label selector: errors ---------------------------------------------- */

#define QN                                                                                    \
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an " \
  "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "      \
  "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define LV                                                                                     \
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or " \
  "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "          \
  "'my_value',  or '12345', regex used for validation is "                                    \
  "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"

static void check_err(const char *in, size_t pos, const char *want) {
  kc_label_selector *sel = (kc_label_selector *)1;
  kc_sel_error err;
  int rc = kc_label_selector_parse(in, strlen(in), &sel, &err);
  if (rc != -EINVAL) fail_msg("'%s': expected -EINVAL, got %d", in, rc);
  assert_null(sel);
  if (strcmp(err.msg, want) != 0) fail_msg("'%s':\n got: %s\nwant: %s", in, err.msg, want);
  if (err.pos != pos) fail_msg("'%s': pos %zu, want %zu", in, err.pos, pos);
  /* Without an error struct the result is the same. */
  assert_int_equal(kc_label_selector_parse(in, strlen(in), &sel, NULL), -EINVAL);
}

static void test_label_errors(void **state) {
  (void)state;
  check_err("a=b,", 4, "found '', expected: identifier after ','");
  check_err("a=b)", 3, "found ')', expected: ',' or 'end of string'");
  check_err("a=b c", 4, "found 'c', expected: ',' or 'end of string'");
  check_err(",a", 0, "found ',', expected: !, identifier, or 'end of string'");
  check_err("a=b,,c", 4, "found ',', expected: identifier after ','");
  check_err("!a=b", 2, "found '=', expected: ',' or 'end of string'");
  check_err("!", 1, "unable to parse requirement: found '', expected: identifier");
  check_err("!!a", 1, "unable to parse requirement: found '!', expected: identifier");
  check_err("a b", 2,
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
  check_err("a in b", 5, "unable to parse requirement: found 'b' expected: '('");
  check_err("a in", 4, "unable to parse requirement: found '' expected: '('");
  check_err("a in (b c)", 8, "unable to parse requirement: found 'c', expected: ',' or ')'");
  check_err("a in (b", 7, "unable to parse requirement: found '', expected: ',' or ')'");
  check_err("a in (=)", 6,
            "unable to parse requirement: found '=', expected: ',', ')' or identifier");
  check_err("a in (b,=)", 8, "unable to parse requirement: found '=', expected: ',', or identifier");
  check_err("a=(", 2, "unable to parse requirement: found '(', expected: identifier");
  check_err("a=-x", 2,
            "unable to parse requirement: values[0][a]: Invalid value: \"-x\": " LV);
  check_err("a in (ok,-x)", 9,
            "unable to parse requirement: values[0][a]: Invalid value: \"-x\": " LV);
  check_err("a in (zz,x_)", 9,
            "unable to parse requirement: values[0][a]: Invalid value: \"x_\": " LV);
  check_err("a=0123456789012345678901234567890123456789012345678901234567890123", 2,
            "unable to parse requirement: values[0][a]: Invalid value: "
            "\"0123456789012345678901234567890123456789012345678901234567890123\": "
            "must be no more than 63 characters");
  check_err("app:monolith", 0,
            "unable to parse requirement: <nil>: Invalid value: \"app:monolith\": name part " QN);
  check_err("a/b/c ?=? def", 0,
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name " QN
            " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
  check_err("app.kubernetes_io/name=x", 0,
            "unable to parse requirement: <nil>: Invalid value: \"app.kubernetes_io/name\": "
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  check_err("/x", 0,
            "unable to parse requirement: <nil>: Invalid value: \"/x\": prefix part must be "
            "non-empty");
  check_err("x/", 0,
            "unable to parse requirement: <nil>: Invalid value: \"x/\": name part must be "
            "non-empty; name part " QN);
  check_err("a\"b=c", 0,
            "unable to parse requirement: <nil>: Invalid value: \"a\\\"b\": name part " QN);
  check_err("a>b", 2,
            "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' "
            "operators, the value must be an integer");
  check_err("a>99999999999999999999", 2,
            "unable to parse requirement: values[0]: Invalid value: \"99999999999999999999\": "
            "for 'Gt', 'Lt' operators, the value must be an integer");
  check_err("a<-1", 2,
            "unable to parse requirement: values[0][a]: Invalid value: \"-1\": " LV);
  check_err("a>-x", 2,
            "unable to parse requirement: [values[0]: Invalid value: \"-x\": for 'Gt', 'Lt' "
            "operators, the value must be an integer, values[0][a]: Invalid value: \"-x\": " LV
            "]");
}

static void test_label_error_nul(void **state) {
  (void)state;
  /* apimachinery's lexer reads a NUL byte where a token starts as the end
   * of the input; inside a token it ends the token and is skipped. */
  kc_label_selector *sel = NULL;
  assert_int_equal(kc_label_selector_parse("a=b \0junk", 9, &sel, NULL), 0);
  assert_int_equal(sel->nreqs, 1);
  kc_label_selector_free(sel);
  kc_sel_error err;
  assert_int_equal(kc_label_selector_parse("a=b\0junk", 8, &sel, &err), -EINVAL);
  assert_string_equal(err.msg, "found 'junk', expected: ',' or 'end of string'");
  assert_int_equal(err.pos, 4);
}

/* ---- label matching ------------------------------------------------------ */

static bool m(const char *sel_text, const kc_label *labels, size_t n) {
  kc_label_selector *sel = NULL;
  if (kc_label_selector_parse(sel_text, strlen(sel_text), &sel, NULL)) fail_msg("parse %s", sel_text);
  bool r = kc_label_selector_matches(sel, labels, n);
  kc_label_selector_free(sel);
  return r;
}

#define L(k, v) {{k, sizeof k - 1}, {v, sizeof v - 1}}

static void test_label_matching(void **state) {
  (void)state;
  const kc_label none[1] = {L("zz", "")};
  const kc_label ab[] = {L("a", "b")};
  const kc_label ac[] = {L("a", "c")};
  const kc_label num[] = {L("a", "6"), L("n", "x")};
  const kc_label empty_val[] = {L("a", "")};
  /* != and notin also match objects without the key. */
  assert_true(m("a!=b", none, 0));
  assert_true(m("a!=b", ac, 1));
  assert_false(m("a!=b", ab, 1));
  assert_true(m("a notin (b)", none, 0));
  assert_true(m("a notin (b)", ac, 1));
  assert_false(m("a notin (b,c)", ac, 1));
  assert_true(m("a notin ()", ab, 1));
  assert_false(m("a notin ()", empty_val, 1));
  /* = and in need the key. */
  assert_false(m("a=b", none, 0));
  assert_true(m("a=b", ab, 1));
  assert_true(m("a==b", ab, 1));
  assert_false(m("a=b", ac, 1));
  assert_true(m("a in (b,c)", ac, 1));
  assert_false(m("a in (x,y)", ac, 1));
  assert_false(m("a in ()", none, 0));
  assert_true(m("a in ()", empty_val, 1));
  assert_true(m("a=", empty_val, 1));
  assert_false(m("a=", ab, 1));
  /* exists / does not exist */
  assert_true(m("a", ab, 1));
  assert_false(m("a", none, 1));
  assert_true(m("!a", none, 1));
  assert_false(m("!a", ab, 1));
  assert_true(m("!a", none, 0));
  /* Gt / Lt need an integer label value. */
  assert_true(m("a>5", num, 2));
  assert_false(m("a>6", num, 2));
  assert_true(m("a<7", num, 2));
  assert_false(m("a<6", num, 2));
  assert_false(m("n>0", num, 2));
  assert_false(m("n<0", num, 2));
  assert_false(m("zz>0", num, 2));
  /* AND, and the empty selector */
  assert_true(m("a=6,n=x", num, 2));
  assert_false(m("a=6,n=y", num, 2));
  assert_true(m("", none, 0));
  assert_true(kc_label_selector_matches(NULL, ab, 1));
}

static void test_label_matching_fixtures(void **state) {
  (void)state;
  kc_obj *dns = tu_fixture_obj("pod-k8s-openapi-coredns.json", NULL);
  kc_obj *prom = tu_fixture_obj("pod-insights-operator-prometheus.json", NULL);
  kc_obj *sidecar = tu_fixture_obj("pod-k9s-sidecar.json", NULL); /* no labels */
  struct {
    const char *sel;
    bool dns, prom, sidecar;
  } cases[] = {
      {"k8s-app=kube-dns", true, false, false},
      {"k8s-app=kube-dns,pod-template-hash", true, false, false},
      {"k8s-app!=kube-dns", false, true, true},
      {"operator.prometheus.io/shard<1", false, true, false},
      {"operator.prometheus.io/shard>0", false, false, false},
      {"statefulset.kubernetes.io/pod-name in (prometheus-k8s-0,x)", false, true, false},
      {"app notin (prometheus)", true, false, true},
      {"!app", true, false, true},
      {"", true, true, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kc_label_selector *sel = NULL;
    assert_int_equal(kc_label_selector_parse(cases[i].sel, strlen(cases[i].sel), &sel, NULL), 0);
    if (kc_label_selector_matches_obj(sel, dns) != cases[i].dns ||
        kc_label_selector_matches_obj(sel, prom) != cases[i].prom ||
        kc_label_selector_matches_obj(sel, sidecar) != cases[i].sidecar)
      fail_msg("selector '%s' matched wrongly", cases[i].sel);
    kc_label_selector_free(sel);
  }
  kc_obj_unref(dns);
  kc_obj_unref(prom);
  kc_obj_unref(sidecar);
}

static void test_label_string_nospace(void **state) {
  (void)state;
  kc_label_selector *sel = NULL;
  assert_int_equal(kc_label_selector_parse("abc=def", 7, &sel, NULL), 0);
  char buf[4];
  assert_int_equal(kc_label_selector_string(sel, buf, sizeof buf), -ENOSPC);
  assert_string_equal(buf, "abc");
  char exact[8];
  assert_int_equal(kc_label_selector_string(sel, exact, 7), -ENOSPC);
  assert_int_equal(kc_label_selector_string(sel, exact, 8), 7);
  kc_label_selector_free(sel);
}

/* ---- field selectors ----------------------------------------------------- */

static void check_field(const char *in, const char *canon, unsigned nreqs) {
  kc_field_selector *sel = NULL;
  kc_sel_error err;
  int rc = kc_field_selector_parse(in, strlen(in), &sel, &err);
  if (rc) fail_msg("parse '%s': %d %s", in, rc, err.msg);
  assert_int_equal(sel->nreqs, nreqs);
  char buf[256];
  assert_int_equal(kc_field_selector_string(sel, buf, sizeof buf), (int)strlen(canon));
  assert_string_equal(buf, canon);
  kc_field_selector_free(sel);
}

static void check_field_err(const char *in, size_t pos, const char *want) {
  kc_field_selector *sel = (kc_field_selector *)1;
  kc_sel_error err;
  assert_int_equal(kc_field_selector_parse(in, strlen(in), &sel, &err), -EINVAL);
  assert_null(sel);
  if (strcmp(err.msg, want) != 0) fail_msg("'%s':\n got: %s\nwant: %s", in, err.msg, want);
  if (err.pos != pos) fail_msg("'%s': pos %zu, want %zu", in, err.pos, pos);
}

static void test_field_parse(void **state) {
  (void)state;
  check_field("", "", 0);
  check_field(",,", "", 0);
  check_field("metadata.name=x", "metadata.name=x", 1);
  check_field("spec.nodeName!=n1,metadata.name==x", "metadata.name=x,spec.nodeName!=n1", 2);
  check_field("a=x\\,y", "a=x\\,y", 1);        /* escaped comma: one term */
  check_field("a=x\\\\,b=y", "a=x\\\\,b=y", 2); /* escaped backslash: comma splits */
  check_field("a=\\=\\\\", "a=\\=\\\\", 1);
  check_field("a=", "a=", 1);
  check_field("a!=", "a!=", 1);
  check_field("a=b,a=b", "a=b", 1);
  check_field("=x", "=x", 1); /* empty field name parses; the server rejects it later */

  kc_field_selector *sel = NULL;
  assert_int_equal(kc_field_selector_parse("a=x\\,y\\=z\\\\", 11, &sel, NULL), 0);
  assert_true(kc_str_eq_c(sel->reqs[0].value, "x,y=z\\"));
  assert_string_equal(sel->reqs[0].value.ptr, "x,y=z\\");
  assert_string_equal(sel->reqs[0].field.ptr, "a");
  kc_field_selector_free(sel);
  /* "!=" is tried before "==" and "=" at each position. */
  assert_int_equal(kc_field_selector_parse("a!=b", 4, &sel, NULL), 0);
  assert_int_equal(sel->reqs[0].op, KC_FIELD_NEQ);
  assert_string_equal(sel->reqs[0].field.ptr, "a");
  kc_field_selector_free(sel);
  assert_int_equal(kc_field_selector_parse("a!b=c", 5, &sel, NULL), 0);
  assert_int_equal(sel->reqs[0].op, KC_FIELD_EQ);
  assert_string_equal(sel->reqs[0].field.ptr, "a!b");
  kc_field_selector_free(sel);

  check_field_err("abc", 0, "invalid selector: 'abc'; can't understand 'abc'");
  check_field_err("a=b,zzz", 4, "invalid selector: 'a=b,zzz'; can't understand 'zzz'");
  check_field_err("a=b=c", 3, "invalid field selector: unescaped character in value: 61");
  check_field_err("a=!=c", 3, "invalid field selector: unescaped character in value: 61");
  check_field_err("a=b\\x", 3, "invalid field selector: invalid escape sequence: \\x");
  check_field_err("a=b\\", 3, "invalid field selector: invalid escape sequence: \\");
  /* Terms are checked in sorted order: "a..." before "zzz". */
  check_field_err("zzz,a=b\\q", 7, "invalid field selector: invalid escape sequence: \\q");
}

static void fv(const kc_obj *o, const char *field, const char *want) {
  char buf[128];
  int n = kc_field_value_text(o, field, buf, sizeof buf);
  if (n < 0) fail_msg("%s: %d", field, n);
  if (strcmp(buf, want) != 0) fail_msg("%s: got '%s' want '%s'", field, buf, want);
}

static bool fm(const char *s, const kc_obj *o) {
  kc_field_selector *sel = NULL;
  if (kc_field_selector_parse(s, strlen(s), &sel, NULL)) fail_msg("parse %s", s);
  bool r = kc_field_selector_matches(sel, o);
  kc_field_selector_free(sel);
  return r;
}

static void test_field_matching(void **state) {
  (void)state;
  kc_obj *pod = tu_fixture_obj("pod-k8s-openapi-coredns.json", NULL);
  kc_obj *node = tu_fixture_obj("node-kubernetes-fieldmanager.json", NULL);
  fv(pod, "metadata.name", "coredns-55cb58b774-8mcpn");
  fv(pod, "metadata.namespace", "kube-system");
  fv(pod, "spec.nodeName", "v1.30-control-plane");
  fv(pod, "spec.restartPolicy", "Always");
  fv(pod, "spec.schedulerName", "default-scheduler");
  fv(pod, "spec.serviceAccountName", "coredns");
  fv(pod, "spec.hostNetwork", "false"); /* absent reads as false */
  fv(pod, "status.phase", "Running");
  fv(pod, "status.podIP", "10.244.0.3");
  fv(pod, "status.nominatedNodeName", "");
  fv(node, "spec.unschedulable", "false");
  fv(node, "metadata.namespace", "");

  assert_true(fm("spec.nodeName=v1.30-control-plane", pod));
  assert_true(fm("spec.nodeName==v1.30-control-plane,status.phase=Running", pod));
  assert_false(fm("spec.nodeName=v1.30-control-plane,status.phase!=Running", pod));
  assert_false(fm("spec.nodeName=", pod));
  assert_true(fm("status.nominatedNodeName=", pod));
  assert_true(fm("spec.hostNetwork=false", pod));
  assert_true(fm("metadata.namespace!=default", pod));
  assert_true(fm("spec.unschedulable!=true", node));
  assert_true(fm("metadata.name=node-default-pool-something", node));
  assert_true(fm("", node));
  assert_true(kc_field_selector_matches(NULL, node));
  kc_obj_unref(pod);
  kc_obj_unref(node);
}

static void test_field_supported(void **state) {
  (void)state;
  assert_true(kc_field_supported("", "pods", true, kc_str_c("spec.nodeName")));
  assert_true(kc_field_supported("", "pods", true, kc_str_c("status.podIP")));
  assert_true(kc_field_supported("", "pods", true, kc_str_c("metadata.namespace")));
  assert_false(kc_field_supported("", "pods", true, kc_str_c("spec.foo")));
  assert_true(kc_field_supported("", "nodes", false, kc_str_c("spec.unschedulable")));
  assert_true(kc_field_supported("", "nodes", false, kc_str_c("metadata.name")));
  assert_false(kc_field_supported("", "nodes", false, kc_str_c("metadata.namespace")));
  assert_true(kc_field_supported("apps", "deployments", true, kc_str_c("metadata.namespace")));
  assert_false(kc_field_supported("apps", "deployments", true, kc_str_c("spec.replicas")));
  assert_false(kc_field_supported("example.com", "widgets", false, kc_str_c("metadata.namespace")));

  struct {
    const char *group, *resource, *sel, *msg;
    bool namespaced;
  } cases[] = {
      {"", "pods", "spec.nodeName=a,spec.foo=b", "field label not supported: spec.foo", true},
      {"", "nodes", "metadata.namespace=x", "field label not supported: metadata.namespace", false},
      {"", "configmaps", "data.x=1",
       "\"data.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
       true},
      {"apps", "deployments", "spec.replicas=1",
       "\"spec.replicas\" is not a known field selector: only \"metadata.name\", "
       "\"metadata.namespace\"",
       true},
      {"example.com", "widgets", "spec.size=1", "field label not supported: spec.size", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kc_field_selector *sel = NULL;
    kc_sel_error err;
    assert_int_equal(kc_field_selector_parse(cases[i].sel, strlen(cases[i].sel), &sel, NULL), 0);
    assert_int_equal(kc_field_selector_check(sel, cases[i].group, cases[i].resource,
                                             cases[i].namespaced, &err),
                     -EINVAL);
    assert_string_equal(err.msg, cases[i].msg);
    kc_field_selector_free(sel);
  }
  kc_field_selector *sel = NULL;
  assert_int_equal(kc_field_selector_parse("metadata.name=a,spec.nodeName=b", 31, &sel, NULL), 0);
  assert_int_equal(kc_field_selector_check(sel, "", "pods", true, NULL), 0);
  kc_field_selector_free(sel);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_label_valid),
      cmocka_unit_test(test_label_values_exposed),
      cmocka_unit_test(test_label_errors),
      cmocka_unit_test(test_label_error_nul),
      cmocka_unit_test(test_label_matching),
      cmocka_unit_test(test_label_matching_fixtures),
      cmocka_unit_test(test_label_string_nospace),
      cmocka_unit_test(test_field_parse),
      cmocka_unit_test(test_field_matching),
      cmocka_unit_test(test_field_supported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
