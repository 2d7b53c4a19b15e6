/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/watch/reflector.c: a kc_reflector with a real kc_api
 * against a scripted HTTP server (mini_server.h). Each test scripts the
 * server's replies in order and checks the exact request sequence (query
 * parameters and their order, as client-go sends them, docs/api-contract.md
 * 3.1, 4.1, 4.8 and section 7), what reached the sink, and the waits between requests
 * (backoff, Retry-After). Tests of those waits run on the manual clock
 * (base/clock.h): the loop helpers move it to the backoff timer's due time
 * as soon as the reflector waits on it, so a Retry-After of a second costs
 * no second. Responses the server holds back until the test has seen what
 * it waits for are held (mini_server_release), not timed. The objects are
 * Pods built from the fixtures (store_podgen.h). One test (connection reset mid-stream) uses a
 * raw socket server, because libmicrohttpd always ends a response cleanly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "client/apiclient.h"
#include "base/log.h"
#include "mini_server.h"
#include "watch/decodepool.h"
#include "base/memtrim.h"
#include "watch/reflector.h"
#include "store_podgen.h"
#include "testutil.h"

#define MAXSTEPS 24
#define MAXCHUNKS 8
#define NS "ns1"
#define BASE "/api/v1/namespaces/" NS "/pods"

/* ---- the script -------------------------------------------------------- */

typedef struct step {
  int status;
  const char *hdr; /* one extra response header */
  const char *body;
  mini_server_chunk chunks[MAXCHUNKS];
  size_t nchunks;
  unsigned hang_ms;
  bool hang_held; /* the hang ends at mini_server_release */
  bool reset; /* raw server only: close after the chunks, no terminating chunk */
} step;

static struct {
  pthread_mutex_t mu;
  step steps[MAXSTEPS];
  size_t nsteps;
  char got[MAXSTEPS + 8][1024]; /* "path?query" as received, timeoutSeconds -> T */
  char accept[MAXSTEPS + 8][160];
  uint64_t at_ms[MAXSTEPS + 8];
  atomic_uint nreq;
  char *owned[512];
  size_t nowned;
  /* Per request: a copy of the step's chunk list, made under mu, so that a
   * connection still streaming never reads steps[] that the next test
   * rewrites. Freed at teardown. */
  mini_server_chunk *served[MAXSTEPS + 8];
} S = {.mu = PTHREAD_MUTEX_INITIALIZER};

static podgen PG;

static char *own(char *s) {
  assert_non_null(s);
  assert_true(S.nowned < sizeof S.owned / sizeof S.owned[0]);
  S.owned[S.nowned++] = s;
  return s;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = NULL;
  int n = vasprintf(&s, f, ap);
  va_end(ap);
  assert_true(n >= 0);
  return own(s);
}

/* A realistic Pod (coredns fixture) named `name` at resourceVersion rv. */
static const char *pod(const char *name, const char *rv) {
  char uid[64];
  snprintf(uid, sizeof uid, "uid-%s", name);
  podspec p = {.tmpl = 0, .ns = NS, .name = name, .uid = uid, .rv = rv, .node = "node-1",
               .lk = {"app"}, .lv = {"web"}, .nlabels = 1};
  kc_obj *o = podgen_make(&PG, &p);
  assert_non_null(o);
  char *s = fmt("%s", o->json);
  kc_obj_unref(o);
  return s;
}

/* items: "name@rv" separated by spaces. */
static const char *list_body(const char *rv, const char *cont, const char *items) {
  char *body = fmt("{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
                   "\"%s\"%s%s%s},\"items\":[",
                   rv, cont ? ",\"continue\":\"" : "", cont ? cont : "", cont ? "\"" : "");
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%s", items);
  bool first = true;
  for (char *save = NULL, *t = strtok_r(tmp, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
    char *at = strchr(t, '@');
    assert_non_null(at);
    *at = 0;
    body = fmt("%s%s%s", body, first ? "" : ",", pod(t, at + 1));
    first = false;
  }
  return fmt("%s]}", body);
}

static const char *event(const char *type, const char *name, const char *rv) {
  return fmt("{\"type\":\"%s\",\"object\":%s}\n", type, pod(name, rv));
}

static const char *bookmark(const char *rv) {
  /* Shape of a real typed bookmark: otherwise-empty Pod. */
  return fmt("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
             "\"metadata\":{\"resourceVersion\":\"%s\",\"creationTimestamp\":null},"
             "\"spec\":{\"containers\":null},\"status\":{}}}\n",
             rv);
}

static const char *const ERROR_410 =
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 110 (150)\","
    "\"reason\":\"Expired\",\"code\":410}}\n";

static const char *status_body(int code, const char *reason, const char *message) {
  return fmt("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
             "\"message\":\"%s\",\"reason\":\"%s\",\"code\":%d}",
             message, reason, code);
}

static step *add_step(int status) {
  pthread_mutex_lock(&S.mu);
  assert_true(S.nsteps < MAXSTEPS);
  step *s = &S.steps[S.nsteps++];
  memset(s, 0, sizeof *s);
  s->status = status;
  pthread_mutex_unlock(&S.mu);
  return s;
}

static void add_body(int status, const char *body) { add_step(status)->body = body; }

static void chunk(step *s, const char *data, unsigned delay_ms) {
  pthread_mutex_lock(&S.mu); /* the handler reads steps under S.mu */
  assert_true(s->nchunks < MAXCHUNKS);
  s->chunks[s->nchunks++] = (mini_server_chunk){.data = data, .len = strlen(data), .delay_ms = delay_ms};
  pthread_mutex_unlock(&S.mu);
}

/* A watch response: the given pieces, each its own chunk. */
static step *add_watch(const char *first, ...) {
  step *s = add_step(200);
  va_list ap;
  va_start(ap, first);
  for (const char *c = first; c; c = va_arg(ap, const char *)) chunk(s, c, 0);
  va_end(ap);
  if (!s->nchunks) chunk(s, "", 0);
  return s;
}

/* ---- scripted mini_server handler --------------------------------------- */

struct qctx {
  char *buf;
  size_t cap, n;
};

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
  struct qctx *q = cls;
  char v[600];
  if (value && strcmp(key, "timeoutSeconds") == 0) {
    long t = strtol(value, NULL, 10);
    snprintf(v, sizeof v, "%s", t >= 300 && t < 600 ? "T" : value);
  } else {
    snprintf(v, sizeof v, "%s", value ? value : "");
  }
  int w = snprintf(q->buf + q->n, q->cap - q->n, "%c%s=%s", q->n ? '&' : '?', key, v);
  if (w > 0 && (size_t)w < q->cap - q->n) q->n += (size_t)w;
  return MHD_YES;
}

static void record(unsigned idx, const char *path, const char *query, const char *accept) {
  if (idx >= MAXSTEPS + 8) return;
  snprintf(S.got[idx], sizeof S.got[idx], "%s%s", path, query);
  snprintf(S.accept[idx], sizeof S.accept[idx], "%s", accept ? accept : "");
  S.at_ms[idx] = kc_clock_now_ms(); /* the reflector's clock */
}

/* Past the script: 503 with a long Retry-After, so nothing else happens. */
static const step STOP = {.status = 503, .hdr = "Retry-After: 60", .body = "{}"};

static void handler(const mini_server_request *rq, mini_server_reply *reply, void *ud) {
  char q[1024] = "";
  struct qctx qc = {q, sizeof q, 0};
  MHD_get_connection_values(rq->conn_, MHD_GET_ARGUMENT_KIND, add_arg, &qc);
  pthread_mutex_lock(&S.mu);
  unsigned idx = atomic_load(&S.nreq);
  record(idx, rq->path, q, mini_server_header(rq, "Accept"));
  const step *s = idx < S.nsteps ? &S.steps[idx] : &STOP;
  atomic_store(&S.nreq, idx + 1);
  reply->status = s->status;
  reply->headers[0] = s->hdr;
  reply->body = s->body;
  if (s->nchunks && idx < MAXSTEPS + 8) {
    S.served[idx] = malloc(s->nchunks * sizeof *s->chunks);
    if (S.served[idx]) {
      memcpy(S.served[idx], s->chunks, s->nchunks * sizeof *s->chunks);
      reply->chunks = S.served[idx];
      reply->nchunks = s->nchunks;
    }
  }
  reply->hang_ms = s->hang_ms;
  reply->hang_held = s->hang_held;
  pthread_mutex_unlock(&S.mu);
}

/* ---- the sink ------------------------------------------------------------ */

static struct {
  char log[8192];
  size_t n;
  unsigned replaces, upserts, removes;
} K;

static void klog_add(const char *f, ...) __attribute__((format(printf, 1, 2)));
static void klog_add(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int w = vsnprintf(K.log + K.n, sizeof K.log - K.n, f, ap);
  va_end(ap);
  if (w > 0 && (size_t)w < sizeof K.log - K.n) K.n += (size_t)w;
}

static void sink_replace(void *ud, kc_reflector *r, kc_obj *const *objs, size_t n) {
  K.replaces++;
  klog_add("R");
  for (size_t i = 0; i < n; i++)
    klog_add("%c%.*s@%.*s", i ? ',' : ' ', (int)kc_obj_name(objs[i]).len, kc_obj_name(objs[i]).ptr,
             (int)kc_obj_resource_version(objs[i]).len, kc_obj_resource_version(objs[i]).ptr);
  klog_add(";");
}

