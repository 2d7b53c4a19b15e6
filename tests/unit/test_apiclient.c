/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/client/apiclient.c: headers, Status parsing and classification,
 * token re-read on 401, synchronous worker requests, TLS with a CA generated
 * by openssl at test time. */
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/apiclient.h"
#include "client/restmetrics.h"
#include "base/log.h"
#include "mini_server.h"
#include "testutil.h"

static char dir[256];
static mini_server *srv;
static char server_url[64];
static char token_path[300];
static char good_token[64] = "tok-1";
static pthread_mutex_t token_mu = PTHREAD_MUTEX_INITIALIZER;

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char *STATUS_404 =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"leases.coordination.k8s.io \\\"kctrld\\\" not found\",\"reason\":\"NotFound\","
    "\"details\":{\"name\":\"kctrld\",\"group\":\"coordination.k8s.io\",\"kind\":\"leases\"},"
    "\"code\":404}";

static void handler(const mini_server_request *rq, mini_server_reply *r, void *ud) {
  static _Thread_local char buf[1024];
  const char *auth = mini_server_header(rq, "Authorization");
  char want[128];
  pthread_mutex_lock(&token_mu);
  snprintf(want, sizeof want, "Bearer %s", good_token);
  pthread_mutex_unlock(&token_mu);
  if (strncmp(rq->path, "http://kctrld-proxied.invalid:8080/", 35) == 0) {
    /* A proxy request: the absolute URL as request target. */
    const char *host = mini_server_header(rq, "Host");
    snprintf(buf, sizeof buf, "proxied %s host=%s", rq->path, host ? host : "-");
    r->body = buf;
    return;
  }
  if (strncmp(rq->path, "/open/", 6) != 0 && (!auth || strcmp(auth, want) != 0)) {
    r->status = 401;
    r->body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
              "\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}";
    return;
  }
  if (strcmp(rq->path, "/open/forbidden") == 0) { /* a proxy that echoes the credentials */
    r->status = 403;
    snprintf(buf, sizeof buf,
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":403,"
             "\"reason\":\"Forbidden\",\"message\":\"request with Authorization: %s refused\"}",
             auth ? auth : "-");
    r->body = buf;
    return;
  }
  if (strcmp(rq->path, "/api/v1/namespaces/ns/configmaps") == 0 ||
      strcmp(rq->path, "/open/echo") == 0) {
    const char *acc = mini_server_header(rq, "Accept");
    const char *ua = mini_server_header(rq, "User-Agent");
    const char *ct = mini_server_header(rq, "Content-Type");
    snprintf(buf, sizeof buf, "%s|%s|%s|%s|%s|%s|%zu", rq->method, acc ? acc : "-",
             ua ? ua : "-", ct ? ct : "-", auth ? auth : "-",
             mini_server_query(rq, "limit") ? mini_server_query(rq, "limit") : "-", rq->body_len);
    r->body = buf;
  } else if (strcmp(rq->path, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kctrld") == 0) {
    r->status = 404;
    r->body = STATUS_404;
  } else if (strcmp(rq->path, "/api/v1/namespaces/ns/pods") == 0) {
    r->status = 429;
    r->content_type = "text/plain";
    r->headers[0] = "Retry-After: 3";
    r->body = "Too many requests, please try again later.\n";
  } else {
    r->status = 200;
    r->body = "{}";
  }
}

static kc_kube_creds creds;

static int setup(void **state) {
  snprintf(dir, sizeof dir, "/tmp/kctrld-api.XXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(token_path, sizeof token_path, "%s/token", dir);
  FILE *f = fopen(token_path, "w");
  if (!f) return -1;
  fputs("tok-1\n", f);
  fclose(f);
  srv = mini_server_start(handler, NULL, NULL, NULL);
  if (!srv) return -1;
  snprintf(server_url, sizeof server_url, "http://127.0.0.1:%d", mini_server_port(srv));
  creds = (kc_kube_creds){.server = server_url, .token_file = token_path, .namespace_ = "ns"};
  return 0;
}

static int teardown(void **state) {
  mini_server_stop(srv);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- Status parsing, no network ---- */

static void test_status_parse(void **state) {
  kc_status st;
  kc_api_status_parse(&st, 404, "GET", STATUS_404, strlen(STATUS_404), NULL, 0);
  assert_true(st.from_body);
  assert_int_equal(st.code, 404);
  assert_string_equal(st.reason, "NotFound");
  assert_string_equal(st.message, "leases.coordination.k8s.io \"kctrld\" not found");
  assert_true(kc_api_is_not_found(&st));
  assert_false(kc_api_is_retryable(&st));
  assert_int_equal(st.retry_after_seconds, -1);

  static const char apf[] = "Too many requests, please try again later.\n";
  kc_api_status_parse(&st, 429, "GET", apf, strlen(apf), "7", 1);
  assert_false(st.from_body);
  assert_string_equal(st.reason, "TooManyRequests");
  assert_int_equal(st.retry_after_seconds, 7);
  assert_true(kc_api_is_too_many_requests(&st));
  assert_true(kc_api_is_retryable(&st));
  assert_non_null(strstr(st.message, "Too many requests, please try again later."));

  /* Non-Status 409: POST means AlreadyExists, else Conflict. */
  kc_api_status_parse(&st, 409, "POST", "<html>", 6, NULL, 0);
  assert_true(kc_api_is_already_exists(&st));
  assert_false(kc_api_is_conflict(&st));
  kc_api_status_parse(&st, 409, "PUT", "", 0, NULL, 0);
  assert_true(kc_api_is_conflict(&st));

  static const char expired[] =
      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
      "\"message\":\"too old resource version: 180 (950)\",\"reason\":\"Expired\",\"code\":410}";
  kc_api_status_parse(&st, 200, "GET", expired, strlen(expired), NULL, 0);
  assert_int_equal(st.code, 410); /* an ERROR event's object, code from the body */
  assert_true(kc_api_is_gone(&st));
  static const char gone[] = "{\"kind\":\"Status\",\"reason\":\"Gone\",\"code\":410}";
  kc_api_status_parse(&st, 410, "GET", gone, strlen(gone), NULL, 0);
  assert_true(kc_api_is_gone(&st));
  kc_api_status_parse(&st, 410, "GET", NULL, 0, NULL, 0);
  assert_true(kc_api_is_gone(&st)); /* unknown reason: by code */

  static const char too_large[] =
      "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Timeout: Too large resource "
      "version: 200, current: 100\",\"reason\":\"Timeout\",\"details\":{\"causes\":[{\"reason\":"
      "\"ResourceVersionTooLarge\",\"message\":\"Too large resource version\"}],"
      "\"retryAfterSeconds\":1},\"code\":504}";
  kc_api_status_parse(&st, 504, "GET", too_large, strlen(too_large), "9", 1);
  assert_true(kc_api_is_too_large_rv(&st));
  assert_true(st.rv_too_large);
  assert_int_equal(st.retry_after_seconds, 1); /* the body wins over the header */
  assert_true(kc_api_is_retryable(&st));

  static const char server_timeout[] =
      "{\"kind\":\"Status\",\"reason\":\"ServerTimeout\",\"code\":500,\"details\":"
      "{\"retryAfterSeconds\":2}}";
  kc_api_status_parse(&st, 500, "GET", server_timeout, strlen(server_timeout), NULL, 0);
  assert_true(kc_api_is_retryable(&st));
  assert_false(kc_api_is_too_large_rv(&st));
  assert_int_equal(st.retry_after_seconds, 2);

  /* A Status with an unknown reason falls back to the code. */
  static const char odd[] = "{\"kind\":\"Status\",\"reason\":\"SomethingNew\",\"code\":404}";
  kc_api_status_parse(&st, 404, "GET", odd, strlen(odd), NULL, 0);
  assert_true(kc_api_is_not_found(&st));
  /* A known but different reason does not. */
  static const char forb[] = "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"code\":404}";
  kc_api_status_parse(&st, 404, "GET", forb, strlen(forb), NULL, 0);
  assert_false(kc_api_is_not_found(&st));
  assert_true(kc_api_is_forbidden(&st));

  kc_api_status_parse(&st, 502, "GET", "bad gateway", 11, "x1", 2);
  assert_string_equal(st.reason, "InternalError");
  assert_int_equal(st.retry_after_seconds, -1); /* not an integer */
  kc_api_status_parse(&st, 422, "POST", "{\"kind\":\"Stat", 13, NULL, 0);
  assert_true(kc_api_is_invalid(&st));
}

/* A Status whose member "x" holds `levels` nested arrays, closed. */
static char *nested_status(size_t levels, size_t *len) {
  static const char head[] = "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"code\":409,\"x\":";
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

struct deep_case {
  const char *body;
  size_t len;
  kc_status st;
};

static void *parse_deep(void *arg) {
  struct deep_case *c = arg;
  kc_api_status_parse(&c->st, 500, "PUT", c->body, c->len, "3", 1);
  return NULL;
}

/* Status bodies are read through jsontree.h: nesting deeper than
 * KC_OBJ_MAX_DEPTH is refused before yajl builds a tree (whose free
 * recurses once per level). Just under the 64 KiB a Status body may have,
 * 32k levels overflowed a thread with musl's default 128 KiB stack; the
 * parse runs on such a thread here. */
static void test_status_parse_depth_limit(void **state) {
  struct deep_case c;
  char *body = nested_status((64 * 1024 - 60) / 2, &c.len);
  assert_non_null(body);
  assert_true(c.len < 64 * 1024);
  c.body = body;
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, 128 * 1024), 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, &attr, parse_deep, &c), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  pthread_attr_destroy(&attr);
  free(body);
  /* Not read as a Status: the HTTP code's meaning, and why in the message. */
  assert_false(c.st.from_body);
  assert_int_equal(c.st.code, 500);
  assert_string_equal(c.st.reason, "InternalError");
  assert_int_equal(c.st.retry_after_seconds, 3);
  assert_string_equal(c.st.message,
                      "an error on the server has prevented the request from succeeding "
                      "(unreadable Status body: offset 307: nesting deeper than "
                      "KC_OBJ_MAX_DEPTH (256) levels)");

  /* A million levels (2 MB): longer than a Status may be, not parsed. */
  body = nested_status(1000000, &c.len);
  assert_non_null(body);
  c.body = body;
  parse_deep(&c);
  free(body);
  assert_false(c.st.from_body);
  assert_string_equal(c.st.reason, "InternalError");

  /* 256 levels, the root included, are read. */
  body = nested_status(255, &c.len);
  assert_non_null(body);
  c.body = body;
  parse_deep(&c);
  free(body);
  assert_true(c.st.from_body);
  assert_int_equal(c.st.code, 409);
  assert_true(kc_api_is_conflict(&c.st));
}

/* ---- async ---- */

struct call {
  int dones;
  kc_api_result res;
  char body[2048];
  size_t len;
  char ct[64];
};

static int a_response(kc_api_call *call, long status, void *ud) {
  struct call *c = ud;
  size_t n;
  const char *v = kc_api_call_header(call, "Content-Type", &n);
  if (v) snprintf(c->ct, sizeof c->ct, "%.*s", (int)n, v);
  return KC_HTTP_CONTINUE;
}

static int a_data(kc_api_call *call, const char *buf, size_t len, void *ud) {
  struct call *c = ud;
  if (c->len + len < sizeof c->body) {
    memcpy(c->body + c->len, buf, len);
    c->len += len;
  }
  return KC_HTTP_CONTINUE;
}

static void a_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  struct call *c = ud;
  c->dones++;
  c->res = *res;
  kc_api_cancel(call); /* no-op inside on_done */
}

static void run(uv_loop_t *loop, kc_api *api) {
  uint64_t t0 = uv_now(loop);
  while (kc_http_active(kc_api_http(api)) > 0) {
    uv_run(loop, UV_RUN_ONCE);
    if (uv_now(loop) - t0 > 10000) fail_msg("requests still running");
  }
}

static void send_req(kc_api *api, const char *method, const char *path, const char *body,
                 struct call *c) {
  memset(c, 0, sizeof *c);
  kc_api_request_opts o = {.method = method, .path = path, .body = body,
                           .body_len = body ? strlen(body) : 0, .timeout_ms = 5000,
                           .on_response = a_response, .on_data = a_data, .on_done = a_done,
                           .ud = c};
  assert_int_equal(kc_api_request(api, &o, NULL), 0);
}

static void set_server_token(const char *t) {
  pthread_mutex_lock(&token_mu);
  snprintf(good_token, sizeof good_token, "%s", t);
  pthread_mutex_unlock(&token_mu);
}

static void test_async_headers_status_and_401(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  set_server_token("tok-1");
  write_file(token_path, "tok-1\n");
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(&loop, &creds, &api), 0);
  assert_string_equal(kc_api_namespace(api), "ns");
  struct call a, b, c, d;
  send_req(api, NULL, "/api/v1/namespaces/ns/configmaps?limit=500", NULL, &a);
  send_req(api, "POST", "/api/v1/namespaces/ns/configmaps", "{\"a\":1}", &b);
  send_req(api, NULL, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kctrld", NULL, &c);
  send_req(api, NULL, "/api/v1/namespaces/ns/pods", NULL, &d);
  run(&loop, api);
  assert_int_equal(a.dones, 1);
  assert_int_equal(a.res.error, 0);
  assert_int_equal(a.res.status.code, 200);
  a.body[a.len] = '\0';
  assert_string_equal(a.body, "GET|application/json|kctrld/" KCTRLD_VERSION
                              "|-|Bearer tok-1|500|0");
  assert_string_equal(a.ct, "application/json");
  b.body[b.len] = '\0';
  assert_string_equal(b.body, "POST|application/json|kctrld/" KCTRLD_VERSION
                              "|application/json|Bearer tok-1|-|7");
  assert_int_equal(c.res.status.code, 404);
  assert_true(kc_api_is_not_found(&c.res.status));
  assert_non_null(strstr(c.res.status.message, "not found"));
  assert_int_equal(c.len, 0); /* error bodies are not streamed */
  assert_int_equal(d.res.status.code, 429);
  assert_int_equal(d.res.status.retry_after_seconds, 3);
  assert_true(kc_api_is_retryable(&d.res.status));

  /* Rotation: the cached token is used until a 401 discards it. */
  set_server_token("tok-2");
  write_file(token_path, "tok-2\n");
  send_req(api, NULL, "/api/v1/namespaces/ns/configmaps", NULL, &a);
  run(&loop, api);
  assert_int_equal(a.res.status.code, 401);
  assert_true(kc_api_is_unauthorized(&a.res.status));
  send_req(api, NULL, "/api/v1/namespaces/ns/configmaps", NULL, &a);
  run(&loop, api);
  assert_int_equal(a.res.status.code, 200);
  a.body[a.len] = '\0';
  assert_non_null(strstr(a.body, "Bearer tok-2"));

  /* Transport error: connection refused reports no code. */
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_static_token_and_bad_args(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  set_server_token("static");
  kc_kube_creds cr = {.server = server_url, .token = "static"};
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(&loop, &cr, &api), 0);
  assert_string_equal(kc_api_namespace(api), "default");
  struct call a;
  kc_api_request_opts bad = {.path = "api/v1"};
  assert_int_equal(kc_api_request(api, &bad, NULL), -EINVAL);
  send_req(api, NULL, "/api/v1/namespaces/ns/configmaps", NULL, &a);
  run(&loop, api);
  assert_int_equal(a.res.status.code, 200);
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- secrets never reach the log, at the most verbose level ---- */

static void test_token_not_logged_at_debug(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_log_set_level(KC_LOG_DEBUG);
  tu_stderr_begin();
  kc_log_detect_sink();
  set_server_token("sekrit-static-token");
  kc_kube_creds cr = {.server = server_url, .token = "sekrit-static-token"};
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(&loop, &cr, &api), 0);
  struct call a, b;
  send_req(api, NULL, "/api/v1/namespaces/ns/configmaps", NULL, &a);
  send_req(api, NULL, "/open/forbidden", NULL, &b);
  run(&loop, api);
  assert_int_equal(a.res.status.code, 200);
  assert_int_equal(b.res.status.code, 403);
  /* The server put the header in its message; the host API logs that message
   * (daemon/host/hostapi.c "failed code= reason= message="). */
  assert_non_null(strstr(b.res.status.message, "Bearer sekrit-static-token"));
  kc_warn("hostapi", "GET /open/forbidden failed code=%d reason=%s message=\"%s\"", b.res.status.code,
          b.res.status.reason, b.res.status.message);
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  /* A token file that is rejected (401) and re-read. */
  set_server_token("sekrit-file-token");
  write_file(token_path, "sekrit-file-token-old\n");
  kc_kube_creds cf = {.server = server_url, .token_file = token_path};
  assert_int_equal(kc_api_new(&loop, &cf, &api), 0);
  send_req(api, NULL, "/api/v1/namespaces/ns/configmaps", NULL, &a);
  run(&loop, api);
  assert_int_equal(a.res.status.code, 401);
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  char *log = tu_stderr_end();
  kc_log_detect_sink();
  kc_log_set_level(KC_LOG_INFO);
  if (strstr(log, "sekrit")) fail_msg("a token reached the log:\n%s", log);
  assert_non_null(strstr(log, "Authorization: Bearer [REDACTED] refused"));
  free(log);
}

/* ---- sync, from worker threads ---- */

static atomic_int worker_ok;

static void *worker_main(void *arg) {
  kc_api *api = arg;
  kc_api_worker *w = NULL;
  if (kc_api_worker_new(api, &w) != 0) return NULL;
  for (int i = 0; i < 25; i++) {
    kc_api_response r;
    const char *body = "{\"metadata\":{\"name\":\"a\"}}";
    const char *method = i % 3 == 0 ? "PUT" : i % 3 == 1 ? "PATCH" : "GET";
    const char *ct = i % 3 == 1 ? "application/merge-patch+json" : NULL;
    int rc = kc_api_do(w, method, "/api/v1/namespaces/ns/configmaps", ct,
                       i % 3 == 2 ? NULL : body, i % 3 == 2 ? 0 : strlen(body), 5000, &r);
    char want[256];
    snprintf(want, sizeof want, "%s|application/json|kctrld/%s|%s|Bearer tok-3|-|%zu", method,
             KCTRLD_VERSION, i % 3 == 2 ? "-" : ct ? ct : "application/json",
             i % 3 == 2 ? (size_t)0 : strlen(body));
    if (rc == 0 && r.code == 200 && strcmp(r.body, want) == 0) atomic_fetch_add(&worker_ok, 1);
    else fprintf(stderr, "worker: rc=%d code=%ld body=%s want=%s\n", rc, r.code, r.body, want);
  }
  kc_api_response r;
  if (kc_api_do(w, "GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kctrld", NULL,
                NULL, 0, 5000, &r) == 0 &&
      r.code == 404 && kc_api_is_not_found(&r.status) && r.status.from_body)
    atomic_fetch_add(&worker_ok, 1);
  kc_api_worker_free(w);
  return NULL;
}

static void test_sync_workers(void **state) {
  set_server_token("tok-3");
  write_file(token_path, "tok-3\n");
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(NULL, &creds, &api), 0);
  atomic_store(&worker_ok, 0);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, worker_main, api), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  assert_int_equal(atomic_load(&worker_ok), 4 * 26);

  /* 401 after rotation: re-read and retried once, transparently. */
  kc_api_worker *w = NULL;
  assert_int_equal(kc_api_worker_new(api, &w), 0);
  set_server_token("tok-4");
  write_file(token_path, "tok-4\n");
  unsigned before = mini_server_requests(srv);
  kc_api_response r;
  assert_int_equal(kc_api_do(w, "GET", "/api/v1/namespaces/ns/configmaps", NULL, NULL, 0, 5000,
                             &r), 0);
  assert_int_equal(r.code, 200);
  assert_non_null(strstr(r.body, "Bearer tok-4"));
  assert_int_equal(mini_server_requests(srv) - before, 2);
  /* A 401 with an unchanged token is returned as is. */
  set_server_token("tok-5");
  assert_int_equal(kc_api_do(w, "GET", "/api/v1/namespaces/ns/configmaps", NULL, NULL, 0, 5000,
                             &r), 0);
  assert_int_equal(r.code, 401);
  assert_true(kc_api_is_unauthorized(&r.status));
  /* Transport error. */
  kc_kube_creds dead = {.server = "http://127.0.0.1:1"};
  kc_api *api2 = NULL;
  assert_int_equal(kc_api_new(NULL, &dead, &api2), 0);
  kc_api_worker *w2 = NULL;
  assert_int_equal(kc_api_worker_new(api2, &w2), 0);
  assert_int_equal(kc_api_do(w2, "GET", "/api", NULL, NULL, 0, 2000, &r), -ECONNREFUSED);
  assert_int_equal(r.error, -ECONNREFUSED);
  assert_int_equal(r.code, 0);
  assert_true(strlen(r.status.message) > 0);
  kc_api_worker_free(w2);
  kc_api_close(api2);
  kc_api_worker_free(w);
  kc_api_close(api);
}

