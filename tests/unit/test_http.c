/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/client/http.c against tests/unit/mini_server.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "client/http.h"
#include "mini_server.h"
#include "testutil.h"

/* ---- server side ---- */

struct fixture {
  char *watch;      /* the watch fixture */
  size_t watch_len;
  mini_server_chunk chunks[512];
  size_t nchunks;
};
static struct fixture fx;

static void handler(const mini_server_request *rq, mini_server_reply *r, void *ud) {
  if (strcmp(rq->path, "/watch") == 0) {
    /* The fixture's events, one chunk per line, 20 ms apart. */
    r->chunks = fx.chunks;
    r->nchunks = fx.nchunks;
  } else if (strcmp(rq->path, "/slow3") == 0) {
    static const mini_server_chunk c[] = {
        {"{\"a\":", 0, 0, false}, {"1}\n", 0, 150, false}, {"{\"b\":2}\n", 0, 150, false}};
    r->chunks = c;
    r->nchunks = 3;
  } else if (strcmp(rq->path, "/hang") == 0) {
    static const mini_server_chunk c[] = {{"{\"type\":\"ADDED\"}\n", 0, 0, false}};
    r->chunks = c;
    r->nchunks = 1;
    r->hang_ms = 3000;
  } else if (strcmp(rq->path, "/trickle") == 0) {
    /* Bytes every 100 ms for 600 ms: never idle for 300 ms. */
    static const mini_server_chunk c[] = {{"a", 0, 100, false}, {"b", 0, 100, false},
                                          {"c", 0, 100, false}, {"d", 0, 100, false},
                                          {"e", 0, 100, false}, {"f", 0, 100, false}};
    r->chunks = c;
    r->nchunks = 6;
  } else if (strcmp(rq->path, "/429") == 0) {
    r->status = 429;
    r->content_type = "text/plain";
    r->headers[0] = "Retry-After: 7";
    r->body = "Too many requests, please try again later.\n";
  } else if (strcmp(rq->path, "/echo") == 0) {
    static _Thread_local char buf[4096];
    const char *ua = mini_server_header(rq, "User-Agent");
    const char *x = mini_server_header(rq, "X-Test");
    const char *ct = mini_server_header(rq, "Content-Type");
    const char *exp = mini_server_header(rq, "Expect");
    snprintf(buf, sizeof buf, "%s|%s|%s|%s|%s|%zu|%.8s", rq->method, ua ? ua : "-",
             x ? x : "-", ct ? ct : "-", exp ? exp : "-", rq->body_len, rq->body);
    r->body = buf;
    r->content_type = "text/plain";
  } else if (strncmp(rq->path, "/n/", 3) == 0) {
    static _Thread_local char buf[64];
    snprintf(buf, sizeof buf, "%s", rq->path);
    r->body = buf;
  } else if (strcmp(rq->path, "/sleep") == 0) {
    static const mini_server_chunk c[] = {{"x", 0, 2000, false}};
    r->chunks = c;
    r->nchunks = 1;
  } else {
    r->status = 404;
    r->body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"NotFound\",\"code\":404}";
  }
}

/* ---- client side ---- */

struct call {
  long status;
  int responses;
  int datas;
  int dones;
  kc_http_result res;
  char msg[256];
  char *body;
  size_t len;
  uint64_t t_first_data, t_done;
  char retry_after[16];
  char content_type[64];
  /* behaviours */
  int abort_on_data;
  int cancel_self_on_data;
  kc_http_req *cancel_other;
  kc_http *spawn_from;   /* start another request from on_data */
  struct call *spawned;
  const char *spawn_url;
  kc_http_req *req;
  uv_loop_t *loop;
};

static int on_response(kc_http_req *req, long status, void *ud) {
  struct call *c = ud;
  c->status = status;
  c->responses++;
  size_t n;
  const char *v = kc_http_req_header(req, "retry-after", &n);
  if (v) snprintf(c->retry_after, sizeof c->retry_after, "%.*s", (int)n, v);
  v = kc_http_req_header(req, "Content-Type", &n);
  if (v) snprintf(c->content_type, sizeof c->content_type, "%.*s", (int)n, v);
  return KC_HTTP_CONTINUE;
}

static void start(kc_http *http, const char *url, struct call *c, const kc_http_request_opts *base);