static void sink_upsert(void *ud, kc_reflector *r, kc_obj *o) {
  K.upserts++;
  klog_add("U %.*s@%.*s;", (int)kc_obj_name(o).len, kc_obj_name(o).ptr,
           (int)kc_obj_resource_version(o).len, kc_obj_resource_version(o).ptr);
}

static void sink_remove(void *ud, kc_reflector *r, kc_obj *o) {
  K.removes++;
  klog_add("D %.*s@%.*s;", (int)kc_obj_name(o).len, kc_obj_name(o).ptr,
           (int)kc_obj_resource_version(o).len, kc_obj_resource_version(o).ptr);
}

/* ---- fixture -------------------------------------------------------------- */

static struct {
  uv_loop_t loop;
  uv_timer_t tick;
  mini_server *srv;
  kc_api *api;
  kc_reflector *r;
  char url[64];
  kc_kube_creds creds;
  kc_decode_pool *pool;
} F;
static bool use_pool; /* the second run of every test */

static void on_tick(uv_timer_t *t) {}

static int setup_group(void **state) { return podgen_init(&PG); }
static int teardown_group(void **state) {
  podgen_free(&PG);
  return 0;
}

static int setup(void **state) {
  pthread_mutex_lock(&S.mu);
  S.nsteps = 0;
  atomic_store(&S.nreq, 0);
  memset(S.got, 0, sizeof S.got);
  pthread_mutex_unlock(&S.mu);
  memset(&K, 0, sizeof K);
  if (uv_loop_init(&F.loop) != 0) return -1;
  if (uv_timer_init(&F.loop, &F.tick) != 0) return -1;
  uv_timer_start(&F.tick, on_tick, 5, 5);
  F.srv = mini_server_start(handler, NULL, NULL, NULL);
  if (!F.srv) return -1;
  snprintf(F.url, sizeof F.url, "http://127.0.0.1:%d", mini_server_port(F.srv));
  F.creds = (kc_kube_creds){.server = F.url, .token = "t0k"};
  F.pool = NULL;
  if (use_pool && kc_decode_pool_new(&F.loop, 2, &F.pool) != 0) return -1;
  return kc_api_new(&F.loop, &F.creds, &F.api) == 0 ? 0 : -1;
}

static int teardown(void **state) {
  kc_reflector_close(F.r);
  F.r = NULL;
  kc_api_close(F.api);
  F.api = NULL;
  kc_decode_pool_free(F.pool);
  F.pool = NULL;
  uv_close((uv_handle_t *)&F.tick, NULL);
  mini_server_stop(F.srv);
  F.srv = NULL;
  uv_run(&F.loop, UV_RUN_DEFAULT);
  kc_clock_set_real();
  int rc = uv_loop_close(&F.loop);
  for (size_t i = 0; i < S.nowned; i++) free(S.owned[i]);
  S.nowned = 0;
  for (size_t i = 0; i < MAXSTEPS + 8; i++) {
    free(S.served[i]);
    S.served[i] = NULL;
  }
  return rc == 0 ? 0 : -1;
}

static kc_reflector_spec spec_default(void) {
  return (kc_reflector_spec){.api_path = "/api/v1",
                             .resource = "pods",
                             .namespace_ = NS,
                             .backoff_initial_ms = 20,
                             .backoff_max_ms = 80,
                             /* Second run: decoded on pool threads, with a
                              * budget small enough to pause transfers. */
                             .decode_pool = F.pool,
                             .decode_budget = use_pool ? 2048 : 0};
}

static void sink_synced(void *ud, kc_reflector *r) { klog_add("S;"); }

static bool incremental_sink; /* tests of the first list applied as it arrives */

static void start(const kc_reflector_spec *spec) {
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL,
                            incremental_sink ? sink_synced : NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, F.api, spec, &sink, &F.r), 0);
  assert_int_equal(kc_reflector_start(F.r), 0);
}

#define MS 1000000ull
/* Waits longer than this are never skipped: the streaming list's 60 s
 * guard, a Retry-After a test wants to see chosen but not served. */
#define SKIP_MAX_MS 5000

/* The test's clock stands still from here on (call before start()). */
static void manual_clock(void) { kc_clock_set_manual(1000000 * MS); }

/* One loop iteration. Under the manual clock, a reflector that waits on its
 * timer (armed only for a backoff, or the streaming list's guard, while no
 * request of its own is under way) gets there at once: the clock moves to
 * the due time. */
static void turn(void) {
  uint64_t due, now = kc_clock_now_ns();
  if (kc_clock_next_due(&due) && due - now <= SKIP_MAX_MS * MS) kc_clock_advance(due - now);
  uv_run(&F.loop, UV_RUN_ONCE);
}

/* Runs the loop until the server has received n requests. */
static void run_until_requests(unsigned n, unsigned timeout_ms) {
  uint64_t deadline = tu_mono_ms() + timeout_ms;
  while (atomic_load(&S.nreq) < n && tu_mono_ms() < deadline) turn();
  if (atomic_load(&S.nreq) < n) {
    for (unsigned i = 0; i < atomic_load(&S.nreq); i++) fprintf(stderr, "# got[%u] %s\n", i, S.got[i]);
    fail_msg("only %u of %u requests arrived", atomic_load(&S.nreq), n);
  }
}

/* Runs the loop for ms milliseconds. */
static void run_for(unsigned ms) {
  uint64_t deadline = tu_mono_ms() + ms;
  while (tu_mono_ms() < deadline) turn();
}

static void expect_requests(const char *const *want, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(S.got[i], want[i]) != 0) {
      for (size_t j = 0; j < n; j++) fprintf(stderr, "# got[%zu] %s\n", j, S.got[j]);
      fail_msg("request %zu: got \"%s\", want \"%s\"", i, S.got[i], want[i]);
    }
  }
}
#define EXPECT_REQUESTS(...)                                   \
  do {                                                         \
    static const char *const w_[] = {__VA_ARGS__};             \
    expect_requests(w_, sizeof w_ / sizeof w_[0]);             \
  } while (0)

static uint64_t gap(unsigned i) { return S.at_ms[i] - S.at_ms[i - 1]; }

/* ---- tests ---------------------------------------------------------------- */

static void test_url_building(void **state) {
  kc_reflector_spec sp = spec_default();
  sp.label_selector = "app in (web,api),tier!=db";
  sp.field_selector = "spec.nodeName=n1";
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, F.api, &sp, &sink, &F.r), 0);
  char buf[1024];
  assert_true(kc_reflector_url(F.r, false, "0", NULL, true, 0, buf, sizeof buf) > 0);
  assert_string_equal(buf, BASE "?fieldSelector=spec.nodeName%3Dn1&labelSelector=app%20in%20%28web"
                               "%2Capi%29%2Ctier%21%3Ddb&limit=500&resourceVersion=0");
  /* A continue page never carries resourceVersion (that is a 400). */
  assert_true(kc_reflector_url(F.r, false, "0", "eyJ2Ijo+/=", true, 0, buf, sizeof buf) > 0);
  assert_string_equal(buf, BASE "?continue=eyJ2Ijo%2B%2F%3D&fieldSelector=spec.nodeName%3Dn1&"
                               "labelSelector=app%20in%20%28web%2Capi%29%2Ctier%21%3Ddb&limit=500");
  assert_true(kc_reflector_url(F.r, true, "105", NULL, false, 412, buf, sizeof buf) > 0);
  assert_string_equal(buf, BASE "?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dn1&"
                               "labelSelector=app%20in%20%28web%2Capi%29%2Ctier%21%3Ddb&"
                               "resourceVersion=105&timeoutSeconds=412&watch=true");
  /* Consistent list: no resourceVersion at all. */
  assert_true(kc_reflector_url(F.r, false, "", NULL, false, 0, buf, sizeof buf) > 0);
  assert_string_equal(buf, BASE "?fieldSelector=spec.nodeName%3Dn1&labelSelector=app%20in%20%28web"
                               "%2Capi%29%2Ctier%21%3Ddb");
  assert_int_equal(kc_reflector_url(F.r, false, "0", NULL, true, 0, buf, 40), -ENOSPC);
  assert_string_equal(kc_reflector_describe(F.r),
                      "pods[ns=ns1,labels=app in (web,api),tier!=db,fields=spec.nodeName=n1]");
}

/* Paged initial list, watch with events split across chunks, a bookmark, a
 * clean end (re-watch from the bookmark's RV without relist), then ERROR 410
 * (relist at the last RV, with limit since the first list was paginated). */
/* ---- shardSelector (KEP-5866, reflector.h "Shard selector") ---- */

#define SHARD_LO "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
#define SHARD_HI "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"

/* A list body whose metadata echoes selector in shardInfo (a server with
 * the ShardedListAndWatch feature). */