/* ---- client-go's REST client metrics ---- */

static uint64_t result_count(const kc_rest_metrics_snapshot *s, const char *code, const char *method,
                             const char *host) {
  for (size_t i = 0; i < s->nresults; i++)
    if (!strcmp(s->results[i].code, code) && !strcmp(s->results[i].method, method) &&
        !strcmp(s->results[i].host, host))
      return s->results[i].count;
  return 0;
}

static uint64_t timed_count(const kc_rest_metrics_snapshot *s, const char *verb, const char *host) {
  for (size_t i = 0; i < s->nlatencies; i++) {
    if (strcmp(s->latencies[i].verb, verb) || strcmp(s->latencies[i].host, host)) continue;
    uint64_t n = 0;
    for (size_t b = 0; b <= KC_REST_LATENCY_BUCKETS; b++) n += s->latencies[i].counts[b];
    return n;
  }
  return 0;
}

/* Every attempt counts once by its code, a watch when it starts and
 * untimed, a request without a response as "<error>"; both the loop's
 * requests and the workers' pass through the same counts. */
static void test_rest_client_metrics(void **state) {
  kc_rest_metrics_reset();
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  set_server_token("tok-m");
  write_file(token_path, "tok-m\n");
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(&loop, &creds, &api), 0);
  const char *host = server_url + strlen("http://");
  struct call a, b, c, d;
  send_req(api, NULL, "/api/v1/namespaces/ns/configmaps?limit=500", NULL, &a);
  send_req(api, "POST", "/api/v1/namespaces/ns/configmaps", "{}", &b);
  send_req(api, NULL, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kctrld", NULL, &c);
  send_req(api, NULL, "/open/echo?resourceVersion=1&watch=true", NULL, &d);
  run(&loop, api);
  assert_int_equal(d.res.status.code, 200);
  kc_api_worker *w = NULL;
  kc_api_response r;
  assert_int_equal(kc_api_worker_new(api, &w), 0);
  assert_int_equal(kc_api_do(w, "GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kctrld",
                             NULL, NULL, 0, 5000, &r), 0);
  assert_int_equal(r.code, 404);
  kc_kube_creds dead = {.server = "http://127.0.0.1:1/"};
  kc_api *api2 = NULL;
  kc_api_worker *w2 = NULL;
  assert_int_equal(kc_api_new(NULL, &dead, &api2), 0);
  assert_int_equal(kc_api_worker_new(api2, &w2), 0);
  assert_int_equal(kc_api_do(w2, "PUT", "/api", NULL, "{}", 2, 2000, &r), -ECONNREFUSED);

  kc_rest_metrics_snapshot s;
  assert_int_equal(kc_rest_metrics_snapshot_get(&s), 0);
  assert_int_equal(result_count(&s, "200", "GET", host), 2); /* the list and the watch */
  assert_int_equal(result_count(&s, "200", "POST", host), 1);
  assert_int_equal(result_count(&s, "404", "GET", host), 2);
  assert_int_equal(result_count(&s, "<error>", "PUT", "127.0.0.1:1"), 1);
  assert_int_equal(s.nresults, 4);
  assert_int_equal(timed_count(&s, "GET", host), 3); /* not the watch */
  assert_int_equal(timed_count(&s, "POST", host), 1);
  assert_int_equal(timed_count(&s, "PUT", "127.0.0.1:1"), 1);
  kc_rest_metrics_snapshot_free(&s);

  kc_api_worker_free(w2);
  kc_api_close(api2);
  kc_api_worker_free(w);
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- proxy-url, exec plugin ---- */

static void test_proxy_url(void **state) {
  /* The server name does not resolve: only the proxy can reach it. */
  kc_kube_creds cr = {.server = "http://kctrld-proxied.invalid:8080", .proxy_url = server_url};
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(NULL, &cr, &api), 0);
  kc_api_worker *w = NULL;
  assert_int_equal(kc_api_worker_new(api, &w), 0);
  kc_api_response r;
  assert_int_equal(kc_api_do(w, "GET", "/version", NULL, NULL, 0, 5000, &r), 0);
  assert_int_equal(r.code, 200);
  assert_string_equal(r.body, "proxied http://kctrld-proxied.invalid:8080/version "
                              "host=kctrld-proxied.invalid:8080");
  kc_api_worker_free(w);
  kc_api_close(api);
}