static int on_data(kc_http_req *req, const char *buf, size_t len, void *ud) {
  struct call *c = ud;
  if (c->datas++ == 0) c->t_first_data = uv_now(c->loop);
  c->body = realloc(c->body, c->len + len + 1);
  assert_non_null(c->body);
  memcpy(c->body + c->len, buf, len);
  c->len += len;
  c->body[c->len] = '\0';
  if (c->cancel_other) {
    kc_http_cancel(c->cancel_other);
    c->cancel_other = NULL;
  }
  if (c->spawn_from) {
    kc_http *h = c->spawn_from;
    c->spawn_from = NULL;
    start(h, c->spawn_url, c->spawned, NULL);
  }
  if (c->cancel_self_on_data) {
    kc_http_cancel(req);
    kc_http_cancel(req); /* twice is harmless */
    return KC_HTTP_CONTINUE;
  }
  return c->abort_on_data ? KC_HTTP_ABORT : KC_HTTP_CONTINUE;
}

static void on_done(kc_http_req *req, const kc_http_result *res, void *ud) {
  struct call *c = ud;
  c->dones++;
  c->res = *res;
  snprintf(c->msg, sizeof c->msg, "%s", res->message);
  c->res.message = c->msg;
  c->t_done = uv_now(c->loop);
  kc_http_cancel(req); /* no-op inside its own on_done */
}

static char base_url[64];

static void start(kc_http *http, const char *path, struct call *c, const kc_http_request_opts *base) {
  char url[256];
  snprintf(url, sizeof url, "%s%s", base_url, path);
  kc_http_request_opts o = base ? *base : (kc_http_request_opts){0};
  o.url = url;
  o.on_response = on_response;
  o.on_data = on_data;
  o.on_done = on_done;
  o.ud = c;
  assert_int_equal(kc_http_request(http, &o, &c->req), 0);
  assert_non_null(c->req);
}

/* Runs the loop until no request is in flight, failing after limit_ms. */
static void run_until_idle(uv_loop_t *loop, kc_http *http, uint64_t limit_ms) {
  uint64_t t0 = uv_now(loop);
  while (kc_http_active(http) > 0) {
    uv_run(loop, UV_RUN_ONCE);
    uv_update_time(loop);
    if (uv_now(loop) - t0 > limit_ms) fail_msg("requests still active after %llu ms",
                                               (unsigned long long)limit_ms);
  }
}

static void close_all(uv_loop_t *loop, kc_http *http) {
  kc_http_close(http);
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

static mini_server *srv;

static int setup(void **state) {
  fx.watch = tu_fixture("watch/watch-pods-sendinitialevents-k8s-openapi.ndjson", &fx.watch_len);
  fx.nchunks = 0;
  char *p = fx.watch, *end = fx.watch + fx.watch_len;
  while (p < end && fx.nchunks < 512) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
    fx.chunks[fx.nchunks++] = (mini_server_chunk){.data = p, .len = n, .delay_ms = 20};
    p += n;
  }
  srv = mini_server_start(handler, NULL, NULL, NULL);
  if (!srv) return -1;
  snprintf(base_url, sizeof base_url, "http://127.0.0.1:%d", mini_server_port(srv));
  return kc_http_global_init();
}

static int teardown(void **state) {
  mini_server_stop(srv);
  free(fx.watch);
  return 0;
}

static kc_http *new_http(uv_loop_t **loop) {
  static uv_loop_t l;
  assert_int_equal(uv_loop_init(&l), 0);
  *loop = &l;
  kc_http *http = NULL;
  assert_int_equal(kc_http_new(&l, &http), 0);
  return http;
}

static void fix_loop(struct call *c, size_t n, uv_loop_t *loop) {
  for (size_t i = 0; i < n; i++) c[i].loop = loop;
}

static void start_on(uv_loop_t *loop, kc_http *http, const char *path, struct call *c,
                     const kc_http_request_opts *base) {
  start(http, path, c, base);
  c->loop = loop;
}

/* A watch stream is delivered as it arrives, not buffered whole. */
static void test_streaming_incremental(void **state) {
  uv_loop_t *loop;
  kc_http *http = new_http(&loop);
  struct call c = {0};
  start_on(loop, http, "/slow3", &c, NULL);
  run_until_idle(loop, http, 5000);
  assert_int_equal(c.dones, 1);
  assert_int_equal(c.res.error, 0);
  assert_int_equal(c.status, 200);
  assert_int_equal(c.responses, 1);
  assert_string_equal(c.body, "{\"a\":1}\n{\"b\":2}\n");
  assert_true(c.datas >= 3);
  /* First bytes came ~300 ms before the end of the stream. */
  assert_true(c.t_done - c.t_first_data >= 200);
  assert_string_equal(c.content_type, "application/json");
  free(c.body);

  /* The real fixture, one event per chunk: byte-exact. */
  struct call w = {0};
  start_on(loop, http, "/watch", &w, NULL);
  run_until_idle(loop, http, 20000);
  assert_int_equal(w.res.error, 0);
  assert_int_equal(w.len, fx.watch_len);
  assert_memory_equal(w.body, fx.watch, fx.watch_len);
  assert_true((size_t)w.datas >= fx.nchunks / 2);
  assert_int_equal(w.res.body_bytes, fx.watch_len);
  free(w.body);
  close_all(loop, http);
}