static const char *shard_list(const char *selector, const char *rv, const char *cont, const char *items) {
  const char *b = list_body(rv, cont, items);
  const char *m = strstr(b, "\"metadata\":{");
  assert_non_null(m);
  size_t at = (size_t)(m - b) + strlen("\"metadata\":{");
  return fmt("%.*s\"shardInfo\":{\"selector\":\"%s\"},%s", (int)at, b, selector, b + at);
}

static const char *initial_end(const char *rv) {
  return fmt("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
             "\"resourceVersion\":\"%s\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n",
             rv);
}

static void run_until_bookmarks(uint64_t n, unsigned timeout_ms) {
  uint64_t deadline = tu_mono_ms() + timeout_ms;
  while (kc_reflector_stats_get(F.r)->bookmarks < n && tu_mono_ms() < deadline) turn();
  assert_true(kc_reflector_stats_get(F.r)->bookmarks >= n);
}

static void run_until_support(enum kc_shard_support want, unsigned timeout_ms) {
  uint64_t deadline = tu_mono_ms() + timeout_ms;
  while (kc_reflector_shard_support(F.r) != want && tu_mono_ms() < deadline) turn();
  assert_int_equal(kc_reflector_shard_support(F.r), want);
}

/* The selector goes on LIST pages, on resumed watches and on relists, in
 * client-go's alphabetical order; shardInfo in the answer -> SERVER. */
static void test_shard_selector_server(void **state) {
  add_body(200, shard_list(SHARD_LO, "100", "tok1", "a@90"));
  add_body(200, shard_list(SHARD_LO, "100", NULL, "b@91"));
  add_watch(event("ADDED", "c", "101"), ERROR_410, NULL);
  add_body(200, shard_list(SHARD_LO, "120", NULL, "a@90 c@101"));
  kc_reflector_spec sp = spec_default();
  sp.label_selector = "app=web";
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, F.api, &sp, &sink, &F.r), 0);
  assert_int_equal(kc_reflector_shard_support(F.r), KC_SHARD_SUPPORT_UNKNOWN);
  assert_null(kc_reflector_shard_selector(F.r));
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_LO), 0); /* before start: remembered */
  assert_string_equal(kc_reflector_shard_selector(F.r), SHARD_LO);
  char buf[1024];
  assert_true(kc_reflector_url(F.r, false, "0", NULL, true, 0, buf, sizeof buf) > 0);
  assert_string_equal(buf, BASE "?labelSelector=app%3Dweb&limit=500&resourceVersion=0&shardSelector=shardRange"
                               "%28object.metadata.uid%2C%20%270x0000000000000000%27%2C%20%270x8000000000000000"
                               "%27%29");
  assert_int_equal(kc_reflector_start(F.r), 0);
  run_until_requests(5, 5000);
  EXPECT_REQUESTS(BASE "?labelSelector=app=web&limit=500&resourceVersion=0&shardSelector=" SHARD_LO,
                  BASE "?continue=tok1&labelSelector=app=web&limit=500&shardSelector=" SHARD_LO,
                  BASE "?allowWatchBookmarks=true&labelSelector=app=web&resourceVersion=100&shardSelector=" SHARD_LO
                       "&timeoutSeconds=T&watch=true",
                  BASE "?labelSelector=app=web&limit=500&resourceVersion=101&shardSelector=" SHARD_LO,
                  BASE "?allowWatchBookmarks=true&labelSelector=app=web&resourceVersion=120&shardSelector=" SHARD_LO
                       "&timeoutSeconds=T&watch=true");
  assert_int_equal(kc_reflector_shard_support(F.r), KC_SHARD_SUPPORT_SERVER);
  assert_string_equal(K.log, "R a@90,b@91;U c@101;R a@90,c@101;");
  assert_string_equal(kc_shard_support_name(KC_SHARD_SUPPORT_SERVER), "server");
}

/* A server without the feature answers the list whole and without
 * shardInfo: NONE, and nothing carries the selector from then on; a later
 * change of the selector is only remembered (no relist). */
static void test_shard_selector_ignored(void **state) {
  add_body(200, list_body("100", "tok1", "a@90"));
  add_body(200, list_body("100", NULL, "b@91"));
  add_watch(event("ADDED", "c", "101"), NULL)->hang_ms = 3000;
  kc_reflector_spec sp = spec_default();
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, F.api, &sp, &sink, &F.r), 0);
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_LO), 0);
  assert_int_equal(kc_reflector_start(F.r), 0);
  run_until_requests(3, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0&shardSelector=" SHARD_LO,
                  BASE "?continue=tok1&limit=500",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true");
  assert_int_equal(kc_reflector_shard_support(F.r), KC_SHARD_SUPPORT_NONE);
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_HI), 0);
  assert_string_equal(kc_reflector_shard_selector(F.r), SHARD_HI);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (K.upserts < 1 && tu_mono_ms() < deadline) turn();
  assert_int_equal(atomic_load(&S.nreq), 3); /* the watch goes on */
  assert_string_equal(K.log, "R a@90,b@91;U c@101;");
  assert_string_equal(kc_shard_support_name(KC_SHARD_SUPPORT_NONE), "none");
}

/* 400/422 to a request with the selector: the same request again at once
 * without it, NONE. On the LIST (422) and on a watch (400: the cache then
 * holds a part only, so everything is listed again). */
static void test_shard_selector_refused(void **state) {
  add_body(422, status_body(422, "Invalid", "ListOptions.meta.k8s.io is invalid: shardSelector: Forbidden"));
  add_body(200, list_body("100", NULL, "a@90 b@91"));
  add_watch(bookmark("101"), NULL)->hang_ms = 600;
  kc_reflector_spec sp = spec_default();
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, F.api, &sp, &sink, &F.r), 0);
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_LO), 0);
  assert_int_equal(kc_reflector_start(F.r), 0);
  run_until_requests(3, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0&shardSelector=" SHARD_LO, BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true");
  assert_int_equal(kc_reflector_stats_get(F.r)->errors, 0); /* at once: no error, no backoff */
  assert_int_equal(kc_reflector_shard_support(F.r), KC_SHARD_SUPPORT_NONE);
  assert_string_equal(K.log, "R a@90,b@91;");
}

static void test_shard_selector_refused_on_watch(void **state) {
  add_body(200, shard_list(SHARD_LO, "100", NULL, "a@90"));
  add_body(400, status_body(400, "BadRequest", "invalid shard selector: boom"));
  add_body(200, list_body("105", NULL, "a@90 b@104"));
  add_watch(bookmark("106"), NULL)->hang_ms = 600;
  kc_reflector_spec sp = spec_default();
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, F.api, &sp, &sink, &F.r), 0);
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_LO), 0);
  assert_int_equal(kc_reflector_start(F.r), 0);
  run_until_requests(4, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0&shardSelector=" SHARD_LO,
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&shardSelector=" SHARD_LO
                       "&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=100",
                  BASE "?allowWatchBookmarks=true&resourceVersion=105&timeoutSeconds=T&watch=true");
  assert_int_equal(kc_reflector_stats_get(F.r)->errors, 0);
  assert_int_equal(kc_reflector_shard_support(F.r), KC_SHARD_SUPPORT_NONE);
  assert_string_equal(K.log, "R a@90;R a@90,b@104;");
}

/* A new selector while watching: the watch is dropped and the scope listed
 * again at once with it (one replace()); clearing it lists everything. With
 * streamingList auto the first list is a LIST (a streaming list's answer
 * cannot show shardInfo), the relists after SERVER are streaming lists. */
static void test_shard_selector_change_relists(void **state) {
  add_body(200, shard_list(SHARD_LO, "100", NULL, "a@90"));
  add_watch(bookmark("101"), NULL)->hang_ms = 3000;
  add_watch(event("ADDED", "b", "95"), initial_end("110"), NULL)->hang_ms = 3000;
  add_watch(event("ADDED", "a", "90"), event("ADDED", "b", "95"), initial_end("111"), NULL)->hang_ms = 3000;
  kc_reflector_spec sp = spec_default();
  sp.streaming = KC_REFLECTOR_STREAM_AUTO;
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, F.api, &sp, &sink, &F.r), 0);
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_LO), 0);
  assert_int_equal(kc_reflector_start(F.r), 0);
  run_until_requests(2, 5000);
  run_until_support(KC_SHARD_SUPPORT_SERVER, 2000);
  run_until_bookmarks(1, 5000); /* the watch is at 101 */
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_LO), 0); /* the same: nothing */
  run_for(100);
  assert_int_equal(atomic_load(&S.nreq), 2);
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_HI), 0);
  run_until_requests(3, 5000);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (!strstr(K.log, "R b@95;") && tu_mono_ms() < deadline) turn();
  assert_int_equal(kc_reflector_set_shard_selector(F.r, ""), 0); /* cleared */
  assert_null(kc_reflector_shard_selector(F.r));
  run_until_requests(4, 5000);
  deadline = tu_mono_ms() + 5000;
  while (!strstr(K.log, "R a@90,b@95;") && tu_mono_ms() < deadline) turn();
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0&shardSelector=" SHARD_LO,
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&shardSelector=" SHARD_LO
                       "&timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&resourceVersion=101&resourceVersionMatch=NotOlderThan&"
                       "sendInitialEvents=true&shardSelector=" SHARD_HI "&timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&resourceVersion=110&resourceVersionMatch=NotOlderThan&"
                       "sendInitialEvents=true&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@90;R b@95;R a@90,b@95;");
  assert_int_equal(kc_reflector_shard_support(F.r), KC_SHARD_SUPPORT_SERVER);
  const kc_reflector_stats *st = kc_reflector_stats_get(F.r);
  assert_int_equal(st->relists, 2);
  assert_int_equal(st->streaming_lists, 2);
}

