/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/hooks/hook_proto.c: the kctrld.io/hook/v1 request writer and
 * the response parser (results, every action, the errors naming the field,
 * the size limit). */
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
#include "hooks/hook_proto.h"
#include "json/jsontree.h"
#include "kctrld/plugin.h"

static int parse(const char *s, kc_hook_response *r, char *err, size_t errlen) {
  return kc_hook_response_parse(s, strlen(s), KC_HOOK_DEFAULT_MAX_RESPONSE, r, err, errlen);
}

static bool slice_is(kc_str s, const char *want) {
  return kc_str_eq_c(s, want);
}

static void test_results(void **state) {
  (void)state;
  kc_hook_response r;
  char err[256];
  assert_int_equal(parse("{\"result\":\"done\"}", &r, err, sizeof err), 0);
  assert_int_equal(r.result, KC_HOOK_DONE);
  assert_int_equal(r.nactions, 0);
  assert_string_equal(r.message, "");
  kc_hook_response_free(&r);
  assert_int_equal(
      parse(" {\"apiVersion\":\"kctrld.io/hook/v1\",\"result\":\"requeue\",\"actions\":null}\n", &r,
            err, sizeof err),
      0);
  assert_int_equal(r.result, KC_HOOK_REQUEUE);
  kc_hook_response_free(&r);
  assert_int_equal(
      parse("{\"result\":\"requeueAfter\",\"requeueAfter\":\"1m30s\"}", &r, err, sizeof err), 0);
  assert_int_equal(r.result, KC_HOOK_REQUEUE_AFTER);
  assert_int_equal(r.after_ms, 90000);
  assert_false(r.has_priority);
  kc_hook_response_free(&r);
  /* A queue priority for the requeue (plugin.h result_requeue_priority). */
  static const struct {
    const char *name;
    int priority;
  } prios[] = {{"low", KCTRLD_PRIORITY_LOW},
               {"normal", KCTRLD_PRIORITY_NORMAL},
               {"high", KCTRLD_PRIORITY_HIGH}};
  for (size_t i = 0; i < sizeof prios / sizeof prios[0]; i++) {
    char doc[128];
    snprintf(doc, sizeof doc,
             "{\"result\":\"requeueAfter\",\"requeueAfter\":\"0s\",\"priority\":\"%s\"}",
             prios[i].name);
    assert_int_equal(parse(doc, &r, err, sizeof err), 0);
    assert_int_equal(r.after_ms, 0);
    assert_true(r.has_priority);
    assert_int_equal(r.priority, prios[i].priority);
    kc_hook_response_free(&r);
  }
  assert_int_equal(parse("{\"result\":\"error\",\"message\":\"no quota\"}", &r, err, sizeof err),
                   0);
  assert_int_equal(r.result, KC_HOOK_ERROR);
  assert_string_equal(r.message, "no quota");
  kc_hook_response_free(&r);
  assert_int_equal(
      parse("{\"result\":\"terminal\",\"message\":\"spec.size is not a number\"}", &r, err, sizeof err), 0);
  assert_int_equal(r.result, KC_HOOK_TERMINAL);
  assert_string_equal(r.message, "spec.size is not a number");
  kc_hook_response_free(&r);
}

