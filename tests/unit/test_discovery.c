/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/client/discovery.c against mini_server. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/discovery.h"
#include "kube/kurl.h"
#include "mini_server.h"

static mini_server *srv;
static char server_url[64];
static char *deep_doc; /* served at /apis/deep.io/v1 */
static size_t deep_len;
static atomic_bool crd_installed;
static atomic_int core_fetches;

static const char CORE[] =
    "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":\"v1\",\"resources\":["
    "{\"name\":\"pods/status\",\"singularName\":\"\",\"namespaced\":true,\"kind\":\"Pod\","
    "\"verbs\":[\"get\",\"patch\",\"update\"]},"
    "{\"name\":\"pods\",\"singularName\":\"pod\",\"namespaced\":true,\"kind\":\"Pod\","
    "\"verbs\":[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\",\"patch\",\"update\","
    "\"watch\"],\"shortNames\":[\"po\"],\"categories\":[\"all\"]},"
    "{\"name\":\"namespaces\",\"singularName\":\"namespace\",\"namespaced\":false,"
    "\"kind\":\"Namespace\",\"verbs\":[\"get\",\"list\",\"watch\"]},"
    "{\"name\":\"configmaps\",\"singularName\":\"configmap\",\"namespaced\":true,"
    "\"kind\":\"ConfigMap\",\"verbs\":[\"get\",\"list\",\"watch\"]}]}";

static const char *GROUP_EMPTY =
    "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":\"example.com/v1\","
    "\"resources\":[]}";
static const char *GROUP_FOO =
    "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":\"example.com/v1\","
    "\"resources\":[{\"name\":\"foos\",\"singularName\":\"foo\",\"namespaced\":true,"
    "\"kind\":\"Foo\",\"verbs\":[\"list\",\"watch\"]},{\"name\":\"foos/status\","
    "\"namespaced\":true,\"kind\":\"Foo\",\"verbs\":[\"get\"]},{\"name\":\"bars\","
    "\"namespaced\":false,\"kind\":\"Bar\",\"verbs\":[\"list\"]}]}";

static void handler(const mini_server_request *rq, mini_server_reply *r, void *ud) {
  if (strcmp(rq->path, "/api/v1") == 0) {
    atomic_fetch_add(&core_fetches, 1);
    /* Slow enough that concurrent resolves overlap. */
    static const mini_server_chunk c[] = {{CORE, 0, 100, false}};
    r->chunks = c;
    r->nchunks = 1;
  } else if (strcmp(rq->path, "/apis/example.com/v1") == 0) {
    r->body = atomic_load(&crd_installed) ? GROUP_FOO : GROUP_EMPTY;
  } else if (strcmp(rq->path, "/apis/deep.io/v1") == 0) {
    r->body = deep_doc;
    r->body_len = deep_len;
  } else if (strcmp(rq->path, "/apis/broken.io/v1") == 0) {
    r->body = "{\"kind\":\"APIGroup\"}";
  } else {
    r->status = 404;
    r->body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
              "\"message\":\"the server could not find the requested resource\","
              "\"reason\":\"NotFound\",\"details\":{},\"code\":404}";
  }
}

/* An APIResourceList whose member "x" holds `levels` nested arrays, closed
 * (a tree yajl would build in full). */
static char *nested_doc(size_t levels, size_t *len) {
  static const char head[] = "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":\"foos\","
                             "\"kind\":\"Foo\",\"namespaced\":true}],\"x\":";
  size_t n = sizeof head - 1 + 2 * levels + 1;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, head, sizeof head - 1);
  memset(s + sizeof head - 1, '[', levels);
  memset(s + sizeof head - 1 + levels, ']', levels);
  s[n - 1] = '}';
  s[n] = '\0';
  *len = n;
  return s;
}

static int setup(void **state) {
  deep_doc = nested_doc(1000000, &deep_len);
  if (!deep_doc) return -1;
  srv = mini_server_start(handler, NULL, NULL, NULL);
  if (!srv) return -1;
  snprintf(server_url, sizeof server_url, "http://127.0.0.1:%d", mini_server_port(srv));
  return 0;
}

static int teardown(void **state) {
  mini_server_stop(srv);
  free(deep_doc);
  return 0;
}

/* The path of a collection (name NULL) or an object of a resource as
 * discovery describes it, as the daemon builds it (daemon.c keeps the
 * group/version prefix, hostapi.c adds the rest): ns only for a namespaced
 * resource. 0, or -ENOSPC. */