/* A 422 to a streaming list that names sendInitialEvents is a server
 * without WatchList: LIST+WATCH from then on, still with the selector (the
 * support stays SERVER). */
/* A 401 or 403 to a streaming list is about the credential, not about the
 * request's shape: the next attempt is a streaming list again, and the
 * streaming list stays in use (a 422 is what turns it off, above). */
static void test_streaming_list_survives_401_and_403(void **state) {
  manual_clock();
  add_body(401, status_body(401, "Unauthorized", "Unauthorized"));
  add_body(403, status_body(403, "Forbidden", "configmaps is forbidden"));
  add_watch(event("ADDED", "a", "90"), initial_end("100"), NULL)->hang_ms = 3000;
  kc_reflector_spec sp = spec_default();
  sp.streaming = KC_REFLECTOR_STREAM_AUTO;
  start(&sp);
  run_until_requests(3, 5000);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (!kc_reflector_stats_get(F.r)->synced && tu_mono_ms() < deadline) turn();
#define STREAMING_LIST BASE "?allowWatchBookmarks=true&resourceVersion=&resourceVersionMatch=NotOlderThan&" \
                             "sendInitialEvents=true&timeoutSeconds=T&watch=true"
  EXPECT_REQUESTS(STREAMING_LIST, STREAMING_LIST, STREAMING_LIST);
#undef STREAMING_LIST
  const kc_reflector_stats *st = kc_reflector_stats_get(F.r);
  assert_true(st->streaming);
  assert_true(st->synced);
  assert_int_equal(st->streaming_fallbacks, 0);
  assert_string_equal(K.log, "R a@90;");
}

static void test_shard_selector_streaming_422_is_watchlist(void **state) {
  add_body(200, shard_list(SHARD_LO, "100", NULL, "a@90"));
  add_watch(bookmark("101"), NULL)->hang_ms = 3000;
  add_body(422, status_body(422, "Invalid", "ListOptions.meta.k8s.io \\\"\\\" is invalid: sendInitialEvents: "
                                            "Forbidden: sendInitialEvents is forbidden for watch unless the "
                                            "WatchList feature gate is enabled"));
  add_body(200, shard_list(SHARD_HI, "110", NULL, "b@95"));
  add_watch(bookmark("111"), NULL)->hang_ms = 3000;
  kc_reflector_spec sp = spec_default();
  sp.streaming = KC_REFLECTOR_STREAM_AUTO;
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, F.api, &sp, &sink, &F.r), 0);
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_LO), 0);
  assert_int_equal(kc_reflector_start(F.r), 0);
  run_until_requests(2, 5000);
  run_until_support(KC_SHARD_SUPPORT_SERVER, 2000);
  run_until_bookmarks(1, 5000); /* the watch is at 101 */
  assert_int_equal(kc_reflector_set_shard_selector(F.r, SHARD_HI), 0);
  run_until_requests(5, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0&shardSelector=" SHARD_LO,
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&shardSelector=" SHARD_LO
                       "&timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&resourceVersion=101&resourceVersionMatch=NotOlderThan&"
                       "sendInitialEvents=true&shardSelector=" SHARD_HI "&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=101&shardSelector=" SHARD_HI,
                  BASE "?allowWatchBookmarks=true&resourceVersion=110&shardSelector=" SHARD_HI
                       "&timeoutSeconds=T&watch=true");
  assert_int_equal(kc_reflector_shard_support(F.r), KC_SHARD_SUPPORT_SERVER);
  assert_false(kc_reflector_stats_get(F.r)->streaming);
  assert_string_equal(K.log, "R a@90;R b@95;");
}

static void test_paged_list_watch_bookmark_resume(void **state) {
  add_body(200, list_body("100", "tok1", "a@90 b@91"));
  add_body(200, list_body("100", NULL, "c@95"));
  const char *mod = event("MODIFIED", "a", "102");
  size_t half = strlen(mod) / 2;
  step *w = add_watch(event("ADDED", "d", "101"), NULL);
  chunk(w, fmt("%.*s", (int)half, mod), 5);
  chunk(w, fmt("%s%s%s", mod + half, event("DELETED", "b", "103"), bookmark("110")), 5);
  add_watch(ERROR_410, NULL);
  add_body(200, list_body("160", NULL, "a@102 c@95 e@150"));
  kc_reflector_spec sp = spec_default();
  sp.label_selector = "app=web";
  start(&sp);
  run_until_requests(6, 5000);
  EXPECT_REQUESTS(BASE "?labelSelector=app=web&limit=500&resourceVersion=0",
                  BASE "?continue=tok1&labelSelector=app=web&limit=500",
                  BASE "?allowWatchBookmarks=true&labelSelector=app=web&resourceVersion=100&"
                       "timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&labelSelector=app=web&resourceVersion=110&"
                       "timeoutSeconds=T&watch=true",
                  BASE "?labelSelector=app=web&limit=500&resourceVersion=110",
                  BASE "?allowWatchBookmarks=true&labelSelector=app=web&resourceVersion=160&"
                       "timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@90,b@91,c@95;U d@101;U a@102;D b@103;R a@102,c@95,e@150;");
  assert_string_equal(S.accept[0], "application/json");
  const kc_reflector_stats *st = kc_reflector_stats_get(F.r);
  assert_true(st->synced);
  assert_int_equal(st->lists, 3);
  assert_int_equal(st->watches, 3);
  assert_int_equal(st->relists, 1);
  assert_int_equal(st->events, 3);
  assert_int_equal(st->bookmarks, 1);
  assert_string_equal(st->resource_version, "160");
  assert_int_equal(kc_mem_lists(), 0); /* both lists delivered: the default heap pad */
}

/* A sink with synced(): the first list (two pages) reaches the sink object
 * by object as it arrives, then synced(); the relist after a 410 is one
 * replace() as before. */
static void test_first_list_incremental(void **state) {
  add_body(200, list_body("100", "tok1", "a@90 b@91"));
  add_body(200, list_body("100", NULL, "c@95"));
  add_watch(event("ADDED", "d", "101"), ERROR_410, NULL);
  add_body(200, list_body("160", NULL, "a@90 d@101"));
  kc_reflector_spec sp = spec_default();
  incremental_sink = true;
  start(&sp);
  incremental_sink = false;
  run_until_requests(4, 5000);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (!strstr(K.log, "R ") && tu_mono_ms() < deadline) turn();
  assert_string_equal(K.log, "U a@90;U b@91;U c@95;S;U d@101;R a@90,d@101;");
  const kc_reflector_stats *st = kc_reflector_stats_get(F.r);
  assert_true(st->synced);
  assert_int_equal(st->relists, 1);
}

/* The first attempt fails half-way (the second page gets a 500): what it
 * handed over may be stale, so the next, complete list is one replace(). */
static void test_first_list_failed_half_way_replaces(void **state) {
  add_body(200, list_body("100", "tok1", "a@90 b@91"));
  add_body(500, status_body(500, "InternalError", "boom"));
  add_body(200, list_body("120", NULL, "a@90 c@96"));
  kc_reflector_spec sp = spec_default();
  incremental_sink = true;
  start(&sp);
  incremental_sink = false;
  run_until_requests(3, 5000);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (!strstr(K.log, "R ") && tu_mono_ms() < deadline) turn();
  assert_string_equal(K.log, "U a@90;U b@91;R a@90,c@96;");
  assert_true(kc_reflector_stats_get(F.r)->synced);
}

/* 410 on a continue token: one full list without limit at the RV of the
 * original request; the first page's items are not delivered twice. */
static void test_expired_continue_full_list(void **state) {
  add_body(200, list_body("200", "tok", "a@150"));
  step *s = add_step(410);
  s->body = fmt("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{\"continue\":\"newtok\"},"
                "\"status\":\"Failure\",\"message\":\"The provided continue parameter is too old "
                "to display a consistent list result.\",\"reason\":\"Expired\",\"code\":410}");
  add_body(200, list_body("205", NULL, "a@150 b@201 c@204"));
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(4, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0", BASE "?continue=tok&limit=500",
                  BASE "?resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=205&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@150,b@201,c@204;");
  /* The pager fallback happens at once, not after a backoff. */
  assert_true(gap(2) < 500);
}

/* HTTP 410 on the watch request -> relist at the last RV without limit (the
 * first list was not paginated); that relist 410s -> consistent relist at
 * once with the same page size (none). */
static void test_watch_http_410_then_consistent_relist(void **state) {
  add_body(200, list_body("300", NULL, "a@250 b@260"));
  add_body(410, status_body(410, "Expired", "too old resource version: 300 (310)"));
  add_body(410, status_body(410, "Expired", "The resourceVersion for the provided list is too old."));
  add_body(200, list_body("420", NULL, "b@260 c@400"));
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(5, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=300&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=300", BASE,
                  BASE "?allowWatchBookmarks=true&resourceVersion=420&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@250,b@260;R b@260,c@400;");
  assert_true(gap(3) < 500);
  assert_string_equal(kc_reflector_stats_get(F.r)->resource_version, "420");
}