static void test_actions(void **state) {
  (void)state;
  kc_hook_response r;
  char err[256];
  const char *doc =
      "{\"result\":\"done\",\"actions\":["
      "{\"action\":\"create\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
      "\"metadata\":{\"generateName\":\"x-\",\"namespace\":\"a\"}}},"
      "{\"action\":\"update\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
      "\"metadata\":{\"name\":\"u\"}}},"
      "{\"action\":\"updateStatus\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
      "\"metadata\":{\"name\":\"s\"}}},"
      "{\"action\":\"patch\",\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"a\","
      "\"name\":\"p\","
      "\"patch\":{\"metadata\":{\"labels\":{\"k\":\"v\"}}}},"
      "{\"action\":\"patch\",\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"j\","
      "\"patchType\":\"json\","
      "\"subresource\":\"status\",\"patch\":[{\"op\":\"test\",\"path\":\"/a\",\"value\":1}]},"
      "{\"action\":\"delete\",\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"namespace\":\"a\",\"name\":"
      "\"d\","
      "\"preconditions\":{\"uid\":\"u1\",\"resourceVersion\":\"7\"},\"propagationPolicy\":"
      "\"Foreground\","
      "\"gracePeriodSeconds\":0},"
      "{\"action\":\"event\",\"type\":\"Warning\",\"reason\":\"Bad\",\"message\":\"m\"},"
      "{\"action\":\"apply\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
      "{\"name\":\"ap\"}},"
      "\"fieldManager\":\"me\",\"force\":true},"
      "{\"action\":\"patch\",\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"namespace\":\"a\",\"name\":\"sp\","
      "\"patchType\":\"strategic\",\"patch\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"$patch\":\"delete\"}]}}}"
      "]}";
  assert_int_equal(parse(doc, &r, err, sizeof err), 0);
  assert_int_equal(r.nactions, 9);
  assert_int_equal(r.actions[0].type, KC_HOOK_CREATE);
  assert_true(slice_is(
      r.actions[0].object,
      "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"generateName\":\"x-\","
      "\"namespace\":\"a\"}}"));
  assert_int_equal(r.actions[1].type, KC_HOOK_UPDATE);
  assert_int_equal(r.actions[2].type, KC_HOOK_UPDATE_STATUS);
  assert_int_equal(r.actions[3].type, KC_HOOK_PATCH);
  assert_int_equal(r.actions[3].patch_type, KCTRLD_PATCH_MERGE);
  assert_string_equal(r.actions[3].ref.namespace_, "a");
  assert_string_equal(r.actions[3].ref.name, "p");
  assert_false(r.actions[3].status);
  assert_true(slice_is(r.actions[3].patch, "{\"metadata\":{\"labels\":{\"k\":\"v\"}}}"));
  assert_int_equal(r.actions[4].patch_type, KCTRLD_PATCH_JSON);
  assert_true(r.actions[4].status);
  assert_null(r.actions[4].ref.namespace_);
  assert_true(slice_is(r.actions[4].patch, "[{\"op\":\"test\",\"path\":\"/a\",\"value\":1}]"));
  assert_int_equal(r.actions[5].type, KC_HOOK_DELETE);
  assert_string_equal(r.actions[5].precondition_uid, "u1");
  assert_string_equal(r.actions[5].precondition_resource_version, "7");
  assert_int_equal(r.actions[5].propagation, KCTRLD_PROPAGATION_FOREGROUND);
  assert_int_equal(r.actions[5].grace_period_seconds, 0);
  assert_int_equal(r.actions[6].type, KC_HOOK_EVENT);
  assert_true(r.actions[6].warning);
  assert_string_equal(r.actions[6].reason, "Bad");
  assert_null(r.actions[6].ref.name); /* the reconciled object */
  assert_int_equal(r.actions[7].type, KC_HOOK_APPLY);
  assert_string_equal(r.actions[7].field_manager, "me");
  assert_true(r.actions[7].force);
  assert_true(slice_is(r.actions[7].object,
                       "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"ap\"}}"));
  assert_int_equal(r.actions[8].type, KC_HOOK_PATCH);
  assert_int_equal(r.actions[8].patch_type, KCTRLD_PATCH_STRATEGIC); /* what api_patch takes */
  assert_true(slice_is(r.actions[8].patch,
                       "{\"spec\":{\"containers\":[{\"name\":\"c\",\"$patch\":\"delete\"}]}}"));
  kc_hook_response_free(&r);
}

