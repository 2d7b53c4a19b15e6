/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for tests/apisim/fieldset and tests/apisim/fieldmgr (kube-apisim's
 * server-side apply): fieldsV1 round trips and refusals, path strings,
 * set algebra, the intent's field set (keyed lists with defaulted keys, sets,
 * granular maps, atomic selectors), Update ownership, apply conflicts and
 * their 409 Status, force, pruning of dropped fields, keyed-list merge order. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../apisim/fieldmgr.h"
#include "../apisim/fieldset.h"

static jv *J(const char *s)
{
  char err[128];
  jv *v = jv_parse(s, strlen(s), err, sizeof err);
  if (!v) fail_msg("bad test JSON %s: %s", s, err);
  return v;
}

static void assert_json(const jv *v, const char *want)
{
  char *got = jv_dump(v, NULL);
  if (strcmp(got, want) != 0) fail_msg("got  %s\nwant %s", got, want);
  free(got);
}

static const struct sim_fm_opts apps = {.api_version = "apps/v1", .builtin = true,
                                        .ignore_status = true};
static const struct sim_fm_opts core = {.api_version = "v1", .builtin = true};

/* managedFields entry i's fieldsV1 */
static const jv *fields_of(const jv *obj, size_t i)
{
  const jv *mf = jv_geta(obj, "metadata", "managedFields", (const char *)NULL);
  assert_non_null(mf);
  assert_true(i < mf->n);
  return jv_get(mf->u.a[i], "fieldsV1");
}

static void test_v1_round_trip(void **state)
{
  (void)state;
  const char *src = "{\"f:metadata\":{\"f:labels\":{\".\":{},\"f:app\":{}}},\"f:spec\":{\"f:containers\":"
                    "{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:image\":{}}},\"f:finalizers\":{\"v:\\\"x\\\"\":{}},\"f:args\":{\"i:10\":{},\"i:2\":{}}}}";
  jv *v = J(src);
  struct sim_fset *s;
  char *err;
  assert_int_equal(sim_fset_from_v1(v, &s, &err), 0);
  assert_int_equal(sim_fset_count(s), 7);
  jv *back = sim_fset_to_v1(s);
  /* fields first, then keys, values, indexes (numerically) */
  assert_json(back, "{\"f:metadata\":{\"f:labels\":{\".\":{},\"f:app\":{}}},\"f:spec\":{\"f:args\":{\"i:2\":{},\"i:10\":{}},"
                    "\"f:containers\":{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:image\":{}}},\"f:finalizers\":{\"v:\\\"x\\\"\":{}}}}");
  char *p[] = {(char *)"f:spec", (char *)"f:containers", (char *)"k:{\"name\":\"c\"}", (char *)"f:image"};
  assert_true(sim_fset_has(s, p, 4));
  assert_true(sim_fset_has(s, p, 3));
  assert_false(sim_fset_has(s, p, 2));
  assert_true(sim_fset_has_at_or_under(s, p, 2));
  char *ps = sim_fset_path_string(p, 4);
  assert_string_equal(ps, ".spec.containers[name=\"c\"].image");
  free(ps);
  jv_free(back);
  jv_free(v);
  sim_fset_free(s);
}

static void test_v1_refusals(void **state)
{
  (void)state;
  const char *bad[] = {"[]", "{\"x:a\":{}}", "{\"f:a\":1}", "{\"k:notjson\":{}}", "{\"k:{}\":{}}",
                       "{\"k:[1]\":{}}", "{\"i:-1\":{}}", "{\"i:\":{}}", "{\".\":{}}",
                       "{\"f:a\":{\".\":{\"f:b\":{}}}}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    jv *v = J(bad[i]);
    struct sim_fset *s = NULL;
    char *err = NULL;
    if (sim_fset_from_v1(v, &s, &err) != -EINVAL) fail_msg("accepted %s", bad[i]);
    assert_null(s);
    assert_non_null(err);
    free(err);
    jv_free(v);
  }
}

