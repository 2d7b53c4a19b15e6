/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/hostapi on fake host environments (hostenv.h):
 * settings over a YAML tree, object accessors on real fixtures, cache
 * get/list through an env holding real stores (namespace, selector, field
 * index, order), two envs side by side and a ctx without one, finalizer
 * helpers and expectations on an in-memory API, and every API write
 * against a local HTTP server through kc_host_env_api_request (paths, methods, content types, bodies, the
 * errno mapping, api error messages, refusal while not leading, Events). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/events.h"
#include "host/hostapi.h"
#include "host/hostenv.h"
#include "apisim_child.h"
#include "mini_server.h"
#include "testutil.h"

/* ---- a fake host environment: in-memory caches (real stores), the API
 * client either a real kc_api on the local HTTP server below or an
 * in-memory fake (mem_request), an atomic write fence, a recorder ---- */

struct fake {
  kc_store *pods;
  kc_store *cms;
  kc_api *api;
  atomic_bool may_write;
  kc_events *events; /* NULL: events dropped */
  atomic_int retained;
};

static struct fake F;
static kc_host_env ENV;
static kctrld_ctx CTX;
#define ctx (&CTX)

static kc_store *f_store(void *ud, const char *av, const char *kind) {
  struct fake *f = ud;
  if (!strcmp(av, "v1") && !strcmp(kind, "Pod")) return f->pods;
  if (!strcmp(av, "v1") && !strcmp(kind, "ConfigMap")) return f->cms;
  return NULL;
}
static int f_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name, kc_obj **out) {
  kc_store *s = f_store(ud, av, kind);
  if (!s) return -ENOTSUP;
  *out = kc_store_get(s, ns, name);
  return *out ? 0 : -ENOENT;
}
static int f_list(void *ud, const char *av, const char *kind, kc_str ns, const kc_label_selector *sel,
                  kc_obj_vec *out) {
  kc_store *s = f_store(ud, av, kind);
  return s ? kc_store_list(s, ns, sel, out) : -ENOTSUP;
}
static int f_by_index(void *ud, const char *av, const char *kind, const char *index, kc_str value,
                      kc_obj_vec *out) {
  kc_store *s = f_store(ud, av, kind);
  return s ? kc_store_by_index(s, index, value, out) : -ENOTSUP;
}
static int f_resource(void *ud, const char *av, const char *kind, kc_resource_ref *out) {
  if (!strcmp(av, "v1") && !strcmp(kind, "Pod")) *out = (kc_resource_ref){"/api/v1", "pods", true};
  else if (!strcmp(av, "v1") && !strcmp(kind, "ConfigMap"))
    *out = (kc_resource_ref){"/api/v1", "configmaps", true};
  else if (!strcmp(av, "v1") && !strcmp(kind, "Namespace"))
    *out = (kc_resource_ref){"/api/v1", "namespaces", false};
  else if (!strcmp(av, "demo.kctrld.io/v1") && !strcmp(kind, "PodSet"))
    *out = (kc_resource_ref){"/apis/demo.kctrld.io/v1", "podsets", true};
  else return -ENOENT;
  return 0;
}
static int f_request(void *ud, const char *method, const char *path, const char *ct, const void *body,
                     size_t len, uint64_t timeout_ms, kc_api_response *out) {
  return kc_host_env_api_request(((struct fake *)ud)->api, method, path, ct, body, len, timeout_ms, out);
}
static bool f_may_write(void *ud) { return atomic_load(&((struct fake *)ud)->may_write); }
static int f_event(void *ud, const char *controller, const kc_obj *o, int type, const char *reason,
                   const char *message) {
  struct fake *f = ud;
  return f->events ? kc_events_record(f->events, controller, o, type, reason, message) : 0;
}
static void f_retain(void *ud) { atomic_fetch_add(&((struct fake *)ud)->retained, 1); }
static void f_release(void *ud) { atomic_fetch_sub(&((struct fake *)ud)->retained, 1); }

static const kc_host_env_ops fake_ops = {
    .cache_get = f_get,       .cache_list = f_list,   .cache_by_index = f_by_index,
    .resource = f_resource,   .request = f_request,   .may_write = f_may_write,
    .event = f_event,         .retain = f_retain,     .release = f_release,
};

static const struct kctrld_host_api *svc;

/* ---- the HTTP server: records the last request, answers as told ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last_method[16], last_path[512], last_ct[128], last_body[8192], last_fm[64], last_force[8];
static int reply_status = 200;
static const char *reply_body = "{}";
static mini_server *srv;
static char server_url[64];

static void handler(const mini_server_request *rq, mini_server_reply *r, void *ud) {
  pthread_mutex_lock(&mu);
  snprintf(last_method, sizeof last_method, "%s", rq->method);
  snprintf(last_path, sizeof last_path, "%s", rq->path);
  const char *ct = mini_server_header(rq, "Content-Type");
  snprintf(last_ct, sizeof last_ct, "%s", ct ? ct : "");
  snprintf(last_body, sizeof last_body, "%s", rq->body ? rq->body : "");
  const char *fm = mini_server_query(rq, "fieldManager"), *force = mini_server_query(rq, "force");
  snprintf(last_fm, sizeof last_fm, "%s", fm ? fm : "");
  snprintf(last_force, sizeof last_force, "%s", force ? force : "");
  r->status = reply_status;
  r->body = reply_body;
  pthread_mutex_unlock(&mu);
}

static void answer(int status, const char *body) {
  pthread_mutex_lock(&mu);
  reply_status = status;
  reply_body = body;
  last_method[0] = last_path[0] = last_ct[0] = last_body[0] = '\0';
  pthread_mutex_unlock(&mu);
}

static kc_obj *parse(const char *json) {
  char err[128];
  kc_obj *o = kc_obj_parse(json, strlen(json), NULL, err, sizeof err);
  if (!o) fail_msg("parse: %s", err);
  return o;
}

static kc_obj *pod(const char *ns, const char *name, const char *labels, const char *node) {
  char json[1024];
  snprintf(json, sizeof json,
           "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\","
           "\"uid\":\"uid-%s\",\"resourceVersion\":\"7\",\"labels\":%s},\"spec\":{\"nodeName\":\"%s\"}}",
           ns, name, name, labels, node);
  return parse(json);
}

static int setup(void **state) {
  static const kc_store_index_spec idx[] = {{.name = "byNode", .path = "spec.nodeName"}};
  F.pods = kc_store_new(idx, 1);
  F.cms = kc_store_new(NULL, 0);
  if (!F.pods || !F.cms) return -1;
  kc_obj *objs[] = {
      pod("b", "p3", "{\"app\":\"web\",\"tier\":\"fe\"}", "n1"),
      pod("a", "p2", "{\"app\":\"web\"}", "n1"),
      pod("a", "p1", "{\"app\":\"web\",\"tier\":\"fe\"}", "n2"),
      pod("a", "p0", "{\"app\":\"db\"}", "n1"),
  };
  for (size_t i = 0; i < 4; i++) {
    if (kc_store_upsert(F.pods, objs[i], NULL) < 0) return -1;
    kc_obj_unref(objs[i]);
  }
  srv = mini_server_start(handler, NULL, NULL, NULL);
  if (!srv) return -1;
  snprintf(server_url, sizeof server_url, "http://127.0.0.1:%d", mini_server_port(srv));
  kc_kube_creds creds = {.server = server_url, .token = "t"};
  if (kc_api_new(NULL, &creds, &F.api) < 0) return -1;
  atomic_store(&F.may_write, true);
  ENV = (kc_host_env){&fake_ops, &F, NULL, false, NULL};
  kc_hostapi_ctx_init(&CTX, &ENV, "test", NULL, NULL, NULL);
  svc = kc_hostapi_table();
  return 0;
}

static int teardown(void **state) {
  kc_hostapi_thread_cleanup();
  kc_host_env_thread_cleanup();
  kc_api_close(F.api);
  mini_server_stop(srv);
  kc_store_free(F.pods);
  kc_store_free(F.cms);
  return 0;
}

/* ---- settings ---- */

