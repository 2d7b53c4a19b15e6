/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/watch/metalist.c: a paged metadata-only LIST of a
 * reflector's scope against a scripted HTTP server (mini_server.h), decoded
 * inline and on a decode pool. Checks the requests (resourceVersion and its
 * match on the first page only, continue tokens, limit, the metadata-only
 * Accept), the items handed over in order, and the result: complete with
 * the list's resourceVersion, or the failure (an item callback's error, a
 * non-2xx answer, a malformed body, a continue token too long). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/log.h"
#include "client/apiclient.h"
#include "mini_server.h"
#include "watch/decodepool.h"
#include "watch/metalist.h"
#include "watch/reflector.h"
#include "testutil.h"

#define MAXREQ 8

static struct {
  pthread_mutex_t mu;
  const char *bodies[MAXREQ]; /* the answer to request i (NULL: 404) */
  int status[MAXREQ];         /* 0: 200 */
  char got[MAXREQ][512];      /* "rv=... match=... limit=... continue=... accept=..." */
  unsigned nreq;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *q(const mini_server_request *rq, const char *name) {
  const char *v = mini_server_query(rq, name);
  return v ? v : "-";
}

static void handler(const mini_server_request *rq, mini_server_reply *reply, void *ud) {
  pthread_mutex_lock(&S.mu);
  unsigned i = S.nreq++;
  if (i < MAXREQ) {
    const char *acc = mini_server_header(rq, "Accept");
    snprintf(S.got[i], sizeof S.got[i], "%s rv=%s match=%s limit=%s continue=%s meta=%d",
             rq->path, q(rq, "resourceVersion"), q(rq, "resourceVersionMatch"), q(rq, "limit"),
             q(rq, "continue"), acc && strstr(acc, "as=PartialObjectMetadataList") != NULL);
    reply->status = S.bodies[i] ? (S.status[i] ? S.status[i] : 200) : 404;
    reply->body = S.bodies[i] ? S.bodies[i] : "{\"kind\":\"Status\",\"code\":404}";
  } else {
    reply->status = 500;
  }
  pthread_mutex_unlock(&S.mu);
}

static struct {
  uv_loop_t loop;
  mini_server *srv;
  char url[64];
  kc_kube_creds creds;
  kc_api *api;
  kc_decode_pool *pool;
  kc_reflector *scope;
  kc_metalist ml;
  /* what the callbacks saw */
  char items[512];
  unsigned nitems;
  int fail_at; /* item number (1-based) whose callback fails; 0: none */
  bool done;
  unsigned ndone;
  kc_metalist_result res;
  char res_rv[64];
  char res_decode_error[256];
} F;

static void sink_replace(void *ud, kc_reflector *r, kc_obj *const *objs, size_t n) {}
static void sink_upsert(void *ud, kc_reflector *r, kc_obj *o) {}
static void sink_remove(void *ud, kc_reflector *r, kc_obj *o) {}

static int setup_with(unsigned threads) {
  memset(&F, 0, sizeof F);
  pthread_mutex_lock(&S.mu);
  memset(S.bodies, 0, sizeof S.bodies);
  memset(S.status, 0, sizeof S.status);
  memset(S.got, 0, sizeof S.got);
  S.nreq = 0;
  pthread_mutex_unlock(&S.mu);
  if (uv_loop_init(&F.loop) != 0) return -1;
  F.srv = mini_server_start(handler, NULL, NULL, NULL);
  if (!F.srv) return -1;
  snprintf(F.url, sizeof F.url, "http://127.0.0.1:%d", mini_server_port(F.srv));
  F.creds = (kc_kube_creds){.server = F.url, .token = "t0k"};
  if (threads && kc_decode_pool_new(&F.loop, threads, &F.pool) != 0) return -1;
  if (kc_api_new(&F.loop, &F.creds, &F.api) != 0) return -1;
  kc_reflector_spec spec = {.api_path = "/api/v1", .resource = "pods", .namespace_ = "ns1",
                            .page_size = 2};
  kc_reflector_sink sink = {.replace = sink_replace, .upsert = sink_upsert,
                            .remove = sink_remove};
  return kc_reflector_new(&F.loop, F.api, &spec, &sink, &F.scope);
}

static int setup_inline(void **state) { return setup_with(0); }
static int setup_pool(void **state) { return setup_with(2); }

static int teardown(void **state) {
  kc_metalist_cancel(&F.ml);
  kc_reflector_close(F.scope);
  kc_api_close(F.api);
  kc_decode_pool_free(F.pool);
  mini_server_stop(F.srv);
  uv_run(&F.loop, UV_RUN_DEFAULT);
  return uv_loop_close(&F.loop) == 0 ? 0 : -1;
}

static int on_item(void *ud, kc_obj *obj) {
  F.nitems++;
  size_t n = strlen(F.items);
  snprintf(F.items + n, sizeof F.items - n, "%s%.*s@%.*s", n ? " " : "",
           (int)kc_obj_name(obj).len, kc_obj_name(obj).ptr, (int)kc_obj_resource_version(obj).len,
           kc_obj_resource_version(obj).ptr);
  return (int)F.nitems == F.fail_at ? -ECANCELED : 0;
}

static void on_done(void *ud, const kc_metalist_result *res) {
  assert_ptr_equal(ud, &F);
  F.done = true;
  F.ndone++;
  F.res = *res;
  snprintf(F.res_rv, sizeof F.res_rv, "%s", res->resource_version);
  snprintf(F.res_decode_error, sizeof F.res_decode_error, "%s", res->decode_error);
}

/* Lists at rv (match Exact when rv is set) and runs the loop until done. */
static void run_list(const char *rv) {
  kc_metalist_opts o = {.api = F.api, .pool = F.pool, .budget = F.pool ? 1024 : 0,
                        .scope = F.scope, .rv = rv, .match = rv ? "Exact" : NULL,
                        .with_limit = true, .log_tag = "test", .item = on_item,
                        .done = on_done, .ud = &F};
  kc_metalist_start(&F.ml, &o);
  uint64_t end = tu_mono_ms() + 10000;
  while (!F.done && tu_mono_ms() < end) uv_run(&F.loop, UV_RUN_ONCE);
  assert_true(F.done);
  assert_int_equal(F.ndone, 1);
}

static const char *meta_item(const char *name, const char *rv) {
  static char buf[MAXREQ * 4][400];
  static unsigned n;
  char *b = buf[n++ % (MAXREQ * 4)];
  snprintf(b, sizeof buf[0],
           "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{"
           "\"name\":\"%s\",\"namespace\":\"ns1\",\"uid\":\"uid-%s\",\"resourceVersion\":\"%s\","
           "\"labels\":{\"app\":\"web\"},\"managedFields\":[{\"manager\":\"m\"}]}}",
           name, name, rv);
  return b;
}

static const char *page(char *buf, size_t cap, const char *rv, const char *cont, const char *a,
                        const char *b) {
  snprintf(buf, cap,
           "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\","
           "\"metadata\":{\"resourceVersion\":\"%s\"%s%s%s},\"items\":[%s%s%s]}",
           rv, cont ? ",\"continue\":\"" : "", cont ? cont : "", cont ? "\"" : "", a ? a : "",
           b ? "," : "", b ? b : "");
  return buf;
}

static void test_pages_followed(void **state) {
  char p1[1024], p2[1024], p3[1024];
  S.bodies[0] = page(p1, sizeof p1, "60", "c1", meta_item("a", "51"), meta_item("b", "52"));
  S.bodies[1] = page(p2, sizeof p2, "60", "c2", meta_item("c", "53"), meta_item("d", "54"));
  S.bodies[2] = page(p3, sizeof p3, "60", NULL, meta_item("e", "55"), NULL);
  run_list("55");
  assert_int_equal(F.res.end, KC_METALIST_COMPLETE);
  assert_string_equal(F.res_rv, "60");
  assert_string_equal(F.items, "a@51 b@52 c@53 d@54 e@55");
  assert_int_equal(S.nreq, 3);
  assert_string_equal(S.got[0], "/api/v1/namespaces/ns1/pods rv=55 match=Exact limit=2 "
                                "continue=- meta=1");
  assert_string_equal(S.got[1], "/api/v1/namespaces/ns1/pods rv=- match=- limit=2 "
                                "continue=c1 meta=1");
  assert_string_equal(S.got[2], "/api/v1/namespaces/ns1/pods rv=- match=- limit=2 "
                                "continue=c2 meta=1");
}

static void test_consistent_read(void **state) {
  char p1[1024];
  S.bodies[0] = page(p1, sizeof p1, "70", NULL, meta_item("a", "51"), NULL);
  run_list(NULL);
  assert_int_equal(F.res.end, KC_METALIST_COMPLETE);
  assert_string_equal(F.res_rv, "70");
  assert_string_equal(S.got[0], "/api/v1/namespaces/ns1/pods rv=- match=- limit=2 "
                                "continue=- meta=1");
}

/* The item callback decides: the list ends there, no further page. */
static void test_item_error_stops(void **state) {
  char p1[1024], p2[1024];
  S.bodies[0] = page(p1, sizeof p1, "60", "c1", meta_item("a", "51"), meta_item("b", "52"));
  S.bodies[1] = page(p2, sizeof p2, "60", NULL, meta_item("c", "53"), NULL);
  F.fail_at = 2;
  run_list("55");
  assert_int_equal(F.res.end, KC_METALIST_FAILED);
  assert_true(F.res.decode_rc < 0);
  assert_true(F.res.decoded);
  assert_int_equal(F.nitems, 2);
  assert_int_equal(S.nreq, 1);
}

static void test_http_error(void **state) {
  S.bodies[0] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
                "\"too old resource version\",\"reason\":\"Expired\",\"code\":410}";
  S.status[0] = 410;
  run_list("55");
  assert_int_equal(F.res.end, KC_METALIST_FAILED);
  assert_int_equal(F.res.api.error, 0);
  assert_int_equal(F.res.api.status.code, 410);
  assert_int_equal(F.nitems, 0);
}

static void test_malformed_body(void **state) {
  S.bodies[0] = "{\"kind\":\"PartialObjectMetadataList\",\"items\":[{\"metadata\":";
  run_list("55");
  assert_int_equal(F.res.end, KC_METALIST_FAILED);
  assert_true(F.res.decoded);
  assert_true(F.res.decode_rc < 0);
  assert_true(F.res_decode_error[0] != 0);
}

static void test_continue_too_long(void **state) {
  static char cont[1100];
  memset(cont, 'x', sizeof cont - 1);
  static char p1[2048];
  S.bodies[0] = page(p1, sizeof p1, "60", cont, meta_item("a", "51"), NULL);
  run_list("55");
  assert_int_equal(F.res.end, KC_METALIST_CONTINUE_TOO_LONG);
  assert_int_equal(S.nreq, 1);
}

/* Cancelled while the answer is under way: no callback afterwards. */
static void test_cancel(void **state) {
  char p1[1024];
  S.bodies[0] = page(p1, sizeof p1, "60", NULL, meta_item("a", "51"), NULL);
  kc_metalist_opts o = {.api = F.api, .pool = F.pool, .scope = F.scope, .rv = "55",
                        .match = "Exact", .with_limit = true, .log_tag = "test",
                        .item = on_item, .done = on_done, .ud = &F};
  kc_metalist_start(&F.ml, &o);
  kc_metalist_cancel(&F.ml);
  uv_run(&F.loop, UV_RUN_NOWAIT);
  assert_false(F.done);
  assert_int_equal(F.nitems, 0);
}

#define BOTH(t)                                                                   \
  cmocka_unit_test_setup_teardown(t, setup_inline, teardown),                    \
      cmocka_unit_test_setup_teardown(t, setup_pool, teardown)

int main(void) {
  kc_log_set_level(KC_LOG_WARN);
  const struct CMUnitTest tests[] = {
      BOTH(test_pages_followed),   BOTH(test_consistent_read), BOTH(test_item_error_stops),
      BOTH(test_http_error),       BOTH(test_malformed_body),  BOTH(test_continue_too_long),
      BOTH(test_cancel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
