/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/httpserver: a real libuv loop on its own thread, a
 * real libmicrohttpd server on 127.0.0.1, scraped with libcurl easy. Covers
 * the endpoints, 404/405, readiness, the bind address rules, a stalled
 * loop: /healthz fails while scrapes still answer (stale) within their wait,
 * and TLS with the authorize hook: the certificate served and replaced, the
 * hook's answers on the metrics side only. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ops/httpserver.h"
#include "testutil.h"

typedef struct fixture {
  uv_loop_t loop;
  uv_async_t quit, stall;
  pthread_t thread;
  kc_metrics *reg;
  kc_metric_family *collections;
  kc_httpserver *srv;
  atomic_int collects;
  atomic_bool ready, b_ok;
  atomic_int check_runs;
  atomic_int stall_ms;
} fixture;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void collect(void *ud, kc_metrics *reg, kc_buf *json) {
  fixture *f = ud;
  int n = atomic_fetch_add(&f->collects, 1) + 1;
  const char *l[] = {"a\"b"};
  kc_metrics_set(f->collections, l, n);
  kc_buf_printf(json, "[{\"resource\":\"pods\",\"collect\":%d}]", n);
}

/* Two checks: informers (f->ready) and one per controller, "b" failing. */
static void checks(void *ud, kc_health_results *out) {
  fixture *f = ud;
  atomic_fetch_add(&f->check_runs, 1);
  out->current = "informers";
  kc_health_report(out, NULL, atomic_load(&f->ready), "waiting for kind v1 Pod (cache not synced yet)");
  out->current = "controller";
  kc_health_report(out, "a", true, NULL);
  kc_health_report(out, "b", atomic_load(&f->b_ok), "hook not answering: timed out");
  out->current = NULL;
}

static void on_quit(uv_async_t *a) {
  fixture *f = a->data;
  kc_httpserver_close(f->srv);
  uv_close((uv_handle_t *)&f->quit, NULL);
  uv_close((uv_handle_t *)&f->stall, NULL);
}

static void on_stall(uv_async_t *a) {
  fixture *f = a->data;
  sleep_ms(atomic_load(&f->stall_ms)); /* a wedged loop */
}

static void *loop_main(void *arg) {
  fixture *f = arg;
  uv_run(&f->loop, UV_RUN_DEFAULT);
  return NULL;
}

static unsigned start_endpoints; /* options.endpoints of the next start() */
static kc_tlscert *start_tls;     /* options.tls of the next start() */
static unsigned (*start_authorize)(void *, const char *, const char *, const char *, char *, size_t);
static const char *get_authorization; /* the Authorization header get() sends, or NULL */
static bool start_admin;         /* the next start() has hooks.admin */

/* hooks.admin: echoes the request; controller "nope" is not found. */
static int admin(void *ud, const kc_admin_request *r, kc_buf *out) {
  (void)ud;
  if (strcmp(r->controller, "nope") == 0) {
    kc_buf_puts(out, "{\"error\":\"no such controller\"}\n");
    return -ENOENT;
  }
  kc_buf_printf(out, "{\"command\":\"%s\",\"controller\":\"%s\",\"key\":\"%s\",\"state\":\"%s\"}\n",
                kc_admin_command_name(r->command), r->controller, r->key,
                kc_admin_state_name(r->state));
  return 0;
}

static fixture *start(const char *bind, uint64_t heartbeat_ms, uint64_t wait_ms) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  f->reg = kc_metrics_new();
  const char *l[] = {"who"};
  assert_int_equal(kc_metrics_register(f->reg, "test_collections_total", "Collections", KC_METRIC_COUNTER, l, 1,
                                       NULL, 0, &f->collections), 0);
  kc_httpserver_options o = {.bind = bind, .heartbeat_ms = heartbeat_ms, .scrape_wait_ms = wait_ms, .fresh_ms = 1,
                             .endpoints = start_endpoints, .tls = start_tls, .authorize = start_authorize};
  kc_httpserver_hooks h = {collect, checks, f, NULL, start_admin ? admin : NULL};
  assert_int_equal(kc_httpserver_start(&f->loop, f->reg, &o, &h, &f->srv), 0);
  assert_non_null(f->srv);
  assert_true(kc_httpserver_port(f->srv) > 0);
  uv_async_init(&f->loop, &f->quit, on_quit);
  uv_async_init(&f->loop, &f->stall, on_stall);
  f->quit.data = f->stall.data = f;
  assert_int_equal(pthread_create(&f->thread, NULL, loop_main, f), 0);
  return f;
}