static void test_set_algebra(void **state)
{
  (void)state;
  char *a[] = {(char *)"f:spec", (char *)"f:replicas"}, *b[] = {(char *)"f:spec", (char *)"f:paused"};
  struct sim_fset *x = sim_fset_new(), *y = sim_fset_new();
  sim_fset_insert(x, a, 2);
  sim_fset_insert(x, b, 2);
  sim_fset_insert(y, b, 2);
  struct sim_fset *i = sim_fset_intersect(x, y);
  assert_int_equal(sim_fset_count(i), 1);
  assert_true(sim_fset_has(i, b, 2));
  sim_fset_subtract(x, y);
  assert_int_equal(sim_fset_count(x), 1);
  assert_true(sim_fset_has(x, a, 2));
  sim_fset_union(x, y);
  assert_int_equal(sim_fset_count(x), 2);
  assert_false(sim_fset_equal(x, y));
  sim_fset_remove_tree(x, a, 1);
  assert_true(sim_fset_empty(x));
  sim_fset_free(i);
  sim_fset_free(x);
  sim_fset_free(y);
}

static jv *apply(const struct sim_fm_opts *o, const jv *live, const char *cfg, const char *mgr,
                 bool force, int want_rc, char **status)
{
  jv *c = J(cfg), *out = NULL;
  char *st = NULL, *err = NULL;
  int code;
  int rc = sim_fm_apply(o, live, c, mgr, force, &out, &st, &code, &err);
  if (rc != want_rc) fail_msg("apply by %s: rc %d (%s), want %d", mgr, rc, err ? err : "", want_rc);
  jv_free(c);
  free(err);
  if (status) *status = st;
  else free(st);
  return out;
}

static const char dep[] =
  "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\",\"labels\":{\"app\":\"web\"}},"
  "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"spec\":{\"containers\":"
  "[{\"name\":\"c\",\"image\":\"nginx\",\"ports\":[{\"containerPort\":80}]}]}}},\"status\":{\"replicas\":9}}";

static void test_apply_field_set(void **state)
{
  (void)state;
  jv *d = apply(&apps, NULL, dep, "alice", false, 0, NULL);
  const jv *mf = jv_geta(d, "metadata", "managedFields", (const char *)NULL);
  assert_int_equal(mf->n, 1);
  assert_string_equal(jv_gets(mf->u.a[0], "manager"), "alice");
  assert_string_equal(jv_gets(mf->u.a[0], "operation"), "Apply");
  assert_string_equal(jv_gets(mf->u.a[0], "apiVersion"), "apps/v1");
  assert_string_equal(jv_gets(mf->u.a[0], "fieldsType"), "FieldsV1");
  assert_non_null(jv_gets(mf->u.a[0], "time"));
  /* labels: a granular map (no "."); selector atomic; status not owned
   * (reset field); ports keyed by containerPort+protocol (defaulted TCP) */
  assert_json(fields_of(d, 0),
              "{\"f:metadata\":{\"f:labels\":{\"f:app\":{}}},\"f:spec\":{\"f:replicas\":{},\"f:selector\":{},"
              "\"f:template\":{\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:image\":{},"
              "\"f:name\":{},\"f:ports\":{\"k:{\\\"containerPort\\\":80,\\\"protocol\\\":\\\"TCP\\\"}\":{\".\":{},"
              "\"f:containerPort\":{}}}}}}}}}");
  jv_free(d);
}

static void test_apply_missing_key_is_invalid(void **state)
{
  (void)state;
  jv *c = J("{\"spec\":{\"containers\":[{\"image\":\"x\"}]}}"), *out;
  char *st, *err;
  int code;
  assert_int_equal(sim_fm_apply(&core, NULL, c, "m", false, &out, &st, &code, &err), -EINVAL);
  assert_int_equal(code, 422);
  assert_non_null(strstr(err, ".spec.containers: element 0: associative list with keys has an element that omits key field \"name\""));
  free(err);
  jv_free(c);
  c = J("{\"metadata\":{\"managedFields\":[]}}");
  assert_int_equal(sim_fm_apply(&core, NULL, c, "m", false, &out, &st, &code, &err), -EINVAL);
  assert_int_equal(code, 400);
  free(err);
  jv_free(c);
}