/* Every malformed response is -EBADMSG with a message naming the field. */
static void test_errors_name_the_field(void **state) {
  (void)state;
  static const struct {
    const char *doc, *err;
  } cases[] = {
      {"", "response is not JSON: "},
      {"{\"result\":", "response is not JSON: "},
      {"[]", "response: expected an object, got an array"},
      {"{}", "result: required"},
      {"{\"result\":1}", "result: expected a string, got a number"},
      {"{\"result\":\"ok\"}", "result: must be done, requeue, requeueAfter, error or terminal, not \"ok\""},
      {"{\"result\":\"done\",\"extra\":1}", "extra: unknown field"},
      {"{\"result\":\"done\",\"result\":\"error\"}", "result: duplicate key"},
      {"{\"apiVersion\":\"kctrld.io/hook/v2\",\"result\":\"done\"}",
       "apiVersion: \"kctrld.io/hook/v2\" is not supported"},
      {"{\"result\":\"requeueAfter\"}", "requeueAfter: required when result is requeueAfter"},
      {"{\"result\":\"requeueAfter\",\"requeueAfter\":\"soon\"}",
       "requeueAfter: \"soon\" is not a duration"},
      {"{\"result\":\"done\",\"requeueAfter\":\"1s\"}",
       "requeueAfter: only allowed when result is requeueAfter"},
      {"{\"result\":\"requeue\",\"priority\":\"high\"}",
       "priority: only allowed when result is requeueAfter"},
      {"{\"result\":\"requeueAfter\",\"requeueAfter\":\"1s\",\"priority\":\"urgent\"}",
       "priority: must be low, normal or high, not \"urgent\""},
      {"{\"result\":\"requeueAfter\",\"requeueAfter\":\"1s\",\"priority\":1}",
       "priority: expected a string, got a number"},
      {"{\"result\":\"done\",\"actions\":{}}", "actions: expected an array, got an object"},
      {"{\"result\":\"done\",\"actions\":[1]}", "actions[0]: expected an object, got a number"},
      {"{\"result\":\"done\",\"actions\":[{}]}", "actions[0].action: required"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"frob\"}]}",
       "actions[0].action: unknown action \"frob\""},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"create\"}]}",
       "actions[0].object: required"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"create\",\"object\":[]}]}",
       "actions[0].object: expected an object, got an array"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"create\",\"object\":{\"apiVersion\":\"v1\","
       "\"metadata\":{}}}]}",
       "actions[0].object.kind: required"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"update\",\"object\":{\"apiVersion\":\"v1\","
       "\"kind\":\"A\","
       "\"metadata\":{\"generateName\":\"x\"}}}]}",
       "actions[0].object.metadata.name: required"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"event\",\"reason\":\"R\"},"
       "{\"action\":\"event\",\"reason\":\"R\"},{\"action\":\"patch\",\"apiVersion\":\"v1\","
       "\"kind\":\"A\","
       "\"name\":\"n\",\"patch\":\"x\"}]}",
       "actions[2].patch: expected an object, got a string"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"patch\",\"apiVersion\":\"v1\",\"kind\":"
       "\"A\",\"name\":\"n\","
       "\"patchType\":\"json\",\"patch\":{}}]}",
       "actions[0].patch: expected an array (patchType json), got an object"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"patch\",\"apiVersion\":\"v1\",\"kind\":"
       "\"A\",\"name\":\"n\","
       "\"patchType\":\"xml\",\"patch\":{}}]}",
       "actions[0].patchType: must be merge, json or strategic"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"patch\",\"apiVersion\":\"v1\",\"kind\":"
       "\"A\",\"patch\":{}}]}",
       "actions[0].name: required"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"delete\",\"apiVersion\":\"v1\",\"kind\":"
       "\"A\",\"name\":\"n\","
       "\"gracePeriodSeconds\":-1}]}",
       "actions[0].gracePeriodSeconds: expected a non-negative integer"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"delete\",\"apiVersion\":\"v1\",\"kind\":"
       "\"A\",\"name\":\"n\","
       "\"preconditions\":{\"uid\":1}}]}",
       "actions[0].preconditions.uid: expected a string, got a number"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"delete\",\"apiVersion\":\"v1\",\"kind\":"
       "\"A\",\"name\":\"n\","
       "\"propagationPolicy\":\"Now\"}]}",
       "actions[0].propagationPolicy: must be Background, Foreground or Orphan"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"event\",\"reason\":\"\"}]}",
       "actions[0].reason: must not be empty"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"event\",\"reason\":\"R\",\"type\":\"Info\"}"
       "]}",
       "actions[0].type: must be Normal or Warning"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"event\",\"reason\":\"R\",\"regarding\":{"
       "\"kind\":\"A\"}}]}",
       "actions[0].regarding.apiVersion: required"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"apply\",\"force\":1,\"object\":{}}]}",
       "actions[0].force: expected a boolean, got a number"},
      {"{\"result\":\"done\",\"actions\":[{\"action\":\"create\",\"object\":{},\"x\":1}]}",
       "actions[0].x: unknown field"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kc_hook_response r;
    char err[256];
    int rc = parse(cases[i].doc, &r, err, sizeof err);
    if (rc != -EBADMSG || strncmp(err, cases[i].err, strlen(cases[i].err)) != 0)
      fail_msg("case %zu %s: rc %d err \"%s\", want \"%s\"", i, cases[i].doc, rc, err,
               cases[i].err);
    assert_int_equal(r.nactions, 0);
    assert_null(r.actions);
    kc_hook_response_free(&r);
  }
}