static void test_exec_plugin_401_retry(void **state) {
  char script[400], count[400];
  snprintf(script, sizeof script, "%s/plugin.sh", dir);
  snprintf(count, sizeof count, "%s/count", dir);
  char text[1200];
  snprintf(text, sizeof text,
           "#!/bin/sh\nn=$(cat %s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %s\n"
           "echo '{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\","
           "\"status\":{\"token\":\"exec-'$n'\"}}'\n",
           count, count);
  write_file(script, text);
  assert_int_equal(chmod(script, 0700), 0);
  kc_exec_config x = {.command = script, .api_version = "client.authentication.k8s.io/v1",
                      .where = "test user"};
  kc_kube_creds cr = {.server = server_url, .exec = &x};
  set_server_token("exec-2");
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(NULL, &cr, &api), 0);
  assert_int_equal(kc_api_prime_credentials(api, 20000), 0);
  kc_api_worker *w = NULL;
  assert_int_equal(kc_api_worker_new(api, &w), 0);
  /* Sent with exec-1: 401, the plugin runs again, the request is retried once. */
  unsigned before = mini_server_requests(srv);
  kc_api_response r;
  assert_int_equal(kc_api_do(w, "GET", "/api/v1/namespaces/ns/configmaps", NULL, NULL, 0, 20000,
                             &r), 0);
  assert_int_equal(r.code, 200);
  assert_non_null(strstr(r.body, "Bearer exec-2"));
  assert_int_equal(mini_server_requests(srv) - before, 2);
  kc_api_worker_free(w);
  kc_api_close(api);

  /* On the loop: a 401 is returned (client-go's exec round tripper does
   * not retry either) and re-runs the plugin once for the whole burst; the
   * following requests carry the new token. */
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  set_server_token("exec-4");
  assert_int_equal(kc_api_new(&loop, &cr, &api), 0);
  assert_int_equal(kc_api_prime_credentials(api, 20000), 0); /* exec-3 */
  struct call a;
  send_req(api, NULL, "/api/v1/namespaces/ns/configmaps", NULL, &a);
  run(&loop, api);
  assert_int_equal(a.res.status.code, 401);
  bool ok = false;
  for (int i = 0; i < 400 && !ok; i++) {
    struct call b[3];
    for (int k = 0; k < 3; k++) send_req(api, NULL, "/api/v1/namespaces/ns/configmaps", NULL, &b[k]);
    run(&loop, api);
    ok = b[2].res.status.code == 200 && strstr(b[2].body, "Bearer exec-4");
    if (!ok) usleep(25000);
  }
  assert_true(ok);
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  char *n = tu_read_file(count, NULL);
  assert_string_equal(n, "4\n"); /* 2 runs above, 2 here: one per 401 burst */
  free(n);
}