static void stop(fixture *f) {
  uv_async_send(&f->quit);
  pthread_join(f->thread, NULL);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  kc_metrics_free(f->reg);
  free(f);
}

typedef struct resp {
  long status;
  char body[8192];
  size_t len;
  char type[128];
  char subject[256]; /* the server certificate's subject (TLS) */
  double seconds;
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
  resp *r = ud;
  size_t len = sz * n;
  size_t room = sizeof r->body - 1 - r->len;
  memcpy(r->body + r->len, p, len < room ? len : room);
  r->len += len < room ? len : room;
  r->body[r->len] = '\0';
  return len;
}

static void get(fixture *f, const char *method, const char *path, resp *r) {
  memset(r, 0, sizeof *r);
  char url[256];
  snprintf(url, sizeof url, "%s://127.0.0.1:%u%s", start_tls ? "https" : "http",
           (unsigned)kc_httpserver_port(f->srv), path);
  CURL *c = curl_easy_init();
  assert_non_null(c);
  struct curl_slist *hdrs = NULL;
  char hdr[256];
  if (get_authorization) {
    snprintf(hdr, sizeof hdr, "Authorization: %s", get_authorization);
    hdrs = curl_slist_append(NULL, hdr);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  }
  if (start_tls) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(c, CURLOPT_CERTINFO, 1L);
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  if (method) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  uint64_t t0 = tu_mono_ms();
  CURLcode rc = curl_easy_perform(c);
  r->seconds = (double)(tu_mono_ms() - t0) / 1000.0;
  if (rc != CURLE_OK) fail_msg("GET %s: %s", path, curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  char *ct = NULL;
  curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
  snprintf(r->type, sizeof r->type, "%s", ct ? ct : "");
  struct curl_certinfo *ci = NULL;
  if (start_tls && curl_easy_getinfo(c, CURLINFO_CERTINFO, &ci) == CURLE_OK && ci && ci->num_of_certs > 0)
    for (struct curl_slist *l = ci->certinfo[0]; l; l = l->next)
      if (strncmp(l->data, "Subject:", 8) == 0) snprintf(r->subject, sizeof r->subject, "%s", l->data + 8);
  curl_easy_cleanup(c);
  curl_slist_free_all(hdrs);
}

static int count_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++)
    if (fcntl(fd, F_GETFD) != -1) n++;
  return n;
}

static void test_endpoints(void **state) {
  (void)state;
  /* libuv opens its process-wide signal pipe with the first loop: count after. */
  uv_loop_t l;
  assert_int_equal(uv_loop_init(&l), 0);
  assert_int_equal(uv_loop_close(&l), 0);
  int fds = count_fds();
  fixture *f = start("127.0.0.1:0", 50, 1000);
  resp r;
  get(f, NULL, "/metrics", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.type, KC_METRICS_CONTENT_TYPE);
  assert_non_null(strstr(r.body, "# HELP test_collections_total Collections\n# TYPE test_collections_total counter\n"));
  assert_non_null(strstr(r.body, "test_collections_total{who=\"a\\\"b\"} 1\n"));
  /* Each scrape of a snapshot older than fresh_ms gets a new collection. */
  sleep_ms(5);
  get(f, NULL, "/metrics", &r);
  assert_non_null(strstr(r.body, "test_collections_total{who=\"a\\\"b\"} 2\n"));
  sleep_ms(5);
  get(f, NULL, "/debug/informers", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.type, "application/json");
  assert_string_equal(r.body, "[{\"resource\":\"pods\",\"collect\":3}]");

  get(f, NULL, "/healthz", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "ok\n");
  get(f, NULL, "/readyz", &r);
  assert_int_equal(r.status, 503);
  assert_string_equal(r.body, "[+]ping ok\n"
                              "[-]informers failed: waiting for kind v1 Pod (cache not synced yet)\n"
                              "[+]controller/a ok\n"
                              "[-]controller/b failed: hook not answering: timed out\n"
                              "readyz check failed\n");
  /* Answered from the state at the request: no heartbeat to wait for. */
  atomic_store(&f->ready, true);
  atomic_store(&f->b_ok, true);
  int runs = atomic_load(&f->check_runs);
  get(f, NULL, "/readyz", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "ok\n");
  assert_true(atomic_load(&f->check_runs) > runs);

  get(f, NULL, "/nope", &r);
  assert_int_equal(r.status, 404);
  get(f, NULL, "/metrics/x", &r);
  assert_int_equal(r.status, 404);
  get(f, NULL, "/", &r);
  assert_int_equal(r.status, 404);
  get(f, "POST", "/metrics", &r);
  assert_int_equal(r.status, 405);
  get(f, "DELETE", "/healthz", &r);
  assert_int_equal(r.status, 405);
  get(f, NULL, "/healthz?verbose=1", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "[+]ping ok\nhealthz check passed\n");
  stop(f);
  assert_int_equal(count_fds(), fds); /* the listening socket is closed too */
}

