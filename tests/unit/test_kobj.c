/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/kube/kobj.c against the real fixtures (tests/fixtures). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "watch/decode.h"
#include "testutil.h"

static void assert_str(kc_str s, const char *want) {
  if (!want) {
    assert_null(s.ptr);
    assert_int_equal(s.len, 0);
    return;
  }
  char buf[512];
  size_t n = s.len < sizeof buf - 1 ? s.len : sizeof buf - 1;
  memcpy(buf, s.ptr, n);
  buf[n] = '\0';
  assert_string_equal(buf, want);
}

/* Expected values were read with python3's json module; json_len is
 * len(json.dumps(obj, separators=(',',':'), ensure_ascii=False)), the same
 * minified text we store. */
static const struct fix {
  const char *file, *kind, *api_version, *ns, *name, *uid, *rv, *cts;
  int64_t generation;
  unsigned nlabels;
  size_t json_len;
} fixtures[] = {
    {"clusteroperator-insights-operator-network.json", "ClusterOperator", "config.openshift.io/v1",
     NULL, "network", "533e85ab-7feb-4c04-83f5-a9837263a683", "1782179", "2021-07-07T11:02:54Z", 1,
     0, 8417},
    {"configmap-k9s.json", "ConfigMap", "v1", "default", "blee",
     "d587a666-87dc-11e9-a8e8-42010a80015b", "27009817", "2019-06-05T21:56:55Z", 0, 0, 542},
    {"deployment-k9s.json", "Deployment", "apps/v1", "icx", "icx-db",
     "6f6143bc-a5f3-11e9-990f-42010a800218", "37116271", "2019-07-14T04:54:17Z", 1, 1, 2791},
    {"event-k9s.json", "Event", "v1", "default", "hello-1567197780-mn4mv.15bfce150bd764dd",
     "c443d4b3-cb66-11e9-990f-42010a800218", "590733", "2019-08-30T20:43:05Z", 0, 0, 857},
    {"node-kubernetes-fieldmanager.json", "Node", "v1", NULL, "node-default-pool-something",
     "0c24d0e1-a265-11e9-abe4-42010a80026b", "211582541", "2019-07-09T16:17:29Z", 0, 9, 10382},
    {"pod-insights-operator-prometheus.json", NULL, NULL, "openshift-monitoring",
     "prometheus-k8s-0", "4f346c63-4d5b-461b-898c-9c0fca14b797", "1782140",
     "2021-07-07T16:15:18Z", 0, 6, 18642},
    {"pod-k8s-openapi-coredns.json", "Pod", "v1", "kube-system", "coredns-55cb58b774-8mcpn",
     "a89692bf-270a-4317-b995-1c97720191a9", "454", "2024-09-12T06:20:57Z", 0, 2, 7552},
    {"pod-k9s-sidecar.json", "Pod", "v1", "default", "sleep",
     "35079257-0ffb-4b09-b2c1-3c0d416f2523", "17852", "2024-08-24T01:54:32Z", 0, 0, 4895},
    {"replicaset-k9s.json", "ReplicaSet", "extensions/v1beta1", "icx", "icx-db-7d4b578979",
     "6f637a60-a5f3-11e9-990f-42010a800218", "37116270", "2019-07-14T04:54:17Z", 1, 2, 1714},
    {"secret-k9s.json", "Secret", "v1", "default", "s1", "c3e3d3f3-cb32-11e9-990f-42010a800218",
     "49724026", "2019-08-30T14:30:50Z", 0, 1, 673},
    {"service-kubectl-neat.json", "Service", "v1", "default", "myappservice",
     "409de7fb-66cd-11e9-b6fa-0800271788ca", "187503", "2019-04-24T20:12:14Z", 0, 0, 458},
};

static void test_fixture_identity(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
    const struct fix *f = &fixtures[i];
    kc_obj *o = tu_fixture_obj(f->file, NULL);
    assert_int_equal(o->refs, 1);
    assert_str(kc_obj_kind(o), f->kind);
    assert_str(kc_obj_api_version(o), f->api_version);
    assert_str(kc_obj_namespace(o), f->ns);
    assert_str(kc_obj_name(o), f->name);
    assert_str(kc_obj_uid(o), f->uid);
    assert_str(kc_obj_resource_version(o), f->rv);
    assert_str(kc_obj_creation_timestamp(o), f->cts);
    assert_int_equal(o->generation, f->generation);
    assert_false(o->deleting);
    assert_int_equal(o->nlabels, f->nlabels);
    assert_int_equal(o->json_len, f->json_len);
    assert_int_equal(strlen(o->json), o->json_len);
    /* Minified text parses again to the identical text. */
    char err[128];
    kc_obj *again = kc_obj_parse(o->json, o->json_len, NULL, err, sizeof err);
    assert_non_null(again);
    assert_int_equal(again->json_len, o->json_len);
    assert_memory_equal(again->json, o->json, o->json_len);
    /* Memory: the text plus a small header, not a multiple. */
    assert_true(kc_obj_mem_size(o) >= sizeof(kc_obj) + o->json_len + 1);
    assert_true(kc_obj_mem_size(o) <= sizeof(kc_obj) + o->json_len + 64 + 16 * o->nlabels);
    kc_obj_unref(again);
    kc_obj_unref(o);
  }
}