static void test_many_concurrent(void **state) {
  uv_loop_t *loop;
  kc_http *http = new_http(&loop);
  enum { N = 64 };
  static struct call c[N];
  memset(c, 0, sizeof c);
  for (int i = 0; i < N; i++) {
    char path[32];
    snprintf(path, sizeof path, "/n/%d", i);
    start_on(loop, http, path, &c[i], NULL);
  }
  assert_int_equal(kc_http_active(http), N);
  run_until_idle(loop, http, 10000);
  for (int i = 0; i < N; i++) {
    char want[32];
    snprintf(want, sizeof want, "/n/%d", i);
    assert_int_equal(c[i].dones, 1);
    assert_int_equal(c[i].res.error, 0);
    assert_int_equal(c[i].status, 200);
    assert_string_equal(c[i].body, want);
    free(c[i].body);
  }
  close_all(loop, http);
}

/* Sequential requests reuse one connection. */
static void test_connection_reuse(void **state) {
  uv_loop_t *loop;
  kc_http *http = new_http(&loop);
  unsigned conns0 = mini_server_connections(srv);
  struct call c[5] = {{0}};
  fix_loop(c, 5, loop);
  for (int i = 0; i < 5; i++) {
    start_on(loop, http, "/n/x", &c[i], NULL);
    run_until_idle(loop, http, 5000);
    assert_int_equal(c[i].status, 200);
    assert_int_equal(c[i].res.http_version, 11);
    if (i > 0) assert_int_equal(c[i].res.new_connections, 0);
    free(c[i].body);
  }
  assert_int_equal(c[0].res.new_connections, 1);
  assert_int_equal(mini_server_connections(srv) - conns0, 1);
  close_all(loop, http);
}

static void test_idle_timeout(void **state) {
  uv_loop_t *loop;
  kc_http *http = new_http(&loop);
  struct call c = {0};
  kc_http_request_opts o = {.idle_timeout_ms = 300};
  uint64_t t0 = uv_now(loop);
  start_on(loop, http, "/hang", &c, &o);
  run_until_idle(loop, http, 5000);
  assert_int_equal(c.dones, 1);
  assert_int_equal(c.res.error, -ETIME);
  assert_true(c.res.idle_timeout);
  assert_int_equal(c.status, 200);
  assert_string_equal(c.body, "{\"type\":\"ADDED\"}\n");
  assert_true(c.t_done - t0 >= 300);
  assert_true(c.t_done - t0 < 2500); /* well before the server's 3 s hang ends */
  free(c.body);

  /* Bytes every 100 ms keep a 300 ms inactivity timer from firing. */
  struct call t = {0};
  start_on(loop, http, "/trickle", &t, &o);
  run_until_idle(loop, http, 5000);
  assert_int_equal(t.res.error, 0);
  assert_false(t.res.idle_timeout);
  assert_string_equal(t.body, "abcdef");
  free(t.body);
  close_all(loop, http);
}

static void test_total_timeout_and_refused(void **state) {
  uv_loop_t *loop;
  kc_http *http = new_http(&loop);
  struct call c = {0};
  kc_http_request_opts o = {.timeout_ms = 200};
  start_on(loop, http, "/sleep", &c, &o);
  /* A port nobody listens on: bind, read the port, close. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
  socklen_t sl = sizeof sin;
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
  close(fd);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/x", ntohs(sin.sin_port));
  struct call r = {.loop = loop};
  kc_http_request_opts o2 = {.url = url, .on_done = on_done, .ud = &r};
  assert_int_equal(kc_http_request(http, &o2, NULL), 0);
  run_until_idle(loop, http, 5000);
  assert_int_equal(c.res.error, -ETIMEDOUT);
  assert_false(c.res.idle_timeout);
  assert_true(c.t_done < 1500 + uv_now(loop)); /* sanity */
  assert_int_equal(r.dones, 1);
  assert_int_equal(r.res.error, -ECONNREFUSED);
  assert_int_equal(r.res.status, 0);
  assert_true(strlen(r.msg) > 0);
  free(c.body);
  close_all(loop, http);
}