static void test_apply_conflict_and_force(void **state)
{
  (void)state;
  jv *d = apply(&apps, NULL, dep, "alice", false, 0, NULL);
  const char *scale = "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"},\"spec\":{\"replicas\":5}}";
  char *st = NULL;
  jv *none = apply(&apps, d, scale, "bob", false, -EBUSY, &st);
  assert_null(none);
  assert_string_equal(st, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                          "\"message\":\"Apply failed with 1 conflict: conflict with \\\"alice\\\": .spec.replicas\","
                          "\"reason\":\"Conflict\",\"details\":{\"causes\":[{\"reason\":\"FieldManagerConflict\","
                          "\"message\":\"conflict with \\\"alice\\\"\",\"field\":\".spec.replicas\"}]},\"code\":409}");
  free(st);
  /* the same value is shared ownership, not a conflict */
  jv *same = apply(&apps, d, "{\"spec\":{\"replicas\":2}}", "bob", false, 0, NULL);
  const jv *mf = jv_geta(same, "metadata", "managedFields", (const char *)NULL);
  assert_int_equal(mf->n, 2);
  jv_free(same);
  jv *forced = apply(&apps, d, scale, "bob", true, 0, NULL);
  int64_t r;
  assert_true(jv_int(jv_geta(forced, "spec", "replicas", (const char *)NULL), &r));
  assert_int_equal(r, 5);
  mf = jv_geta(forced, "metadata", "managedFields", (const char *)NULL);
  assert_int_equal(mf->n, 2);
  assert_string_equal(jv_gets(mf->u.a[0], "manager"), "alice");
  assert_null(jv_geta(fields_of(forced, 0), "f:spec", "f:replicas", (const char *)NULL));
  assert_json(fields_of(forced, 1), "{\"f:spec\":{\"f:replicas\":{}}}");
  /* alice now conflicts with bob, an Apply manager: no "using" */
  apply(&apps, forced, "{\"spec\":{\"replicas\":3}}", "alice", false, -EBUSY, &st);
  assert_non_null(strstr(st, "conflict with \\\"bob\\\": .spec.replicas"));
  free(st);
  jv_free(forced);
  jv_free(d);
}

static void test_update_ownership_and_conflict_message(void **state)
{
  (void)state;
  jv *d = apply(&core, NULL, "{\"metadata\":{\"name\":\"cm\"},\"data\":{\"x\":\"1\",\"y\":\"2\"}}", "alice",
                false, 0, NULL);
  jv *nd = jv_copy(d);
  jv_set_str(jv_get(nd, "data"), "y", "22");
  jv_set_str(jv_get(nd, "data"), "z", "3");
  sim_fm_update(&core, d, nd, "kubectl-edit");
  const jv *mf = jv_geta(nd, "metadata", "managedFields", (const char *)NULL);
  assert_int_equal(mf->n, 2);
  assert_json(fields_of(nd, 0), "{\"f:data\":{\"f:x\":{}}}"); /* alice lost y */
  assert_string_equal(jv_gets(mf->u.a[1], "operation"), "Update");
  assert_json(fields_of(nd, 1), "{\"f:data\":{\"f:y\":{},\"f:z\":{}}}");
  /* an unchanged write records nothing */
  jv *again = jv_copy(nd);
  sim_fm_update(&core, nd, again, "other");
  assert_true(jv_equal(again, nd));
  jv_free(again);
  char *st;
  apply(&core, nd, "{\"data\":{\"x\":\"1\",\"z\":\"4\"}}", "alice", false, -EBUSY, &st);
  assert_non_null(strstr(st, "conflict with \\\"kubectl-edit\\\" using v1: .data.z"));
  free(st);
  /* two conflicts: grouped by manager, one path per line */
  apply(&core, nd, "{\"data\":{\"y\":\"0\",\"z\":\"4\"}}", "alice", false, -EBUSY, &st);
  assert_non_null(strstr(st, "Apply failed with 2 conflicts: conflicts with \\\"kubectl-edit\\\" using v1:\\n- .data.y\\n- .data.z"));
  free(st);
  /* create: the skeleton's metadata is not owned, data is added */
  jv *c = J("{\"metadata\":{\"name\":\"n\",\"labels\":{\"a\":\"b\"}},\"data\":{\"k\":\"v\"}}");
  sim_fm_update(&core, NULL, c, "curl");
  assert_json(fields_of(c, 0), "{\"f:data\":{\".\":{},\"f:k\":{}},\"f:metadata\":{\"f:labels\":{\".\":{},\"f:a\":{}}}}");
  jv_free(c);
  jv_free(nd);
  jv_free(d);
}