/* /livez, per-check paths, ?verbose and ?exclude=. */
static void test_probe_paths(void **state) {
  (void)state;
  fixture *f = start("127.0.0.1:0", 50, 1000);
  resp r;
  get(f, NULL, "/livez", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "ok\n");
  get(f, NULL, "/livez?verbose", &r);
  assert_string_equal(r.body, "[+]ping ok\nlivez check passed\n");
  get(f, NULL, "/livez/ping", &r);
  assert_int_equal(r.status, 200);
  get(f, NULL, "/livez/informers", &r); /* liveness is the loop only */
  assert_int_equal(r.status, 404);
  get(f, NULL, "/readyz/ping", &r);
  assert_int_equal(r.status, 200);
  get(f, NULL, "/readyz/controller/a", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "ok\n");
  get(f, NULL, "/readyz/controller/b", &r);
  assert_int_equal(r.status, 503);
  assert_string_equal(r.body, "controller/b failed: hook not answering: timed out\n");
  get(f, NULL, "/readyz/controller", &r);
  assert_int_equal(r.status, 404);
  get(f, NULL, "/readyz/nope", &r);
  assert_int_equal(r.status, 404);
  get(f, NULL, "/readyz/", &r);
  assert_int_equal(r.status, 404);
  get(f, NULL, "/readyzz", &r);
  assert_int_equal(r.status, 404);
  atomic_store(&f->ready, true);
  get(f, NULL, "/readyz?exclude=controller/b", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "ok\n");
  get(f, NULL, "/readyz?verbose&exclude=controller&exclude=nope", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "[+]ping ok\n[+]informers ok\n[+]controller/a excluded: ok\n"
                              "[+]controller/b excluded: ok\n"
                              "warn: some health checks cannot be excluded: no matches for \"nope\"\n"
                              "readyz check passed\n");
  stop(f);
}

/* --health-probe-bind-address: a probes-only server and a metrics-only one. */
static void test_endpoint_split(void **state) {
  (void)state;
  start_endpoints = KC_HTTP_PROBES;
  fixture *p = start("127.0.0.1:0", 50, 1000);
  start_endpoints = KC_HTTP_METRICS;
  fixture *m = start("127.0.0.1:0", 50, 1000);
  start_endpoints = 0;
  resp r;
  get(p, NULL, "/healthz", &r);
  assert_int_equal(r.status, 200);
  get(p, NULL, "/readyz", &r);
  assert_int_equal(r.status, 503);
  get(p, NULL, "/metrics", &r);
  assert_int_equal(r.status, 404);
  get(p, NULL, "/debug/informers", &r);
  assert_int_equal(r.status, 404);
  assert_int_equal(atomic_load(&p->collects), 0);
  get(m, NULL, "/metrics", &r);
  assert_int_equal(r.status, 200);
  get(m, NULL, "/debug/informers", &r);
  assert_int_equal(r.status, 200);
  get(m, NULL, "/healthz", &r);
  assert_int_equal(r.status, 404);
  get(m, NULL, "/readyz", &r);
  assert_int_equal(r.status, 404);
  stop(p);
  stop(m);
}

/* The authorize hook of test_tls: "Bearer reader" passes, no header is a
 * 401, any other token a 403. */
static unsigned authorize_reader(void *ud, const char *authorization, const char *method, const char *path,
                                 char *msg, size_t cap) {
  if (!authorization) {
    snprintf(msg, cap, "no token");
    return 401;
  }
  if (strcmp(authorization, "Bearer reader") == 0) return 0;
  snprintf(msg, cap, "%s may not %s %s", authorization, method, path);
  return 403;
}