/* ---- TLS ---- */

static void test_tls(void **state) {
  if (!mini_server_tls_supported()) skip();
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && "
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
           "-keyout ca.key -out ca.crt -subj /CN=kctrld-test-ca -days 2 && "
           "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
           "-keyout srv.key -out srv.csr -subj /CN=kubernetes && "
           "printf 'subjectAltName=DNS:kubernetes,DNS:localhost\\n' > ext.cnf && "
           "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
           "-out srv.crt -days 2 -extfile ext.cnf",
           dir);
  char full[2200];
  snprintf(full, sizeof full, "(%s) >/dev/null 2>&1", cmd);
  if (system(full) != 0) skip();
  char path[400];
  snprintf(path, sizeof path, "%s/srv.crt", dir);
  char *cert = tu_read_file(path, NULL);
  snprintf(path, sizeof path, "%s/srv.key", dir);
  char *key = tu_read_file(path, NULL);
  snprintf(path, sizeof path, "%s/ca.crt", dir);
  char *ca = tu_read_file(path, NULL);
  assert_non_null(cert);
  assert_non_null(key);
  assert_non_null(ca);
  mini_server *tsrv = mini_server_start(handler, NULL, cert, key);
  assert_non_null(tsrv);
  int port = mini_server_port(tsrv);
  char url_local[64], url_ip[64];
  snprintf(url_local, sizeof url_local, "https://localhost:%d", port);
  snprintf(url_ip, sizeof url_ip, "https://127.0.0.1:%d/", port);

  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct {
    kc_kube_creds cr;
    int want_error;
    const char *want_msg; /* libcurl's error text, in both paths */
  } cases[] = {
      {{.server = url_local, .ca_file = path}, 0, NULL},
      {{.server = url_local, .ca_data = ca, .ca_len = strlen(ca)}, 0, NULL},
      {{.server = url_local}, -EPROTO, "SSL certificate problem"}, /* unknown CA */
      {{.server = url_ip, .ca_file = path}, -EPROTO, "127.0.0.1"},  /* name mismatch */
      {{.server = url_ip, .ca_file = path, .tls_server_name = "kubernetes"}, 0, NULL},
      {{.server = url_ip, .insecure = true}, 0, NULL},
  };
  size_t n = sizeof cases / sizeof cases[0];
  for (size_t i = 0; i < n; i++) {
    kc_api *api = NULL;
    cases[i].cr.token = "tok-tls";
    assert_int_equal(kc_api_new(&loop, &cases[i].cr, &api), 0);
    struct call c;
    send_req(api, NULL, "/open/echo", NULL, &c);
    run(&loop, api);
    if (c.res.error != cases[i].want_error)
      fail_msg("case %zu: error %d, want %d (%s)", i, c.res.error, cases[i].want_error,
               c.res.status.message);
    if (cases[i].want_msg && !strstr(c.res.status.message, cases[i].want_msg))
      fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, c.res.status.message,
               cases[i].want_msg);
    if (!cases[i].want_error) {
      assert_int_equal(c.res.status.code, 200);
      c.body[c.len] = '\0';
      assert_non_null(strstr(c.body, "Bearer tok-tls"));
    }
    /* The synchronous path applies the same TLS settings. */
    kc_api_worker *w = NULL;
    kc_api_response r;
    assert_int_equal(kc_api_worker_new(api, &w), 0);
    assert_int_equal(kc_api_do(w, "GET", "/open/echo", NULL, NULL, 0, 5000, &r),
                     cases[i].want_error);
    if (cases[i].want_msg && !strstr(r.status.message, cases[i].want_msg))
      fail_msg("case %zu (sync): message \"%s\" lacks \"%s\"", i, r.status.message,
               cases[i].want_msg);
    kc_api_worker_free(w);
    kc_api_close(api);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  mini_server_stop(tsrv);
  free(cert);
  free(key);
  free(ca);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_parse),
      cmocka_unit_test(test_status_parse_depth_limit),
      cmocka_unit_test(test_async_headers_status_and_401),
      cmocka_unit_test(test_static_token_and_bad_args),
      cmocka_unit_test(test_token_not_logged_at_debug),
      cmocka_unit_test(test_sync_workers),
      cmocka_unit_test(test_tls),
      cmocka_unit_test(test_proxy_url),
      cmocka_unit_test(test_exec_plugin_401_retry),
      cmocka_unit_test(test_rest_client_metrics),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