static void test_size_limit(void **state) {
  (void)state;
  kc_hook_response r;
  char err[256];
  const char *doc = "{\"result\":\"done\"}";
  assert_int_equal(kc_hook_response_parse(doc, strlen(doc), 10, &r, err, sizeof err), -E2BIG);
  assert_string_equal(err, "response of 17 bytes exceeds the limit of 10 bytes");
  assert_int_equal(kc_hook_response_parse(doc, strlen(doc), 17, &r, err, sizeof err), 0);
  kc_hook_response_free(&r);
  /* Deep nesting is refused by the tree's limit, not the stack. */
  size_t n = 100000;
  char *deep = malloc(2 * n + 32);
  assert_non_null(deep);
  strcpy(deep, "{\"result\":\"done\",\"actions\":");
  size_t o = strlen(deep);
  memset(deep + o, '[', n);
  assert_int_equal(kc_hook_response_parse(deep, o + n, 0, &r, err, sizeof err), -EBADMSG);
  assert_non_null(strstr(err, "nesting deeper"));
  free(deep);
}

static int keep_first(void *ud, const kc_watch_event *ev) {
  kc_obj **o = ud;
  if (!*o) *o = kc_obj_ref(ev->obj);
  return 0;
}

/* An object as the informers cache it: the streaming decoder's (text as
 * received, managedFields[].fieldsV1 shared). */
static kc_obj *decode_one(const char *json) {
  kc_buf ev = {0};
  kc_buf_printf(&ev, "{\"type\":\"ADDED\",\"object\":%s}\n", json);
  kc_obj *o = NULL;
  kc_decoder_callbacks cbs = {.event = keep_first};
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cbs, &o);
  assert_non_null(d);
  assert_int_equal(kc_decoder_feed(d, ev.p, ev.len), 0);
  assert_int_equal(kc_decoder_finish(d), 0);
  kc_decoder_free(d);
  kc_buf_free(&ev);
  return o;
}