static void test_labels_sorted(void **state) {
  (void)state;
  kc_obj *o = tu_fixture_obj("node-kubernetes-fieldmanager.json", NULL);
  static const char *keys[] = {"beta.kubernetes.io/arch",
                               "beta.kubernetes.io/fluentd-ds-ready",
                               "beta.kubernetes.io/instance-type",
                               "beta.kubernetes.io/os",
                               "cloud.google.com/gke-nodepool",
                               "cloud.google.com/gke-os-distribution",
                               "failure-domain.beta.kubernetes.io/region",
                               "failure-domain.beta.kubernetes.io/zone",
                               "kubernetes.io/hostname"};
  static const char *vals[] = {"amd64", "true", "n1-standard-4", "linux", "default-pool", "cos",
                               "us-central1", "us-central1-b", "node-default-pool-something"};
  assert_int_equal(o->nlabels, 9);
  for (unsigned i = 0; i < 9; i++) {
    assert_str(kc_obj_label_key(o, i), keys[i]);
    assert_str(kc_obj_label_value(o, i), vals[i]);
    if (i) assert_true(kc_str_cmp(kc_obj_label_key(o, i - 1), kc_obj_label_key(o, i)) < 0);
    assert_str(kc_obj_label(o, kc_str_c(keys[i])), vals[i]);
  }
  assert_null(kc_obj_label(o, kc_str_c("beta.kubernetes.io")).ptr);
  assert_null(kc_obj_label(o, kc_str_c("zzz")).ptr);
  assert_null(kc_obj_label(o, kc_str_c("")).ptr);
  kc_obj_unref(o);

  /* Unsorted in the text, a duplicated key (last wins), more than 16 labels
   * (the qsort path), a non-string value (ignored). */
  char text[4096];
  size_t n = (size_t)snprintf(text, sizeof text, "{\"metadata\":{\"labels\":{\"b\":\"1\",\"a\":\"2\","
                                                  "\"b\":\"3\",\"num\":5");
  for (int i = 30; i > 0; i--) n += (size_t)snprintf(text + n, sizeof text - n, ",\"k%02d\":\"v%d\"", i, i);
  snprintf(text + n, sizeof text - n, "}}}");
  char err[128];
  o = kc_obj_parse(text, strlen(text), NULL, err, sizeof err);
  assert_non_null(o);
  assert_int_equal(o->nlabels, 32);
  assert_str(kc_obj_label_key(o, 0), "a");
  assert_str(kc_obj_label(o, kc_str_c("b")), "3");
  assert_str(kc_obj_label(o, kc_str_c("k07")), "v7");
  assert_null(kc_obj_label(o, kc_str_c("num")).ptr);
  for (unsigned i = 1; i < o->nlabels; i++)
    assert_true(kc_str_cmp(kc_obj_label_key(o, i - 1), kc_obj_label_key(o, i)) < 0);
  kc_obj_unref(o);
}

static void test_key(void **state) {
  (void)state;
  char buf[64];
  kc_obj *o = tu_fixture_obj("pod-k8s-openapi-coredns.json", NULL);
  assert_int_equal(kc_obj_key(o, buf, sizeof buf), strlen("kube-system/coredns-55cb58b774-8mcpn"));
  assert_string_equal(buf, "kube-system/coredns-55cb58b774-8mcpn");
  assert_int_equal(kc_obj_key(o, buf, 36), -ENOSPC); /* needs 36 + NUL */
  assert_int_equal(kc_obj_key(o, buf, 37), 36);
  kc_obj_unref(o);
  o = tu_fixture_obj("node-kubernetes-fieldmanager.json", NULL);
  assert_int_equal(kc_obj_key(o, buf, sizeof buf), strlen("node-default-pool-something"));
  assert_string_equal(buf, "node-default-pool-something");
  kc_obj_unref(o);
}