/* The consistent relist fails too (500): the next attempt, after a backoff,
 * stays at resourceVersion="" (the old RV is known to be gone) and, being a
 * fresh list, uses limit=500. */
static void test_consistent_relist_retried_at_empty_rv(void **state) {
  add_body(200, list_body("300", NULL, "a@250"));
  add_watch(ERROR_410, NULL);
  add_body(410, status_body(410, "Expired", "The resourceVersion for the provided list is too old."));
  add_body(500, status_body(500, "InternalError", "boom"));
  add_body(200, list_body("500", NULL, "a@250"));
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(6, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=300&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=300", BASE, BASE "?limit=500",
                  BASE "?allowWatchBookmarks=true&resourceVersion=500&timeoutSeconds=T&watch=true");
  assert_true(gap(4) >= 20);
}

/* Config knobs: pageSize 0 (never send limit) and a short watchTimeout
 * (timeoutSeconds in [t, 2t)). */
static void test_no_limit_and_watch_timeout(void **state) {
  add_body(200, list_body("7", NULL, "a@5"));
  kc_reflector_spec sp = spec_default();
  sp.no_limit = true;
  sp.watch_timeout_s = 2;
  start(&sp);
  run_until_requests(2, 5000);
  assert_string_equal(S.got[0], BASE "?resourceVersion=0");
  assert_true(strcmp(S.got[1], BASE "?allowWatchBookmarks=true&resourceVersion=7&timeoutSeconds=2&watch=true") == 0 ||
              strcmp(S.got[1], BASE "?allowWatchBookmarks=true&resourceVersion=7&timeoutSeconds=3&watch=true") == 0);
}

/* ERROR 410 mid-watch after an event -> relist at that event's RV; the
 * relist is answered 504 "Too large resource version" -> consistent relist
 * at once (not after retryAfterSeconds). */
static void test_too_large_rv_consistent_relist(void **state) {
  add_body(200, list_body("300", NULL, "a@250"));
  add_watch(event("ADDED", "b", "305"), ERROR_410, NULL);
  step *s = add_step(504);
  s->body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
            "\"message\":\"Too large resource version: 305, current: 290\",\"reason\":\"Timeout\","
            "\"details\":{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":\"Too "
            "large resource version\"}],\"retryAfterSeconds\":1},\"code\":504}";
  add_body(200, list_body("330", NULL, "a@250 b@305"));
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(5, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=300&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=305", BASE,
                  BASE "?allowWatchBookmarks=true&resourceVersion=330&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@250;U b@305;R a@250,b@305;");
  assert_true(gap(3) < 900);
}

/* 429 on the watch: Retry-After honoured, re-watch from the same RV (no
 * relist). 500 on the watch: relist after backoff. 429 on that list:
 * Retry-After honoured, same list again. */
static void test_429_retry_after_and_500(void **state) {
  add_body(200, list_body("10", NULL, "a@5"));
  step *s = add_step(429);
  s->hdr = "Retry-After: 1";
  s->body = "Too many requests, please try again later.\n";
  add_body(500, status_body(500, "InternalError", "etcdserver: leader changed"));
  s = add_step(429);
  s->hdr = "Retry-After: 1";
  s->body = status_body(429, "TooManyRequests", "throttled");
  add_body(200, list_body("20", NULL, "a@5 b@15"));
  kc_reflector_spec sp = spec_default();
  sp.backoff_max_ms = 5000; /* Retry-After is bounded by it */
  manual_clock();
  start(&sp);
  run_until_requests(6, 8000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=10&timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&resourceVersion=10&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=10", BASE "?resourceVersion=10",
                  BASE "?allowWatchBookmarks=true&resourceVersion=20&timeoutSeconds=T&watch=true");
  assert_int_equal(gap(2), 1000);
  assert_true(gap(3) >= 20 && gap(3) < 40);
  assert_int_equal(gap(4), 1000);
  assert_string_equal(K.log, "R a@5;R a@5,b@15;");
  assert_true(kc_reflector_stats_get(F.r)->errors >= 3);
}

/* Repeated 500s: waits grow 50 -> 100 -> 200 (cap), each with jitter in
 * [d, 2d). The list that works after the failed lists ends the streak (the
 * watch 500 waits the initial 50 ms again); a list that works after a
 * failed watch does not, so a server whose lists work and whose watches
 * fail is not hammered with relists (the second watch 500 waits 100). */
static void test_500_backoff_grows(void **state) {
  for (int i = 0; i < 4; i++) add_body(500, status_body(500, "InternalError", "boom"));
  add_body(200, list_body("50", NULL, "a@40"));
  add_body(500, status_body(500, "InternalError", "watch boom"));
  add_body(200, list_body("60", NULL, "a@40"));
  add_body(500, status_body(500, "InternalError", "watch boom"));
  add_body(200, list_body("70", NULL, "a@40"));
  kc_reflector_spec sp = spec_default();
  sp.backoff_initial_ms = 50;
  sp.backoff_max_ms = 200;
  manual_clock();
  start(&sp);
  run_until_requests(10, 8000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0", BASE "?limit=500&resourceVersion=0",
                  BASE "?limit=500&resourceVersion=0", BASE "?limit=500&resourceVersion=0",
                  BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=50&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=50",
                  BASE "?allowWatchBookmarks=true&resourceVersion=60&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=60",
                  BASE "?allowWatchBookmarks=true&resourceVersion=70&timeoutSeconds=T&watch=true");
  uint64_t g1 = gap(1), g2 = gap(2), g3 = gap(3), g4 = gap(4);
  assert_true(g1 >= 50 && g1 < 100);
  assert_true(g2 >= 100 && g2 < 200);
  assert_true(g3 >= 200 && g3 < 400);
  assert_true(g4 >= 200 && g4 < 400);
  assert_true(gap(6) >= 50 && gap(6) < 100);
  assert_true(gap(8) >= 100 && gap(8) < 200); /* grew: the list between did not reset it */
  assert_int_equal(gap(5), 0); /* list -> watch: no wait */
  /* The step after the last watch failure: doubled from the reset value. */
  assert_int_equal(kc_reflector_stats_get(F.r)->backoff_ms, 100);
}

/* Captures stderr (the log) while running fn; returns it (free it). */
static char *with_log(void (*fn)(void)) {
  char logpath[] = "/tmp/kctrld-refl-log.XXXXXX";
  int lfd = mkstemp(logpath);
  assert_true(lfd >= 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(lfd, 2) == 2);
  enum kc_log_level lvl = kc_log_get_level();
  kc_log_set_level(KC_LOG_DEBUG);
  fn();
  kc_log_set_level(lvl);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(lfd);
  char *log = tu_read_file(logpath, NULL);
  unlink(logpath);
  assert_non_null(log);
  return log;
}

/* The waits the reflector chose, in order, from its "retrying in N ms"
 * lines (N, negated when it was a Retry-After). */
static size_t waits_in(const char *log, long *out, size_t cap) {
  size_t n = 0;
  for (const char *p = log; n < cap && (p = strstr(p, "retrying in ")); p++) {
    char *end;
    long v = strtol(p + 12, &end, 10);
    out[n++] = strncmp(end, " ms (Retry-After)", 17) == 0 ? -v : v;
  }
  return n;
}

static void run_storm(void) {
  kc_reflector_spec sp = spec_default();
  sp.backoff_initial_ms = 200;
  sp.backoff_max_ms = 30000;
  manual_clock();
  start(&sp);
  run_until_requests(9, 15000);
  /* The answer to the last request (Retry-After 60): its wait is chosen. */
  uint64_t deadline = tu_mono_ms() + 5000;
  while (kc_reflector_stats_get(F.r)->retry_after_waits < 6 && tu_mono_ms() < deadline) turn();
}

/* A 429 storm (5 x Retry-After: 1 on the list, then the server is fine):
 * every wait is exactly the Retry-After, the exponential step does not
 * grow meanwhile, so the first ordinary failure afterwards (a watch 500)
 * waits the initial delay; a Retry-After longer than backoff_max_ms is cut
 * to it. The waits are read from the log, not measured. */
static void test_retry_after_storm_then_reset(void **state) {
  for (int i = 0; i < 5; i++) {
    step *s = add_step(429);
    s->hdr = "Retry-After: 1";
    s->body = status_body(429, "TooManyRequests", "storm");
  }
  add_body(200, list_body("10", NULL, "a@5"));
  add_body(500, status_body(500, "InternalError", "watch boom"));
  add_body(200, list_body("20", NULL, "a@5"));
  /* request 9 gets STOP: 503 with Retry-After: 60 */
  char *log = with_log(run_storm);
  long w[16];
  size_t n = waits_in(log, w, 16);
  if (n != 7) fputs(log, stderr);
  assert_int_equal(n, 7);
  for (int i = 0; i < 5; i++) assert_int_equal(w[i], -1000);
  assert_true(w[5] >= 200 && w[5] < 400); /* the initial step, jittered */
  assert_int_equal(w[6], -30000);         /* Retry-After 60 s, bounded */
  const kc_reflector_stats *st = kc_reflector_stats_get(F.r);
  assert_int_equal(st->retry_after_waits, 6);
  assert_int_equal(st->backoff_ms, 200);
  assert_int_equal(st->last_wait_ms, 30000);
  free(log);
}

