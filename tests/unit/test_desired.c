/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of daemon/host/desired.c on an in-memory host environment:
 * what a commit refuses before any write, the writes of a commit (apply
 * with the ownerReference spliced in, prune with a uid precondition,
 * status only when changed), expectations, the Recreate strategy, the
 * finalizer around a reconcile, and children left unchanged not applied. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/desired.h"
#include "host/hostapi.h"
#include "base/clock.h"
#include "cache/store.h"
#include "kube/kobj.h"
#include "kube/kstatus.h"
#include "watch/decode.h"

#define MAX_OBJS 16
#define MAX_REQS 16

struct req {
  char method[8];
  char path[256];
  char body[2048];
};

static struct {
  kc_obj *objs[MAX_OBJS];
  size_t nobjs;
  struct req reqs[MAX_REQS];
  size_t nreqs;
  int apply_code; /* answer to an apply: 200, 201, 409 or 422 (immutable) */
  const char *apply_rv; /* a 2xx apply answers the object (uid u-NAME) at this resourceVersion */
} E;

static const struct kctrld_host_api *H;

static kc_obj *parse(const char *json) {
  char err[128];
  kc_obj *o = kc_obj_parse(json, strlen(json), NULL, err, sizeof err);
  if (!o) fail_msg("parse: %s", err);
  return o;
}

static void add(const char *json) { E.objs[E.nobjs++] = parse(json); }

static bool matches(const kc_obj *o, const char *av, const char *kind, kc_str ns) {
  return kc_str_eq(kc_obj_api_version(o), kc_str_c(av)) && kc_str_eq(kc_obj_kind(o), kc_str_c(kind)) &&
         (!ns.ptr || kc_str_eq(kc_obj_namespace(o), ns));
}

static int e_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name, kc_obj **out) {
  (void)ud;
  for (size_t i = 0; i < E.nobjs; i++)
    if (matches(E.objs[i], av, kind, ns) && kc_str_eq(kc_obj_name(E.objs[i]), name)) {
      *out = kc_obj_ref(E.objs[i]);
      return 0;
    }
  *out = NULL;
  return -ENOENT;
}

static int e_list(void *ud, const char *av, const char *kind, kc_str ns, const kc_label_selector *sel,
                  kc_obj_vec *out) {
  (void)ud, (void)sel;
  for (size_t i = 0; i < E.nobjs; i++) {
    if (!matches(E.objs[i], av, kind, ns)) continue;
    if (out->n == out->cap) {
      size_t cap = out->cap ? 2 * out->cap : 8;
      kc_obj **v = realloc(out->v, cap * sizeof *v);
      if (!v) return -ENOMEM;
      out->v = v;
      out->cap = cap;
    }
    out->v[out->n++] = kc_obj_ref(E.objs[i]);
  }
  return 0;
}

static int e_resource(void *ud, const char *av, const char *kind, kc_resource_ref *out) {
  (void)ud;
  if (!strcmp(av, "v1") && !strcmp(kind, "Pod")) *out = (kc_resource_ref){"/api/v1", "pods", true};
  else if (!strcmp(av, "v1") && !strcmp(kind, "ConfigMap")) *out = (kc_resource_ref){"/api/v1", "configmaps", true};
  else if (!strcmp(av, "demo.kctrld.io/v1") && !strcmp(kind, "PodSet"))
    *out = (kc_resource_ref){"/apis/demo.kctrld.io/v1", "podsets", true};
  else return -ENOENT;
  return 0;
}