static void test_tls(void **state) {
  (void)state;
  char dir[] = "/tmp/kc-httpserver-XXXXXX", cert[64], key[64];
  assert_non_null(mkdtemp(dir));
  snprintf(cert, sizeof cert, "%s/tls.crt", dir);
  snprintf(key, sizeof key, "%s/tls.key", dir);
  tu_write_cert_pair(cert, key, "one");
  kc_tlscert *tls = NULL;
  assert_int_equal(kc_tlscert_new(cert, key, 1, &tls), 0);
  start_tls = tls;
  start_authorize = authorize_reader;
  fixture *f = start("127.0.0.1:0", 50, 1000);
  resp r;
  get(f, NULL, "/metrics", &r);
  assert_int_equal(r.status, 401);
  assert_string_equal(r.body, "no token\n");
  assert_non_null(strstr(r.subject, "CN = one"));
  get_authorization = "Bearer someone";
  get(f, NULL, "/debug/informers", &r);
  assert_int_equal(r.status, 403);
  assert_string_equal(r.body, "Bearer someone may not GET /debug/informers\n");
  get_authorization = "Bearer reader";
  get(f, NULL, "/metrics", &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "test_collections_total"));
  /* The probes are never behind the hook. */
  get_authorization = NULL;
  get(f, NULL, "/healthz", &r);
  assert_int_equal(r.status, 200);
  assert_int_equal(atomic_load(&f->collects), 1);

  /* Replaced files: the next handshake serves the new certificate. */
  tu_write_cert_pair(cert, key, "two");
  get(f, NULL, "/livez", &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.subject, "CN = two"));
  assert_int_equal(kc_tlscert_generation(tls), 2);
  stop(f);
  start_tls = NULL;
  start_authorize = NULL;
  kc_tlscert_free(tls);
  unlink(cert);
  unlink(key);
  rmdir(dir);
}

static void test_stalled_loop(void **state) {
  (void)state;
  fixture *f = start("127.0.0.1:0", 50, 200); /* stall after 150 ms, scrapes wait 200 ms */
  resp r;
  get(f, NULL, "/metrics", &r);
  assert_int_equal(r.status, 200);
  atomic_store(&f->ready, true);
  sleep_ms(100);
  atomic_store(&f->stall_ms, 1200);
  uv_async_send(&f->stall);
  sleep_ms(400);
  get(f, NULL, "/healthz", &r);
  assert_int_equal(r.status, 500);
  assert_non_null(strstr(r.body, "event loop stalled"));
  assert_true(r.seconds < 0.5); /* health checks never wait for the loop */
  get(f, NULL, "/readyz", &r);
  assert_int_equal(r.status, 503);
  assert_non_null(strstr(r.body, "[-]ping failed: event loop stalled"));
  assert_true(r.seconds < 0.5); /* a stalled loop is not waited for */
  /* A scrape waits at most scrape_wait_ms, then gets the last snapshot. */
  get(f, NULL, "/metrics", &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "test_collections_total{who=\"a\\\"b\"} 1\n"));
  assert_true(r.seconds >= 0.15 && r.seconds < 1.0);
  /* The loop recovers: healthy again and fresh collections. */
  sleep_ms(1000);
  get(f, NULL, "/healthz", &r);
  assert_int_equal(r.status, 200);
  sleep_ms(5);
  get(f, NULL, "/metrics", &r);
  assert_int_equal(r.status, 200);
  assert_null(strstr(r.body, "} 1\n"));
  stop(f);
}

/* /debug/queues, /debug/keys, /debug/trace: 404 without hooks.admin; with
 * it, the URL's arguments checked by the admin socket's parser (400 naming
 * what is wrong), answered by the loop, 404 for an unknown controller, 503
 * when the loop does not answer in time (the late answer is dropped). */