static bool refused_seen; /* run_refused saw the configuration error mid-way */

static void run_refused(void) {
  kc_reflector_spec sp = spec_default();
  sp.backoff_initial_ms = 50;
  sp.backoff_max_ms = 200;
  manual_clock();
  start(&sp);
  run_until_requests(3, 8000);
  const char *e = kc_reflector_config_error(F.r);
  refused_seen = e && strstr(e, "field label not supported: metadata.nmae");
  run_until_requests(5, 8000);
}

/* A 400 to a LIST (a field selector the server does not support) is a
 * configuration error: one error line with the server's message however
 * often the LIST is retried, no warning per retry, readable from
 * kc_reflector_config_error, and slow retries: from backoff_max_ms (200)
 * doubling, never the initial 50 ms. A LIST that works clears it. */
static void test_list_400_is_config_error(void **state) {
  for (int i = 0; i < 3; i++)
    add_body(400, status_body(400, "BadRequest", "field label not supported: metadata.nmae"));
  add_body(200, list_body("10", NULL, "a@5"));
  /* request 5, the watch, gets STOP */
  char *log = with_log(run_refused);
  assert_true(refused_seen);
  size_t errors = 0, warns = 0;
  for (const char *p = log; (p = strstr(p, " level=error logger=reflector ")); p++) errors++;
  for (const char *p = log; (p = strstr(p, "metadata.nmae")); p++) {
    const char *bol = p;
    while (bol > log && bol[-1] != '\n') bol--;
    if (strstr(bol, " level=warn ") && strstr(bol, " level=warn ") < p) warns++;
  }
  if (errors != 1 || warns != 0) fputs(log, stderr);
  assert_int_equal(errors, 1);
  assert_int_equal(warns, 0);
  assert_non_null(strstr(log, "pods[ns=ns1]: the API server refuses to list this scope"));
  assert_non_null(strstr(log, "HTTP 400 BadRequest: field label not supported: metadata.nmae"));
  assert_non_null(strstr(log, "the API server lists this scope now"));
  long w[16];
  size_t n = waits_in(log, w, 16);
  assert_true(n >= 3);
  assert_true(w[0] >= 200 && w[0] <= 220);
  assert_true(w[1] >= 400 && w[1] <= 440);
  assert_true(w[2] >= 800 && w[2] <= 880);
  assert_null(kc_reflector_config_error(F.r));
  assert_int_equal(kc_reflector_stats_get(F.r)->errors >= 3, 1);
  free(log);
}

static void run_reset(void) {
  kc_reflector_spec sp = spec_default();
  sp.backoff_initial_ms = 40;
  sp.backoff_max_ms = 10000;
  manual_clock();
  start(&sp);
  run_until_requests(7, 10000);
}

/* Failures grow the step (40, 80, 160); a watch that delivers an event
 * ends the streak: the next failure waits the initial 40 ms again. */
static void test_backoff_reset_by_watch_events(void **state) {
  for (int i = 0; i < 3; i++) add_body(500, status_body(500, "InternalError", "boom"));
  add_body(200, list_body("10", NULL, "a@5"));
  add_watch(event("ADDED", "b", "11"), NULL)->hang_ms = 0;
  add_body(500, status_body(500, "InternalError", "watch boom"));
  char *log = with_log(run_reset);
  long w[16];
  size_t n = waits_in(log, w, 16);
  if (n < 4) fputs(log, stderr);
  assert_true(n >= 4);
  assert_true(w[0] >= 40 && w[0] < 80);
  assert_true(w[1] >= 80 && w[1] < 160);
  assert_true(w[2] >= 160 && w[2] < 320);
  assert_true(w[3] >= 40 && w[3] < 80); /* after the event: reset */
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0", BASE "?limit=500&resourceVersion=0",
                  BASE "?limit=500&resourceVersion=0", BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=10&timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&resourceVersion=11&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=11");
  free(log);
}

/* Unknown event types are logged and skipped; the RV of the last known
 * event is kept; a clean end after events re-watches without relist. */
static void test_unknown_event_type_ignored(void **state) {
  add_body(200, list_body("100", NULL, "a@90"));
  add_watch(event("ADDED", "b", "101"), event("SOMETHINGNEW", "z", "102"),
            event("MODIFIED", "a", "103"), NULL);
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(3, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&resourceVersion=103&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@90;U b@101;U a@103;");
  assert_int_equal(kc_reflector_stats_get(F.r)->relists, 0);
}

/* A malformed event: logged with context (reflector, event number, byte
 * offset), events before it stand, relist at the last good RV, no crash. */
static void test_malformed_event_relists(void **state) {
  add_body(200, list_body("100", NULL, "a@90"));
  add_watch(event("ADDED", "b", "101"),
            "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\"]}}\n", NULL);
  add_body(200, list_body("120", NULL, "a@90 b@101"));
  char logpath[] = "/tmp/kctrld-refl-log.XXXXXX";
  int lfd = mkstemp(logpath);
  assert_true(lfd >= 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(lfd, 2) == 2);
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(4, 5000);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(lfd);
  char *log = tu_read_file(logpath, NULL);
  unlink(logpath);
  assert_non_null(log);
  fputs(log, stderr);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=101",
                  BASE "?allowWatchBookmarks=true&resourceVersion=120&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@90;U b@101;R a@90,b@101;");
  assert_non_null(strstr(log, "pods[ns=ns1]"));
  assert_non_null(strstr(log, "malformed"));
  assert_non_null(strstr(log, "event 2"));
  assert_non_null(strstr(log, "offset"));
  free(log);
}

/* A watch that ends at once with no event is "very short": relist after a
 * backoff. A watch that lasted 1 s without events ends cleanly: re-watch
 * from the same RV, no relist. */
static void test_short_and_quiet_watches(void **state) {
  add_body(200, list_body("100", NULL, "a@90"));
  add_watch(NULL);
  add_body(200, list_body("100", NULL, "a@90"));
  step *s = add_watch(NULL);
  s->hang_ms = 10000;
  s->hang_held = true;
  kc_reflector_spec sp = spec_default();
  manual_clock();
  start(&sp);
  run_until_requests(4, 5000);
  kc_clock_advance(1000 * MS); /* the quiet watch has lasted a second */
  mini_server_release(F.srv);
  run_until_requests(5, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true",
                  BASE "?resourceVersion=100",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true");
  assert_true(gap(2) >= 20 && gap(2) < 40);
  assert_int_equal(gap(4), 1000);
  assert_string_equal(K.log, "R a@90;R a@90;");
}

/* A watch that goes silent (no byte for idle_timeout_ms) is restarted from
 * the last RV (here a bookmark's), without relist. Metadata-only asks for
 * PartialObjectMetadata(List). */
static void test_idle_watch_restarted(void **state) {
  add_body(200, list_body("100", NULL, "a@90"));
  step *s = add_watch(bookmark("140"), NULL);
  s->hang_ms = 4000;
  kc_reflector_spec sp = spec_default();
  sp.idle_timeout_ms = 300;
  sp.transform.metadata_only = true;
  start(&sp);
  run_until_requests(3, 5000);
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true",
                  BASE "?allowWatchBookmarks=true&resourceVersion=140&timeoutSeconds=T&watch=true");
  /* Restarted by the idle timer (300 ms), not by the server ending the
   * hang at 4000 ms: the bound is the hang, not a speed requirement. The
   * lower bound has slack: libuv starts a timer from the loop's cached
   * time, which can be a few ms before the server saw the request (CI once
   * measured 299 ms). */
  assert_true(gap(2) >= 250 && gap(2) < 3900);
  assert_string_equal(K.log, "R a@90;");
  assert_int_equal(kc_reflector_stats_get(F.r)->bookmarks, 1);
  assert_string_equal(S.accept[0], "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;"
                                   "v=v1,application/json;q=0.9");
  assert_string_equal(S.accept[1], "application/json;as=PartialObjectMetadata;g=meta.k8s.io;"
                                   "v=v1,application/json;q=0.9");
}

/* Close while a watch is streaming: no sink call afterwards, no leak (ASan). */
/* A list counts as in progress for the heap's pad (memtrim.h) through its
 * failed attempts and backoff, and no longer once the reflector is closed. */
static void test_list_in_progress_until_closed(void **state) {
  add_body(500, status_body(500, "InternalError", "boom"));
  kc_reflector_spec sp = spec_default();
  sp.backoff_initial_ms = 60000;
  unsigned before = kc_mem_lists();
  start(&sp);
  run_until_requests(1, 5000);
  run_for(50);
  assert_int_equal(kc_mem_lists(), before + 1); /* waiting to retry the list */
  kc_reflector_close(F.r);
  F.r = NULL;
  assert_int_equal(kc_mem_lists(), before);
  run_for(50);
}

