/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for tests/apisim/protobuf (kube-apisim's decoder of the
 * Kubernetes protobuf envelope): the JSON each supported kind turns into,
 * the Go encoding/json conventions (zero scalars and zero Times left out,
 * pointer fields kept at zero, bytes as base64, IntOrString, Quantity), and
 * every refusal (magic, truncation, wire types, unknown fields and kinds,
 * contentEncoding). The messages are built here with a small encoder. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../apisim/protobuf.h"

/* ---- encoder ---- */

struct enc {
  uint8_t b[4096];
  size_t n;
};

static void put_varint(struct enc *e, uint64_t v)
{
  while (v >= 0x80) {
    e->b[e->n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  e->b[e->n++] = (uint8_t)v;
}

static void put_bytes(struct enc *e, unsigned num, const void *p, size_t n)
{
  put_varint(e, (uint64_t)num << 3 | 2);
  put_varint(e, n);
  memcpy(e->b + e->n, p, n);
  e->n += n;
}

static void put_str(struct enc *e, unsigned num, const char *s) { put_bytes(e, num, s, strlen(s)); }
static void put_msg(struct enc *e, unsigned num, const struct enc *m) { put_bytes(e, num, m->b, m->n); }

static void put_int(struct enc *e, unsigned num, uint64_t v)
{
  put_varint(e, (uint64_t)num << 3);
  put_varint(e, v);
}

static void put_map(struct enc *e, unsigned num, const char *k, const void *v, size_t vn)
{
  struct enc m = {0};
  put_str(&m, 1, k);
  put_bytes(&m, 2, v, vn);
  put_msg(e, num, &m);
}

/* "k8s\0" + runtime.Unknown{typeMeta, raw} */
static void envelope(struct enc *out, const char *av, const char *kind, const struct enc *raw)
{
  memcpy(out->b, "k8s\0", 4);
  out->n = 4;
  struct enc tm = {0};
  put_str(&tm, 1, av);
  put_str(&tm, 2, kind);
  put_msg(out, 1, &tm);
  put_msg(out, 2, raw);
}

static char *decode_json(const struct enc *e, int *rc, char **err)
{
  jv *dom = NULL;
  *rc = sim_pb_decode(e->b, e->n, &dom, err);
  if (*rc < 0) {
    assert_null(dom);
    return NULL;
  }
  assert_non_null(dom);
  char *s = jv_dump(dom, NULL);
  jv_free(dom);
  return s;
}

static void expect_json(const struct enc *e, const char *want)
{
  int rc;
  char *err = NULL;
  char *got = decode_json(e, &rc, &err);
  if (rc < 0) fail_msg("decode failed: %d %s", rc, err ? err : "");
  assert_null(err);
  assert_string_equal(got, want);
  free(got);
}

static void expect_error(const struct enc *e, int want_rc, const char *want_substr)
{
  int rc;
  char *err = NULL;
  char *got = decode_json(e, &rc, &err);
  assert_null(got);
  assert_int_equal(rc, want_rc);
  assert_non_null(err);
  if (!strstr(err, want_substr)) fail_msg("error %s lacks %s", err, want_substr);
  free(err);
}

static void objmeta(struct enc *md, const char *name, const char *ns)
{
  put_str(md, 1, name);
  put_str(md, 2, "");          /* generateName: gogo writes empty strings */
  put_str(md, 3, ns);
  put_int(md, 7, 0);           /* generation 0: left out */
  struct enc t = {0};
  put_msg(md, 8, &t);          /* zero creationTimestamp: left out */
}

/* ---- kinds ---- */

static void test_configmap(void **state)
{
  (void)state;
  struct enc raw = {0}, md = {0}, e = {0};
  objmeta(&md, "x", "default");
  put_map(&md, 11, "app", "web", 3);
  put_msg(&raw, 1, &md);
  put_map(&raw, 2, "a", "b", 1);
  put_map(&raw, 2, "c", "", 0);
  put_map(&raw, 3, "bin", "\0\1\2", 3);
  envelope(&e, "v1", "ConfigMap", &raw);
  expect_json(&e, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\","
                  "\"namespace\":\"default\",\"labels\":{\"app\":\"web\"}},\"data\":{\"a\":\"b\",\"c\":\"\"},"
                  "\"binaryData\":{\"bin\":\"AAEC\"}}");
}

static void test_secret_and_pointer_bool(void **state)
{
  (void)state;
  struct enc raw = {0}, md = {0}, e = {0};
  objmeta(&md, "s", "ns1");
  put_msg(&raw, 1, &md);
  put_map(&raw, 2, "pw", "hunter2", 7);
  put_str(&raw, 3, "Opaque");
  put_int(&raw, 5, 0); /* immutable is *bool: false is kept */
  envelope(&e, "v1", "Secret", &raw);
  expect_json(&e, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\",\"namespace\":\"ns1\"},"
                  "\"data\":{\"pw\":\"aHVudGVyMg==\"},\"type\":\"Opaque\",\"immutable\":false}");
}

static void test_namespace_time_and_repeated(void **state)
{
  (void)state;
  struct enc raw = {0}, md = {0}, spec = {0}, t = {0}, own = {0}, e = {0};
  put_str(&md, 1, "n1");
  put_int(&t, 1, 1714557600); /* 2024-05-01T10:00:00Z */
  put_int(&t, 2, 5);
  put_msg(&md, 8, &t);
  put_str(&own, 1, "Thing");
  put_str(&own, 3, "owner");
  put_str(&own, 4, "u-1");
  put_str(&own, 5, "example.com/v1");
  put_int(&own, 6, 1);
  put_msg(&md, 13, &own);
  put_str(&md, 14, "a/b");
  put_str(&md, 14, "");
  put_msg(&raw, 1, &md);
  put_str(&spec, 1, "kubernetes");
  put_msg(&raw, 2, &spec);
  struct enc st = {0};
  put_msg(&raw, 3, &st);
  envelope(&e, "v1", "Namespace", &raw);
  expect_json(&e, "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"n1\","
                  "\"creationTimestamp\":\"2024-05-01T10:00:00Z\",\"ownerReferences\":[{\"kind\":\"Thing\","
                  "\"name\":\"owner\",\"uid\":\"u-1\",\"apiVersion\":\"example.com/v1\",\"controller\":true}],"
                  "\"finalizers\":[\"a/b\",\"\"]},\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{}}");
}

static void test_deployment(void **state)
{
  (void)state;
  struct enc raw = {0}, md = {0}, spec = {0}, sel = {0}, tpl = {0}, tmd = {0}, ps = {0}, c = {0},
             port = {0}, res = {0}, q = {0}, strat = {0}, ru = {0}, ios = {0}, ioi = {0}, e = {0};
  objmeta(&md, "d1", "default");
  put_msg(&raw, 1, &md);
  put_int(&spec, 1, 0); /* replicas is *int32: 0 is kept */
  put_map(&sel, 1, "app", "d1", 2);
  put_msg(&spec, 2, &sel);
  put_map(&tmd, 11, "app", "d1", 2);
  put_msg(&tpl, 1, &tmd);
  put_str(&c, 1, "nginx");
  put_str(&c, 2, "nginx:1");
  put_str(&c, 3, "sh");
  put_int(&port, 3, 80);
  put_msg(&c, 6, &port);
  put_str(&q, 1, "100m");
  put_map(&res, 1, "cpu", q.b, q.n);
  put_msg(&c, 8, &res);
  put_msg(&ps, 2, &c);
  put_int(&ps, 4, (uint64_t)-1); /* negative int64 */
  put_msg(&tpl, 2, &ps);
  put_msg(&spec, 3, &tpl);
  put_int(&ioi, 1, 0);
  put_int(&ioi, 2, 1);
  put_int(&ios, 1, 1);
  put_str(&ios, 3, "25%");
  put_msg(&ru, 1, &ioi);
  put_msg(&ru, 2, &ios);
  put_str(&strat, 1, "RollingUpdate");
  put_msg(&strat, 2, &ru);
  put_msg(&spec, 4, &strat);
  put_msg(&raw, 2, &spec);
  struct enc st = {0};
  put_int(&st, 2, 0);
  put_msg(&raw, 3, &st);
  envelope(&e, "apps/v1", "Deployment", &raw);
  expect_json(&e, "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d1\","
                  "\"namespace\":\"default\"},\"spec\":{\"replicas\":0,\"selector\":{\"matchLabels\":{\"app\":\"d1\"}},"
                  "\"template\":{\"metadata\":{\"labels\":{\"app\":\"d1\"}},\"spec\":{\"containers\":[{"
                  "\"name\":\"nginx\",\"image\":\"nginx:1\",\"command\":[\"sh\"],\"ports\":[{\"containerPort\":80}],"
                  "\"resources\":{\"limits\":{\"cpu\":\"100m\"}}}],\"terminationGracePeriodSeconds\":-1}},"
                  "\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":1,\"maxSurge\":\"25%\"}}},"
                  "\"status\":{}}");
}

static void test_service(void **state)
{
  (void)state;
  struct enc raw = {0}, md = {0}, spec = {0}, port = {0}, tp = {0}, st = {0}, lb = {0}, e = {0};
  objmeta(&md, "s1", "default");
  put_msg(&raw, 1, &md);
  put_str(&port, 1, "80-8080");
  put_str(&port, 2, "TCP");
  put_int(&port, 3, 80);
  put_int(&tp, 2, 8080);
  put_msg(&port, 4, &tp);
  put_int(&port, 5, 0);
  put_msg(&spec, 1, &port);
  put_map(&spec, 2, "app", "s1", 2);
  put_str(&spec, 4, "ClusterIP");
  put_int(&spec, 12, 0);
  put_msg(&raw, 2, &spec);
  put_msg(&st, 1, &lb);
  put_msg(&raw, 3, &st);
  envelope(&e, "v1", "Service", &raw);
  expect_json(&e, "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"s1\",\"namespace\":\"default\"},"
                  "\"spec\":{\"ports\":[{\"name\":\"80-8080\",\"protocol\":\"TCP\",\"port\":80,\"targetPort\":8080}],"
                  "\"selector\":{\"app\":\"s1\"},\"type\":\"ClusterIP\"},\"status\":{\"loadBalancer\":{}}}");
  /* a load balancer ingress entry is outside the tables */
  struct enc raw2 = {0}, st2 = {0}, lb2 = {0}, ing = {0}, e2 = {0};
  put_str(&ing, 1, "10.0.0.1");
  put_msg(&lb2, 1, &ing);
  put_msg(&st2, 1, &lb2);
  put_msg(&raw2, 3, &st2);
  envelope(&e2, "v1", "Service", &raw2);
  expect_error(&e2, -ENOTSUP, "field 1 of k8s.io.api.core.v1.LoadBalancerStatus");
}

/* What kubectl auth can-i and whoami send, and a SubjectAccessReview about
 * a non-resource path as an authorization filter sends one. */
static void test_review_kinds(void **state)
{
  (void)state;
  struct enc ra = {0}, spec = {0}, raw = {0}, e = {0}, empty = {0};
  put_str(&ra, 1, "default");
  put_str(&ra, 2, "list");
  put_str(&ra, 4, "v1");
  put_str(&ra, 5, "configmaps");
  put_msg(&spec, 1, &ra);
  put_msg(&raw, 1, &empty);
  put_msg(&raw, 2, &spec);
  put_msg(&raw, 3, &empty);
  envelope(&e, "authorization.k8s.io/v1", "SelfSubjectAccessReview", &raw);
  expect_json(&e, "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SelfSubjectAccessReview\","
                  "\"metadata\":{},\"spec\":{\"resourceAttributes\":{\"namespace\":\"default\","
                  "\"verb\":\"list\",\"version\":\"v1\",\"resource\":\"configmaps\"}},\"status\":{}}");
  struct enc nra = {0}, sspec = {0}, sraw = {0}, se = {0};
  put_str(&nra, 1, "/metrics");
  put_str(&nra, 2, "get");
  put_msg(&sspec, 2, &nra);
  put_str(&sspec, 3, "system:serviceaccount:obs:scraper");
  put_str(&sspec, 4, "system:serviceaccounts");
  put_str(&sspec, 4, "system:authenticated");
  put_msg(&sraw, 2, &sspec);
  envelope(&se, "authorization.k8s.io/v1", "SubjectAccessReview", &sraw);
  expect_json(&se, "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\","
                   "\"spec\":{\"nonResourceAttributes\":{\"path\":\"/metrics\",\"verb\":\"get\"},"
                   "\"user\":\"system:serviceaccount:obs:scraper\","
                   "\"groups\":[\"system:serviceaccounts\",\"system:authenticated\"]}}");
  struct enc tspec = {0}, traw = {0}, te = {0};
  put_str(&tspec, 1, "tok");
  put_str(&tspec, 2, "aud");
  put_msg(&traw, 2, &tspec);
  envelope(&te, "authentication.k8s.io/v1", "TokenReview", &traw);
  expect_json(&te, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\","
                   "\"spec\":{\"token\":\"tok\",\"audiences\":[\"aud\"]}}");
  /* extra (field 5) is outside the tables: refused, never dropped */
  struct enc xspec = {0}, xraw = {0}, xe = {0};
  put_str(&xspec, 5, "x");
  put_msg(&xraw, 2, &xspec);
  envelope(&xe, "authorization.k8s.io/v1", "SubjectAccessReview", &xraw);
  expect_error(&xe, -ENOTSUP, "field 5 of k8s.io.api.authorization.v1.SubjectAccessReviewSpec");
}

static void test_empty_raw(void **state)
{
  (void)state;
  struct enc raw = {0}, e = {0};
  envelope(&e, "v1", "ServiceAccount", &raw);
  expect_json(&e, "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\"}");
}

/* ---- refusals ---- */

static void test_bad_magic(void **state)
{
  (void)state;
  struct enc e = {0};
  memcpy(e.b, "{\"a\"", 4);
  e.n = 4;
  expect_error(&e, -EINVAL, "expected prefix [107 56 115 0]");
  e.n = 2;
  expect_error(&e, -EINVAL, "expected prefix");
}

static void test_truncation(void **state)
{
  (void)state;
  struct enc raw = {0}, md = {0}, e = {0};
  objmeta(&md, "x", "default");
  put_msg(&raw, 1, &md);
  envelope(&e, "v1", "ConfigMap", &raw);
  struct enc cut = e;
  cut.n -= 3;                   /* raw's length now exceeds the body */
  expect_error(&cut, -EINVAL, "exceeds the message");
  struct enc v = {0};
  memcpy(v.b, "k8s\0\x0a\x80", 6); /* tag then an unterminated varint */
  v.n = 6;
  expect_error(&v, -EINVAL, "truncated varint");
  struct enc big = {0};
  memcpy(big.b, "k8s\0\x0a", 5);
  memset(big.b + 5, 0xff, 10);
  big.b[15] = 0x01;
  big.n = 16;
  expect_error(&big, -EINVAL, "overflows 64 bits");
}

static void test_unknown_field_and_kind(void **state)
{
  (void)state;
  struct enc raw = {0}, e = {0};
  put_str(&raw, 99, "x");
  envelope(&e, "v1", "ConfigMap", &raw);
  expect_error(&e, -ENOTSUP, "field 99 of k8s.io.api.core.v1.ConfigMap");

  struct enc raw2 = {0}, c = {0}, ps = {0}, tpl = {0}, spec = {0}, e2 = {0};
  put_str(&c, 10, "probe"); /* livenessProbe: outside the tables */
  put_msg(&ps, 2, &c);
  put_msg(&tpl, 2, &ps);
  put_msg(&spec, 3, &tpl);
  put_msg(&raw2, 2, &spec);
  envelope(&e2, "apps/v1", "Deployment", &raw2);
  expect_error(&e2, -ENOTSUP, "field 10 of k8s.io.api.core.v1.Container");

  struct enc raw3 = {0}, e3 = {0};
  envelope(&e3, "rbac.authorization.k8s.io/v1", "Role", &raw3);
  expect_error(&e3, -ENOTSUP, "not rbac.authorization.k8s.io/v1 Role");
}

static void test_wire_types_and_encoding(void **state)
{
  (void)state;
  struct enc raw = {0}, e = {0};
  put_int(&raw, 2, 5); /* data is a map: varint is wrong */
  envelope(&e, "v1", "ConfigMap", &raw);
  expect_error(&e, -EINVAL, "wire type 0");

  struct enc raw2 = {0}, e2 = {0};
  put_str(&raw2, 4, "yes"); /* immutable is a bool varint */
  envelope(&e2, "v1", "ConfigMap", &raw2);
  expect_error(&e2, -EINVAL, "wire type 2");

  struct enc raw3 = {0}, e3 = {0};
  envelope(&e3, "v1", "ConfigMap", &raw3);
  put_str(&e3, 3, "gzip");
  expect_error(&e3, -ENOTSUP, "contentEncoding \"gzip\"");

  struct enc e4 = {0};
  memcpy(e4.b, "k8s\0", 4);
  e4.n = 4;
  put_int(&e4, 1, 1); /* typeMeta as varint */
  expect_error(&e4, -EINVAL, "runtime.Unknown field 1");

  struct enc raw5 = {0}, md = {0}, ent = {0}, e5 = {0};
  put_bytes(&ent, 1, "a\0b", 3); /* a label key with a NUL byte */
  put_bytes(&ent, 2, "v", 1);
  put_msg(&md, 11, &ent);
  put_msg(&raw5, 1, &md);
  envelope(&e5, "v1", "ConfigMap", &raw5);
  expect_error(&e5, -EINVAL, "NUL byte");

  struct enc raw6 = {0}, md6 = {0}, e6 = {0};
  put_str(&md6, 1, "bad\xf3 "); /* truncated UTF-8 sequence */
  put_msg(&raw6, 1, &md6);
  envelope(&e6, "v1", "ConfigMap", &raw6);
  expect_error(&e6, -EINVAL, "field name of k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta is not valid UTF-8");

  struct enc raw7 = {0}, e7 = {0};
  put_map(&raw7, 2, "k", "\xed\xa0\x80", 3); /* a UTF-16 surrogate */
  envelope(&e7, "v1", "ConfigMap", &raw7);
  expect_error(&e7, -EINVAL, "map entry is not valid UTF-8");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_configmap),
    cmocka_unit_test(test_secret_and_pointer_bool),
    cmocka_unit_test(test_namespace_time_and_repeated),
    cmocka_unit_test(test_deployment),
    cmocka_unit_test(test_service),
    cmocka_unit_test(test_review_kinds),
    cmocka_unit_test(test_empty_raw),
    cmocka_unit_test(test_bad_magic),
    cmocka_unit_test(test_truncation),
    cmocka_unit_test(test_unknown_field_and_kind),
    cmocka_unit_test(test_wire_types_and_encoding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