static int info_path(const kc_resource_info *r, const char *ns, const char *name, char *buf,
                     size_t cap) {
  char prefix[400];
  kc_buf pb = kc_buf_fixed(prefix, sizeof prefix);
  kc_url_group_version(&pb, kc_str_c(r->group), kc_str_c(r->version));
  kc_buf b = kc_buf_fixed(buf, cap);
  kc_url_resource(&b, prefix, r->plural, r->namespaced ? kc_str_c(ns) : (kc_str){NULL, 0},
                  kc_str_c(name), NULL);
  return pb.err ? pb.err : b.err;
}

struct answer {
  int calls;
  int err;
  kc_resource_info info;
  int code;
};

static void on_resolved(int err, const kc_resource_info *info, const kc_status *st,
                        void *ud) {
  struct answer *a = ud;
  a->calls++;
  a->err = err;
  a->code = st ? st->code : -1;
  if (info) a->info = *info;
}

static void run(uv_loop_t *loop, kc_api *api) {
  uint64_t t0 = uv_now(loop);
  while (kc_http_active(kc_api_http(api)) > 0) {
    uv_run(loop, UV_RUN_ONCE);
    if (uv_now(loop) - t0 > 10000) fail_msg("requests still running");
  }
}

static void test_resolve_and_cache(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_kube_creds cr = {.server = server_url};
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(&loop, &cr, &api), 0);
  kc_discovery *d = NULL;
  assert_int_equal(kc_discovery_new(api, &d), 0);
  kc_resource_info info;
  /* Lease is known without asking. */
  assert_int_equal(kc_discovery_lookup(d, "coordination.k8s.io/v1", "Lease", &info), 0);
  assert_string_equal(info.plural, "leases");
  assert_true(info.namespaced);
  assert_int_equal(kc_discovery_lookup(d, "v1", "Pod", &info), -ENOENT);
  assert_int_equal(kc_discovery_lookup(d, "/v1", "Pod", &info), -EINVAL);
  assert_int_equal(kc_discovery_resolve(d, "a/b/c", "Pod", on_resolved, NULL), -EINVAL);

  struct answer pod = {0}, ns = {0}, missing = {0};
  atomic_store(&core_fetches, 0);
  assert_int_equal(kc_discovery_resolve(d, "v1", "Pod", on_resolved, &pod), 0);
  assert_int_equal(kc_discovery_resolve(d, "v1", "Namespace", on_resolved, &ns), 0);
  assert_int_equal(kc_discovery_resolve(d, "v1", "Nope", on_resolved, &missing), 0);
  assert_int_equal(pod.calls, 0); /* never from inside resolve */
  run(&loop, api);
  assert_int_equal(atomic_load(&core_fetches), 1); /* one fetch for three callers */
  assert_int_equal(pod.calls, 1);
  assert_int_equal(pod.err, 0);
  assert_string_equal(pod.info.plural, "pods"); /* not pods/status */
  assert_string_equal(pod.info.group, "");
  assert_string_equal(pod.info.version, "v1");
  assert_true(pod.info.namespaced);
  assert_int_equal(ns.err, 0);
  assert_string_equal(ns.info.plural, "namespaces");
  assert_false(ns.info.namespaced);
  assert_int_equal(missing.calls, 1);
  assert_int_equal(missing.err, -ENOENT);
  assert_int_equal(kc_discovery_lookup(d, "v1", "ConfigMap", &info), 0);
  assert_string_equal(info.plural, "configmaps");
  /* "Did you mean" from what the server serves. */
  char best[64];
  assert_int_equal(kc_discovery_suggest(d, "v1", "ConfigMaps", best, sizeof best), 0);
  assert_string_equal(best, "ConfigMap");
  assert_int_equal(kc_discovery_suggest(d, "v1", "pod", best, sizeof best), 0);
  assert_string_equal(best, "Pod");
  assert_int_equal(kc_discovery_suggest(d, "v1", "Deployment", best, sizeof best), -ENOENT);
  assert_int_equal(kc_discovery_suggest(d, "nope.io/v1", "Pod", best, sizeof best), -ENOENT);

  char path[256];
  assert_int_equal(info_path(&pod.info, "team-a", NULL, path, sizeof path), 0);
  assert_string_equal(path, "/api/v1/namespaces/team-a/pods");
  info_path(&pod.info, NULL, NULL, path, sizeof path);
  assert_string_equal(path, "/api/v1/pods");
  info_path(&ns.info, "ignored", "kube-system", path, sizeof path);
  assert_string_equal(path, "/api/v1/namespaces/kube-system");
  kc_discovery_lookup(d, "coordination.k8s.io/v1", "Lease", &info);
  info_path(&info, "kctrld-system", "kctrld", path, sizeof path);
  assert_string_equal(path, "/apis/coordination.k8s.io/v1/namespaces/kctrld-system/leases/kctrld");
  assert_int_equal(info_path(&info, "kctrld-system", "kctrld", path, 10), -ENOSPC);

  /* A CRD installed later: not found, then found on the next resolve. */
  struct answer foo = {0};
  atomic_store(&crd_installed, false);
  assert_int_equal(kc_discovery_resolve(d, "example.com/v1", "Foo", on_resolved, &foo), 0);
  run(&loop, api);
  assert_int_equal(foo.err, -ENOENT);
  atomic_store(&crd_installed, true);
  assert_int_equal(kc_discovery_resolve(d, "example.com/v1", "Foo", on_resolved, &foo), 0);
  run(&loop, api);
  assert_int_equal(foo.calls, 2);
  assert_int_equal(foo.err, 0);
  assert_string_equal(foo.info.group, "example.com");
  assert_string_equal(foo.info.plural, "foos");
  assert_int_equal(kc_discovery_lookup(d, "example.com/v1", "Bar", &info), 0);
  assert_false(info.namespaced);
  info_path(&foo.info, "ns", "a", path, sizeof path);
  assert_string_equal(path, "/apis/example.com/v1/namespaces/ns/foos/a");

  /* Unknown group: 404 -> -ENOENT; a body that is no APIResourceList: -EIO,
   * and the cache is kept. */
  struct answer nope = {0}, broken = {0};
  assert_int_equal(kc_discovery_resolve(d, "nope.io/v1", "X", on_resolved, &nope), 0);
  assert_int_equal(kc_discovery_resolve(d, "broken.io/v1", "X", on_resolved, &broken), 0);
  run(&loop, api);
  assert_int_equal(nope.err, -ENOENT);
  assert_int_equal(nope.code, 404);
  assert_int_equal(broken.err, -EIO);

  /* A document nested a million levels deep: refused (-EIO), no crash. */
  struct answer deep = {0};
  assert_int_equal(kc_discovery_resolve(d, "deep.io/v1", "Foo", on_resolved, &deep), 0);
  run(&loop, api);
  assert_int_equal(deep.calls, 1);
  assert_int_equal(deep.err, -EIO);
  assert_int_equal(kc_discovery_lookup(d, "deep.io/v1", "Foo", &info), -ENOENT);

  /* Freeing with a fetch in flight: no callback. */
  struct answer late = {0};
  assert_int_equal(kc_discovery_resolve(d, "v1", "Pod", on_resolved, &late), 0);
  uv_run(&loop, UV_RUN_NOWAIT);
  kc_discovery_free(d);
  assert_int_equal(kc_http_active(kc_api_http(api)), 0);
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(late.calls, 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void count(const char *plural, const char *kind, bool namespaced, void *ud) {
  (*(int *)ud)++;
}

static void test_parse(void **state) {
  int n = 0;
  char err[160];
  assert_int_equal(kc_discovery_parse(CORE, strlen(CORE), count, &n, err, sizeof err), 0);
  assert_int_equal(n, 3);
  n = 0;
  assert_int_equal(kc_discovery_parse("{\"kind\":\"Status\"}", 17, count, &n, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "not an APIResourceList");
  static const char nores[] = "{\"kind\":\"APIResourceList\",\"resources\":{}}";
  assert_int_equal(kc_discovery_parse(nores, strlen(nores), count, &n, err, sizeof err), -EINVAL);
  assert_string_equal(err, "no resources array");
  assert_int_equal(kc_discovery_parse("{\"kind\":", 8, count, &n, NULL, 0), -EINVAL);
  assert_int_equal(kc_discovery_parse("{\"kind\":", 8, count, &n, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "invalid JSON"));
  assert_int_equal(n, 0);
}

/* Nesting is refused before yajl builds a tree (whose free recurses once per
 * level: a million levels overflowed the stack). The limit is the objects'
 * one: 256 open arrays/objects, the root included. */
static void test_parse_depth_limit(void **state) {
  char err[160];
  int n = 0;
  size_t len;
  char *doc = nested_doc(1000000, &len);
  assert_non_null(doc);
  assert_int_equal(kc_discovery_parse(doc, len, count, &n, err, sizeof err), -E2BIG);
  free(doc);
  /* The 256th '[' (the 257th level) after the 91 bytes before "x"'s value. */
  assert_string_equal(err, "offset 346: nesting deeper than KC_OBJ_MAX_DEPTH (256) levels");
  assert_int_equal(n, 0);

  doc = nested_doc(255, &len); /* root + 255 = 256 levels: fine */
  assert_non_null(doc);
  assert_int_equal(kc_discovery_parse(doc, len, count, &n, err, sizeof err), 0);
  free(doc);
  assert_int_equal(n, 1);
  doc = nested_doc(256, &len);
  assert_non_null(doc);
  assert_int_equal(kc_discovery_parse(doc, len, count, &n, err, sizeof err), -E2BIG);
  free(doc);
  assert_int_equal(n, 1);

  /* Brackets and escaped quotes inside strings are not structure. */
  static const char strs[] =
      "{\"kind\":\"APIResourceList\",\"x\":\"[[[{{\\\"[[\",\"resources\":[{\"name\":\"a\","
      "\"kind\":\"A\"}]}";
  n = 0;
  assert_int_equal(kc_discovery_parse(strs, strlen(strs), count, &n, err, sizeof err), 0);
  assert_int_equal(n, 1);
  /* yajl_tree_parse takes comments, where a '"' would hide brackets from the
   * scan: comments and NUL bytes are refused. */
  static const char comment[] = "{\"kind\":\"APIResourceList\",\"resources\":[] /* \" */}";
  assert_int_equal(kc_discovery_parse(comment, strlen(comment), count, &n, err, sizeof err),
                   -EINVAL);
  assert_string_equal(err, "offset 41: comments are not JSON");
  static const char nul[] = "{\"kind\":\"APIResourceList\",\"resources\":[]}\0[[[";
  assert_int_equal(kc_discovery_parse(nul, sizeof nul - 1, count, &n, err, sizeof err), -EINVAL);
  assert_string_equal(err, "offset 41: NUL byte");
}

static void test_kind_suggest(void **state) {
  static const char *const names[] = {"ConfigMap", "Ingress", "NetworkPolicy", "Pod", "Endpoints"};
  const size_t n = sizeof names / sizeof names[0];
  assert_string_equal(kc_discovery_kind_suggest("ConfigMaps", names, n), "ConfigMap");
  assert_string_equal(kc_discovery_kind_suggest("configmap", names, n), "ConfigMap");
  assert_string_equal(kc_discovery_kind_suggest("Ingresses", names, n), "Ingress");
  assert_string_equal(kc_discovery_kind_suggest("NetworkPolicies", names, n), "NetworkPolicy");
  assert_string_equal(kc_discovery_kind_suggest("Pdo", names, n), "Pod");
  assert_string_equal(kc_discovery_kind_suggest("endpoints", names, n), "Endpoints");
  assert_null(kc_discovery_kind_suggest("Deployment", names, n));
  assert_null(kc_discovery_kind_suggest("", names, n));

  /* Offline, for --check-config: built-in group/versions only. */
  char msg[256];
  assert_int_equal(kc_discovery_builtin_check("v1", "ConfigMaps", msg, sizeof msg), -ENOENT);
  assert_string_equal(msg, "kind ConfigMaps is not served by v1 (did you mean ConfigMap?)");
  assert_int_equal(kc_discovery_builtin_check("apps/v1", "Deploymnet", msg, sizeof msg), -ENOENT);
  assert_string_equal(msg, "kind Deploymnet is not served by apps/v1 (did you mean Deployment?)");
  assert_int_equal(kc_discovery_builtin_check("v1", "Gadget", msg, sizeof msg), -ENOENT);
  assert_string_equal(msg, "kind Gadget is not served by v1 (a built-in group/version)");
  assert_int_equal(kc_discovery_builtin_check("v1", "ConfigMap", msg, sizeof msg), 0);
  assert_int_equal(kc_discovery_builtin_check("apps/v1", "StatefulSet", msg, sizeof msg), 0);
  assert_int_equal(kc_discovery_builtin_check("demo.kctrld.io/v1", "PodSets", msg, sizeof msg), 0);
  assert_string_equal(msg, "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resolve_and_cache),
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_parse_depth_limit),
      cmocka_unit_test(test_kind_suggest),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