static void test_request(void **state) {
  (void)state;
  kc_buf b = {0};
  /* kc_obj_parse minifies; a raw-mode object keeps the text as received,
   * line breaks included: build that one with the streaming decoder. */
  kc_obj *o1 = decode_one("{\"b\":\n2}");
  kc_obj *o0 = kc_obj_parse("{\"a\":1}", 7, NULL, NULL, 0);
  kc_obj *obj = kc_obj_parse("{\"metadata\":{\"name\":\"n\"}}", 25, NULL, NULL, 0);
  assert_true(o0 && o1 && obj);
  const kc_obj *owned[] = {o0, o1};
  kc_hook_request req = {.controller = "c\"1",
                         .key = "ns/n",
                         .attempt = 3,
                         .object = obj,
                         .owned = owned,
                         .nowned = 2,
                         .expectations_satisfied = true};
  kc_hook_request_write(&b, &req);
  assert_int_equal(b.err, 0);
  assert_string_equal(
      b.p,
      "{\"apiVersion\":\"kctrld.io/hook/v1\",\"controller\":\"c\\\"1\",\"key\":\"ns/n\","
      "\"attempt\":3,\"expectationsSatisfied\":true,\"object\":{\"metadata\":{\"name\":\"n\"}},"
      "\"owned\":[{\"a\":1},{\"b\": 2}]}");
  /* A deleted object is null. */
  kc_buf_reset(&b);
  req.object = NULL;
  req.nowned = 0;
  kc_hook_request_write(&b, &req);
  yajl_val v = NULL;
  assert_int_equal(kc_jsontree_parse(b.p, b.len, &v, NULL, 0), 0);
  const char *path[] = {"object", NULL};
  assert_true(YAJL_IS_NULL(yajl_tree_get(v, path, yajl_t_any)));
  yajl_tree_free(v);
  /* An object whose fieldsV1 is a shared piece goes out whole. */
  char big[600];
  int n = snprintf(big, sizeof big, "{\"metadata\":{\"name\":\"p\",\"managedFields\":[{\"manager\":\"m\","
                   "\"fieldsV1\":{\"f:spec\":{");
  for (int i = 0; i < 20; i++) n += snprintf(big + n, sizeof big - (size_t)n, "%s\"f:field%02d\":{}", i ? "," : "", i);
  snprintf(big + n, sizeof big - (size_t)n, "}}}]}}");
  kc_obj *shared = decode_one(big);
  assert_int_equal(shared->nshared, 1);
  kc_buf_reset(&b);
  req.object = shared;
  kc_hook_request_write(&b, &req);
  assert_int_equal(b.err, 0);
  assert_non_null(strstr(b.p, big));
  kc_obj_unref(shared);
  kc_obj_unref(o0);
  kc_obj_unref(o1);
  kc_obj_unref(obj);
  kc_buf_free(&b);
}

/* Desired-state responses: children and status as raw text, resyncAfter,
 * finalized; what is refused names the field. */