static void test_get(void **state) {
  (void)state;
  kc_obj *o = tu_fixture_obj("pod-insights-operator-prometheus.json", NULL);
  kc_json_value v;
  char buf[256];
  assert_int_equal(kc_obj_get(o, "spec.nodeName", &v), 0);
  assert_int_equal(v.type, KC_JSON_STRING);
  assert_int_equal(kc_json_string(&v, buf, sizeof buf),
                   strlen("worker-0.imeixner20210707.lab.upshift.rdu2.redhat.com"));
  assert_string_equal(buf, "worker-0.imeixner20210707.lab.upshift.rdu2.redhat.com");
  assert_int_equal(kc_obj_get(o, "spec.containers[2].name", &v), 0);
  assert_int_equal(kc_json_string(&v, buf, sizeof buf), 14);
  assert_string_equal(buf, "thanos-sidecar");
  assert_int_equal(kc_obj_get(o, "spec.containers[2].ports[1].containerPort", &v), 0);
  assert_int_equal(v.type, KC_JSON_NUMBER);
  int64_t i64;
  assert_int_equal(kc_json_int64(&v, &i64), 0);
  assert_int_equal(i64, 10901);
  assert_int_equal(kc_json_scalar_text(&v, buf, sizeof buf), 5);
  assert_string_equal(buf, "10901");
  assert_int_equal(kc_obj_get(o, "spec.containers[7]", &v), 0); /* 7 containers */
  assert_int_equal(v.type, KC_JSON_ABSENT);
  assert_int_equal(kc_obj_get(o, "spec.containers", &v), 0);
  assert_int_equal(v.type, KC_JSON_ARRAY);
  assert_true(v.raw.ptr[0] == '[' && v.raw.ptr[v.raw.len - 1] == ']');
  assert_int_equal(kc_obj_get(o, "metadata", &v), 0);
  assert_int_equal(v.type, KC_JSON_OBJECT);
  assert_int_equal(kc_obj_get(o, "metadata.labels[\"statefulset.kubernetes.io/pod-name\"]", &v), 0);
  assert_int_equal(kc_json_string(&v, buf, sizeof buf), 16);
  assert_string_equal(buf, "prometheus-k8s-0");
  assert_int_equal(kc_json_string(&v, buf, 16), -ENOSPC);
  assert_int_equal(kc_obj_get(o, "metadata.ownerReferences[0].controller", &v), 0);
  assert_int_equal(v.type, KC_JSON_BOOL);
  assert_true(kc_json_true(&v));
  assert_int_equal(kc_json_scalar_text(&v, buf, sizeof buf), 4);
  assert_int_equal(kc_obj_get(o, "spec.nodeName.x", &v), 0); /* through a scalar */
  assert_int_equal(v.type, KC_JSON_ABSENT);
  assert_int_equal(kc_obj_get(o, "spec.nope", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  assert_int_equal(kc_json_scalar_text(&v, buf, sizeof buf), 0);
  assert_string_equal(buf, "");
  assert_int_equal(kc_obj_get(o, "spec[0]", &v), 0); /* index on an object */
  assert_int_equal(v.type, KC_JSON_ABSENT);
  assert_int_equal(kc_json_string(&v, buf, sizeof buf), -EINVAL);
  assert_int_equal(kc_json_int64(&v, &i64), -EINVAL);
  /* An element visited as a bare value. */
  assert_int_equal(kc_obj_get(o, "spec.containers[3]", &v), 0);
  kc_json_value w;
  assert_int_equal(kc_json_get(v.raw, "ports[0].containerPort", &w), 0);
  assert_int_equal(kc_json_int64(&w, &i64), 0);
  assert_int_equal(i64, 9091);
  assert_int_equal(kc_json_scalar_text(&v, buf, sizeof buf), -EINVAL);
  /* Malformed paths. */
  static const char *bad[] = {"", ".a", "a.", "a..b", "a[", "a[x]", "a.[0]", "a[0", "a[\"b\"",
                              "a[\"b]", "a[]", "a]b", "a\"b", "a[1]b"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v.type = KC_JSON_STRING;
    if (kc_obj_get(o, bad[i], &v) != -EINVAL) fail_msg("path '%s' accepted", bad[i]);
  }
  assert_int_equal(kc_obj_get(o, NULL, &v), -EINVAL);
  /* Cluster-scoped CR: bracket first segment, deep path. */
  kc_obj_unref(o);
  o = tu_fixture_obj("clusteroperator-insights-operator-network.json", NULL);
  assert_int_equal(kc_obj_get(o, "[\"status\"].conditions[0].type", &v), 0);
  assert_int_equal(v.type, KC_JSON_STRING);
  kc_obj_unref(o);
}

struct collect {
  int n;
  int stop_after;
  char vals[16][64];
};

static bool collect_cb(const kc_json_value *v, void *ud) {
  struct collect *c = ud;
  if (c->n < 16) {
    if (v->type == KC_JSON_STRING) kc_json_string(v, c->vals[c->n], sizeof c->vals[0]);
    else kc_json_scalar_text(v, c->vals[c->n], sizeof c->vals[0]);
  }
  c->n++;
  return c->stop_after == 0 || c->n < c->stop_after;
}

static void test_get_each(void **state) {
  (void)state;
  kc_obj *o = tu_fixture_obj("pod-insights-operator-prometheus.json", NULL);
  struct collect c = {0};
  assert_int_equal(kc_obj_get_each(o, "metadata.ownerReferences[].uid", collect_cb, &c), 1);
  assert_string_equal(c.vals[0], "8e2bf3fd-dc62-4904-8023-30ff9809caf9");
  memset(&c, 0, sizeof c);
  assert_int_equal(kc_obj_get_each(o, "spec.containers[].name", collect_cb, &c), 7);
  assert_string_equal(c.vals[0], "prometheus");
  assert_string_equal(c.vals[6], "kube-rbac-proxy-thanos");
  memset(&c, 0, sizeof c);
  /* Nested [] with elements that lack the field (skipped). */
  assert_int_equal(kc_obj_get_each(o, "spec.containers[].ports[].containerPort", collect_cb, &c),
                   5);
  assert_string_equal(c.vals[0], "10902");
  assert_string_equal(c.vals[4], "10902");
  memset(&c, 0, sizeof c);
  c.stop_after = 3;
  assert_int_equal(kc_obj_get_each(o, "spec.containers[].name", collect_cb, &c), 3);
  memset(&c, 0, sizeof c);
  /* No [] at all: one value. Absent: zero. */
  assert_int_equal(kc_obj_get_each(o, "spec.nodeName", collect_cb, &c), 1);
  assert_int_equal(kc_obj_get_each(o, "spec.nothing[].x", collect_cb, &c), 0);
  assert_int_equal(kc_obj_get_each(o, "spec.nodeName[]", collect_cb, &c), 0);
  assert_int_equal(kc_obj_get_each(o, "spec..containers[]", collect_cb, &c), -EINVAL);
  assert_int_equal(kc_obj_get_each(o, "spec.containers[].", collect_cb, &c), -EINVAL);
  kc_obj_unref(o);
}

static void test_escapes_and_utf8(void **state) {
  (void)state;
  /* Whitespace everywhere, escapes (\/ and \u00e9 become raw bytes; control
   * characters stay escaped), non-ASCII kept as UTF-8, surrogate pairs. */
  const char *in =
      " {\n \"kind\" : \"Config\\/Map\" , \"metadata\":{\"name\":\"caf\\u00e9\",\"namespace\":"
      "\"ns\"},\n\"data\":{\"a\\\"b\":\"line1\\nline2\\t\\u0001\\\\ \xc3\xa9\\ud83d\\ude00\","
      "\"n\":[1.5e3,-0,true,false,null,{},[]]}}\r\n";
  const char *want = "{\"kind\":\"Config/Map\",\"metadata\":{\"name\":\"caf\xc3\xa9\",\"namespace\":"
                     "\"ns\"},\"data\":{\"a\\\"b\":\"line1\\nline2\\t\\u0001\\\\ \xc3\xa9\xf0\x9f\x98\x80\","
                     "\"n\":[1.5e3,-0,true,false,null,{},[]]}}";
  char err[128];
  kc_obj *o = kc_obj_parse(in, strlen(in), NULL, err, sizeof err);
  assert_non_null(o);
  assert_string_equal(o->json, want);
  assert_str(kc_obj_kind(o), "Config/Map");
  assert_str(kc_obj_name(o), "caf\xc3\xa9");
  kc_json_value v;
  char buf[128];
  assert_int_equal(kc_obj_get(o, "data[\"a\\\"b\"]", &v), -EINVAL); /* no escapes in paths */
  assert_int_equal(kc_obj_get(o, "data.a\"b", &v), -EINVAL);
  assert_int_equal(kc_obj_get(o, "data.n[0]", &v), 0);
  assert_int_equal(v.type, KC_JSON_NUMBER);
  int64_t i64;
  assert_int_equal(kc_json_int64(&v, &i64), -EINVAL); /* not an integer */
  assert_int_equal(kc_obj_get(o, "data.n[4]", &v), 0);
  assert_int_equal(v.type, KC_JSON_NULL);
  assert_int_equal(kc_obj_get(o, "data.n[5]", &v), 0);
  assert_int_equal(v.type, KC_JSON_OBJECT);
  assert_int_equal(v.raw.len, 2);
  assert_int_equal(kc_obj_get(o, "data.n[6]", &v), 0);
  assert_int_equal(v.type, KC_JSON_ARRAY);
  assert_int_equal(kc_obj_get(o, "data.n[7]", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  kc_obj_unref(o);

  /* kc_json_get on foreign text with escaped keys and whitespace. */
  const char *t = "{ \"a\\u002eb\" : { \"x\" : \"\\u00e9\\ud83d\\ude00\\/\" } , \"n\": -9223372036854775808 ,"
                  " \"big\": 9223372036854775808 }";
  kc_str js = kc_str_c(t);
  assert_int_equal(kc_json_get(js, "[\"a.b\"].x", &v), 0);
  assert_int_equal(kc_json_string(&v, buf, sizeof buf), 7);
  assert_string_equal(buf, "\xc3\xa9\xf0\x9f\x98\x80/");
  assert_int_equal(kc_json_get(js, "n", &v), 0);
  assert_int_equal(kc_json_int64(&v, &i64), 0);
  assert_true(i64 == INT64_MIN);
  assert_int_equal(kc_json_get(js, "big", &v), 0);
  assert_int_equal(kc_json_int64(&v, &i64), -ERANGE);
}

static void test_transform(void **state) {
  (void)state;
  const char *drop[] = {"metadata.managedFields"};
  kc_transform t = {.drop = drop, .ndrop = 1, .metadata_only = false};
  kc_obj *full = tu_fixture_obj("pod-k8s-openapi-coredns.json", NULL);
  kc_obj *o = tu_fixture_obj("pod-k8s-openapi-coredns.json", &t);
  kc_json_value v;
  assert_int_equal(kc_obj_get(full, "metadata.managedFields[0].manager", &v), 0);
  assert_int_equal(v.type, KC_JSON_STRING);
  assert_int_equal(kc_obj_get(o, "metadata.managedFields", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  assert_null(strstr(o->json, "managedFields"));
  assert_int_equal(o->json_len, 4288); /* python: del metadata.managedFields */
  assert_true(kc_str_eq(kc_obj_name(o), kc_obj_name(full)));
  assert_true(kc_str_eq(kc_obj_uid(o), kc_obj_uid(full)));
  assert_true(kc_str_eq(kc_obj_resource_version(o), kc_obj_resource_version(full)));
  assert_int_equal(o->nlabels, 2);
  assert_str(kc_obj_label(o, kc_str_c("k8s-app")), "kube-dns");
  assert_int_equal(kc_obj_get(o, "metadata.ownerReferences[0].kind", &v), 0); /* neighbour kept */
  assert_int_equal(v.type, KC_JSON_STRING);
  assert_int_equal(kc_obj_get(o, "status.qosClass", &v), 0);
  assert_int_equal(v.type, KC_JSON_STRING);
  kc_obj_unref(o);

  /* metadata-only */
  kc_transform mo = {.drop = NULL, .ndrop = 0, .metadata_only = true};
  o = tu_fixture_obj("pod-k8s-openapi-coredns.json", &mo);
  assert_int_equal(o->json_len, 3765); /* python: {kind, apiVersion, metadata} */
  assert_int_equal(kc_obj_get(o, "spec", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  assert_int_equal(kc_obj_get(o, "status", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  assert_str(kc_obj_kind(o), "Pod");
  assert_str(kc_obj_name(o), "coredns-55cb58b774-8mcpn");
  assert_int_equal(o->nlabels, 2);
  kc_obj_unref(o);
  kc_obj_unref(full);

  /* Bracketed key, [] (each element), several paths, a path that never matches. */
  const char *drop2[] = {"metadata.annotations[\"kubectl.kubernetes.io/last-applied-configuration\"]",
                         "spec.template.spec.containers[].resources", "no.such.path", "status"};
  kc_transform t2 = {.drop = drop2, .ndrop = 4, .metadata_only = false};
  o = tu_fixture_obj("deployment-k9s.json", &t2);
  assert_null(strstr(o->json, "last-applied-configuration"));
  assert_non_null(strstr(o->json, "deployment.kubernetes.io/revision"));
  assert_int_equal(kc_obj_get(o, "spec.template.spec.containers[0].resources", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  assert_int_equal(kc_obj_get(o, "spec.template.spec.containers[0].image", &v), 0);
  assert_int_equal(v.type, KC_JSON_STRING);
  assert_int_equal(kc_obj_get(o, "status", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  char err[128];
  kc_obj *re = kc_obj_parse(o->json, o->json_len, NULL, err, sizeof err); /* still valid JSON */
  assert_non_null(re);
  kc_obj_unref(re);
  kc_obj_unref(o);

  /* Bad transforms. */
  const char *bad1[] = {"metadata..x"};
  kc_transform tb = {.drop = bad1, .ndrop = 1, .metadata_only = false};
  char text[] = "{}";
  assert_null(kc_obj_parse(text, 2, &tb, err, sizeof err));
  assert_string_equal(err, "invalid transform");
  const char *bad2[] = {"spec.containers[0]"};
  tb.drop = bad2;
  assert_null(kc_obj_parse(text, 2, &tb, err, sizeof err));
}

/* Builds {"metadata":{"name":"n"}} through the event API. */
static kc_obj *build_small(kc_obj_builder *b) {
  kc_obj_builder_reset(b);
  assert_int_equal(kc_obj_builder_start_map(b), 0);
  assert_int_equal(kc_obj_builder_key(b, "metadata", 8), 0);
  assert_int_equal(kc_obj_builder_start_map(b), 0);
  assert_int_equal(kc_obj_builder_key(b, "name", 4), 0);
  assert_int_equal(kc_obj_builder_string(b, "n", 1), 0);
  assert_int_equal(kc_obj_builder_end_map(b), 0);
  assert_int_equal(kc_obj_builder_end_map(b), 0);
  kc_obj *o = kc_obj_builder_finish(b);
  assert_non_null(o);
  return o;
}

/* Shapes the API server never sends are reported, reset forgets them. */
static void test_shape_error(void **state) {
  kc_obj_builder *b = kc_obj_builder_new(NULL, 0);
  assert_non_null(b);
  kc_obj *o = build_small(b);
  assert_null(kc_obj_builder_shape_error(b));
  kc_obj_unref(o);
  /* {"metadata":{"name":"n","labels":{"a":"x","b":{}}}} */
  kc_obj_builder_reset(b);
  assert_int_equal(kc_obj_builder_start_map(b), 0);
  assert_int_equal(kc_obj_builder_key(b, "metadata", 8), 0);
  assert_int_equal(kc_obj_builder_start_map(b), 0);
  assert_int_equal(kc_obj_builder_key(b, "name", 4), 0);
  assert_int_equal(kc_obj_builder_string(b, "n", 1), 0);
  assert_int_equal(kc_obj_builder_key(b, "labels", 6), 0);
  assert_int_equal(kc_obj_builder_start_map(b), 0);
  assert_int_equal(kc_obj_builder_key(b, "a", 1), 0);
  assert_int_equal(kc_obj_builder_string(b, "x", 1), 0);
  assert_int_equal(kc_obj_builder_key(b, "b", 1), 0);
  assert_int_equal(kc_obj_builder_start_map(b), 0);
  assert_int_equal(kc_obj_builder_end_map(b), 0);
  assert_int_equal(kc_obj_builder_end_map(b), 0);
  assert_int_equal(kc_obj_builder_end_map(b), 0);
  assert_int_equal(kc_obj_builder_end_map(b), 0);
  o = kc_obj_builder_finish(b);
  assert_non_null(o); /* still built: the caller decides */
  assert_string_equal(kc_obj_builder_shape_error(b), "label \"b\" has an object value, not a string");
  assert_int_equal(o->nlabels, 1);
  kc_obj_unref(o);
  /* The first problem is the one reported; reset clears it. */
  kc_obj_builder_reset(b);
  assert_int_equal(kc_obj_builder_start_map(b), 0);
  assert_int_equal(kc_obj_builder_key(b, "metadata", 8), 0);
  assert_int_equal(kc_obj_builder_start_map(b), 0);
  assert_int_equal(kc_obj_builder_key(b, "name", 4), 0);
  assert_int_equal(kc_obj_builder_string(b, ".", 1), 0);
  assert_int_equal(kc_obj_builder_key(b, "labels", 6), 0);
  assert_int_equal(kc_obj_builder_bool(b, true), 0);
  assert_int_equal(kc_obj_builder_end_map(b), 0);
  assert_int_equal(kc_obj_builder_end_map(b), 0);
  o = kc_obj_builder_finish(b);
  assert_non_null(o);
  assert_string_equal(kc_obj_builder_shape_error(b), "metadata.name may not be \".\"");
  kc_obj_unref(o);
  o = build_small(b);
  assert_null(kc_obj_builder_shape_error(b));
  kc_obj_unref(o);
  kc_obj_builder_free(b);
}

/* kc_transform "Object type" on the re-emitting (non-raw) path; the
 * streaming path is covered in test_decode. */
static void test_type(void **state) {
  (void)state;
  char err[256];
  kc_obj *full = tu_fixture_obj("configmap-k9s.json", NULL);
  const char *drop[] = {"kind", "apiVersion"};
  kc_transform untyped = {.drop = drop, .ndrop = 2};
  kc_obj *bare = tu_fixture_obj("configmap-k9s.json", &untyped);
  assert_null(kc_obj_kind(bare).ptr);
  kc_transform typed = {.kind = "ConfigMap", .api_version = "v1"};
  kc_obj *o = kc_obj_parse(bare->json, bare->json_len, &typed, err, sizeof err);
  assert_non_null(o);
  const char *pre = "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",";
  assert_int_equal(o->json_len, strlen(pre) + bare->json_len - 1);
  assert_memory_equal(o->json, pre, strlen(pre));
  assert_string_equal(o->json + strlen(pre), bare->json + 1);
  assert_str(kc_obj_kind(o), "ConfigMap");
  assert_str(kc_obj_api_version(o), "v1");
  assert_true(kc_str_eq(kc_obj_name(o), kc_obj_name(full)));
  assert_true(kc_str_eq(kc_obj_namespace(o), kc_obj_namespace(full)));
  assert_true(kc_str_eq(kc_obj_uid(o), kc_obj_uid(full)));
  assert_true(kc_str_eq(kc_obj_resource_version(o), kc_obj_resource_version(full)));
  assert_true(kc_str_eq(kc_obj_creation_timestamp(o), kc_obj_creation_timestamp(full)));
  assert_int_equal(o->nlabels, full->nlabels);
  for (uint32_t i = 0; i < o->nlabels; i++) {
    assert_true(kc_str_eq(kc_obj_label_key(o, i), kc_obj_label_key(full, i)));
    assert_true(kc_str_eq(kc_obj_label_value(o, i), kc_obj_label_value(full, i)));
  }
  kc_json_value v;
  assert_int_equal(kc_obj_get(o, "metadata.name", &v), 0);
  assert_ptr_equal(v.raw.ptr + 1, kc_obj_name(o).ptr);
  kc_obj_unref(o);
  /* An object that has its type: the same text as without a type. */
  o = tu_fixture_obj("configmap-k9s.json", &typed);
  assert_string_equal(o->json, full->json);
  kc_obj_unref(o);
  kc_obj_unref(bare);
  kc_obj_unref(full);

  /* Metadata-only view, minified on the way. */
  const char *pom = "{ \"kind\" : \"PartialObjectMetadata\", \"apiVersion\": \"meta.k8s.io/v1\",\n"
                    "  \"metadata\": {\"name\": \"x\", \"labels\": {\"a\": \"b\"}} }";
  kc_transform mo = {.metadata_only = true, .kind = "Pod", .api_version = "v1"};
  o = kc_obj_parse(pom, strlen(pom), &mo, err, sizeof err);
  assert_non_null(o);
  assert_string_equal(o->json, "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
                               "{\"name\":\"x\",\"labels\":{\"a\":\"b\"}}}");
  assert_str(kc_obj_kind(o), "Pod");
  assert_str(kc_obj_name(o), "x");
  assert_str(kc_obj_label(o, kc_str_c("a")), "b");
  kc_obj_unref(o);
  /* A PartialObjectMetadata with another apiVersion is not the view. */
  const char *other = "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"x/v1\"}";
  o = kc_obj_parse(other, strlen(other), &mo, err, sizeof err);
  assert_non_null(o);
  assert_string_equal(o->json, other);
  kc_obj_unref(o);
  /* Only the apiVersion missing: kind replaced, apiVersion inserted. */
  const char *noav = "{\"metadata\":{},\"kind\":\"PartialObjectMetadata\"}";
  o = kc_obj_parse(noav, strlen(noav), &mo, err, sizeof err);
  assert_non_null(o);
  assert_string_equal(o->json, "{\"apiVersion\":\"v1\",\"metadata\":{},\"kind\":\"Pod\"}");
  assert_str(kc_obj_kind(o), "Pod");
  assert_str(kc_obj_api_version(o), "v1");
  kc_obj_unref(o);

  /* kc_obj_builder_set_type: set, change, clear; bad types leave it. */
  kc_obj_builder *b = kc_obj_builder_new(NULL, 0);
  assert_non_null(b);
  o = build_small(b);
  assert_string_equal(o->json, "{\"metadata\":{\"name\":\"n\"}}");
  kc_obj_unref(o);
  assert_int_equal(kc_obj_builder_set_type(b, kc_str_c("Lease"), kc_str_c("coordination.k8s.io/v1")), 0);
  o = build_small(b);
  assert_string_equal(o->json, "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\","
                               "\"metadata\":{\"name\":\"n\"}}");
  assert_str(kc_obj_name(o), "n");
  kc_obj_unref(o);
  assert_int_equal(kc_obj_builder_set_type(b, kc_str_c("Lease"), kc_str_c("")), -EINVAL);
  assert_int_equal(kc_obj_builder_set_type(b, (kc_str){"A\nB", 3}, kc_str_c("v1")), -EINVAL);
  assert_int_equal(kc_obj_builder_set_type(b, (kc_str){"LeaseList", 5}, kc_str_c("v1")), 0);
  o = build_small(b);
  assert_string_equal(o->json, "{\"kind\":\"Lease\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"n\"}}");
  kc_obj_unref(o);
  assert_int_equal(kc_obj_builder_set_type(b, kc_str_c(""), kc_str_c("")), 0);
  o = build_small(b);
  assert_string_equal(o->json, "{\"metadata\":{\"name\":\"n\"}}");
  assert_null(kc_obj_kind(o).ptr);
  kc_obj_unref(o);
  kc_obj_builder_free(b);
}

static void test_status_capture(void **state) {
  (void)state;
  const char *s = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                  "\"message\":\"too old resource version: 1200 (3400)\",\"reason\":\"Expired\","
                  "\"details\":{\"retryAfterSeconds\":3},\"code\":410}";
  kc_transform mo = {.drop = NULL, .ndrop = 0, .metadata_only = true};
  kc_status st;
  char err[128];
  kc_obj *o = kc_obj_parse_status(s, strlen(s), &mo, &st, err, sizeof err);
  assert_non_null(o);
  assert_int_equal(st.code, 410);
  assert_string_equal(st.status, "Failure");
  assert_string_equal(st.reason, "Expired");
  assert_string_equal(st.message, "too old resource version: 1200 (3400)");
  assert_int_equal(st.retry_after_seconds, 3);
  assert_string_equal(o->json, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{}}");
  kc_obj_unref(o);
  /* A Pod's map-valued status is not a Status string. */
  o = tu_fixture_obj("pod-k9s-sidecar.json", NULL);
  kc_obj_unref(o);
}

static void test_deleting_generation(void **state) {
  (void)state;
  const char *s = "{\"metadata\":{\"name\":\"x\",\"generation\":42,\"deletionTimestamp\":"
                  "\"2024-01-01T00:00:00Z\",\"creationTimestamp\":null}}";
  char err[128];
  kc_obj *o = kc_obj_parse(s, strlen(s), NULL, err, sizeof err);
  assert_non_null(o);
  assert_true(o->deleting);
  assert_int_equal(o->generation, 42);
  assert_null(kc_obj_creation_timestamp(o).ptr);
  assert_null(kc_obj_namespace(o).ptr);
  assert_int_equal(o->nlabels, 0);
  assert_null(o->labels);
  assert_ptr_equal(kc_obj_ref(o), o);
  assert_int_equal(o->refs, 2);
  kc_obj_unref(o);
  assert_int_equal(o->refs, 1);
  kc_obj_unref(o);
  kc_obj_unref(NULL);
}

static void test_large_object(void **state) {
  (void)state;
  /* A ConfigMap fixture with a 3 MiB value: larger than etcd's 1.5 MiB. */
  size_t flen;
  char *base = tu_fixture("objects/configmap-k9s.json", &flen);
  const size_t big = 3u << 20;
  size_t cap = flen + big + 64;
  char *text = malloc(cap);
  assert_non_null(text);
  char *brace = strrchr(base, '}');
  size_t head = (size_t)(brace - base);
  memcpy(text, base, head);
  size_t n = head;
  n += (size_t)snprintf(text + n, cap - n, ",\"binaryData\":{\"blob\":\"");
  memset(text + n, 'A', big);
  n += big;
  n += (size_t)snprintf(text + n, cap - n, "\"}}");
  char err[160];
  kc_obj *o = kc_obj_parse(text, n, NULL, err, sizeof err);
  assert_non_null(o);
  kc_json_value v;
  assert_int_equal(kc_obj_get(o, "binaryData.blob", &v), 0);
  assert_int_equal(v.raw.len, big + 2);
  assert_str(kc_obj_name(o), "blee");
  assert_true(kc_obj_mem_size(o) < o->json_len + 4096);
  kc_obj_unref(o);
  free(text);
  free(base);

  /* Over the 16 MiB limit: a clear error, no object. */
  size_t huge = KC_OBJ_MAX_BYTES + 16;
  text = malloc(huge + 32);
  assert_non_null(text);
  n = (size_t)sprintf(text, "{\"data\":\"");
  memset(text + n, 'x', huge);
  n += huge;
  n += (size_t)sprintf(text + n, "\"}");
  assert_null(kc_obj_parse(text, n, NULL, err, sizeof err));
  assert_non_null(strstr(err, "object larger than the limit of 16777216 bytes"));
  free(text);
}

static void test_errors(void **state) {
  (void)state;
  static const struct {
    const char *text;
    const char *msg;
  } cases[] = {
      {"", "premature EOF"},
      {"[1,2]", "not a JSON object"},
      {"\"str\"", "not a JSON object"},
      {"12", "not a JSON object"},
      {"null", "not a JSON object"},
      {"{\"a\":1", "premature EOF"},
      {"{\"a\":1} {}", "trailing garbage"},
      {"{\"a\":1,}", "invalid"},
      {"{\"a\":\"\xff\"}", "invalid bytes in UTF8 string"},
      {"{\"a\":\"\xc3\"}", "invalid bytes in UTF8 string"},
      {"{\"a\":tru}", "invalid"},
      {"{\"a\":\"\\x\"}", "invalid"},
      {"{a:1}", "invalid"},
  };
  char err[200];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kc_obj *o = kc_obj_parse(cases[i].text, strlen(cases[i].text), NULL, err, sizeof err);
    if (o) fail_msg("case %zu accepted", i);
    if (!strstr(err, cases[i].msg)) fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].msg);
  }
  /* Error text carries the offset. */
  assert_null(kc_obj_parse("{\"a\":1,}", 8, NULL, err, sizeof err));
  assert_true(strncmp(err, "offset ", 7) == 0);

  /* Depth limit. */
  size_t depth = KC_OBJ_MAX_DEPTH + 10;
  char *deep = malloc(depth * 2 + 16);
  assert_non_null(deep);
  size_t n = 0;
  deep[n++] = '{';
  memcpy(deep + n, "\"a\":", 4);
  n += 4;
  for (size_t i = 0; i < depth; i++) deep[n++] = '[';
  for (size_t i = 0; i < depth; i++) deep[n++] = ']';
  deep[n++] = '}';
  assert_null(kc_obj_parse(deep, n, NULL, err, sizeof err));
  assert_non_null(strstr(err, "nesting deeper"));
  /* Just inside the limit is fine. */
  n = 0;
  deep[n++] = '{';
  memcpy(deep + n, "\"a\":", 4);
  n += 4;
  for (size_t i = 0; i < KC_OBJ_MAX_DEPTH - 1; i++) deep[n++] = '[';
  for (size_t i = 0; i < KC_OBJ_MAX_DEPTH - 1; i++) deep[n++] = ']';
  deep[n++] = '}';
  kc_obj *o = kc_obj_parse(deep, n, NULL, err, sizeof err);
  assert_non_null(o);
  kc_obj_unref(o);
  free(deep);
}

static void test_str_helpers(void **state) {
  (void)state;
  kc_str a = kc_str_c("abc"), b = kc_str_c("abd"), e = kc_str_c(""), n = kc_str_c(NULL);
  assert_true(kc_str_eq(a, kc_str_c("abc")));
  assert_false(kc_str_eq(a, b));
  assert_true(kc_str_eq(e, n));
  assert_true(kc_str_eq_c(a, "abc"));
  assert_true(kc_str_cmp(a, b) < 0);
  assert_true(kc_str_cmp(b, a) > 0);
  assert_true(kc_str_cmp(kc_str_c("ab"), a) < 0);
  assert_int_equal(kc_str_cmp(a, a), 0);
}

/* The scanner skips strings with escaped quotes and backslashes and
 * brackets inside strings; a truncated escape is "absent", not a read past
 * the end. */
static void test_get_skips_escapes(void **state) {
  (void)state;
  static const char j[] =
      "{\"a\":\"x\\\"}{[\",\"b\":{\"c\":\"\\\\\",\"e\":[\"]\",\"\\\\\\\"\"]},\"d\":1}";
  kc_json_value v;
  assert_int_equal(kc_json_get((kc_str){j, sizeof j - 1}, "d", &v), 0);
  assert_int_equal(v.type, KC_JSON_NUMBER);
  assert_true(kc_str_eq_c(v.raw, "1"));
  assert_int_equal(kc_json_get((kc_str){j, sizeof j - 1}, "b.c", &v), 0);
  assert_true(kc_str_eq_c(v.raw, "\"\\\\\""));
  assert_int_equal(kc_json_get((kc_str){j, sizeof j - 1}, "b.e[1]", &v), 0);
  assert_true(kc_str_eq_c(v.raw, "\"\\\\\\\"\""));
  static const char cut[] = "{\"a\":\"x\\";
  assert_int_equal(kc_json_get((kc_str){cut, sizeof cut - 1}, "b", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
}

/* A Pod shaped like kube-apisim's generated ones: 4 labels. */
static const char POD4[] =
    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"web-7d4b9c-x2x7q\","
    "\"namespace\":\"ns-1\",\"uid\":\"0b5d5c3e-5f4e-4f7a-9c1e-2b8f3a6d7e10\","
    "\"resourceVersion\":\"1234\",\"creationTimestamp\":\"2026-12-01T10:00:00Z\","
    "\"labels\":{\"app\":\"web\",\"tier\":\"front\",\"pod-template-hash\":\"7d4b9c\","
    "\"app.kubernetes.io/managed-by\":\"kube-apisim\"}},"
    "\"spec\":{\"nodeName\":\"node-3\",\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1.27\"}]},"
    "\"status\":{\"phase\":\"Running\"}}";

/* An object costs its text, the header, 16 bytes per label and malloc's
 * share: kc_obj_mem_size <= offsetof(kc_obj, json) + json_len + N with
 * N = 1 (NUL) + 7 (labels 8-aligned after the text) + 4 x 16 (labels) +
 * 8 + 15 (malloc's chunk header, rounding to 16) = 95 for the 4 labels;
 * 32-byte labels (kc_str pairs) would need 159. */
static void test_mem_size_labels(void **state) {
  (void)state;
  char err[128];
  kc_obj *o = kc_obj_parse(POD4, strlen(POD4), NULL, err, sizeof err);
  assert_non_null(o);
  assert_int_equal(o->nlabels, 4);
  assert_int_equal(o->json_len, strlen(POD4));
  size_t n = 1 + 7 + 4 * 16 + 8 + 15;
  assert_true(kc_obj_mem_size(o) <= offsetof(kc_obj, json) + o->json_len + n);
  static const char *keys[] = {"app", "app.kubernetes.io/managed-by", "pod-template-hash", "tier"};
  static const char *vals[] = {"web", "kube-apisim", "7d4b9c", "front"};
  for (uint32_t i = 0; i < 4; i++) {
    kc_label l = kc_obj_label_at(o, i);
    assert_str(l.key, keys[i]);
    assert_str(l.value, vals[i]);
    /* slices into the object's own text, right after the key's quote */
    assert_true(l.key.ptr > o->json && l.key.ptr + l.key.len < o->json + o->json_len);
    assert_int_equal(l.key.ptr[-1], '"');
    assert_int_equal(l.value.ptr[l.value.len], '"');
  }
  kc_obj_unref(o);
}

/* Labels whose text is escaped: read through the accessors in the stored
 * (escaped) form, ordered bytewise in that form; a type stamp that inserts
 * text before them (kind/apiVersion) shifts every offset. */
static void test_label_accessors_escaped(void **state) {
  (void)state;
  const char *in = "{\"metadata\":{\"name\":\"x\",\"labels\":{\"z\\/y\":\"\\u00e9\","
                   "\"q\\\"k\":\"a\\\\b\",\"n\\tx\":\"\",\"app\":\"web\"}}}";
  static const char *keys[] = {"app", "n\\tx", "q\\\"k", "z/y"};
  static const char *vals[] = {"web", "", "a\\\\b", "\xc3\xa9"};
  static const kc_transform stamp = {.kind = "ConfigMap", .api_version = "v1"};
  for (int t = 0; t < 2; t++) {
    char err[128];
    kc_obj *o = kc_obj_parse(in, strlen(in), t ? &stamp : NULL, err, sizeof err);
    assert_non_null(o);
    if (t) assert_str(kc_obj_kind(o), "ConfigMap");
    assert_int_equal(o->nlabels, 4);
    for (uint32_t i = 0; i < 4; i++) {
      assert_str(kc_obj_label_key(o, i), keys[i]);
      assert_str(kc_obj_label_value(o, i), vals[i]);
      assert_str(kc_obj_label(o, kc_str_c(keys[i])), vals[i]);
      uint32_t at = 99;
      assert_true(kc_obj_label_find(o, kc_str_c(keys[i]), &at));
      assert_int_equal(at, i);
    }
    /* present but empty is not absent */
    assert_non_null(kc_obj_label(o, kc_str_c("n\\tx")).ptr);
    assert_false(kc_obj_label_find(o, kc_str_c("q\"k"), &(uint32_t){0})); /* unescaped form */
    kc_obj_unref(o);
  }
}

/* The header's identity slices are 8-byte offset+length pairs: with the
 * 88-byte header (refs, json_len, 7 x 8 bytes of slices, generation, flags,
 * nlabels, labels pointer) the 4-label Pod costs at most json_len + 88 + 95
 * (test_mem_size_labels); 16-byte kc_str slices would make it 144 + 95. */
static void test_mem_size_header(void **state) {
  (void)state;
  char err[128];
  kc_obj *o = kc_obj_parse(POD4, strlen(POD4), NULL, err, sizeof err);
  assert_non_null(o);
  assert_true(offsetof(kc_obj, json) <= 88);
  assert_true(kc_obj_mem_size(o) <= o->json_len + 88 + 95);
  assert_str(kc_obj_kind(o), "Pod");
  assert_str(kc_obj_api_version(o), "v1");
  assert_str(kc_obj_namespace(o), "ns-1");
  assert_str(kc_obj_name(o), "web-7d4b9c-x2x7q");
  assert_str(kc_obj_uid(o), "0b5d5c3e-5f4e-4f7a-9c1e-2b8f3a6d7e10");
  assert_str(kc_obj_resource_version(o), "1234");
  assert_str(kc_obj_creation_timestamp(o), "2026-12-01T10:00:00Z");
  kc_obj_unref(o);
}

/* Absent fields read as {NULL, 0}, an empty string as a non-NULL "", both
 * before and after a type stamp moved the text. */
static void test_fields_absent_and_empty(void **state) {
  (void)state;
  const char *in = "{\"metadata\":{\"name\":\"n\",\"namespace\":\"\",\"uid\":\"u\\\"q\"}}";
  static const kc_transform stamp = {.kind = "Node", .api_version = "v1"};
  for (int t = 0; t < 2; t++) {
    char err[128];
    kc_obj *o = kc_obj_parse(in, strlen(in), t ? &stamp : NULL, err, sizeof err);
    assert_non_null(o);
    assert_str(kc_obj_kind(o), t ? "Node" : NULL);
    assert_str(kc_obj_api_version(o), t ? "v1" : NULL);
    assert_str(kc_obj_name(o), "n");
    assert_non_null(kc_obj_namespace(o).ptr);
    assert_int_equal(kc_obj_namespace(o).len, 0);
    assert_str(kc_obj_uid(o), "u\\\"q"); /* the stored, escaped form */
    assert_str(kc_obj_resource_version(o), NULL);
    assert_str(kc_obj_creation_timestamp(o), NULL);
    assert_str(kc_obj_field(o, KC_OBJ_NAME), "n");
    char key[16];
    assert_int_equal(kc_obj_key(o, key, sizeof key), 1); /* "" namespace: cluster-style key */
    assert_string_equal(key, "n");
    kc_obj_unref(o);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixture_identity), cmocka_unit_test(test_labels_sorted),
      cmocka_unit_test(test_key),              cmocka_unit_test(test_get),
      cmocka_unit_test(test_get_each),         cmocka_unit_test(test_get_skips_escapes),         cmocka_unit_test(test_escapes_and_utf8),
      cmocka_unit_test(test_transform),        cmocka_unit_test(test_status_capture),
      cmocka_unit_test(test_type),            cmocka_unit_test(test_shape_error),
      cmocka_unit_test(test_deleting_generation), cmocka_unit_test(test_large_object),
      cmocka_unit_test(test_errors),           cmocka_unit_test(test_str_helpers),
      cmocka_unit_test(test_mem_size_labels),  cmocka_unit_test(test_label_accessors_escaped),
      cmocka_unit_test(test_mem_size_header),  cmocka_unit_test(test_fields_absent_and_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