static int e_request(void *ud, const char *method, const char *path, const char *ct, const void *body,
                     size_t len, uint64_t timeout_ms, kc_api_response *out) {
  (void)ud, (void)timeout_ms;
  assert_true(E.nreqs < MAX_REQS);
  struct req *r = &E.reqs[E.nreqs++];
  snprintf(r->method, sizeof r->method, "%s", method);
  snprintf(r->path, sizeof r->path, "%s", path);
  snprintf(r->body, sizeof r->body, "%.*s", (int)len, body ? (const char *)body : "");
  static const char ok[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\"}}";
  static const char immutable[] =
      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"Pod \\\"web-0\\\" "
      "is invalid: spec.containers[0].image: Invalid value: field is immutable\",\"reason\":\"Invalid\","
      "\"code\":422}";
  static const char conflict[] =
      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"conflict\","
      "\"reason\":\"Conflict\",\"code\":409}";
  bool apply = ct && strstr(ct, "apply-patch");
  int code = apply ? E.apply_code : 200;
  const char *b = code == 422 ? immutable : code == 409 ? conflict : ok;
  static char applied[256]; /* read by the host after the return */
  if (apply && code < 300 && E.apply_rv) {
    const char *name = strrchr(path, '/') + 1;
    int n = (int)strcspn(name, "?");
    snprintf(applied, sizeof applied,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%.*s\",\"uid\":\"u-%.*s\","
             "\"resourceVersion\":\"%s\"}}",
             n, name, n, name, E.apply_rv);
    b = applied;
  }
  *out = (kc_api_response){.code = code, .body = b, .body_len = strlen(b)};
  if (code >= 300) kc_status_parse(&out->status, b, strlen(b), NULL, 0);
  return 0;
}

static bool e_may_write(void *ud) {
  (void)ud;
  return true;
}

static const kc_host_env_ops ops = {.cache_get = e_get, .cache_list = e_list, .resource = e_resource,
                                    .request = e_request, .may_write = e_may_write};

static kc_desired_spec *SPEC;
static kc_expectations *EXP;
static kc_reconcile_result RES;
static kc_host_env ENV = {&ops, NULL, NULL, false, NULL};

static const char PARENT[] =
    "{\"apiVersion\":\"demo.kctrld.io/v1\",\"kind\":\"PodSet\",\"metadata\":{\"name\":\"web\","
    "\"namespace\":\"demo\",\"uid\":\"u-web\",\"resourceVersion\":\"5\"%s},\"spec\":{\"replicas\":2}%s}";

static void parent(const char *metadata_more, const char *status) {
  char json[1024];
  snprintf(json, sizeof json, PARENT, metadata_more, status);
  add(json);
}

/* A cached child (uid u-NAME) at resourceVersion rv ("": none). */
static void child_at(const char *kind, const char *name, const char *owner_uid, const char *rv) {
  char json[1024];
  snprintf(json, sizeof json,
           "{\"apiVersion\":\"v1\",\"kind\":\"%s\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\","
           "\"uid\":\"u-%s\",%s%s%s\"ownerReferences\":[{\"apiVersion\":\"demo.kctrld.io/v1\","
           "\"kind\":\"PodSet\",\"name\":\"web\",\"uid\":\"%s\",\"controller\":true}]}}",
           kind, name, name, *rv ? "\"resourceVersion\":\"" : "", rv, *rv ? "\"," : "", owner_uid);
  add(json);
}

static void child(const char *kind, const char *name, const char *owner_uid) {
  child_at(kind, name, owner_uid, "");
}

/* Takes the cached object named name out of the cache. */
static void uncache(const char *name) {
  for (size_t i = 0; i < E.nobjs; i++)
    if (kc_str_eq(kc_obj_name(E.objs[i]), kc_str_c(name))) {
      kc_obj_unref(E.objs[i]);
      E.objs[i] = E.objs[--E.nobjs];
      return;
    }
  fail_msg("%s is not cached", name);
}

static int setup(void **state) {
  (void)state;
  memset(&E, 0, sizeof E);
  E.apply_code = 200;
  static const kc_owns_spec owns[] = {
      {.ref = {.api_version = "v1", .kind = "Pod"}, .update_strategy = KC_UPDATE_RECREATE},
      {.ref = {.api_version = "v1", .kind = "ConfigMap"}},
  };
  const kc_controller_spec spec = {.name = "podset",
                                   .for_ = {.api_version = "demo.kctrld.io/v1", .kind = "PodSet"},
                                   .owns = owns,
                                   .nowns = 2,
                                   .finalizer = "demo.kctrld.io/pods"};
  SPEC = kc_desired_spec_new(&spec);
  EXP = kc_expectations_new(0);
  H = kc_hostapi_table();
  return SPEC && EXP ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  for (size_t i = 0; i < E.nobjs; i++) kc_obj_unref(E.objs[i]);
  kc_desired_spec_free(SPEC);
  kc_expectations_free(EXP);
  return 0;
}

static void ctx_of(kctrld_ctx *ctx) {
  memset(&RES, 0, sizeof RES);
  kc_hostapi_ctx_init(ctx, &ENV, "podset", EXP, "demo/web", &RES);
  ctx->sync = SPEC;
}

/* Commits the children (NULL-terminated) and status (NULL: none). */
static int commit(kctrld_ctx *ctx, const char *const *children, const char *status) {
  kc_desired_set *set = kc_desired_set_new();
  assert_non_null(set);
  for (; *children; children++) assert_int_equal(kc_desired_set_add_child(set, *children, strlen(*children)), 0);
  if (status) assert_int_equal(kc_desired_set_status(set, status, strlen(status)), 0);
  int rc = kc_desired_commit(H, ctx, set);
  kc_desired_set_free(set);
  return rc;
}

#define POD(name) "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\"},\"spec\":{}}"

/* One bad child fails the commit, naming it, before any write. */
static void test_refusals(void **state) {
  (void)state;
  parent("", "");
  kctrld_ctx ctx;
  static const struct {
    const char *child, *says;
  } cases[] = {
      {"{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\"}}",
       "desired child children[1] v1 Secret demo/s: its kind is not one of the controller's owns"},
      {"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"other\"}}",
       "desired child children[1] v1 Pod other/p: not in the namespace of its owner"},
      {POD("web-0"), "desired child children[1] v1 Pod demo/web-0: the same object as children[0]"},
      {"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":\"p-\"}}",
       "metadata.name: required"},
      {"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"q\",\"ownerReferences\":[{"
       "\"apiVersion\":\"v1\",\"kind\":\"X\",\"name\":\"x\",\"uid\":\"u-x\",\"controller\":true}]}}",
       "names another controller"},
      {"[1]", "not a JSON object"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ctx_of(&ctx);
    const char *children[] = {POD("web-0"), cases[i].child, NULL};
    assert_int_equal(commit(&ctx, children, "{\"replicas\":1}"), KCTRLD_RESULT_ERROR);
    if (!strstr(RES.message, cases[i].says)) fail_msg("case %zu: %s", i, RES.message);
    assert_int_equal(E.nreqs, 0);
  }
}

/* Apply (ownerReference and namespace spliced in), prune ours only, status
 * only when it changed; expectations set for the create and the delete. */
static void test_commit_writes(void **state) {
  (void)state;
  parent("", ",\"status\":{\"replicas\":7}");
  child("Pod", "web-0", "u-web");
  child("Pod", "web-9", "u-web");
  child("Pod", "stranger", "u-other");
  kctrld_ctx ctx;
  ctx_of(&ctx);
  E.apply_code = 201;
  const char *children[] = {POD("web-0"), POD("web-1"), NULL};
  assert_int_equal(commit(&ctx, children, "{\"replicas\":2}"), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 4);
  assert_string_equal(E.reqs[0].method, "PATCH");
  assert_string_equal(E.reqs[0].path, "/api/v1/namespaces/demo/pods/web-0?fieldManager=podset&force=true");
  assert_string_equal(E.reqs[0].body,
                      "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"demo\","
                      "\"ownerReferences\":[{\"apiVersion\":\"demo.kctrld.io/v1\",\"kind\":\"PodSet\","
                      "\"name\":\"web\",\"uid\":\"u-web\",\"controller\":true,\"blockOwnerDeletion\":true}],"
                      "\"name\":\"web-0\"},\"spec\":{}}");
  assert_string_equal(E.reqs[1].path, "/api/v1/namespaces/demo/pods/web-1?fieldManager=podset&force=true");
  assert_string_equal(E.reqs[2].method, "DELETE");
  assert_string_equal(E.reqs[2].path, "/api/v1/namespaces/demo/pods/web-9");
  assert_non_null(strstr(E.reqs[2].body, "\"preconditions\":{\"uid\":\"u-web-9\"}"));
  assert_string_equal(E.reqs[3].method, "PUT");
  assert_string_equal(E.reqs[3].path, "/apis/demo.kctrld.io/v1/namespaces/demo/podsets/web/status");
  assert_non_null(strstr(E.reqs[3].body, "\"status\":{\"replicas\":2}"));
  assert_non_null(strstr(E.reqs[3].body, "\"resourceVersion\":\"5\""));
  /* web-1 created (201) and web-9 deleted: both wait for their events. */
  assert_false(kc_expectations_satisfied(EXP, "demo/web", kc_clock_now_ns()));
  kc_expectations_observe(EXP, "demo/web", 1, 1);
  assert_true(kc_expectations_satisfied(EXP, "demo/web", kc_clock_now_ns()));

  /* The same status again: no status write. */
  E.nreqs = 0;
  ctx_of(&ctx);
  const char *again[] = {POD("web-0"), POD("web-9"), NULL};
  E.apply_code = 200;
  assert_int_equal(commit(&ctx, again, "{ \"replicas\" : 7 }"), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 2);
  assert_string_equal(E.reqs[1].path, "/api/v1/namespaces/demo/pods/web-9?fieldManager=podset&force=true");
}

/* While expectations are pending, no child is created and none deleted. */
static void test_pending_expectations(void **state) {
  (void)state;
  parent("", "");
  child("Pod", "web-0", "u-web");
  child("Pod", "web-9", "u-web");
  assert_int_equal(kc_expectations_set(EXP, "demo/web", 1, 0, kc_clock_now_ns()), 0);
  kctrld_ctx ctx;
  ctx_of(&ctx);
  const char *children[] = {POD("web-0"), POD("web-1"), NULL};
  assert_int_equal(commit(&ctx, children, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 1);
  assert_string_equal(E.reqs[0].path, "/api/v1/namespaces/demo/pods/web-0?fieldManager=podset&force=true");
}

/* An apply refused as immutable: Recreate deletes the child (uid
 * precondition), InPlace is an error; a 409 requeues. */
static void test_update_strategies(void **state) {
  (void)state;
  parent("", "");
  child("Pod", "web-0", "u-web");
  child("ConfigMap", "cm", "u-web");
  kctrld_ctx ctx;
  ctx_of(&ctx);
  E.apply_code = 422;
  const char *pods[] = {POD("web-0"), "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\"}}",
                        NULL};
  assert_int_equal(commit(&ctx, pods, NULL), KCTRLD_RESULT_ERROR);
  assert_int_equal(E.nreqs, 3);
  assert_string_equal(E.reqs[1].method, "DELETE");
  assert_string_equal(E.reqs[1].path, "/api/v1/namespaces/demo/pods/web-0");
  assert_non_null(strstr(E.reqs[1].body, "\"uid\":\"u-web-0\""));
  assert_non_null(strstr(RES.message, "apply v1 ConfigMap demo/cm: Invalid argument"));
  assert_non_null(strstr(RES.message, "immutable"));
  E.nreqs = 0;
  E.apply_code = 409;
  ctx_of(&ctx);
  assert_int_equal(commit(&ctx, pods, NULL), KCTRLD_RESULT_REQUEUE);
  assert_int_equal(E.nreqs, 1);
}

/* A child our last apply left as it is cached (same resourceVersion) and
 * whose body is the same is not applied again; a changed body, a changed
 * cached object or one not cached is; a pruned child is forgotten. */
static void test_unchanged_not_applied(void **state) {
  (void)state;
  parent("", "");
  child_at("Pod", "web-0", "u-web", "10");
  child_at("Pod", "web-1", "u-web", "10");
  E.apply_rv = "10"; /* what the server answers: nothing changed by the applies */
  kctrld_ctx ctx;
  ctx_of(&ctx);
  const char *both[] = {POD("web-0"), POD("web-1"), NULL};
  assert_int_equal(commit(&ctx, both, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 2);
  assert_int_equal(kc_applymemo_size(SPEC->applied), 2);

  /* The same children, cached as the applies left them: no write. */
  uint64_t skipped = kc_applymemo_skips_of("podset");
  E.nreqs = 0;
  ctx_of(&ctx);
  assert_int_equal(commit(&ctx, both, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 0);
  assert_int_equal(kc_applymemo_skips_of("podset"), skipped + 2);

  /* A body given a field is applied; dropping it again is applied too
   * (the apply removes it). */
  const char *more[] = {"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-0\"},"
                        "\"spec\":{\"hostname\":\"a\"}}",
                        POD("web-1"), NULL};
  E.nreqs = 0;
  ctx_of(&ctx);
  assert_int_equal(commit(&ctx, more, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 1);
  assert_string_equal(E.reqs[0].path, "/api/v1/namespaces/demo/pods/web-0?fieldManager=podset&force=true");
  E.nreqs = 0;
  ctx_of(&ctx);
  assert_int_equal(commit(&ctx, both, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 1);
  assert_string_equal(E.reqs[0].path, "/api/v1/namespaces/demo/pods/web-0?fieldManager=podset&force=true");

  /* Someone changed web-1 (a new resourceVersion): applied again. */
  uncache("web-1");
  child_at("Pod", "web-1", "u-web", "12");
  E.nreqs = 0;
  ctx_of(&ctx);
  assert_int_equal(commit(&ctx, both, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 1);
  assert_string_equal(E.reqs[0].path, "/api/v1/namespaces/demo/pods/web-1?fieldManager=podset&force=true");

  /* Not cached: applied (a create), whatever was remembered. */
  uncache("web-1");
  E.nreqs = 0;
  ctx_of(&ctx);
  assert_int_equal(commit(&ctx, both, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 1);
  assert_string_equal(E.reqs[0].path, "/api/v1/namespaces/demo/pods/web-1?fieldManager=podset&force=true");

  /* web-1 no longer wanted: pruned, and forgotten. */
  child_at("Pod", "web-1", "u-web", "10");
  const char *one[] = {POD("web-0"), NULL};
  E.nreqs = 0;
  ctx_of(&ctx);
  assert_int_equal(commit(&ctx, one, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 1);
  assert_string_equal(E.reqs[0].method, "DELETE");
  assert_int_equal(kc_applymemo_size(SPEC->applied), 1);
  /* Were it remembered, web-1 as cached (rv 10) would be left alone. */
  E.nreqs = 0;
  ctx_of(&ctx);
  assert_int_equal(commit(&ctx, both, NULL), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 1);
  assert_string_equal(E.reqs[0].path, "/api/v1/namespaces/demo/pods/web-1?fieldManager=podset&force=true");
}

/* The finalizer: added to a live parent; a deleting parent that holds it
 * is finalized and the finalizer removed after a finalized reconcile;
 * one that no longer holds it is not reconciled. */
static void test_finalizer(void **state) {
  (void)state;
  kctrld_ctx ctx;
  int result = -1;
  parent("", "");
  ctx_of(&ctx);
  assert_true(kc_desired_finalize_before(H, &ctx, &result));
  assert_false(ctx.finalizing);
  assert_int_equal(E.nreqs, 1);
  assert_string_equal(E.reqs[0].method, "PATCH");
  assert_non_null(strstr(E.reqs[0].body, "\"path\":\"/metadata/finalizers\",\"value\":[\"demo.kctrld.io/pods\"]"));
  kc_obj_unref(E.objs[--E.nobjs]);

  E.nreqs = 0;
  parent(",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\",\"finalizers\":[\"demo.kctrld.io/pods\"]", "");
  ctx_of(&ctx);
  assert_true(kc_desired_finalize_before(H, &ctx, &result));
  assert_true(H->ctx_finalizing(&ctx));
  /* Not finalized yet: nothing removed. */
  assert_int_equal(kc_desired_finalize_after(H, &ctx, KCTRLD_RESULT_DONE), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 0);
  H->result_finalized(&ctx);
  assert_int_equal(kc_desired_finalize_after(H, &ctx, KCTRLD_RESULT_DONE), KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 1);
  assert_non_null(strstr(E.reqs[0].body, "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}"));
  kc_obj_unref(E.objs[--E.nobjs]);

  E.nreqs = 0;
  parent(",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\",\"finalizers\":[\"other.io/x\"]", "");
  ctx_of(&ctx);
  assert_false(kc_desired_finalize_before(H, &ctx, &result));
  assert_int_equal(result, KCTRLD_RESULT_DONE);
  assert_int_equal(E.nreqs, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_commit_writes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pending_expectations, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_strategies, setup, teardown),
      cmocka_unit_test_setup_teardown(test_finalizer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unchanged_not_applied, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