static void test_desired_responses(void **state) {
  (void)state;
  kc_hook_response r;
  char err[256];
  const char *doc = "{\"children\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}},"
                    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\",\"namespace\":\"x\"}}],"
                    "\"status\":{\"n\": 2},\"resyncAfter\":\"30s\",\"finalized\":true}";
  assert_int_equal(parse(doc, &r, err, sizeof err), 0);
  assert_true(r.desired);
  assert_true(r.finalized);
  assert_int_equal(r.nchildren, 2);
  assert_true(slice_is(r.children[0], "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}}"));
  assert_true(slice_is(r.status, "{\"n\": 2}"));
  assert_int_equal(r.result, KC_HOOK_REQUEUE_AFTER);
  assert_int_equal(r.after_ms, 30000);
  kc_hook_response_free(&r);
  assert_int_equal(parse("{\"children\":[]}", &r, err, sizeof err), 0);
  assert_true(r.desired);
  assert_int_equal(r.result, KC_HOOK_DONE);
  assert_null(r.status.ptr);
  kc_hook_response_free(&r);
  assert_int_equal(parse("{\"children\":[],\"result\":\"error\",\"message\":\"m\",\"resyncAfter\":\"1s\"}",
                         &r, err, sizeof err), 0);
  assert_int_equal(r.result, KC_HOOK_ERROR);
  kc_hook_response_free(&r);
  assert_int_equal(parse("{\"children\":[],\"result\":\"terminal\",\"message\":\"m\"}", &r, err, sizeof err), 0);
  assert_int_equal(r.result, KC_HOOK_TERMINAL);
  kc_hook_response_free(&r);
  /* finalized in an actions response too */
  assert_int_equal(parse("{\"result\":\"done\",\"finalized\":true}", &r, err, sizeof err), 0);
  assert_false(r.desired);
  assert_true(r.finalized);
  kc_hook_response_free(&r);
  static const struct {
    const char *doc, *err;
  } bad[] = {
      {"{\"children\":[],\"actions\":[]}", "actions: not with children"},
      {"{\"result\":\"done\",\"status\":{}}", "status: only with children"},
      {"{\"result\":\"done\",\"resyncAfter\":\"1s\"}", "resyncAfter: only with children"},
      {"{\"children\":{}}", "children: expected an array, got an object"},
      {"{\"children\":[],\"result\":\"requeue\"}", "result: must be done, error or terminal with children"},
      {"{\"children\":[],\"requeueAfter\":\"1s\"}", "requeueAfter: not with children"},
      {"{\"children\":[],\"resyncAfter\":\"soon\"}", "resyncAfter: \"soon\" is not a duration"},
      {"{\"children\":[],\"status\":[]}", "status: expected an object, got an array"},
      {"{\"children\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{}}]}",
       "children[0].metadata.name: required"},
      {"{\"children\":[{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}}]}", "children[0].apiVersion: required"},
      {"{\"children\":[3]}", "children[0]: expected an object, got a number"},
      {"{\"children\":[],\"finalized\":1}", "finalized: expected a boolean"},
      {"{\"actions\":[]}", "result: required"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(parse(bad[i].doc, &r, err, sizeof err), -EBADMSG);
    if (!strstr(err, bad[i].err)) fail_msg("%s: got \"%s\", want \"%s\"", bad[i].doc, err, bad[i].err);
    assert_null(r.children);
    kc_hook_response_free(&r);
  }
}

/* A desired-state request: children by kind, keyed by name (by
 * namespace/name under a cluster-scoped object); finalizing when set. */
static void test_desired_request(void **state) {
  (void)state;
  kc_buf b = {0};
  static const char pj[] = "{\"metadata\":{\"name\":\"w-0\",\"namespace\":\"d\"}}";
  static const char cj[] = "{\"metadata\":{\"name\":\"cm\",\"namespace\":\"d\"}}";
  kc_obj *p0 = kc_obj_parse(pj, sizeof pj - 1, NULL, NULL, 0);
  kc_obj *c0 = kc_obj_parse(cj, sizeof cj - 1, NULL, NULL, 0);
  kc_obj *obj = kc_obj_parse("{\"metadata\":{\"name\":\"n\"}}", 25, NULL, NULL, 0);
  assert_true(p0 && c0 && obj);
  const kc_obj *owned[] = {p0, c0};
  const size_t kind[] = {0, 2};
  const char *const kinds[] = {"Pod.v1", "Deployment.apps/v1", "ConfigMap.v1"};
  kc_hook_request req = {.controller = "c",
                         .key = "d/n",
                         .attempt = 1,
                         .object = obj,
                         .owned = owned,
                         .nowned = 2,
                         .expectations_satisfied = true,
                         .finalizing = true,
                         .child_kinds = kinds,
                         .nchild_kinds = 3,
                         .owned_kind = kind};
  kc_hook_request_write(&b, &req);
  assert_string_equal(b.p,
                      "{\"apiVersion\":\"kctrld.io/hook/v1\",\"controller\":\"c\",\"key\":\"d/n\",\"attempt\":1,"
                      "\"expectationsSatisfied\":true,\"object\":{\"metadata\":{\"name\":\"n\"}},\"finalizing\":true,"
                      "\"children\":{\"Pod.v1\":{\"w-0\":{\"metadata\":{\"name\":\"w-0\",\"namespace\":\"d\"}}},"
                      "\"Deployment.apps/v1\":{},\"ConfigMap.v1\":{\"cm\":{\"metadata\":{\"name\":\"cm\",\"namespace\":\"d\"}}}}}");
  kc_buf_reset(&b);
  req.children_by_namespace = true;
  req.finalizing = false;
  kc_hook_request_write(&b, &req);
  assert_non_null(strstr(b.p, "{\"Pod.v1\":{\"d/w-0\":"));
  assert_null(strstr(b.p, "finalizing"));
  kc_obj_unref(p0);
  kc_obj_unref(c0);
  kc_obj_unref(obj);
  kc_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_results),
      cmocka_unit_test(test_actions),
      cmocka_unit_test(test_errors_name_the_field),
      cmocka_unit_test(test_size_limit),
      cmocka_unit_test(test_request),
      cmocka_unit_test(test_desired_responses),
      cmocka_unit_test(test_desired_request),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