static void test_admin_paths(void **state) {
  (void)state;
  fixture *f = start("127.0.0.1:0", 50, 200);
  resp r;
  get(f, NULL, "/debug/queues", &r);
  assert_int_equal(r.status, 404);
  stop(f);
  start_admin = true;
  f = start("127.0.0.1:0", 50, 200);
  start_admin = false;
  get(f, NULL, "/debug/queues", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.type, "application/json");
  assert_string_equal(r.body, "{\"command\":\"queues\",\"controller\":\"\",\"key\":\"\",\"state\":\"\"}\n");
  get(f, NULL, "/debug/keys?controller=web&state=failing", &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"controller\":\"web\",\"key\":\"\",\"state\":\"failing\""));
  get(f, NULL, "/debug/trace?controller=web&key=default%2Fa", &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"key\":\"default/a\""));
  get(f, NULL, "/debug/keys", &r);
  assert_int_equal(r.status, 400);
  assert_string_equal(r.body, "{\"error\":\"keys needs \\\"controller\\\"\"}\n");
  get(f, NULL, "/debug/trace?controller=web&key=a&state=queued", &r);
  assert_int_equal(r.status, 400);
  get(f, NULL, "/debug/keys?controller=nope", &r);
  assert_int_equal(r.status, 404);
  /* A wedged loop: the request gives up after scrape_wait_ms. */
  atomic_store(&f->stall_ms, 1000);
  uv_async_send(&f->stall);
  uint64_t deadline = tu_mono_ms() + 5000;
  do get(f, NULL, "/healthz", &r);
  while (r.status == 200 && tu_mono_ms() < deadline);
  assert_int_equal(r.status, 500);
  get(f, NULL, "/debug/queues", &r);
  assert_int_equal(r.status, 503);
  assert_true(r.seconds >= 0.15 && r.seconds < 1.0);
  do get(f, NULL, "/debug/queues", &r);
  while (r.status != 200 && tu_mono_ms() < deadline);
  assert_int_equal(r.status, 200);
  stop(f);
}

static void test_bind_rules(void **state) {
  (void)state;
  char host[64];
  uint16_t port;
  assert_int_equal(kc_httpserver_parse_bind("127.0.0.1:9090", host, sizeof host, &port), 0);
  assert_string_equal(host, "127.0.0.1");
  assert_int_equal(port, 9090);
  assert_int_equal(kc_httpserver_parse_bind("[::1]:0", host, sizeof host, &port), 0);
  assert_string_equal(host, "::1");
  assert_int_equal(port, 0);
  assert_int_equal(kc_httpserver_parse_bind(":8080", host, sizeof host, &port), 0);
  assert_string_equal(host, "");
  assert_int_equal(kc_httpserver_parse_bind("0", host, sizeof host, &port), 1);
  assert_int_equal(kc_httpserver_parse_bind("", host, sizeof host, &port), 1);
  assert_int_equal(kc_httpserver_parse_bind(NULL, host, sizeof host, &port), 1);
  assert_int_equal(kc_httpserver_parse_bind("::1:80", host, sizeof host, &port), -EINVAL);
  assert_int_equal(kc_httpserver_parse_bind("host", host, sizeof host, &port), -EINVAL);
  assert_int_equal(kc_httpserver_parse_bind("host:", host, sizeof host, &port), -EINVAL);
  assert_int_equal(kc_httpserver_parse_bind("host:65536", host, sizeof host, &port), -EINVAL);
  assert_int_equal(kc_httpserver_parse_bind("host:9x", host, sizeof host, &port), -EINVAL);
  assert_int_equal(kc_httpserver_parse_bind("[::1]80", host, sizeof host, &port), -EINVAL);

  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_metrics *reg = kc_metrics_new();
  kc_httpserver_hooks h = {0};
  kc_httpserver *s = (kc_httpserver *)&loop;
  kc_httpserver_options o = {.bind = "0"};
  assert_int_equal(kc_httpserver_start(&loop, reg, &o, &h, &s), 0);
  assert_null(s); /* disabled */
  o.bind = "localhost";
  assert_int_equal(kc_httpserver_start(&loop, reg, &o, &h, &s), -EINVAL);
  o.bind = "192.0.2.1:0"; /* TEST-NET address not on this host: bind fails */
  assert_int_equal(kc_httpserver_start(&loop, reg, &o, &h, &s), -EADDRNOTAVAIL);
  /* A port in use is an error the operator sees. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(fd, 1), 0);
  socklen_t al = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &al);
  char bind_addr[64];
  snprintf(bind_addr, sizeof bind_addr, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
  o.bind = bind_addr;
  assert_int_equal(kc_httpserver_start(&loop, reg, &o, &h, &s), -EADDRINUSE);
  close(fd);
  /* IPv6 loopback, when the host has it. */
  o.bind = "[::1]:0";
  int rc = kc_httpserver_start(&loop, reg, &o, &h, &s);
  if (rc == 0) {
    assert_true(kc_httpserver_port(s) > 0);
    kc_httpserver_close(s);
  } else {
    assert_true(rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT || rc == -EINVAL);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  kc_metrics_free(reg);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_endpoints),
      cmocka_unit_test(test_probe_paths),
      cmocka_unit_test(test_endpoint_split),
      cmocka_unit_test(test_stalled_loop),
      cmocka_unit_test(test_admin_paths),
      cmocka_unit_test(test_bind_rules),
      cmocka_unit_test(test_tls),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