static void test_prune_dropped_fields(void **state)
{
  (void)state;
  jv *d = apply(&core, NULL,
                "{\"metadata\":{\"name\":\"cm\",\"labels\":{\"a\":\"1\",\"b\":\"2\"}},\"data\":{\"x\":\"1\",\"y\":\"2\"}}",
                "alice", false, 0, NULL);
  /* bob co-owns y */
  jv *e = apply(&core, d, "{\"data\":{\"y\":\"2\"}}", "bob", false, 0, NULL);
  jv *f = apply(&core, e, "{\"metadata\":{\"labels\":{\"a\":\"1\"}},\"data\":{\"x\":\"1\"}}", "alice", false, 0, NULL);
  assert_json(jv_get(f, "data"), "{\"x\":\"1\",\"y\":\"2\"}");
  assert_json(jv_geta(f, "metadata", "labels", (const char *)NULL), "{\"a\":\"1\"}");
  /* bob drops y too: gone */
  jv *g = apply(&core, f, "{\"metadata\":{\"name\":\"cm\"}}", "bob", false, 0, NULL);
  assert_json(jv_get(g, "data"), "{\"x\":\"1\"}");
  jv_free(g);
  jv_free(f);
  jv_free(e);
  jv_free(d);
}

static void test_keyed_list_merge(void **state)
{
  (void)state;
  jv *d = apply(&core, NULL,
                "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"1\",\"env\":[{\"name\":\"X\",\"value\":\"x\"}]},"
                "{\"name\":\"b\",\"image\":\"2\"}]}}", "alice", false, 0, NULL);
  /* another manager adds container s and an env var of a; alice's
   * reordered list merges a by key, and s (not listed) keeps its place
   * relative to the items around it: structured-merge-diff gives b, s, a */
  jv *e = apply(&core, d,
                "{\"spec\":{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"Y\",\"value\":\"y\"}]},{\"name\":\"s\",\"image\":\"3\"}]}}",
                "sidecar", false, 0, NULL);
  jv *f = apply(&core, e,
                "{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"2\"},{\"name\":\"a\",\"image\":\"9\",\"env\":[{\"name\":\"X\",\"value\":\"x\"}]}]}}",
                "alice", false, 0, NULL);
  const jv *cs = jv_geta(f, "spec", "containers", (const char *)NULL);
  assert_int_equal(cs->n, 3);
  assert_string_equal(jv_gets(cs->u.a[0], "name"), "b");
  assert_string_equal(jv_gets(cs->u.a[1], "name"), "s");
  assert_string_equal(jv_gets(cs->u.a[2], "name"), "a");
  assert_string_equal(jv_gets(cs->u.a[2], "image"), "9");
  assert_int_equal(jv_get(cs->u.a[2], "env")->n, 2);
  jv_free(f);
  jv_free(e);
  jv_free(d);
}

static void test_manager_from_user_agent(void **state)
{
  (void)state;
  char *m = sim_fm_manager_from_ua("kubectl/v1.32.0 (linux/amd64) kubernetes/abc");
  assert_string_equal(m, "kubectl");
  free(m);
  m = sim_fm_manager_from_ua(NULL);
  assert_string_equal(m, "");
  free(m);
  char longua[300];
  memset(longua, 'a', sizeof longua - 1);
  longua[sizeof longua - 1] = 0;
  m = sim_fm_manager_from_ua(longua);
  assert_int_equal(strlen(m), 128);
  free(m);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_v1_round_trip),
    cmocka_unit_test(test_v1_refusals),
    cmocka_unit_test(test_set_algebra),
    cmocka_unit_test(test_apply_field_set),
    cmocka_unit_test(test_apply_missing_key_is_invalid),
    cmocka_unit_test(test_apply_conflict_and_force),
    cmocka_unit_test(test_update_ownership_and_conflict_message),
    cmocka_unit_test(test_prune_dropped_fields),
    cmocka_unit_test(test_keyed_list_merge),
    cmocka_unit_test(test_manager_from_user_agent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