static void test_close_mid_watch(void **state) {
  add_body(200, list_body("100", NULL, "a@90"));
  step *s = add_watch(event("ADDED", "b", "101"), NULL);
  chunk(s, event("ADDED", "c", "102"), 400);
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(2, 5000);
  run_for(150);
  kc_reflector_close(F.r);
  F.r = NULL;
  run_for(500);
  assert_string_equal(K.log, "R a@90;U b@101;");
}

/* ---- raw socket server: connection reset mid-stream ---------------------- */

static struct {
  int lfd;
  int port;
  atomic_uint nreq;
  atomic_bool stop;
} RAW;

/* send, not write: the reflector may close its end first, and a SIGPIPE
 * would end the whole test program. */
static bool write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

static void *raw_conn(void *arg) {
  int fd = (int)(intptr_t)arg;
  char req[4096];
  size_t n = 0;
  for (;;) {
    char *end;
    while (!(end = memmem(req, n, "\r\n\r\n", 4))) {
      if (n == sizeof req) goto out;
      ssize_t r = read(fd, req + n, sizeof req - n);
      if (r <= 0) goto out;
      n += (size_t)r;
    }
    size_t used = (size_t)(end + 4 - req);
    char line[1024];
    size_t ll = strcspn(req, "\r");
    snprintf(line, sizeof line, "%.*s", (int)ll, req);
    memmove(req, req + used, n - used);
    n -= used;
    /* "GET /path?query HTTP/1.1" -> path?query */
    char *sp1 = strchr(line, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp2) goto out;
    *sp2 = 0;
    pthread_mutex_lock(&S.mu);
    unsigned idx = atomic_load(&RAW.nreq);
    /* timeoutSeconds is random: normalise it like the MHD handler. */
    char *t = strstr(sp1 + 1, "timeoutSeconds=");
    if (t) {
      long v = strtol(t + 15, NULL, 10);
      if (v >= 300 && v < 600) {
        char *e = t + 15;
        while (*e >= '0' && *e <= '9') e++;
        memmove(t + 16, e, strlen(e) + 1);
        t[15] = 'T';
      }
    }
    record(idx, sp1 + 1, "", NULL);
    /* A copy: this detached thread may outlive the test whose steps it
     * serves, and the next test rewrites steps[] (under mu). */
    const step cur = idx < S.nsteps ? S.steps[idx] : STOP;
    const step *s = &cur;
    atomic_store(&RAW.nreq, idx + 1);
    pthread_mutex_unlock(&S.mu);
    char hdr[256];
    if (!s->nchunks) {
      const char *body = s->body ? s->body : "";
      snprintf(hdr, sizeof hdr,
               "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s%s\r\n",
               s->status, strlen(body), s->hdr ? s->hdr : "", s->hdr ? "\r\n" : "");
      if (!write_all(fd, hdr, strlen(hdr)) || !write_all(fd, body, strlen(body))) goto out;
      continue;
    }
    snprintf(hdr, sizeof hdr,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    if (!write_all(fd, hdr, strlen(hdr))) goto out;
    for (size_t i = 0; i < s->nchunks; i++) {
      char ch[32];
      if (s->chunks[i].delay_ms) usleep(s->chunks[i].delay_ms * 1000u);
      snprintf(ch, sizeof ch, "%zx\r\n", s->chunks[i].len);
      if (!write_all(fd, ch, strlen(ch)) || !write_all(fd, s->chunks[i].data, s->chunks[i].len) ||
          !write_all(fd, "\r\n", 2))
        goto out;
    }
    if (s->reset) {
      /* RST instead of FIN: SO_LINGER 0. Wait first: data still unread
       * when the RST arrives is discarded by the client's kernel. */
      usleep(100 * 1000);
      struct linger lg = {1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      goto out;
    }
    if (!write_all(fd, "0\r\n\r\n", 5)) goto out;
  }
out:
  close(fd);
  return NULL;
}

static void *raw_accept(void *arg) {
  while (!atomic_load(&RAW.stop)) {
    int fd = accept(RAW.lfd, NULL, NULL);
    if (fd < 0) break;
    if (atomic_load(&RAW.stop)) {
      close(fd);
      break;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, raw_conn, (void *)(intptr_t)fd) == 0)
      pthread_detach(t);
    else
      close(fd);
  }
  return NULL;
}

/* Runs the scripted steps against the raw server until nreq requests
 * arrived and the sink's log reads want_log (a loaded machine may deliver
 * the last event well after the last request); returns how many requests
 * arrived and the reflector's stats then. */
static unsigned raw_run(unsigned nreq, const char *want_log, kc_reflector_stats *st) {
  RAW.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(RAW.lfd >= 0);
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(RAW.lfd, (struct sockaddr *)&sin, sizeof sin), 0);
  assert_int_equal(listen(RAW.lfd, 8), 0);
  socklen_t sl = sizeof sin;
  assert_int_equal(getsockname(RAW.lfd, (struct sockaddr *)&sin, &sl), 0);
  RAW.port = ntohs(sin.sin_port);
  atomic_store(&RAW.nreq, 0);
  atomic_store(&RAW.stop, false);
  pthread_t acc;
  assert_int_equal(pthread_create(&acc, NULL, raw_accept, NULL), 0);

  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", RAW.port);
  kc_kube_creds cr = {.server = url, .token = "t0k"};
  kc_api *api = NULL;
  assert_int_equal(kc_api_new(&F.loop, &cr, &api), 0);
  kc_reflector_spec sp = spec_default();
  kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(kc_reflector_new(&F.loop, api, &sp, &sink, &F.r), 0);
  assert_int_equal(kc_reflector_start(F.r), 0);
  uint64_t deadline = tu_mono_ms() + 5000;
  while ((atomic_load(&RAW.nreq) < nreq || strcmp(K.log, want_log) != 0) && tu_mono_ms() < deadline)
    uv_run(&F.loop, UV_RUN_ONCE);
  unsigned got = atomic_load(&RAW.nreq);
  *st = *kc_reflector_stats_get(F.r);
  kc_reflector_close(F.r);
  F.r = NULL;
  kc_api_close(api);
  atomic_store(&RAW.stop, true);
  shutdown(RAW.lfd, SHUT_RDWR);
  close(RAW.lfd);
  pthread_join(acc, NULL);
  return got;
}

/* The raw server's steps run until the sink's log reads want_log: a list
 * at RV 50, its watch reset, the history check's GETs (check: one or two
 * paths below BASE, "?limit=500" for the consistent relist), and the watch
 * that resumes at resume_rv; one history check that found `changes`
 * changes. */
static void expect_reset_run(const char *want_log, const char *check1, const char *check2,
                             const char *resume_rv, unsigned changes) {
  kc_reflector_stats st;
  assert_true(raw_run(5, want_log, &st) >= 5);
  char resume[256];
  snprintf(resume, sizeof resume,
           BASE "?allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=T&watch=true", resume_rv);
  char c1[128], c2[128];
  snprintf(c1, sizeof c1, BASE "%s", check1);
  snprintf(c2, sizeof c2, BASE "%s", check2);
  const char *want[] = {BASE "?limit=500&resourceVersion=0",
                        BASE "?allowWatchBookmarks=true&resourceVersion=50&timeoutSeconds=T&watch=true",
                        c1, c2, resume};
  expect_requests(want, 5);
  assert_int_equal(st.history_checks, 1);
  assert_int_equal(st.history_changes, changes);
  assert_string_equal(K.log, want_log);
}

static void test_connection_reset_midstream(void **state) {
  add_body(200, list_body("50", NULL, "a@40"));
  const char *mod = event("MODIFIED", "a", "52");
  step *s = add_watch(event("ADDED", "b", "51"), NULL);
  chunk(s, fmt("%.*s", (int)(strlen(mod) / 2), mod), 50);
  s->reset = true;
  add_body(200, pod("b", "51")); /* the history check: same uid, same RV */
  add_body(200, pod("a", "40"));
  add_watch(event("MODIFIED", "a", "52"), NULL);
  /* After the reset, the history check reads the newest cached object (b)
   * and the sampled others (a: two objects, both in the sample) before the
   * watch resumes at 51. The half event is dropped; the re-watch from 51
   * delivers it whole. */
  expect_reset_run("R a@40;U b@51;U a@52;", "/b", "/a", "51", 0);
}

/* A connection reset, and the server that answers afterwards holds the
 * witness with another uid (a different cluster, a fresh store): no watch
 * at the old RV; a consistent relist (no resourceVersion) instead. Then
 * the same with the witness older than cached (a restored backup) and
 * with the witness missing (404). */
static void reset_then_check(const char *check_status, const char *check_body) {
  add_body(200, list_body("50", NULL, "a@40 b@45"));
  step *s = add_watch(event("MODIFIED", "b", "51"), NULL);
  s->reset = true;
  add_body(atoi(check_status), check_body);
  add_body(200, list_body("30", NULL, "a@20"));
  add_watch(event("MODIFIED", "a", "31"), NULL);
  expect_reset_run("R a@40,b@45;U b@51;R a@20;U a@31;", "/b", "?limit=500", "30", 1);
}