/* Cancel from inside callbacks: own request, another one; start a new one. */
static void test_cancel_inside_callbacks(void **state) {
  uv_loop_t *loop;
  kc_http *http = new_http(&loop);
  struct call self = {.cancel_self_on_data = 1};
  struct call victim = {0}, spawned = {0}, killer = {0}, aborter = {.abort_on_data = 1};
  start_on(loop, http, "/slow3", &self, NULL);
  start_on(loop, http, "/hang", &victim, NULL);
  killer.cancel_other = victim.req;
  killer.spawn_from = http;
  killer.spawned = &spawned;
  killer.spawn_url = "/n/spawned";
  spawned.loop = loop;
  start_on(loop, http, "/n/killer", &killer, NULL);
  start_on(loop, http, "/slow3", &aborter, NULL);
  run_until_idle(loop, http, 5000);
  assert_int_equal(self.datas, 1);
  assert_int_equal(self.dones, 0); /* cancelled: no on_done */
  assert_int_equal(victim.dones, 0);
  assert_int_equal(killer.dones, 1);
  assert_int_equal(killer.res.error, 0);
  assert_int_equal(spawned.dones, 1);
  assert_string_equal(spawned.body, "/n/spawned");
  assert_int_equal(aborter.dones, 1);
  assert_int_equal(aborter.res.error, -ECANCELED);
  assert_int_equal(aborter.datas, 1);
  free(self.body);
  free(victim.body);
  free(killer.body);
  free(spawned.body);
  free(aborter.body);

  /* Cancel from loop context (not inside a callback), before any byte. */
  struct call quiet = {0};
  start_on(loop, http, "/hang", &quiet, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  kc_http_cancel(quiet.req);
  assert_int_equal(kc_http_active(http), 0);
  uv_run(loop, UV_RUN_NOWAIT);
  assert_int_equal(quiet.dones, 0);
  free(quiet.body); /* a slow run (valgrind) may see the first chunk before the cancel */
  close_all(loop, http);
}

static void test_headers_body_and_status(void **state) {
  uv_loop_t *loop;
  kc_http *http = new_http(&loop);
  struct call c = {0}, e = {0}, nf = {0};
  start_on(loop, http, "/429", &c, NULL);
  static const char *hdrs[] = {"User-Agent: kctrld/test", "X-Test: yes",
                               "Content-Type: application/merge-patch+json"};
  static char big[300000];
  memset(big, 'a', sizeof big - 1);
  kc_http_request_opts o = {.method = "PATCH", .headers = hdrs, .nheaders = 3, .body = big,
                            .body_len = sizeof big - 1};
  start_on(loop, http, "/echo", &e, &o);
  start_on(loop, http, "/nothing", &nf, NULL);
  run_until_idle(loop, http, 5000);
  assert_int_equal(c.res.error, 0);
  assert_int_equal(c.status, 429);
  assert_int_equal(c.res.status, 429);
  assert_string_equal(c.retry_after, "7");
  assert_string_equal(c.content_type, "text/plain");
  assert_string_equal(c.msg, "HTTP 429");
  assert_int_equal(e.status, 200);
  assert_string_equal(e.body, "PATCH|kctrld/test|yes|application/merge-patch+json|-|299999|aaaaaaaa");
  assert_int_equal(nf.status, 404);
  assert_non_null(strstr(nf.body, "NotFound"));
  free(c.body);
  free(e.body);
  free(nf.body);
  close_all(loop, http);
}

/* Closing with requests in flight releases everything: loop closes. */
static void test_close_with_active(void **state) {
  uv_loop_t *loop;
  kc_http *http = new_http(&loop);
  struct call c[3] = {{0}};
  kc_http_request_opts o = {.idle_timeout_ms = 10000};
  start_on(loop, http, "/hang", &c[0], &o);
  start_on(loop, http, "/hang", &c[1], NULL);
  start_on(loop, http, "/slow3", &c[2], NULL);
  uint64_t t0 = uv_now(loop);
  while (c[0].datas == 0 && uv_now(loop) - t0 < 3000) uv_run(loop, UV_RUN_ONCE);
  assert_int_equal(c[0].datas, 1);
  close_all(loop, http);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c[i].dones, 0);
    free(c[i].body);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_streaming_incremental),
      cmocka_unit_test(test_many_concurrent),
      cmocka_unit_test(test_connection_reuse),
      cmocka_unit_test(test_idle_timeout),
      cmocka_unit_test(test_total_timeout_and_refused),
      cmocka_unit_test(test_cancel_inside_callbacks),
      cmocka_unit_test(test_headers_body_and_status),
      cmocka_unit_test(test_close_with_active),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