static void test_settings(void **state) {
  static const char yaml[] = "greeting: hello\n"
                             "replicas: 3\n"
                             "neg: -12\n"
                             "huge: 99999999999999999999\n"
                             "on: true\n"
                             "off: False\n"
                             "yes: yes\n"
                             "wait: 1h30m\n"
                             "short: 250ms\n"
                             "bare: 15\n"
                             "zero: 0\n"
                             "quotedint: \"5\"\n"
                             "quotedbool: \"true\"\n"
                             "quoteddur: \"2s\"\n"
                             "bad: soon\n"
                             "nothing: ~\n"
                             "\"dotted.key\": v\n"
                             "kinds:\n"
                             "  - {apiVersion: v1, kind: ConfigMap}\n"
                             "  - {apiVersion: apps/v1, kind: Deployment, extra: [1, 2, 3]}\n";
  kc_yaml_doc *doc;
  char err[256];
  assert_int_equal(kc_yaml_load_buffer("<t>", yaml, sizeof yaml - 1, &doc, err, sizeof err), 0);
  const kctrld_settings *s = kc_hostapi_settings(kc_yaml_root(doc));
  const char *str;
  int64_t i;
  bool b;
  size_t n;
  assert_int_equal(svc->settings_string(s, "greeting", &str), 0);
  assert_string_equal(str, "hello");
  assert_int_equal(svc->settings_string(s, "kinds[1].kind", &str), 0);
  assert_string_equal(str, "Deployment");
  assert_int_equal(svc->settings_string(s, "[\"dotted.key\"]", &str), 0);
  assert_string_equal(str, "v");
  assert_int_equal(svc->settings_string(s, "missing", &str), -ENOENT);
  assert_int_equal(svc->settings_string(s, "kinds[2].kind", &str), -ENOENT);
  assert_int_equal(svc->settings_string(s, "nothing", &str), -ENOENT);
  assert_int_equal(svc->settings_string(s, "kinds", &str), -EINVAL);
  assert_int_equal(svc->settings_string(s, "a..b", &str), -EINVAL);
  assert_int_equal(svc->settings_string(s, "kinds[x]", &str), -EINVAL);
  assert_int_equal(svc->settings_string(s, ".a", &str), -EINVAL);
  /* The lookups' grammar (jsonpath.h): no "[]", no ']' or '"' in a bare key,
   * nothing but '.' or '[' after ']'. */
  assert_int_equal(svc->settings_string(s, "kinds[]", &str), -EINVAL);
  assert_int_equal(svc->settings_string(s, "greet]ing", &str), -EINVAL);
  assert_int_equal(svc->settings_string(s, "kinds[0]kind", &str), -EINVAL);
  assert_int_equal(svc->settings_string(s, "kinds.[0]", &str), -EINVAL);
  assert_int_equal(svc->settings_int(s, "replicas", &i), 0);
  assert_int_equal(i, 3);
  assert_int_equal(svc->settings_int(s, "neg", &i), 0);
  assert_int_equal(i, -12);
  assert_int_equal(svc->settings_int(s, "huge", &i), -ERANGE);
  assert_int_equal(svc->settings_int(s, "greeting", &i), -EINVAL);
  assert_int_equal(svc->settings_int(s, "kinds[1].extra[2]", &i), 0);
  assert_int_equal(i, 3);
  assert_int_equal(svc->settings_bool(s, "on", &b), 0);
  assert_true(b);
  assert_int_equal(svc->settings_bool(s, "off", &b), 0);
  assert_false(b);
  assert_int_equal(svc->settings_bool(s, "yes", &b), -EINVAL);
  assert_int_equal(svc->settings_duration_ms(s, "wait", &i), 0);
  assert_int_equal(i, 5400000);
  assert_int_equal(svc->settings_duration_ms(s, "short", &i), 0);
  assert_int_equal(i, 250);
  /* The config file's rules (yamltree.h getters): a duration needs a unit,
   * a quoted scalar is a string, each refusal is logged with its place. */
  tu_stderr_begin();
  assert_int_equal(svc->settings_duration_ms(s, "bare", &i), -EINVAL);
  assert_int_equal(svc->settings_int(s, "quotedint", &i), -EINVAL);
  assert_int_equal(svc->settings_bool(s, "quotedbool", &b), -EINVAL);
  char *log = tu_logfmt_plain(tu_stderr_end());
  assert_non_null(strstr(log, "<t>:10:7: settings.bare: duration \"15\" has no unit (write e.g. \"15s\""));
  assert_non_null(strstr(log, "<t>:12:12: settings.quotedint: expected an integer, got the quoted string"));
  assert_non_null(strstr(log, "<t>:13:13: settings.quotedbool: expected true or false, got the quoted string"));
  free(log);
  assert_int_equal(svc->settings_string(s, "quotedint", &str), 0);
  assert_string_equal(str, "5");
  assert_int_equal(svc->settings_string(s, "replicas", &str), 0);
  assert_string_equal(str, "3");
  assert_int_equal(svc->settings_duration_ms(s, "zero", &i), 0);
  assert_int_equal(i, 0);
  assert_int_equal(svc->settings_duration_ms(s, "quoteddur", &i), 0);
  assert_int_equal(i, 2000);
  assert_int_equal(svc->settings_duration_ms(s, "bad", &i), -EINVAL);
  assert_int_equal(svc->settings_len(s, "kinds", &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(svc->settings_len(s, "kinds[0]", &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(svc->settings_len(s, "greeting", &n), -EINVAL);
  assert_int_equal(svc->settings_len(s, "nope", &n), -ENOENT);
  /* No settings at all. */
  assert_int_equal(svc->settings_string(NULL, "greeting", &str), -ENOENT);
  assert_int_equal(svc->settings_len(NULL, "kinds", &n), -ENOENT);
  kc_yaml_free(doc);
}

/* Reads recorded during an init ctx: nested keys and sequence items. */
static void test_settings_unread(void **state) {
  static const char yaml[] = "kinds:\n"
                             "  - { apiVersion: v1, kind: ConfigMap, knd: typo }\n"
                             "  - { apiVersion: v1, kind: Secret }\n"
                             "selector: { matchLabels: { a: b }, matchLables: { c: d } }\n"
                             "\"dotted.key\": 1\n"
                             "count: 3\n";
  kc_yaml_doc *doc;
  char err[256];
  assert_int_equal(kc_yaml_load_buffer("c.yaml", yaml, sizeof yaml - 1, &doc, err, sizeof err), 0);
  const kctrld_settings *s = kc_hostapi_settings(kc_yaml_root(doc));
  kctrld_ctx init_ctx;
  kc_hostapi_ctx_init(&init_ctx, NULL, "ctl", NULL, NULL, NULL);
  kc_settings_used used = {.root = kc_yaml_root(doc)};
  init_ctx.used = &used;
  kctrld_ctx *prev = kc_hostapi_enter(&init_ctx);
  const char *str;
  size_t n;
  int64_t i;
  assert_int_equal(svc->settings_len(s, "kinds", &n), 0);
  for (size_t k = 0; k < n; k++) {
    char path[64];
    snprintf(path, sizeof path, "kinds[%zu].apiVersion", k);
    assert_int_equal(svc->settings_string(s, path, &str), 0);
    snprintf(path, sizeof path, "kinds[%zu].kind", k);
    assert_int_equal(svc->settings_string(s, path, &str), 0);
  }
  assert_int_equal(svc->settings_string(s, "selector.matchLabels.a", &str), 0);
  assert_int_equal(svc->settings_int(s, "missing.too", &i), -ENOENT);
  kc_hostapi_leave(prev);
  /* Outside the init ctx nothing is recorded: count stays unread. */
  assert_int_equal(svc->settings_int(s, "count", &i), 0);
  tu_stderr_begin();
  size_t warned = kc_hostapi_settings_warn_unread(&used, "ctl", "p");
  char *log = tu_logfmt_plain(tu_stderr_end());
  if (warned != 4) fail_msg("%zu warnings: %s", warned, log);
  assert_non_null(strstr(log, "c.yaml:2:40: controller ctl: settings key \"kinds[0].knd\" was not read by plugin p"));
  assert_non_null(strstr(log, "c.yaml:4:36: controller ctl: settings key \"selector.matchLables\""));
  assert_non_null(strstr(log, "c.yaml:5:1: controller ctl: settings key \"[\"dotted.key\"]\""));
  assert_non_null(strstr(log, "c.yaml:6:1: controller ctl: settings key \"count\""));
  assert_null(strstr(log, "apiVersion"));
  assert_null(strstr(log, "matchLabels"));
  free(log);
  kc_yaml_free(doc);
}

/* ---- object accessors ---- */

static bool count_label(kctrld_str k, kctrld_str v, void *ud) {
  (*(int *)ud)++;
  return true;
}

struct names {
  char v[8][64];
  int n;
};

static bool collect(const kctrld_value *v, void *ud) {
  struct names *s = ud;
  assert_true(svc->value_string(v, s->v[s->n], sizeof s->v[0]) > 0);
  s->n++;
  return true;
}

static void test_object_fields(void **state) {
  kc_obj *o = tu_fixture_obj("pod-k8s-openapi-coredns.json", NULL);
  const kctrld_object *obj = (const kctrld_object *)o;
  kctrld_str s = svc->object_name(obj);
  assert_int_equal(s.len, strlen("coredns-55cb58b774-8mcpn"));
  assert_memory_equal(s.ptr, "coredns-55cb58b774-8mcpn", s.len);
  s = svc->object_namespace(obj);
  assert_memory_equal(s.ptr, "kube-system", s.len);
  s = svc->object_uid(obj);
  assert_memory_equal(s.ptr, "a89692bf-270a-4317-b995-1c97720191a9", s.len);
  s = svc->object_resource_version(obj);
  assert_memory_equal(s.ptr, "454", s.len);
  s = svc->object_kind(obj);
  assert_memory_equal(s.ptr, "Pod", s.len);
  s = svc->object_api_version(obj);
  assert_memory_equal(s.ptr, "v1", s.len);
  s = svc->object_creation_timestamp(obj);
  assert_memory_equal(s.ptr, "2024-09-12T06:20:57Z", s.len);
  assert_int_equal(svc->object_generation(obj), 0);
  assert_false(svc->object_deleting(obj));
  s = svc->object_label(obj, "k8s-app");
  assert_int_equal(s.len, 8);
  assert_memory_equal(s.ptr, "kube-dns", 8);
  assert_null(svc->object_label(obj, "nope").ptr);
  int nl = 0;
  assert_int_equal(svc->object_each_label(obj, count_label, &nl), 2);
  assert_int_equal(nl, 2);
  s = svc->object_json(obj);
  assert_int_equal(s.len, o->json_len);
  kctrld_value v;
  assert_int_equal(svc->object_get(obj, "spec.containers[0].name", &v), 0);
  assert_int_equal(v.type, KCTRLD_JSON_STRING);
  assert_int_equal(svc->object_get(obj, "spec.nope", &v), 0);
  assert_int_equal(v.type, KCTRLD_JSON_ABSENT);
  assert_int_equal(svc->object_get(obj, "spec.containers[", &v), -EINVAL);
  char buf[64];
  assert_int_equal(svc->object_string(obj, "spec.containers[0].name", buf, sizeof buf), 7);
  assert_string_equal(buf, "coredns");
  assert_int_equal(svc->object_string(obj, "spec.containers[0].name", buf, 4), -ENOSPC);
  assert_int_equal(svc->object_string(obj, "spec.nope", buf, sizeof buf), -ENOENT);
  assert_int_equal(svc->object_string(obj, "spec.containers", buf, sizeof buf), -EINVAL);
  int64_t i;
  assert_int_equal(svc->object_int(obj, "spec.volumes[0].configMap.defaultMode", &i), 0);
  assert_int_equal(i, 420);
  assert_int_equal(svc->object_int(obj, "spec.nodeName", &i), -EINVAL);
  assert_int_equal(svc->object_int(obj, "spec.nope", &i), -ENOENT);
  bool b;
  assert_int_equal(svc->object_bool(obj, "spec.containers[0].securityContext.readOnlyRootFilesystem", &b), 0);
  assert_true(b);
  assert_int_equal(svc->object_bool(obj, "spec.nodeName", &b), -EINVAL);
  /* [] paths: every configMap referenced by volumes, also projected ones. */
  struct names cm = {0};
  assert_int_equal(svc->object_each(obj, "spec.volumes[].configMap.name", collect, &cm), 1);
  assert_int_equal(svc->object_each(obj, "spec.volumes[].projected.sources[].configMap.name", collect, &cm), 1);
  assert_string_equal(cm.v[0], "coredns");
  assert_string_equal(cm.v[1], "kube-root-ca.crt");
  /* value_get relative to a value. */
  assert_int_equal(svc->object_get(obj, "spec.containers[0]", &v), 0);
  kctrld_value img;
  assert_int_equal(svc->value_get(&v, "image", &img), 0);
  assert_true(svc->value_string(&img, buf, sizeof buf) > 0);
  assert_string_equal(buf, "registry.k8s.io/coredns/coredns:v1.11.3");
  assert_int_equal(svc->value_int(&img, &i), -EINVAL);
  /* References. */
  assert_ptr_equal(svc->object_ref(obj), obj);
  assert_int_equal(atomic_load(&o->refs), 2);
  svc->object_release(obj);
  svc->object_release(obj);
  svc->object_release(NULL);
}

/* ---- cache ---- */

static void expect_names(const kctrld_list *l, const char *const *want, size_t n) {
  assert_int_equal(svc->list_len(l), n);
  for (size_t i = 0; i < n; i++) {
    const kctrld_object *o = svc->list_item(l, i);
    char key[128];
    kctrld_str ns = svc->object_namespace(o), nm = svc->object_name(o);
    snprintf(key, sizeof key, "%.*s/%.*s", (int)ns.len, ns.ptr, (int)nm.len, nm.ptr);
    assert_string_equal(key, want[i]);
  }
  assert_null(svc->list_item(l, n));
}

static void test_cache(void **state) {
  const kctrld_object *o = NULL;
  kctrld_ref ref = {"v1", "Pod", "a", "p1"};
  assert_int_equal(svc->cache_get(ctx, &ref, &o), 0);
  assert_memory_equal(svc->object_name(o).ptr, "p1", 2);
  svc->object_release(o);
  ref.name = "p3";
  assert_int_equal(svc->cache_get(ctx, &ref, &o), -ENOENT);
  kctrld_ref other = {"v1", "Secret", "a", "x"};
  assert_int_equal(svc->cache_get(ctx, &other, &o), -ENOTSUP);

  kctrld_list *l = NULL;
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", NULL, &l), 0);
  expect_names(l, (const char *const[]){"a/p0", "a/p1", "a/p2", "b/p3"}, 4);
  svc->list_release(l);

  kctrld_list_opts opts = {.struct_size = sizeof opts, .namespace_ = "a", .label_selector = "app=web"};
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", &opts, &l), 0);
  expect_names(l, (const char *const[]){"a/p1", "a/p2"}, 2);
  svc->list_release(l);
  /* Same selector again (per-thread cache), another namespace. */
  opts.namespace_ = "b";
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", &opts, &l), 0);
  expect_names(l, (const char *const[]){"b/p3"}, 1);
  svc->list_release(l);
  opts.namespace_ = NULL;
  opts.label_selector = "tier in (fe),app!=db";
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", &opts, &l), 0);
  expect_names(l, (const char *const[]){"a/p1", "b/p3"}, 2);
  svc->list_release(l);

  /* Field index, then namespace and selector filters. */
  kctrld_list_opts io = {.struct_size = sizeof io, .field_index = "byNode", .field_value = "n1"};
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", &io, &l), 0);
  expect_names(l, (const char *const[]){"a/p0", "a/p2", "b/p3"}, 3);
  svc->list_release(l);
  io.namespace_ = "a";
  io.label_selector = "app=web";
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", &io, &l), 0);
  expect_names(l, (const char *const[]){"a/p2"}, 1);
  svc->list_release(l);

  /* Errors. */
  io.field_index = "byNothing";
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", &io, &l), -EINVAL);
  assert_non_null(strstr(CTX.api_error, "byNothing"));
  assert_null(l);
  kctrld_list_opts bad = {.struct_size = sizeof bad, .label_selector = "a=b,"};
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", &bad, &l), -EINVAL);
  assert_non_null(strstr(CTX.api_error, "a=b,"));
  assert_int_equal(svc->cache_list(ctx, "v1", "Secret", NULL, &l), -ENOTSUP);
  /* An old plugin's smaller options struct: only namespace_ is read. */
  kctrld_list_opts old = {.struct_size = offsetof(kctrld_list_opts, label_selector), .namespace_ = "b",
                          .label_selector = "a=b,"};
  assert_int_equal(svc->cache_list(ctx, "v1", "Pod", &old, &l), 0);
  expect_names(l, (const char *const[]){"b/p3"}, 1);
  svc->list_release(l);
  svc->list_release(NULL);
}

/* ---- API writes ---- */

static const char cm_json[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"ns\","
                              "\"name\":\"x\"},\"status\":{}}";
static const char pod_json[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\","
                               "\"name\":\"web-1\",\"resourceVersion\":\"5\"},\"spec\":{}}";
static const char pod_reply[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\","
                                "\"name\":\"web-1\",\"uid\":\"u1\",\"resourceVersion\":\"6\"},\"spec\":{}}";

/* Copies under the lock, asserts outside it (a failed assert longjmps). */
static void expect_request(const char *method, const char *path, const char *ct) {
  char m[16], p[512], c[128];
  pthread_mutex_lock(&mu);
  memcpy(m, last_method, sizeof m);
  memcpy(p, last_path, sizeof p);
  memcpy(c, last_ct, sizeof c);
  pthread_mutex_unlock(&mu);
  assert_string_equal(m, method);
  assert_string_equal(p, path);
  if (ct) assert_string_equal(c, ct);
}

static void test_writes(void **state) {
  const kctrld_object *out = NULL;
  answer(201, pod_reply);
  assert_int_equal(svc->api_create(ctx, pod_json, strlen(pod_json), &out), 0);
  expect_request("POST", "/api/v1/namespaces/ns/pods", "application/json");
  assert_string_equal(last_body, pod_json);
  assert_non_null(out);
  assert_memory_equal(svc->object_resource_version(out).ptr, "6", 1);
  svc->object_release(out);

  answer(200, pod_reply);
  assert_int_equal(svc->api_update(ctx, pod_json, strlen(pod_json), NULL), 0);
  expect_request("PUT", "/api/v1/namespaces/ns/pods/web-1", "application/json");
  assert_int_equal(svc->api_update_status(ctx, pod_json, strlen(pod_json), &out), 0);
  expect_request("PUT", "/api/v1/namespaces/ns/pods/web-1/status", "application/json");
  svc->object_release(out);

  kctrld_ref ps = {"demo.kctrld.io/v1", "PodSet", "ns", "web"};
  const char mp[] = "{\"status\":{\"replicas\":3}}";
  assert_int_equal(svc->api_patch(ctx, &ps, KCTRLD_PATCH_MERGE, mp, strlen(mp), true, NULL), 0);
  expect_request("PATCH", "/apis/demo.kctrld.io/v1/namespaces/ns/podsets/web/status",
                 "application/merge-patch+json");
  assert_string_equal(last_body, mp);
  const char jp[] = "[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]";
  assert_int_equal(svc->api_patch(ctx, &ps, KCTRLD_PATCH_JSON, jp, strlen(jp), false, NULL), 0);
  expect_request("PATCH", "/apis/demo.kctrld.io/v1/namespaces/ns/podsets/web", "application/json-patch+json");
  assert_int_equal(svc->api_patch(ctx, &ps, 9, jp, strlen(jp), false, NULL), -EINVAL);

  /* Cluster-scoped path; names are escaped. */
  kctrld_ref nsref = {"v1", "Namespace", NULL, "a b"};
  assert_int_equal(svc->api_get(ctx, &nsref, &out), 0);
  expect_request("GET", "/api/v1/namespaces/a b", NULL); /* sent as a%20b, decoded by the server */
  svc->object_release(out);

  answer(200, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\"}");
  kctrld_ref pr = {"v1", "Pod", "ns", "web-1"};
  kctrld_delete_opts o = {.struct_size = sizeof o,
                          .precondition_uid = "u1",
                          .precondition_resource_version = "6",
                          .propagation = KCTRLD_PROPAGATION_FOREGROUND,
                          .grace_period_seconds = 0};
  assert_int_equal(svc->api_delete(ctx, &pr, &o), 0);
  expect_request("DELETE", "/api/v1/namespaces/ns/pods/web-1", "application/json");
  assert_string_equal(last_body, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"preconditions\":{\"uid\":\"u1\","
                                 "\"resourceVersion\":\"6\"},\"propagationPolicy\":\"Foreground\","
                                 "\"gracePeriodSeconds\":0}");
  assert_int_equal(svc->api_delete(ctx, &pr, NULL), 0);
  assert_string_equal(last_body, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"}");

  /* Bad input never reaches the server. */
  answer(200, "{}");
  kctrld_ref nons = {"v1", "Pod", NULL, "x"};
  assert_int_equal(svc->api_delete(ctx, &nons, NULL), -EINVAL);
  assert_non_null(strstr(CTX.api_error, "namespaced"));
  kctrld_ref unknown = {"v9", "Thing", "ns", "x"};
  assert_int_equal(svc->api_get(ctx, &unknown, &out), -ENOTSUP);
  assert_int_equal(svc->api_create(ctx, "{nope", 5, NULL), -EINVAL);
  assert_string_equal(last_method, "");
}

/* api_apply (ABI 1.2): the apply PATCH, 1 for a create, the field manager
 * (default: the controller), force, and the error mapping of a conflict;
 * strategic merge patches. */
static void test_apply_request(void **state) {
  assert_true(KCTRLD_HOST_HAS(svc, api_apply));
  const kctrld_object *out = NULL;
  answer(201, pod_reply);
  assert_int_equal(svc->api_apply(ctx, pod_json, strlen(pod_json), "my-ctl", false, &out), 1);
  expect_request("PATCH", "/api/v1/namespaces/ns/pods/web-1", "application/apply-patch+yaml");
  assert_string_equal(last_body, pod_json);
  assert_string_equal(last_fm, "my-ctl");
  assert_string_equal(last_force, "");
  assert_non_null(out);
  svc->object_release(out);
  answer(200, pod_reply);
  assert_int_equal(svc->api_apply(ctx, pod_json, strlen(pod_json), NULL, true, NULL), 0);
  assert_string_equal(last_fm, "test"); /* the controller's name */
  assert_string_equal(last_force, "true");
  answer(409, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409,"
              "\"message\":\"Apply failed with 1 conflict: conflict with \\\"x\\\": .spec.replicas\"}");
  assert_int_equal(svc->api_apply(ctx, pod_json, strlen(pod_json), "my-ctl", false, NULL), -ESTALE);
  assert_non_null(strstr(CTX.api_error, "conflict with \"x\": .spec.replicas"));
  /* no name: never sent */
  answer(200, "{}");
  const char noname[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\"}}";
  assert_int_equal(svc->api_apply(ctx, noname, strlen(noname), "m", false, NULL), -EINVAL);
  assert_string_equal(last_method, "");
  atomic_store(&F.may_write, false);
  assert_int_equal(svc->api_apply(ctx, pod_json, strlen(pod_json), "m", false, NULL), -EAGAIN);
  atomic_store(&F.may_write, true);
  assert_string_equal(last_method, "");
  kctrld_ref pr = {"v1", "Pod", "ns", "web-1"};
  const char smp[] = "{\"spec\":{\"containers\":[{\"name\":\"c\",\"$patch\":\"delete\"}]}}";
  assert_int_equal(svc->api_patch(ctx, &pr, KCTRLD_PATCH_STRATEGIC, smp, strlen(smp), false, NULL), 0);
  expect_request("PATCH", "/api/v1/namespaces/ns/pods/web-1", "application/strategic-merge-patch+json");
}

/* api_apply and strategic merge patches against kube-apisim itself: create
 * (1), re-apply (0), another manager's conflict (-ESTALE, the server's
 * message), force, and a strategic patch merging containers by name. */
static void test_apply_against_apisim(void **state) {
  assert_int_equal(sim_paths_init(), 0);
  assert_int_equal(sim_start(), 0);
  kc_api *api = NULL;
  kc_kube_creds creds = {.server = sim_url};
  assert_int_equal(kc_api_new(NULL, &creds, &api), 0);
  struct fake f2 = {.api = api};
  atomic_store(&f2.may_write, true);
  kc_host_env env2 = {&fake_ops, &f2, NULL, false, NULL};
  kctrld_ctx c2;
  kc_hostapi_ctx_init(&c2, &env2, "podctl", NULL, NULL, NULL);
  const char p1[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"default\",\"name\":\"ssa\","
                    "\"labels\":{\"a\":\"1\"}},\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"nginx\"}]}}";
  const kctrld_object *o = NULL;
  assert_int_equal(svc->api_apply(&c2, p1, strlen(p1), NULL, false, &o), 1);
  kctrld_value v;
  assert_int_equal(svc->object_get(o, "metadata.managedFields", &v), 0);
  static const char want_mgr[] = "\"manager\":\"podctl\",\"operation\":\"Apply\"";
  assert_non_null(memmem(v.raw.ptr, v.raw.len, want_mgr, sizeof want_mgr - 1));
  svc->object_release(o);
  assert_int_equal(svc->api_apply(&c2, p1, strlen(p1), NULL, false, NULL), 0);
  const char p2[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"default\",\"name\":\"ssa\"},"
                    "\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"httpd\"}]}}";
  assert_int_equal(svc->api_apply(&c2, p2, strlen(p2), "other", false, NULL), -ESTALE);
  assert_non_null(strstr(c2.api_error, "conflict with \"podctl\": .spec.containers[name=\"main\"].image"));
  assert_int_equal(svc->api_apply(&c2, p2, strlen(p2), "other", true, &o), 0);
  char img[32];
  assert_int_equal(svc->object_string(o, "spec.containers[0].image", img, sizeof img), 5);
  assert_string_equal(img, "httpd");
  svc->object_release(o);
  kctrld_ref pr = {"v1", "Pod", "default", "ssa"};
  const char smp[] = "{\"spec\":{\"containers\":[{\"name\":\"side\",\"image\":\"busybox\"}]}}";
  assert_int_equal(svc->api_patch(&c2, &pr, KCTRLD_PATCH_STRATEGIC, smp, strlen(smp), false, &o), 0);
  assert_int_equal(svc->object_string(o, "spec.containers[0].name", img, sizeof img), 4);
  assert_string_equal(img, "main");
  assert_int_equal(svc->object_string(o, "spec.containers[1].name", img, sizeof img), 4);
  assert_string_equal(img, "side");
  svc->object_release(o);
  kc_host_env_thread_cleanup();
  kc_api_close(api);
  sim_stop();
  sim_paths_free();
}

struct mapping {
  int status;
  const char *body;
  int patch_type;
  int want;
};

static void test_error_mapping(void **state) {
  static const struct mapping cases[] = {
      {409, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409,\"message\":\"the object has been modified\"}", 0, -ESTALE},
      {409, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"AlreadyExists\",\"code\":409,\"message\":\"exists\"}", 0, -EEXIST},
      {404, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\",\"code\":404,\"message\":\"pods \\\"x\\\" not found\"}", 0, -ENOENT},
      {404, "404 page not found", 0, -ENOENT},
      {422, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Invalid\",\"code\":422,\"message\":\"testing value /metadata/resourceVersion failed: test failed\"}", KCTRLD_PATCH_JSON, -ESTALE},
      {422, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Invalid\",\"code\":422,\"message\":\"spec.replicas: Invalid value\"}", KCTRLD_PATCH_MERGE, -EINVAL},
      {400, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"BadRequest\",\"code\":400,\"message\":\"bad\"}", 0, -EINVAL},
      {403, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\",\"code\":403,\"message\":\"forbidden\"}", 0, -EACCES},
      {401, "", 0, -EACCES},
      {429, "Too many requests, please try again later.", 0, -EAGAIN},
      {500, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"InternalError\",\"code\":500,\"message\":\"boom\"}", 0, -EAGAIN},
      {503, "", 0, -EAGAIN},
      {504, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Timeout\",\"code\":504,\"message\":\"slow\"}", 0, -ETIMEDOUT},
      {415, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"UnsupportedMediaType\",\"code\":415,\"message\":\"no\"}", 0, -EPROTO},
  };
  kctrld_ref ps = {"demo.kctrld.io/v1", "PodSet", "ns", "web"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    answer(cases[i].status, cases[i].body);
    CTX.api_error[0] = '\0';
    int rc = cases[i].patch_type ? svc->api_patch(ctx, &ps, cases[i].patch_type, "{}", 2, false, NULL)
                                 : svc->api_update(ctx, pod_json, strlen(pod_json), NULL);
    if (rc != cases[i].want) fail_msg("case %zu (HTTP %d): got %d, want %d", i, cases[i].status, rc, cases[i].want);
    assert_true(CTX.api_error[0] != '\0');
  }
  answer(409, cases[0].body);
  assert_int_equal(svc->api_update(ctx, pod_json, strlen(pod_json), NULL), -ESTALE);
  assert_string_equal(CTX.api_error, "the object has been modified");
}

/* Answers no retry can fix (plugin.h "Terminal errors"): the reason names
 * the subresource or the field, reaches ctx_api_error and stays on the ctx
 * (ctx->terminal) until a later call fails for another reason. */
static void test_terminal_failures(void **state) {
  kctrld_ref cm = {"v1", "ConfigMap", "ns", "x"};
  kctrld_ref ps = {"demo.kctrld.io/v1", "PodSet", "ns", "web"};
  /* A ConfigMap has no status: the server routes no such path (a NotFound
   * that names no object; kube-apiserver and kube-apisim alike). */
  answer(404, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
              "\"message\":\"the server could not find the requested resource\",\"reason\":\"NotFound\","
              "\"details\":{},\"code\":404}");
  assert_int_equal(svc->api_patch(ctx, &cm, KCTRLD_PATCH_MERGE, "{}", 2, true, NULL), -ENOTSUP);
  assert_string_equal(last_path, "/api/v1/namespaces/ns/configmaps/x/status");
  assert_string_equal(CTX.terminal, "configmaps has no status subresource (HTTP 404 on PATCH)");
  assert_string_equal(svc->ctx_api_error(ctx), CTX.terminal);
  answer(404, "404 page not found\n"); /* no Status body at all */
  assert_int_equal(svc->api_update_status(ctx, cm_json, strlen(cm_json), NULL), -ENOTSUP);
  assert_string_equal(CTX.terminal, "configmaps has no status subresource (HTTP 404 on PUT)");
  answer(405, "");
  assert_int_equal(svc->api_patch(ctx, &cm, KCTRLD_PATCH_MERGE, "{}", 2, true, NULL), -ENOTSUP);
  assert_string_equal(CTX.terminal, "configmaps has no status subresource (HTTP 405 on PATCH)");
  /* The object itself is missing: an ordinary -ENOENT, and it ends the
   * terminal mark (the last failure decides). */
  answer(404, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"podsets.demo.kctrld.io "
              "\\\"web\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"web\","
              "\"group\":\"demo.kctrld.io\",\"kind\":\"podsets\"},\"code\":404}");
  assert_int_equal(svc->api_patch(ctx, &ps, KCTRLD_PATCH_MERGE, "{}", 2, true, NULL), -ENOENT);
  assert_string_equal(CTX.terminal, "");
  assert_string_equal(CTX.api_error, "podsets.demo.kctrld.io \"web\" not found");
  /* A 404 of the object's own path is not about a subresource. */
  answer(404, "404 page not found\n");
  assert_int_equal(svc->api_patch(ctx, &cm, KCTRLD_PATCH_MERGE, "{}", 2, false, NULL), -ENOENT);
  assert_string_equal(CTX.terminal, "");
  /* 422 Invalid: the first cause that names a field names it. */
  answer(422, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
              "\"message\":\"ConfigMap \\\"x\\\" is invalid: metadata.labels: Invalid value: \\\"a b\\\": "
              "name part must consist of alphanumeric characters\",\"reason\":\"Invalid\","
              "\"details\":{\"name\":\"x\",\"kind\":\"ConfigMap\",\"causes\":[{\"reason\":\"FieldValueInvalid\","
              "\"message\":\"Invalid value: \\\"a b\\\": name part must consist of alphanumeric characters\","
              "\"field\":\"metadata.labels\"}]},\"code\":422}");
  assert_int_equal(svc->api_patch(ctx, &cm, KCTRLD_PATCH_MERGE, "{}", 2, false, NULL), -EINVAL);
  assert_string_equal(CTX.terminal,
                      "PATCH configmaps refused (HTTP 422 Invalid): field metadata.labels: Invalid value: "
                      "\"a b\": name part must consist of alphanumeric characters");
  /* 400 without causes: the server's message. */
  answer(400, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"BadRequest\",\"code\":400,"
              "\"message\":\"the body of the request was in an unknown format\"}");
  assert_int_equal(svc->api_update(ctx, pod_json, strlen(pod_json), NULL), -EINVAL);
  assert_string_equal(CTX.terminal,
                      "PUT pods refused (HTTP 400 BadRequest): the body of the request was in an unknown format");
  /* A failed JSON patch "test" is optimistic concurrency, not terminal;
   * nor is a conflict or a 500. */
  static const struct {
    int status;
    const char *body;
  } retryable[] = {
      {422, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Invalid\",\"code\":422,\"message\":\"testing value /metadata/resourceVersion failed: test failed\"}"},
      {409, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409,\"message\":\"the object has been modified\"}"},
      {500, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"InternalError\",\"code\":500,\"message\":\"boom\"}"},
  };
  for (size_t i = 0; i < sizeof retryable / sizeof retryable[0]; i++) {
    answer(405, "");
    assert_int_equal(svc->api_patch(ctx, &cm, KCTRLD_PATCH_MERGE, "{}", 2, true, NULL), -ENOTSUP);
    assert_true(CTX.terminal[0] != '\0');
    answer(retryable[i].status, retryable[i].body);
    assert_true(svc->api_patch(ctx, &cm, KCTRLD_PATCH_JSON, "[]", 2, true, NULL) < 0);
    assert_string_equal(CTX.terminal, "");
  }
}

static void test_not_leader(void **state) {
  atomic_store(&F.may_write, false);
  answer(200, pod_reply);
  unsigned before = mini_server_requests(srv);
  kctrld_ref pr = {"v1", "Pod", "ns", "web-1"};
  assert_int_equal(svc->api_create(ctx, pod_json, strlen(pod_json), NULL), -EAGAIN);
  assert_non_null(strstr(CTX.api_error, "not the leader"));
  assert_int_equal(svc->api_delete(ctx, &pr, NULL), -EAGAIN);
  kc_obj *p1 = kc_store_get(F.pods, kc_str_c("a"), kc_str_c("p1"));
  /* Events are queued and return at once; this test has no recorder
   * installed, so the event is dropped and nothing is sent. */
  assert_int_equal(svc->event(ctx, (const kctrld_object *)p1, KCTRLD_EVENT_NORMAL, "R", "m"), 0);
  kc_obj_unref(p1);
  assert_int_equal(mini_server_requests(srv), before);
  /* Reads still work. */
  const kctrld_object *out = NULL;
  assert_int_equal(svc->api_get(ctx, &pr, &out), 0);
  svc->object_release(out);
  atomic_store(&F.may_write, true);
}

/* The event service hands events to the recorder (daemon/client/events.h) on a
 * loop of its own here; flush_loop runs that loop until the queue is empty
 * and the write answered. */
static void on_flushed(void *ud) { uv_stop(ud); }

static void flush_loop(uv_loop_t *loop, kc_events *ev) {
  kc_events_flush(ev, 5000, on_flushed, loop);
  uv_run(loop, UV_RUN_DEFAULT);
}

static void test_event(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_kube_creds creds = {.server = server_url, .token = "t"};
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(&loop, &creds, &api), 0);
  kc_events *rec = NULL;
  kc_events_options eo = {.api = api};
  assert_int_equal(kc_events_new(&loop, &eo, &rec), 0);
  F.events = rec;

  answer(201, "{}");
  kc_obj *o = tu_fixture_obj("deployment-k9s.json", NULL);
  assert_int_equal(svc->event(ctx, (const kctrld_object *)o, KCTRLD_EVENT_WARNING, "InvalidTTL",
                              "value \"soon\"\nis bad"),
                   0);
  flush_loop(&loop, rec);
  expect_request("POST", "/api/v1/namespaces/icx/events", "application/json");
  kc_obj *ev = parse(last_body);
  char buf[256];
  kc_json_value v;
  assert_true(kc_str_eq_c(kc_obj_kind(ev), "Event") && kc_str_eq_c(kc_obj_api_version(ev), "v1"));
  assert_true(kc_str_eq_c(kc_obj_namespace(ev), "icx"));
  assert_int_equal(strncmp(kc_obj_name(ev).ptr, "icx-db.", 7), 0);
  assert_true(kc_obj_name(ev).len > 7 + 8);
  char first_name[256];
  snprintf(first_name, sizeof first_name, "%.*s", (int)kc_obj_name(ev).len, kc_obj_name(ev).ptr);
  static const char *const want[][2] = {
      {"involvedObject.kind", "Deployment"},
      {"involvedObject.apiVersion", "apps/v1"},
      {"involvedObject.name", "icx-db"},
      {"involvedObject.namespace", "icx"},
      {"involvedObject.uid", "6f6143bc-a5f3-11e9-990f-42010a800218"},
      {"reason", "InvalidTTL"},
      {"message", "value \"soon\"\nis bad"},
      {"type", "Warning"},
      {"source.component", "kctrld.io/test"},
      {"reportingComponent", "kctrld.io/test"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_int_equal(kc_obj_get(ev, want[i][0], &v), 0);
    assert_true(kc_json_string(&v, buf, sizeof buf) >= 0);
    assert_string_equal(buf, want[i][1]);
  }
  int64_t count;
  assert_int_equal(kc_obj_get(ev, "count", &v), 0);
  assert_int_equal(kc_json_int64(&v, &count), 0);
  assert_int_equal(count, 1);
  assert_int_equal(kc_obj_get(ev, "firstTimestamp", &v), 0);
  assert_int_equal(kc_json_string(&v, buf, sizeof buf), 20);
  assert_int_equal(kc_obj_get(ev, "lastTimestamp", &v), 0);
  kc_obj_unref(ev);
  /* Another reason: a new Event with another name. */
  char first[sizeof last_body];
  memcpy(first, last_body, sizeof first);
  assert_int_equal(svc->event(ctx, (const kctrld_object *)o, KCTRLD_EVENT_NORMAL, "R", "m"), 0);
  flush_loop(&loop, rec);
  expect_request("POST", "/api/v1/namespaces/icx/events", "application/json");
  assert_string_not_equal(first, last_body);
  /* The first event again: its Event is patched, count 2. */
  answer(200, "{}");
  assert_int_equal(svc->event(ctx, (const kctrld_object *)o, KCTRLD_EVENT_WARNING, "InvalidTTL",
                              "value \"soon\"\nis bad"),
                   0);
  flush_loop(&loop, rec);
  char patch_path[512];
  snprintf(patch_path, sizeof patch_path, "/api/v1/namespaces/icx/events/%s", first_name);
  expect_request("PATCH", patch_path, "application/strategic-merge-patch+json");
  ev = parse(last_body);
  assert_int_equal(kc_obj_get(ev, "count", &v), 0);
  assert_int_equal(kc_json_int64(&v, &count), 0);
  assert_int_equal(count, 2);
  kc_obj_unref(ev);
  assert_int_equal(svc->event(ctx, (const kctrld_object *)o, KCTRLD_EVENT_NORMAL, "", "m"), -EINVAL);
  kc_events_stats st;
  kc_events_get_stats(rec, &st);
  assert_int_equal(st.created, 2);
  assert_int_equal(st.patched, 1);
  kc_obj_unref(o);

  F.events = NULL;
  kc_events_close(rec);
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Worker threads each get their own API worker, freed at thread exit. */
static void *writer(void *arg) {
  kctrld_ctx c;
  kc_hostapi_ctx_init(&c, &ENV, "test", NULL, NULL, NULL);
  for (int i = 0; i < 20; i++) {
    const kctrld_object *out = NULL;
    if (svc->api_get(&c, &(kctrld_ref){"v1", "Pod", "ns", "web-1"}, &out) != 0) return (void *)1;
    svc->object_release(out);
  }
  return NULL;
}

static void test_threads(void **state) {
  answer(200, pod_reply);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, writer, NULL), 0);
  for (int i = 0; i < 4; i++) {
    void *r;
    assert_int_equal(pthread_join(t[i], &r), 0);
    assert_null(r);
  }
}

/* ---- a second, fully in-memory environment: its own cache and a fake API ---- */

struct mem_env {
  kc_store *pods;
  bool may_write;
  char method[16], path[256], body[1024];
  int requests;
};

static int m_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name, kc_obj **out) {
  struct mem_env *m = ud;
  if (strcmp(kind, "Pod")) return -ENOTSUP;
  *out = kc_store_get(m->pods, ns, name);
  return *out ? 0 : -ENOENT;
}
static int m_request(void *ud, const char *method, const char *path, const char *ct, const void *body,
                     size_t len, uint64_t timeout_ms, kc_api_response *out) {
  struct mem_env *m = ud;
  m->requests++;
  snprintf(m->method, sizeof m->method, "%s", method);
  snprintf(m->path, sizeof m->path, "%s", path);
  snprintf(m->body, sizeof m->body, "%.*s", (int)len, body ? (const char *)body : "");
  static const char reply[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\"}}";
  *out = (kc_api_response){.code = 200, .body = reply, .body_len = sizeof reply - 1};
  return 0;
}
static bool m_may_write(void *ud) { return ((struct mem_env *)ud)->may_write; }
static const kc_host_env_ops mem_ops = {.cache_get = m_get, .resource = f_resource, .request = m_request,
                                        .may_write = m_may_write};

/* Each ctx reaches its own environment: nothing is process-global. */
static void test_two_environments(void **state) {
  struct mem_env m = {.pods = kc_store_new(NULL, 0), .may_write = false};
  assert_non_null(m.pods);
  kc_obj *only = pod("z", "mine", "{}", "n9");
  assert_int_equal(kc_store_upsert(m.pods, only, NULL), 0);
  kc_obj_unref(only);
  kc_host_env menv = {&mem_ops, &m, NULL, false, NULL};
  kctrld_ctx mctx;
  kc_hostapi_ctx_init(&mctx, &menv, "mem", NULL, NULL, NULL);

  const kctrld_object *o = NULL;
  kctrld_ref mine = {"v1", "Pod", "z", "mine"}, p1 = {"v1", "Pod", "a", "p1"};
  assert_int_equal(svc->cache_get(&mctx, &mine, &o), 0);
  svc->object_release(o);
  assert_int_equal(svc->cache_get(&mctx, &p1, &o), -ENOENT);
  assert_int_equal(svc->cache_get(ctx, &mine, &o), -ENOENT);
  assert_int_equal(svc->cache_get(ctx, &p1, &o), 0);
  svc->object_release(o);
  /* No cache_list in this env: -ENOSYS, not the other env's answer. */
  kctrld_list *l = NULL;
  assert_int_equal(svc->cache_list(&mctx, "v1", "Pod", NULL, &l), -ENOSYS);
  /* Its own write fence, its own API. */
  assert_int_equal(svc->api_patch(&mctx, &mine, KCTRLD_PATCH_MERGE, "{}", 2, false, NULL), -EAGAIN);
  assert_int_equal(m.requests, 0);
  m.may_write = true;
  assert_int_equal(svc->api_patch(&mctx, &mine, KCTRLD_PATCH_MERGE, "{\"a\":1}", 7, false, &o), 0);
  assert_int_equal(m.requests, 1);
  assert_string_equal(m.method, "PATCH");
  assert_string_equal(m.path, "/api/v1/namespaces/z/pods/mine");
  assert_string_equal(m.body, "{\"a\":1}");
  assert_memory_equal(svc->object_name(o).ptr, "x", 1);
  svc->object_release(o);
  assert_string_equal(svc->ctx_controller(&mctx), "mem");
  assert_string_equal(svc->ctx_controller(ctx), "test");
  /* Events: this env has no recorder member. */
  kc_obj *p = kc_store_get(m.pods, kc_str_c("z"), kc_str_c("mine"));
  assert_int_equal(svc->event(&mctx, (const kctrld_object *)p, KCTRLD_EVENT_NORMAL, "R", "m"), -ENOSYS);
  kc_obj_unref(p);
  kc_store_free(m.pods);
}

/* A ctx without an environment answers -ENOSYS, never crashes. */
static void test_no_environment(void **state) {
  kctrld_ctx bare;
  kc_hostapi_ctx_init(&bare, NULL, NULL, NULL, NULL, NULL);
  const kctrld_object *o = NULL;
  kctrld_ref r = {"v1", "Pod", "a", "p1"};
  kctrld_list *l = NULL;
  assert_int_equal(svc->cache_get(&bare, &r, &o), -ENOSYS);
  assert_int_equal(svc->cache_list(&bare, "v1", "Pod", NULL, &l), -ENOSYS);
  assert_int_equal(svc->api_get(&bare, &r, &o), -ENOSYS);
  assert_int_equal(svc->api_create(&bare, pod_json, strlen(pod_json), NULL), -ENOSYS);
  kc_obj *p1 = kc_store_get(F.pods, kc_str_c("a"), kc_str_c("p1"));
  assert_int_equal(svc->event(&bare, (const kctrld_object *)p1, KCTRLD_EVENT_NORMAL, "R", "m"), -ENOSYS);
  assert_int_equal(svc->expect_creations(&bare, "a/p1", 1), -EINVAL);
  assert_true(svc->expectations_satisfied(&bare, "a/p1"));
  kc_obj_unref(p1);
  assert_string_equal(svc->ctx_controller(&bare), "");
  assert_string_equal(svc->ctx_controller(NULL), "");
}

/* The finalizer helpers are JSON patches through the env's API. */
static void test_finalizers(void **state) {
  struct mem_env m = {.may_write = true};
  kc_host_env menv = {&mem_ops, &m, NULL, false, NULL};
  kctrld_ctx mctx;
  kc_hostapi_ctx_init(&mctx, &menv, "mem", NULL, NULL, NULL);
  kc_obj *o = parse("{\"apiVersion\":\"demo.kctrld.io/v1\",\"kind\":\"PodSet\",\"metadata\":"
                    "{\"namespace\":\"default\",\"name\":\"web\",\"resourceVersion\":\"1234\"}}");
  const kctrld_object *obj = (const kctrld_object *)o;
  assert_false(svc->object_has_finalizer(obj, "demo.kctrld.io/cleanup"));
  assert_int_equal(svc->finalizer_add(&mctx, obj, "demo.kctrld.io/cleanup"), 0);
  assert_string_equal(m.path, "/apis/demo.kctrld.io/v1/namespaces/default/podsets/web");
  assert_string_equal(m.body, "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"1234\"},"
                              "{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"demo.kctrld.io/cleanup\"]}]");
  kc_obj_unref(o);
  o = parse("{\"apiVersion\":\"demo.kctrld.io/v1\",\"kind\":\"PodSet\",\"metadata\":{\"namespace\":"
            "\"default\",\"name\":\"web\",\"resourceVersion\":\"1235\",\"finalizers\":"
            "[\"foregroundDeletion\",\"demo.kctrld.io/cleanup\"]}}");
  obj = (const kctrld_object *)o;
  assert_true(svc->object_has_finalizer(obj, "demo.kctrld.io/cleanup"));
  int before = m.requests;
  assert_int_equal(svc->finalizer_add(&mctx, obj, "demo.kctrld.io/cleanup"), 0); /* present: no-op */
  assert_int_equal(m.requests, before);
  assert_int_equal(svc->finalizer_add(&mctx, obj, "other.io/x"), 0);
  assert_non_null(strstr(m.body, "{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":\"other.io/x\"}"));
  assert_int_equal(svc->finalizer_remove(&mctx, obj, "demo.kctrld.io/cleanup"), 0);
  assert_string_equal(m.body, "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/1\",\"value\":\"demo.kctrld.io/cleanup\"},"
                              "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/1\"}]");
  before = m.requests;
  assert_int_equal(svc->finalizer_remove(&mctx, obj, "absent.io/x"), 0);
  assert_int_equal(m.requests, before);
  assert_int_equal(svc->finalizer_add(&mctx, obj, "bad\"name"), -EINVAL);
  /* Finalizers are qualified names, as the API server validates them:
   * anything else is refused before a request is sent. */
  char long_name[80];
  memset(long_name, 'a', 64);
  long_name[64] = '\0';
  const char *bad[] = {"",        "demo.kctrld.io/", "/cleanup",   "Demo.io/x",     "a b",
                       "-x",      "x-",              "a/b/c",      "demo.io/x\\y", "tab\tx",
                       long_name, NULL};
  before = m.requests;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(svc->finalizer_add(&mctx, obj, bad[i]), -EINVAL);
    assert_int_equal(svc->finalizer_remove(&mctx, obj, bad[i]), -EINVAL);
  }
  assert_int_equal(m.requests, before);
  /* Without a prefix (the built-in ones) and at the length limits: a
   * 253-byte prefix and a 63-byte name. */
  long_name[63] = '\0';
  char longest[320];
  memset(longest, 'p', 253);
  longest[63] = longest[127] = longest[191] = '.';
  longest[253] = '/';
  memcpy(longest + 254, long_name, 64);
  const char *good[] = {"kubernetes", "foregroundDeletion", "a.b-c/X.y-z_0", long_name, longest};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    assert_int_equal(svc->finalizer_add(&mctx, obj, good[i]), 0);
  assert_int_equal(m.requests, before + 4); /* foregroundDeletion is present: no-op */
  assert_non_null(strstr(m.body, longest));
  longest[0] = '.'; /* an empty label in the prefix */
  assert_int_equal(svc->finalizer_add(&mctx, obj, longest), -EINVAL);
  kc_obj_unref(o);
}

/* Expectations live on the ctx's kc_expectations (the instance's). */
static void test_expectations_on_ctx(void **state) {
  kc_expectations *e = kc_expectations_new(0);
  assert_non_null(e);
  kctrld_ctx c;
  kc_hostapi_ctx_init(&c, &ENV, "test", e, NULL, NULL);
  assert_int_equal(svc->expect_creations(&c, "a/x", 2), 0);
  assert_false(svc->expectations_satisfied(&c, "a/x"));
  svc->creation_observed(&c, "a/x");
  svc->creation_observed(&c, "a/x");
  assert_true(svc->expectations_satisfied(&c, "a/x"));
  assert_int_equal(svc->expect_deletions(&c, "a/y", 1), 0);
  svc->expectations_forget(&c, "a/y");
  assert_int_equal(kc_expectations_count(e), 0);
  kc_expectations_free(e);
}

/* A plugin's log line names the key being reconciled once: from the
 * thread's reconcile fields (log.h) when a worker set them, else from the
 * ctx, and never again when the message carries key= itself. */
static size_t count_key_fields(const char *line) {
  size_t n = 0;
  for (const char *p = strstr(line, " key="); p; p = strstr(p + 1, " key=")) n++;
  return n;
}
static void test_log_key_once(void **state) {
  kctrld_ctx c;
  kc_hostapi_ctx_init(&c, &ENV, "test", NULL, "a/p1", NULL);
  kctrld_ctx *prev = kc_hostapi_enter(&c);
  const char *msgs[] = {"synced pods=3", "deleted key=a/p1", "plain"};
  for (int rec = 0; rec < 2; rec++)
    for (size_t i = 0; i < sizeof msgs / sizeof *msgs; i++) {
      if (rec) kc_log_set_reconcile("test", "a/p1", "r-1");
      tu_stderr_begin();
      svc->log(KC_LOG_INFO, "%s", msgs[i]);
      char *out = tu_stderr_end();
      kc_log_set_reconcile(NULL, NULL, NULL);
      if (count_key_fields(out) != 1) fail_msg("reconcile fields %d: %s", rec, out);
      assert_non_null(strstr(out, " key=a/p1"));
      free(out);
    }
  kc_hostapi_leave(prev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_settings),
      cmocka_unit_test(test_settings_unread),
      cmocka_unit_test(test_object_fields), cmocka_unit_test(test_cache),
      cmocka_unit_test(test_writes),      cmocka_unit_test(test_apply_request),
      cmocka_unit_test(test_terminal_failures),
      cmocka_unit_test(test_apply_against_apisim),      cmocka_unit_test(test_error_mapping), cmocka_unit_test(test_not_leader),
      cmocka_unit_test(test_event),       cmocka_unit_test(test_threads),
      cmocka_unit_test(test_two_environments), cmocka_unit_test(test_no_environment),
      cmocka_unit_test(test_finalizers),  cmocka_unit_test(test_expectations_on_ctx),
      cmocka_unit_test(test_log_key_once),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