static void test_history_changed_other_uid(void **state) {
  /* pod() names the uid after the name: "uid-b" is cached; serve "uid-x"
   * at an RV below the resume RV 51 (above it, the same history could have
   * re-created b after 51, and the watch would bring that). */
  char *other = fmt("%s", pod("b", "50"));
  char *u = strstr(other, "\"uid-b\"");
  assert_non_null(u);
  memcpy(u, "\"uid-x\"", 7);
  reset_then_check("200", other);
}

static void test_history_changed_older_rv(void **state) {
  reset_then_check("200", pod("b", "12"));
}

static void test_history_changed_witness_gone(void **state) {
  reset_then_check("404", status_body(404, "NotFound", "pods \"b\" not found"));
}


/* ---- pipelined pages (reflector.h "Pipelined pages"; pool runs only) ---- */

/* Page 1 split after its metadata and first item; the rest is held back by
 * the server until the test releases it (at most HOLD_MS). */
#define HOLD_MS 20000
static void held_chunk(step *s, const char *data) {
  chunk(s, data, HOLD_MS);
  s->chunks[s->nchunks - 1].held = true;
}

static void paged_head_tail(const char *cont, const char *head_item, const char *tail_items,
                            bool malformed_tail) {
  const char *full = list_body("100", cont, head_item);
  /* full ends with "]}": cut there and append the tail items. */
  size_t n = strlen(full) - 2;
  step *s = add_step(200);
  chunk(s, fmt("%.*s", (int)n, full), 0);
  if (malformed_tail) {
    held_chunk(s, ",{\"metadata\":{\"name\":]}");
    return;
  }
  const char *t = list_body("100", NULL, tail_items);
  const char *items = strstr(t, "\"items\":[") + strlen("\"items\":[");
  held_chunk(s, fmt(",%s", items));
}

/* Page 2 is requested while page 1 is still held back by the server (on
 * main it is requested only after page 1 ended), and its
 * items, received in full long before, are applied after all of page 1's. */
static void test_pipelined_next_page_early_in_order(void **state) {
  if (!use_pool) skip();
  paged_head_tail("tok1", "a@90", "b@91", false);
  add_body(200, list_body("100", NULL, "c@92 d@93"));
  add_watch(event("ADDED", "e", "101"), NULL)->hang_ms = 3000;
  kc_reflector_spec sp = spec_default();
  incremental_sink = true;
  start(&sp);
  incremental_sink = false;
  run_until_requests(2, 5000);
  /* Page 1 is not complete: nothing after its first item was applied. */
  assert_true(strstr(K.log, "U b@91") == NULL);
  assert_true(strstr(K.log, "U c@92") == NULL);
  mini_server_release(F.srv);
  run_until_requests(3, 5000);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (!strstr(K.log, "U e@101") && tu_mono_ms() < deadline) turn();
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0", BASE "?continue=tok1&limit=500",
                  BASE "?allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "U a@90;U b@91;U c@92;U d@93;S;U e@101;");
  assert_int_equal(kc_reflector_stats_get(F.r)->lists, 2); /* one per page */
}

/* Page 1 fails (malformed) after page 2 was requested: page 2 is dropped,
 * the list is retried after the backoff as before, and it counts as one
 * LIST only (page 2 was never taken up). */
static void test_pipelined_failure_cancels_next_page(void **state) {
  if (!use_pool) skip();
  paged_head_tail("tok1", "a@90", NULL, true);
  add_step(200)->body = list_body("100", NULL, "z@99"); /* page 2: must never apply */
  S.steps[S.nsteps - 1].hang_ms = 500;
  add_body(200, list_body("120", NULL, "a@90 c@96"));
  add_watch(event("ADDED", "e", "121"), NULL)->hang_ms = 3000;
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(2, 5000);
  mini_server_release(F.srv);
  run_until_requests(4, 5000);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (!strstr(K.log, "U e@121") && tu_mono_ms() < deadline) turn();
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0", BASE "?continue=tok1&limit=500",
                  BASE "?limit=500&resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=120&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@90,c@96;U e@121;");
  const kc_reflector_stats *st = kc_reflector_stats_get(F.r);
  assert_int_equal(st->lists, 2); /* page 1 twice; the cancelled page 2 is none */
  assert_true(strstr(st->last_error, "malformed") != NULL);
}

/* 410 (expired continue) on the early page 2: handled once page 1 was
 * applied, exactly as without pipelining: one full list without limit. */
static void test_pipelined_next_page_410(void **state) {
  if (!use_pool) skip();
  paged_head_tail("tok", "a@150", "b@151", false);
  step *s = add_step(410);
  s->body = fmt("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                "\"status\":\"Failure\",\"message\":\"The provided continue parameter is too old "
                "to display a consistent list result.\",\"reason\":\"Expired\",\"code\":410}");
  add_body(200, list_body("205", NULL, "a@150 b@201 c@204"));
  add_watch(event("ADDED", "e", "206"), NULL)->hang_ms = 3000;
  kc_reflector_spec sp = spec_default();
  start(&sp);
  run_until_requests(2, 5000);
  assert_int_equal(K.replaces, 0);
  mini_server_release(F.srv);
  run_until_requests(4, 5000);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (!strstr(K.log, "U e@206") && tu_mono_ms() < deadline) turn();
  EXPECT_REQUESTS(BASE "?limit=500&resourceVersion=0", BASE "?continue=tok&limit=500",
                  BASE "?resourceVersion=0",
                  BASE "?allowWatchBookmarks=true&resourceVersion=205&timeoutSeconds=T&watch=true");
  assert_string_equal(K.log, "R a@150,b@201,c@204;U e@206;");
}

/* Page 2 is large and arrives in full while page 1 is held: its held
 * stream pauses its transfer at half the reflector's budget (the other half
 * is page 1's), and everything still arrives, in order. */
static void test_pipelined_budget_pauses_held_page(void **state) {
  if (!use_pool) skip();
  paged_head_tail("tok1", "a@90", "b@91", false);
  add_body(200, list_body("100", NULL, "c@92 d@93 e@94 f@95 g@96 h@97"));
  add_watch(event("ADDED", "x", "101"), NULL)->hang_ms = 3000;
  kc_reflector_spec sp = spec_default(); /* budget 2048: a Pod is larger */
  incremental_sink = true;
  start(&sp);
  incremental_sink = false;
  run_until_requests(2, 5000);
  uint64_t deadline = tu_mono_ms() + 5000;
  while (kc_reflector_stats_get(F.r)->decode_pauses < 1 && tu_mono_ms() < deadline) turn();
  /* the held page 2 paused, before page 1 ended */
  assert_true(kc_reflector_stats_get(F.r)->decode_pauses >= 1);
  assert_true(strstr(K.log, "U b@91") == NULL);
  mini_server_release(F.srv);
  run_until_requests(3, 5000);
  deadline = tu_mono_ms() + 5000;
  while (!strstr(K.log, "U x@101") && tu_mono_ms() < deadline) turn();
  assert_string_equal(K.log, "U a@90;U b@91;U c@92;U d@93;U e@94;U f@95;U g@96;U h@97;S;U x@101;");
}

int main(void) {
  kc_log_set_level(KC_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_url_building, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelined_next_page_early_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelined_failure_cancels_next_page, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelined_next_page_410, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelined_budget_pauses_held_page, setup, teardown),
      cmocka_unit_test_setup_teardown(test_paged_list_watch_bookmark_resume, setup, teardown),
      cmocka_unit_test_setup_teardown(test_first_list_incremental, setup, teardown),
      cmocka_unit_test_setup_teardown(test_first_list_failed_half_way_replaces, setup, teardown),
      cmocka_unit_test_setup_teardown(test_expired_continue_full_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_watch_http_410_then_consistent_relist, setup, teardown),
      cmocka_unit_test_setup_teardown(test_consistent_relist_retried_at_empty_rv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_limit_and_watch_timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_too_large_rv_consistent_relist, setup, teardown),
      cmocka_unit_test_setup_teardown(test_429_retry_after_and_500, setup, teardown),
      cmocka_unit_test_setup_teardown(test_500_backoff_grows, setup, teardown),
      cmocka_unit_test_setup_teardown(test_retry_after_storm_then_reset, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_400_is_config_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_backoff_reset_by_watch_events, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_event_type_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_malformed_event_relists, setup, teardown),
      cmocka_unit_test_setup_teardown(test_short_and_quiet_watches, setup, teardown),
      cmocka_unit_test_setup_teardown(test_idle_watch_restarted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_in_progress_until_closed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_mid_watch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_connection_reset_midstream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_history_changed_other_uid, setup, teardown),
      cmocka_unit_test_setup_teardown(test_history_changed_older_rv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_history_changed_witness_gone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_server, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_refused_on_watch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_change_relists, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_streaming_422_is_watchlist, setup, teardown),
      cmocka_unit_test_setup_teardown(test_streaming_list_survives_401_and_403, setup, teardown),
  };
  int failed = cmocka_run_group_tests_name("inline decoding", tests, setup_group, teardown_group);
  use_pool = true;
  failed += cmocka_run_group_tests_name("decode pool", tests, setup_group, teardown_group);
  return failed;
}
