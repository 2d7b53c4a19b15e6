/* SPDX-License-Identifier: Apache-2.0 */
/* Integration tests of the observing path (kc_informer -> kc_reflector ->
 * kc_api -> http) against the simulator, build/kube-apisim (docs/apisim.md).
 * The simulator binary is $KC_APISIM, else build/kube-apisim, else the one
 * next to this test's build directory (<build>/tests/test_x ->
 * <build>/kube-apisim); when none exists the test prints a TAP skip.
 *
 * Every check compares the informer's cache with what the simulator
 * serves (a fresh LIST, with the same selectors), not with expectations
 * written by hand, and counts handler events against the simulator's
 * modification counts.
 */
#include <curl/curl.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include <cmocka.h>

#include "client/apiclient.h"
#include "apisim_child.h"
#include "watch/decodepool.h"
#include "cache/informer.h"
#include "base/clock.h"
#include "base/log.h"
#include "ops/ops.h"
#include "kube/selector.h"
#include "lease/shardsel.h"

static char apisim_path[4200];

/* ---- the simulator process ---------------------------------------------- */

static struct {
  pid_t pid;
  int port;
  char url[160];
} SIM;

/* Starts kube-apisim on port (0: any) with extra args; reads its URL. */
static int apisim_start(int port, const char *const *extra) {
  int pfd[2];
  if (pipe(pfd) != 0) return -1;
  char listen[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  const char *argv[32] = {apisim_path, "--listen", listen, "--fixtures", KC_FIXTURES_DIR};
  int n = 5;
  for (; extra && *extra && n < 30; extra++) argv[n++] = *extra;
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a crashed test */
    dup2(pfd[1], 1);
    close(pfd[0]);
    close(pfd[1]);
    execv(apisim_path, (char *const *)argv);
    _exit(127);
  }
  close(pfd[1]);
  char line[128];
  size_t len = 0;
  while (len < sizeof line - 1) {
    ssize_t r = read(pfd[0], line + len, 1);
    if (r <= 0 || line[len] == '\n') break;
    len++;
  }
  line[len] = 0;
  close(pfd[0]);
  if (strncmp(line, "http://127.0.0.1:", 17) != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  SIM.pid = pid;
  snprintf(SIM.url, sizeof SIM.url, "%s", line);
  SIM.port = atoi(line + 17);
  return 0;
}

static void apisim_stop(void) {
  if (SIM.pid <= 0) return;
  kill(SIM.pid, SIGTERM);
  int st;
  for (int i = 0; i < 300; i++) {
    if (waitpid(SIM.pid, &st, WNOHANG) == SIM.pid) {
      SIM.pid = 0;
      return;
    }
    usleep(10000);
  }
  kill(SIM.pid, SIGKILL);
  waitpid(SIM.pid, &st, 0);
  SIM.pid = 0;
}

/* ---- blocking HTTP to the simulator (test side, not the code under test) - */

/* Returns the HTTP code; *out (may be NULL) gets the body (free it). */
static long http(const char *method, const char *path, const char *ctype, const char *body,
                 char **out) {
  char url[8192];
  snprintf(url, sizeof url, "%s%s", SIM.url, path);
  long code = sim_request(method, url, body, ctype, 60000, out);
  if (out && !*out) *out = strdup("");
  return code;
}

static void ctl(const char *method, const char *what, const char *body) {
  char path[256];
  snprintf(path, sizeof path, "/_apisim/%s", what);
  long code = http(method, path, NULL, body, NULL);
  if (code < 200 || code >= 300) fail_msg("control %s %s: HTTP %ld", method, what, code);
}

/* ---- comparing the cache with the server ------------------------------- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct strset {
  char **v;
  size_t n, cap;
} strset;

static void set_add(strset *s, const char *f, ...) __attribute__((format(printf, 2, 3)));
static void set_add(strset *s, const char *f, ...) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 256;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    assert_non_null(s->v);
  }
  va_list ap;
  va_start(ap, f);
  assert_true(vasprintf(&s->v[s->n++], f, ap) >= 0);
  va_end(ap);
}

static void set_free(strset *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

static const char *yget_str(yajl_val v, const char *a, const char *b) {
  const char *path[] = {a, b, NULL};
  yajl_val x = yajl_tree_get(v, path, yajl_t_string);
  return x ? YAJL_GET_STRING(x) : "";
}

/* With uids: also "#uid" (a store re-seeded at the same RVs differs only there). */
static bool WITH_UID;

/* "ns/name@rv" of every object the server lists at `query`. */
static void server_set(const char *collection, const char *query, strset *out) {
  char path[2048], *body = NULL, err[256];
  snprintf(path, sizeof path, "%s%s%s", collection, query && *query ? "?" : "", query ? query : "");
  long code = http("GET", path, NULL, NULL, &body);
  if (code != 200) fail_msg("GET %s: %ld %s", path, code, body);
  yajl_val root = yajl_tree_parse(body, err, sizeof err);
  free(body);
  assert_non_null(root);
  const char *ip[] = {"items", NULL};
  yajl_val items = yajl_tree_get(root, ip, yajl_t_array);
  assert_non_null(items);
  for (size_t i = 0; i < items->u.array.len; i++) {
    yajl_val it = items->u.array.values[i];
    set_add(out, "%s/%s@%s%s%s", yget_str(it, "metadata", "namespace"),
            yget_str(it, "metadata", "name"), yget_str(it, "metadata", "resourceVersion"),
            WITH_UID ? "#" : "", WITH_UID ? yget_str(it, "metadata", "uid") : "");
  }
  yajl_tree_free(root);
}

static void vec_set(const kc_obj_vec *vec, strset *out) {
  for (size_t i = 0; i < vec->n; i++) {
    const kc_obj *o = vec->v[i];
    set_add(out, "%.*s/%.*s@%.*s%s%.*s", (int)kc_obj_namespace(o).len,
            kc_obj_namespace(o).ptr ? kc_obj_namespace(o).ptr : "", (int)kc_obj_name(o).len,
            kc_obj_name(o).ptr, (int)kc_obj_resource_version(o).len, kc_obj_resource_version(o).ptr,
            WITH_UID ? "#" : "", WITH_UID ? (int)kc_obj_uid(o).len : 0,
            WITH_UID && kc_obj_uid(o).ptr ? kc_obj_uid(o).ptr : "");
  }
}

/* True when both sets are equal; else prints the first difference. */
static bool sets_equal(strset *a, strset *b, const char *what, bool quiet) {
  qsort(a->v, a->n, sizeof *a->v, cmp_str);
  qsort(b->v, b->n, sizeof *b->v, cmp_str);
  size_t i = 0, j = 0;
  bool eq = true;
  while (i < a->n || j < b->n) {
    int c = i == a->n ? 1 : j == b->n ? -1 : strcmp(a->v[i], b->v[j]);
    if (c == 0) {
      i++, j++;
      continue;
    }
    if (!quiet)
      fprintf(stderr, "# %s: %s only %s\n", what, c < 0 ? "cache" : "server", c < 0 ? a->v[i] : b->v[j]);
    eq = false;
    break;
  }
  if (!quiet && a->n != b->n) fprintf(stderr, "# %s: cache %zu, server %zu\n", what, a->n, b->n);
  return eq;
}

/* ---- loop, informers, handlers -------------------------------------------- */

typedef struct counts {
  unsigned adds, updates, deletes;
  strset deleted; /* "ns/name@rv" of the objects handed to on_delete */
} counts;

static void h_add(void *ud, kc_informer *inf, kc_obj *o) { ((counts *)ud)->adds++; }
static void h_update(void *ud, kc_informer *inf, kc_obj *old, kc_obj *o) {
  ((counts *)ud)->updates++;
}
static void h_delete(void *ud, kc_informer *inf, kc_obj *o) {
  counts *c = ud;
  c->deletes++;
  set_add(&c->deleted, "%.*s/%.*s@%.*s", (int)kc_obj_namespace(o).len, kc_obj_namespace(o).ptr,
          (int)kc_obj_name(o).len, kc_obj_name(o).ptr, (int)kc_obj_resource_version(o).len,
          kc_obj_resource_version(o).ptr);
}

static struct {
  uv_loop_t loop;
  uv_timer_t tick;
  kc_api *api;
  kc_kube_creds creds;
  char url[160];
} L;

static void on_tick(uv_timer_t *t) {}

static void loop_open(void) {
  assert_int_equal(uv_loop_init(&L.loop), 0);
  assert_int_equal(uv_timer_init(&L.loop, &L.tick), 0);
  uv_timer_start(&L.tick, on_tick, 5, 5);
  snprintf(L.url, sizeof L.url, "%s", SIM.url);
  L.creds = (kc_kube_creds){.server = L.url, .token = "t"};
  assert_int_equal(kc_api_new(&L.loop, &L.creds, &L.api), 0);
}

/* The decode pool informers get (NULL: inline decoding). */
static kc_decode_pool *POOL;

/* Informers still open when a test fails are closed by the teardown. */
static kc_informer *OPEN[8];

static void forget(kc_informer *inf) {
  for (size_t i = 0; i < 8; i++)
    if (OPEN[i] == inf) OPEN[i] = NULL;
}

static void close_inf(kc_informer *inf) {
  forget(inf);
  kc_informer_close(inf);
}

static int loop_close(void) {
  for (size_t i = 0; i < 8; i++) close_inf(OPEN[i]);
  kc_decode_pool_free(POOL); /* a test that failed before freeing it */
  POOL = NULL;
  kc_api_close(L.api);
  uv_close((uv_handle_t *)&L.tick, NULL);
  uv_run(&L.loop, UV_RUN_DEFAULT);
  return uv_loop_close(&L.loop) == 0 ? 0 : -1;
}

static void run_ms(unsigned ms) {
  uint64_t end = sim_mono_ms() + ms;
  while (sim_mono_ms() < end) uv_run(&L.loop, UV_RUN_ONCE);
}

static const kc_resource_ref PODS = {"/api/v1", "pods", true};
static const kc_resource_ref CONFIGMAPS = {"/api/v1", "configmaps", true};

static kc_informer_spec pod_spec(void) {
  return (kc_informer_spec){.api_version = "v1", .kind = "Pod", .group = "",
                            .label_selector = "", .field_selector = "", .page_size = 500,
                            .watch_timeout_ms = 300000, .watch_inactivity_ms = 300000,
                            .streaming_list = KC_STREAMING_OFF, .identity = "test"};
}

/* An informer with a shardSelector (NULL: none) set before it starts. */
static kc_informer *informer_sel(const kc_informer_spec *sp, const kc_resource_ref *ref, counts *c,
                                 const char *shard_selector) {
  kc_informer *inf = NULL;
  assert_int_equal(kc_informer_new(&L.loop, L.api, POOL, sp, ref, &inf), 0);
  if (shard_selector) assert_int_equal(kc_informer_set_shard_selector(inf, shard_selector), 0);
  if (c) {
    kc_informer_handler h = {h_add, h_update, h_delete, c, NULL};
    assert_true(kc_informer_add_handler(inf, &h) > 0);
  }
  for (size_t i = 0; i < 8; i++)
    if (!OPEN[i]) {
      OPEN[i] = inf;
      break;
    }
  assert_int_equal(kc_informer_start(inf), 0);
  uint64_t end = sim_mono_ms() + 30000;
  while (!kc_informer_synced(inf) && sim_mono_ms() < end) uv_run(&L.loop, UV_RUN_ONCE);
  assert_true(kc_informer_synced(inf));
  return inf;
}

static kc_informer *informer(const kc_informer_spec *sp, const kc_resource_ref *ref, counts *c) {
  return informer_sel(sp, ref, c, NULL);
}

/* Does the informer hold exactly what the server lists at query? */
static bool matches_server(kc_informer *inf, const char *collection, const char *query, bool quiet) {
  strset a = {0}, b = {0};
  kc_obj_vec vec = {0};
  assert_true(kc_informer_list(inf, (kc_str){0}, NULL, &vec) >= 0);
  vec_set(&vec, &a);
  kc_obj_vec_release(&vec);
  server_set(collection, query, &b);
  bool eq = sets_equal(&a, &b, collection, quiet);
  set_free(&a);
  set_free(&b);
  return eq;
}

/* Runs the loop until the cache equals the server's list (or times out). */
static void converge(kc_informer *inf, const char *collection, const char *query, unsigned ms) {
  /* `ms` is loop time: the loop (timers, backoffs, watches) only runs
   * between checks, and one check of thousands of objects takes seconds
   * under sanitizers, so wall time would starve it. */
  unsigned budget = ms, slice = 100;
  while (budget > 0) {
    unsigned run = slice < budget ? slice : budget;
    run_ms(run);
    budget -= run;
    uint64_t t0 = sim_mono_ms();
    if (matches_server(inf, collection, query, true)) return;
    uint64_t took = sim_mono_ms() - t0;
    slice = took > 100 ? (unsigned)(took < 5000 ? took : 5000) : 100;
  }
  assert_true(matches_server(inf, collection, query, false));
}

/* Waits for the simulator's modification stream to finish. */
static void wait_modify_done(unsigned ms) {
  uint64_t end = sim_mono_ms() + ms;
  while (sim_mono_ms() < end) {
    char *body = NULL;
    http("GET", "/_apisim/modify", NULL, NULL, &body);
    bool running = strstr(body, "\"running\":true") != NULL;
    free(body);
    if (!running) return;
    run_ms(50);
  }
  fail_msg("modification stream did not finish");
}

static unsigned count_requests(const char *needle) {
  char *body = NULL;
  http("GET", "/_apisim/requests", NULL, NULL, &body);
  unsigned n = 0;
  for (const char *p = body; (p = strstr(p, needle)); p += strlen(needle)) n++;
  free(body);
  return n;
}

/* ---- tests ----------------------------------------------------------------- */

static int setup(void **state) {
  static const char *const gen[] = {"--generate", "pods=3000", "--history", "100000", NULL};
  if (apisim_start(0, gen) < 0) return -1;
  loop_open();
  return 0;
}

static int teardown(void **state) {
  WITH_UID = false;
  apisim_stop();
  return loop_close();
}

/* Initial sync across pages (the RV=0 shortcut that ignores limit is off),
 * then a stream of 3000 modifications while every watch is dropped three
 * times: the cache ends equal to the server, and handlers saw every
 * modification exactly once (no relist happened, so no duplicates). */
static void test_paged_sync_and_resume(void **state) {
  ctl("POST", "config", "{\"rv0IgnoresLimit\":false}");
  ctl("DELETE", "counters", NULL);
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  kc_informer *inf = informer(&sp, &PODS, &c);
  assert_int_equal(c.adds, 3000);
  assert_true(matches_server(inf, "/api/v1/pods", NULL, false));
  assert_int_equal(count_requests("continue="), 5); /* 6 pages of 500 */
  kc_informer_stats st;
  kc_informer_stats_get(inf, &st);
  assert_int_equal(st.lists, 6);

  ctl("POST", "modify", "{\"resource\":\"pods\",\"count\":3000,\"rate\":3000}");
  for (int i = 0; i < 3; i++) {
    run_ms(250);
    ctl("POST", "drop-watches", NULL);
  }
  wait_modify_done(30000);
  converge(inf, "/api/v1/pods", NULL, 10000);
  kc_informer_stats_get(inf, &st);
  assert_int_equal(st.relists, 0);
  assert_true(st.watches >= 4);
  assert_int_equal(c.updates, 3000);
  assert_int_equal(c.adds, 3000);
  assert_int_equal(c.deletes, 0);
  close_inf(inf);
  set_free(&c.deleted);
}

/* While the informer cannot watch (connections reset), pods are deleted and
 * modified and the history is compacted. Once the server is reachable the
 * watch gets 410, the informer relists and reports the vanished pods as
 * deletes carrying the last state it had. */
static void test_410_relist_deletes(void **state) {
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  sp.label_selector = "apisim.kctrld.io/app=app-3";
  kc_informer *inf = informer(&sp, &PODS, &c);
  assert_int_equal(c.adds, 300);
  /* Remember what the cache holds for the victims. */
  kc_obj_vec vec = {0};
  assert_int_equal(kc_informer_list(inf, (kc_str){0}, NULL, &vec), 300);
  strset want_deleted = {0};
  ctl("POST", "faults", "{\"action\":\"reset\",\"watch\":true,\"count\":-1}");
  ctl("POST", "drop-watches", NULL);
  run_ms(100);
  for (size_t i = 0; i < 5; i++) {
    kc_obj *o = vec.v[i * 7];
    char path[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/%.*s/pods/%.*s", (int)kc_obj_namespace(o).len,
             kc_obj_namespace(o).ptr, (int)kc_obj_name(o).len, kc_obj_name(o).ptr);
    assert_int_equal(http("DELETE", path, NULL, NULL, NULL), 200);
    set_add(&want_deleted, "%.*s/%.*s@%.*s", (int)kc_obj_namespace(o).len, kc_obj_namespace(o).ptr,
            (int)kc_obj_name(o).len, kc_obj_name(o).ptr, (int)kc_obj_resource_version(o).len,
            kc_obj_resource_version(o).ptr);
    /* One more moves out of the selection: a delete for this informer. */
    o = vec.v[i * 7 + 1];
    snprintf(path, sizeof path, "/api/v1/namespaces/%.*s/pods/%.*s", (int)kc_obj_namespace(o).len,
             kc_obj_namespace(o).ptr, (int)kc_obj_name(o).len, kc_obj_name(o).ptr);
    assert_int_equal(http("PATCH", path, "application/merge-patch+json",
                          "{\"metadata\":{\"labels\":{\"apisim.kctrld.io/app\":\"moved\"}}}", NULL),
                     200);
    set_add(&want_deleted, "%.*s/%.*s@%.*s", (int)kc_obj_namespace(o).len, kc_obj_namespace(o).ptr,
            (int)kc_obj_name(o).len, kc_obj_name(o).ptr, (int)kc_obj_resource_version(o).len,
            kc_obj_resource_version(o).ptr);
  }
  kc_obj_vec_release(&vec);
  ctl("POST", "compact", NULL);
  ctl("DELETE", "faults", NULL);
  converge(inf, "/api/v1/pods", "labelSelector=apisim.kctrld.io%2Fapp%3Dapp-3", 15000);
  kc_informer_stats st;
  kc_informer_stats_get(inf, &st);
  assert_true(st.relists >= 1);
  assert_int_equal(c.deletes, 10);
  assert_true(sets_equal(&c.deleted, &want_deleted, "deletes", false));
  set_free(&want_deleted);
  set_free(&c.deleted);
  close_inf(inf);
}

/* Injected failures on the initial list: 429 (Retry-After 1 s), 500, and a
 * connection reset; the informer syncs after backing off, one request per
 * failure, never a burst. */
static void test_injected_failures(void **state) {
  ctl("POST", "faults", "{\"action\":\"status\",\"code\":429,\"retryAfter\":1,\"watch\":false,\"pathPrefix\":\"/api/v1/pods\"}");
  ctl("POST", "faults", "{\"action\":\"status\",\"code\":500,\"watch\":false,\"pathPrefix\":\"/api/v1/pods\"}");
  ctl("POST", "faults", "{\"action\":\"reset\",\"watch\":false,\"pathPrefix\":\"/api/v1/pods\"}");
  ctl("POST", "faults", "{\"action\":\"status\",\"code\":503,\"watch\":true,\"pathPrefix\":\"/api/v1/pods\"}");
  ctl("DELETE", "counters", NULL);
  uint64_t t0 = sim_mono_ms();
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  kc_informer *inf = informer(&sp, &PODS, &c);
  uint64_t took = sim_mono_ms() - t0;
  kc_informer_stats st;
  kc_informer_stats_get(inf, &st);
  /* curl retries a request whose reused connection is closed before any
   * byte of the answer on a new connection by itself, so the reset may be
   * invisible here; each failure the reflector saw cost one request. */
  assert_true(st.lists == 3 || st.lists == 4);
  /* Each failed list is one error; the watch's 503 may be one more already:
   * the watch starts when the list's transfer ends, and under load its
   * answer can come before the decode pool delivered the list's last
   * objects (which makes the informer synced). */
  uint64_t list_errors = st.lists - 1;
  assert_true(st.errors == list_errors || st.errors == list_errors + 1);
  /* 1 s Retry-After, then backoffs of at least 0.8 s and (when the reset
   * was seen) 1.6 s. */
  uint64_t least = 1000 + 800 + (st.lists == 4 ? 1600 : 0);
  if (took < least) fail_msg("synced after %llu ms, before the backoffs allow (%llu ms, %llu lists)",
                             (unsigned long long)took, (unsigned long long)least,
                             (unsigned long long)st.lists);
  /* The watch 503 -> relist after backoff; then the cache is current. */
  uint64_t end = sim_mono_ms() + 15000;
  do {
    run_ms(50);
    kc_informer_stats_get(inf, &st);
  } while (st.relists == 0 && sim_mono_ms() < end);
  converge(inf, "/api/v1/pods", NULL, 15000);
  kc_informer_stats_get(inf, &st);
  assert_int_equal(st.errors, list_errors + 1);
  assert_int_equal(st.relists, 1);
  assert_int_equal(c.adds, 3000);
  close_inf(inf);
}

/* Resident bytes of this process (/proc/self/statm). */
static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  assert_non_null(f);
  unsigned long size = 0, resident = 0;
  int n = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  assert_int_equal(n, 2);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* A relist that replaces every cached object (all 3000 pods changed without
 * watch events, history compacted, watches dropped: 410, relist): while it
 * is decoded the old and the new objects are both alive (the replace is
 * atomic), then the old ones are freed. Their pages must go back to the OS
 * rather than stay resident as free memory inside the heap: RSS after the
 * relist within a quarter of the cache's size of RSS before it. Decoded on
 * a pool thread, as in the daemon. Meaningless under ASan (its quarantine
 * keeps freed memory): skipped there. */
static void test_relist_returns_memory(void **state) {
#if defined(__SANITIZE_ADDRESS__)
  skip();
#endif
  assert_int_equal(kc_decode_pool_new(&L.loop, 1, &POOL), 0);
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  kc_informer *inf = informer(&sp, &PODS, &c);
  assert_int_equal(c.adds, 3000);
  run_ms(200);
  kc_informer_stats st;
  kc_informer_stats_get(inf, &st);
  size_t cache = st.bytes, before = rss_bytes();
  ctl("POST", "lose-events", "{\"resource\":\"pods\",\"count\":3000}");
  ctl("POST", "compact", NULL);
  ctl("POST", "drop-watches", NULL);
  uint64_t end = sim_mono_ms() + 30000;
  do {
    run_ms(50);
    kc_informer_stats_get(inf, &st);
  } while ((st.relists < 1 || c.updates < 3000) && sim_mono_ms() < end);
  assert_int_equal(st.relists, 1);
  assert_int_equal(c.updates, 3000); /* the replace changed every object */
  run_ms(200);
  size_t after = rss_bytes();
  fprintf(stderr, "# relist of %zu KiB cached: RSS %zu -> %zu KiB\n", cache >> 10, before >> 10,
          after >> 10);
  if (after > before + cache / 4)
    fail_msg("RSS grew by %zu KiB over a relist of a %zu KiB cache", (after - before) >> 10,
             cache >> 10);
  close_inf(inf);
  kc_decode_pool_free(POOL);
  POOL = NULL;
  run_ms(50);
  set_free(&c.deleted);
}

/* Metadata-only and transform: what is stored, and that watch events go
 * through the same path. */
static void test_metadata_only_and_transform(void **state) {
  static const char *const drop[] = {"metadata.managedFields"};
  kc_informer_spec sp = pod_spec();
  sp.label_selector = "apisim.kctrld.io/app=app-1";
  sp.drop = drop;
  sp.ndrop = 1;
  kc_informer *tr = informer(&sp, &PODS, NULL);
  kc_informer_spec sm = pod_spec();
  sm.label_selector = "apisim.kctrld.io/app=app-1";
  sm.metadata_only = true;
  kc_informer *md = informer(&sm, &PODS, NULL);
  kc_informer_spec sf = pod_spec();
  sf.label_selector = "apisim.kctrld.io/app=app-1";
  kc_informer *full = informer(&sf, &PODS, NULL);
  ctl("POST", "modify", "{\"resource\":\"pods\",\"count\":3000,\"rate\":0}");
  wait_modify_done(20000);
  const char *q = "labelSelector=apisim.kctrld.io%2Fapp%3Dapp-1";
  converge(full, "/api/v1/pods", q, 10000);
  converge(tr, "/api/v1/pods", q, 10000);
  converge(md, "/api/v1/pods", q, 10000);
  kc_obj_vec v = {0};
  assert_int_equal(kc_informer_list(md, (kc_str){0}, NULL, &v), 300);
  for (size_t i = 0; i < v.n; i++) {
    kc_json_value jv;
    assert_int_equal(kc_obj_get(v.v[i], "spec", &jv), 0);
    assert_int_equal(jv.type, KC_JSON_ABSENT);
    assert_int_equal(kc_obj_get(v.v[i], "status", &jv), 0);
    assert_int_equal(jv.type, KC_JSON_ABSENT);
    assert_true(kc_str_eq_c(kc_obj_label(v.v[i], kc_str_c("apisim.kctrld.io/app")), "app-1"));
    assert_true(kc_obj_uid(v.v[i]).len > 0);
  }
  kc_obj_vec_clear(&v);
  kc_informer_stats a, b, m;
  kc_informer_stats_get(tr, &a);
  kc_informer_stats_get(full, &b);
  kc_informer_stats_get(md, &m);
  assert_int_equal(kc_informer_list(tr, (kc_str){0}, NULL, &v), 300);
  for (size_t i = 0; i < v.n; i++) {
    kc_json_value jv;
    assert_int_equal(kc_obj_get(v.v[i], "metadata.managedFields", &jv), 0);
    assert_int_equal(jv.type, KC_JSON_ABSENT);
    assert_int_equal(kc_obj_get(v.v[i], "spec.nodeName", &jv), 0);
    assert_int_equal(jv.type, KC_JSON_STRING);
    /* The annotation set by the modification stream arrived by watch. */
    assert_int_equal(kc_obj_get(v.v[i], "metadata.annotations[\"apisim.kctrld.io/tick\"]", &jv), 0);
    assert_int_equal(jv.type, KC_JSON_STRING);
  }
  kc_obj_vec_release(&v);
  fprintf(stderr, "# bytes: full %zu, without managedFields %zu, metadata-only %zu\n", b.bytes,
          a.bytes, m.bytes);
  assert_true(a.bytes < b.bytes);
  assert_true(m.bytes < a.bytes);
  close_inf(tr);
  close_inf(md);
  close_inf(full);
}

/* Selectors: an informer with label + field selectors holds exactly what the
 * server lists with them, while patches move pods in and out of the
 * selection; the in-memory label-selector list of an unfiltered informer
 * equals the server's filtered list for several selectors; a field index
 * stays exact while patches move configmaps between index values. */
static void test_selectors_and_indexes(void **state) {
  kc_informer_spec sp = pod_spec();
  sp.label_selector = "apisim.kctrld.io/app in (app-2,app-5),tier!=db";
  sp.field_selector = "status.phase=Running";
  kc_informer *sel = informer(&sp, &PODS, NULL);
  kc_informer_spec sa = pod_spec();
  kc_informer *all = informer(&sa, &PODS, NULL);
  const char *q = "labelSelector=apisim.kctrld.io%2Fapp%20in%20%28app-2%2Capp-5%29%2Ctier%21%3Ddb&"
                  "fieldSelector=status.phase%3DRunning";
  assert_true(matches_server(sel, "/api/v1/pods", q, false));
  /* Move pods around: tier=db removes from selection, app changes add. */
  char *body = NULL;
  assert_int_equal(http("GET", "/api/v1/pods?limit=60", NULL, NULL, &body), 200);
  char err[256];
  yajl_val root = yajl_tree_parse(body, err, sizeof err);
  free(body);
  assert_non_null(root);
  const char *ip[] = {"items", NULL};
  yajl_val items = yajl_tree_get(root, ip, yajl_t_array);
  for (size_t i = 0; i < items->u.array.len; i++) {
    yajl_val it = items->u.array.values[i];
    char path[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", yget_str(it, "metadata", "namespace"),
             yget_str(it, "metadata", "name"));
    const char *patch = i % 3 == 0   ? "{\"metadata\":{\"labels\":{\"tier\":\"db\"}}}"
                        : i % 3 == 1 ? "{\"metadata\":{\"labels\":{\"apisim.kctrld.io/app\":\"app-5\"}}}"
                                     : "{\"metadata\":{\"labels\":{\"tier\":\"web\",\"apisim.kctrld.io/app\":\"app-2\"}}}";
    assert_int_equal(http("PATCH", path, "application/merge-patch+json", patch, NULL), 200);
  }
  yajl_tree_free(root);
  converge(sel, "/api/v1/pods", q, 10000);
  converge(all, "/api/v1/pods", NULL, 10000);

  static const char *const sels[] = {
      "apisim.kctrld.io/app=app-5", "apisim.kctrld.io/app!=app-5", "tier",
      "!tier", "tier notin (db)", "apisim.kctrld.io/app in (app-1,app-2),tier=web",
      "tier=db,apisim.kctrld.io/generated=true"};
  for (size_t i = 0; i < sizeof sels / sizeof sels[0]; i++) {
    kc_label_selector *ls = NULL;
    kc_sel_error perr;
    assert_int_equal(kc_label_selector_parse(sels[i], strlen(sels[i]), &ls, &perr), 0);
    kc_obj_vec v = {0};
    assert_true(kc_informer_list(all, (kc_str){0}, ls, &v) >= 0);
    strset a = {0}, b = {0};
    vec_set(&v, &a);
    kc_obj_vec_release(&v);
    kc_label_selector_free(ls);
    char query[512] = "labelSelector=";
    CURL *c = curl_easy_init();
    char *esc = curl_easy_escape(c, sels[i], 0);
    strncat(query, esc, sizeof query - strlen(query) - 1);
    curl_free(esc);
    curl_easy_cleanup(c);
    server_set("/api/v1/pods", query, &b);
    assert_true(sets_equal(&a, &b, sels[i], false));
    set_free(&a);
    set_free(&b);
  }
  close_inf(sel);
  close_inf(all);

  /* Field index on configmaps: data.owner, moved between values. */
  for (int i = 0; i < 40; i++) {
    char b2[256];
    snprintf(b2, sizeof b2, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm-%d\"},"
             "\"data\":{\"owner\":\"o-%d\"}}", i, i % 4);
    assert_int_equal(http("POST", "/api/v1/namespaces/default/configmaps", NULL, b2, NULL), 201);
  }
  kc_index_spec idx[] = {{.name = "byOwner", .path = "data.owner"}};
  kc_informer_spec sc = {.api_version = "v1", .kind = "ConfigMap", .group = "", .label_selector = "",
                         .field_selector = "", .page_size = 500, .watch_timeout_ms = 300000,
                         .watch_inactivity_ms = 300000, .streaming_list = KC_STREAMING_OFF,
                         .identity = "cm", .indexes = idx,
                         .nindexes = 1};
  kc_informer *cms = informer(&sc, &CONFIGMAPS, NULL);
  for (int round = 0; round < 3; round++) {
    for (int i = round; i < 40; i += 3) {
      char path[128], patch[128];
      snprintf(path, sizeof path, "/api/v1/namespaces/default/configmaps/cm-%d", i);
      snprintf(patch, sizeof patch, "{\"data\":{\"owner\":\"o-%d\"}}", (i + round + 1) % 5);
      assert_int_equal(http("PATCH", path, "application/merge-patch+json", patch, NULL), 200);
    }
    assert_int_equal(http("DELETE", "/api/v1/namespaces/default/configmaps/cm-39", NULL, NULL, NULL),
                     round == 0 ? 200 : 404);
    converge(cms, "/api/v1/configmaps", NULL, 10000);
    /* Expected index content from the server's objects. */
    char *lb = NULL;
    assert_int_equal(http("GET", "/api/v1/namespaces/default/configmaps", NULL, NULL, &lb), 200);
    yajl_val r2 = yajl_tree_parse(lb, err, sizeof err);
    free(lb);
    assert_non_null(r2);
    yajl_val its = yajl_tree_get(r2, ip, yajl_t_array);
    for (int o = 0; o < 5; o++) {
      char val[16];
      snprintf(val, sizeof val, "o-%d", o);
      strset want = {0}, got = {0};
      for (size_t i = 0; i < its->u.array.len; i++) {
        yajl_val it = its->u.array.values[i];
        if (strcmp(yget_str(it, "data", "owner"), val) == 0)
          set_add(&want, "default/%s@%s", yget_str(it, "metadata", "name"),
                  yget_str(it, "metadata", "resourceVersion"));
      }
      kc_obj_vec v = {0};
      assert_true(kc_informer_by_index(cms, "byOwner", kc_str_c(val), &v) >= 0);
      vec_set(&v, &got);
      kc_obj_vec_release(&v);
      assert_true(sets_equal(&got, &want, val, false));
      set_free(&want);
      set_free(&got);
    }
    yajl_tree_free(r2);
  }
  close_inf(cms);
}

/* A ConfigMap over 1 MiB: listed, then modified (the watch event > 1 MiB). */
static void test_large_objects(void **state) {
  size_t big = (1u << 20) + 200000;
  char *b = malloc(big + 512);
  assert_non_null(b);
  int n = snprintf(b, 512, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                   "\"huge\"},\"data\":{\"blob\":\"");
  memset(b + n, 'x', big);
  strcpy(b + n + big, "\"}}");
  assert_int_equal(http("POST", "/api/v1/namespaces/default/configmaps", NULL, b, NULL), 201);
  kc_informer_spec sc = {.api_version = "v1", .kind = "ConfigMap", .group = "", .label_selector = "",
                         .field_selector = "", .page_size = 500, .watch_timeout_ms = 300000,
                         .watch_inactivity_ms = 300000, .identity = "cm"};
  kc_informer *cms = informer(&sc, &CONFIGMAPS, NULL);
  kc_obj *o = kc_informer_get(cms, kc_str_c("default"), kc_str_c("huge"));
  assert_non_null(o);
  assert_true(o->json_len > big);
  kc_obj_unref(o);
  memset(b + n, 'y', big);
  memcpy(b + n + big - 3, "zzz", 3);
  assert_int_equal(http("PUT", "/api/v1/namespaces/default/configmaps/huge", NULL, b, NULL), 200);
  free(b);
  converge(cms, "/api/v1/configmaps", NULL, 10000);
  o = kc_informer_get(cms, kc_str_c("default"), kc_str_c("huge"));
  assert_non_null(o);
  kc_json_value jv;
  assert_int_equal(kc_obj_get(o, "data.blob", &jv), 0);
  assert_int_equal(jv.raw.len, big + 2);
  assert_memory_equal(jv.raw.ptr + big - 2, "zzz\"", 4);
  kc_obj_unref(o);
  kc_informer_stats st;
  kc_informer_stats_get(cms, &st);
  assert_int_equal(st.relists, 0);
  close_inf(cms);
}

/* The simulator is restarted on the same port with different content (a
 * fresh cluster: its resourceVersions start low again). The informer ends
 * with exactly the new server's content. */
static void test_server_restart(void **state) {
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  kc_informer *inf = informer(&sp, &PODS, &c);
  assert_int_equal(c.adds, 3000);
  int port = SIM.port;
  apisim_stop();
  run_ms(300);
  static const char *const gen[] = {"--generate", "pods=200", NULL};
  assert_int_equal(apisim_start(port, gen), 0);
  converge(inf, "/api/v1/pods", NULL, 30000);
  fprintf(stderr, "# after restart: adds %u deletes %u\n", c.adds, c.deletes);
  close_inf(inf);
  set_free(&c.deleted);
}

/* The server's history changes under the informer: the simulator is
 * restarted on the same port with a new store (new uids, same names)
 * whose resourceVersions are given by extra args. A watch resumed at the
 * old RV would be accepted and would never deliver what the new store holds
 * at or below it; the reflector's history check after the connection
 * failure (its witness has another uid now) relists instead. The cache
 * must end equal to the new server, uids included. */
static void restart_with_new_history(const char *rv_offset, const char *pods) {
  WITH_UID = true;
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  kc_informer *inf = informer(&sp, &PODS, &c);
  assert_int_equal(c.adds, 3000);
  kc_informer_stats st;
  kc_informer_stats_get(inf, &st);
  unsigned long long last = strtoull(st.resource_version, NULL, 10);
  assert_true(last > 3000);
  char offset[32], gen[32];
  /* "past": the new store starts 1000 below the informer's RV and ends
   * 2000 above it; "same": identical RVs; "smaller": ends below it. */
  snprintf(offset, sizeof offset, "%llu",
           strcmp(rv_offset, "past") == 0 ? last - 1000 : 0ULL);
  snprintf(gen, sizeof gen, "pods=%s", pods);
  int port = SIM.port;
  apisim_stop();
  run_ms(300);
  const char *const args[] = {"--generate", gen, "--history", "100000", "--rv-offset", offset, NULL};
  assert_int_equal(apisim_start(port, args), 0);
  converge(inf, "/api/v1/pods", NULL, 30000);
  kc_informer_stats_get(inf, &st);
  fprintf(stderr, "# %s history: adds %u updates %u deletes %u, history checks %llu changes %llu\n",
          rv_offset, c.adds, c.updates, c.deletes, (unsigned long long)st.history_checks,
          (unsigned long long)st.history_changes);
  /* Usually the history check relisted; when the old server's watch ended
   * cleanly and at once (a very short watch) the reflector relisted anyway.
   * Either way the cache was rebuilt by a list, never resumed blindly. */
  assert_true(st.relists >= 1);
  close_inf(inf);
  set_free(&c.deleted);
}

static void test_restart_history_past_rv(void **state) { restart_with_new_history("past", "3000"); }
static void test_restart_history_same_rv(void **state) { restart_with_new_history("same", "3000"); }
static void test_restart_history_smaller_rv(void **state) {
  restart_with_new_history("smaller", "2000");
}

/* The same objects (same names, same uids) restored in another order, the
 * counter ending exactly on the informer's resourceVersion R, and the
 * connection broken (an etcd restore behind the same endpoint): a watch
 * resumed at R would be accepted and would never bring the other
 * resourceVersions. The history check compares the server's state at R
 * with the cache and relists, every time: 50 restores in a row, each with
 * another order. The manual clock skips the reconnection backoff. */
static void test_history_reseeded_in_another_order(void **state) {
  WITH_UID = true;
  int port = SIM.port;
  apisim_stop();
  static const char *const gen[] = {"--generate", "configmaps=200", NULL};
  assert_int_equal(apisim_start(port, gen), 0);
  kc_clock_set_manual(1000000000ULL);
  kc_informer_spec sc = {.api_version = "v1", .kind = "ConfigMap", .group = "", .label_selector = "",
                         .field_selector = "", .page_size = 500, .watch_timeout_ms = 300000,
                         .watch_inactivity_ms = 300000, .identity = "cm"};
  kc_informer *inf = informer(&sc, &CONFIGMAPS, NULL);
  kc_informer_stats st;
  uint64_t t0 = sim_mono_ms();
  for (unsigned i = 1; i <= 50; i++) {
    kc_informer_stats_get(inf, &st);
    uint64_t relists = st.relists, changes = st.history_changes;
    char body[160];
    snprintf(body, sizeof body,
             "{\"cluster\":\"same\",\"shuffle\":%u,\"endResourceVersion\":\"%s\",\"drop\":\"reset\"}",
             i, st.resource_version);
    ctl("POST", "reseed", body);
    uint64_t end = sim_mono_ms() + 5000;
    do {
      run_ms(5);
      kc_clock_advance(2000000000ULL); /* past any reconnection backoff */
      kc_informer_stats_get(inf, &st);
    } while (st.relists == relists && sim_mono_ms() < end);
    if (st.relists != relists + 1 || st.history_changes != changes + 1)
      fail_msg("restore %u: relists %llu -> %llu, history changes %llu -> %llu", i,
               (unsigned long long)relists, (unsigned long long)st.relists,
               (unsigned long long)changes, (unsigned long long)st.history_changes);
    assert_true(matches_server(inf, "/api/v1/configmaps", NULL, false));
  }
  fprintf(stderr, "# 50 restores in another order: 50 relists in %llu ms\n",
          (unsigned long long)(sim_mono_ms() - t0));
  close_inf(inf);
  kc_clock_set_real();
}

/* The consistency check: a clean cache passes (no difference); then the
 * simulator changes 250 pods without sending their events (lost events,
 * 50 of them in the informer's selection), and one ordinary create moves
 * the watch past them. The check finds the 50 keys, relists, and the cache equals the server (uids and RVs). With
 * a period set, checks keep running without false differences. */
static void test_consistency_check_repairs(void **state) {
  WITH_UID = true;
  assert_int_equal(kc_decode_pool_new(&L.loop, 2, &POOL), 0); /* pages decoded off the loop */
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  sp.label_selector = "apisim.kctrld.io/app=app-4";
  kc_informer *inf = informer(&sp, &PODS, &c);
  assert_int_equal(c.adds, 300);
  kc_informer_stats st;
  assert_int_equal(kc_informer_check_consistency(inf), 0);
  uint64_t end = sim_mono_ms() + 20000;
  do {
    run_ms(50);
    kc_informer_stats_get(inf, &st);
  } while (st.consistency_checks < 1 && sim_mono_ms() < end);
  assert_int_equal(st.consistency_checks, 1);
  assert_int_equal(st.consistency_diffs, 0);
  assert_int_equal(st.relists, 0);

  ctl("POST", "lose-events", "{\"resource\":\"pods\",\"count\":250}");
  assert_false(matches_server(inf, "/api/v1/pods", "labelSelector=apisim.kctrld.io%2Fapp%3Dapp-4", true));
  assert_int_equal(http("POST", "/api/v1/namespaces/default/pods", NULL,
                        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"extra\","
                        "\"labels\":{\"apisim.kctrld.io/app\":\"app-4\"}},"
                        "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}", NULL),
                   201);
  assert_int_equal(kc_informer_check_consistency(inf), 0);
  end = sim_mono_ms() + 20000;
  do {
    run_ms(50);
    kc_informer_stats_get(inf, &st);
  } while (st.consistency_checks < 2 && sim_mono_ms() < end);
  assert_int_equal(st.consistency_checks, 2);
  /* 250 silent changes in key order: the first 250 pods of gen-0 (every
   * 4th generated pod), of which those of app-4 (every 5th of them). */
  assert_int_equal(st.consistency_diffs, 50);
  converge(inf, "/api/v1/pods", "labelSelector=apisim.kctrld.io%2Fapp%3Dapp-4", 10000);
  kc_informer_stats_get(inf, &st);
  assert_int_equal(st.relists, 1);
  assert_int_equal(c.updates, 50);

  /* Periodic checks while the server changes and deletes pods of the
   * selection: changes after a list and deletes during a check are not
   * differences. */
  kc_informer_spec periodic = sp;
  periodic.consistency_check_ms = 200;
  kc_informer_rebind(inf, &periodic);
  ctl("POST", "modify", "{\"resource\":\"pods\",\"count\":3000,\"rate\":1000}");
  kc_obj_vec vec = {0};
  assert_true(kc_informer_list(inf, (kc_str){0}, NULL, &vec) >= 20);
  for (size_t i = 0; i < 20; i++) {
    char path[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%.*s/pods/%.*s",
             (int)kc_obj_namespace(vec.v[i]).len, kc_obj_namespace(vec.v[i]).ptr,
             (int)kc_obj_name(vec.v[i]).len, kc_obj_name(vec.v[i]).ptr);
    long code = http("DELETE", path, NULL, NULL, NULL);
    assert_true(code == 200 || code == 404); /* "extra" is in default */
    run_ms(60);
  }
  kc_obj_vec_release(&vec);
  wait_modify_done(30000);
  uint64_t before = st.consistency_checks;
  end = sim_mono_ms() + 20000;
  do {
    run_ms(50);
    kc_informer_stats_get(inf, &st);
  } while (st.consistency_checks < before + 3 && sim_mono_ms() < end);
  fprintf(stderr, "# periodic consistency checks: %llu done, %llu skipped\n",
          (unsigned long long)st.consistency_checks, (unsigned long long)st.consistency_skipped);
  assert_true(st.consistency_checks >= before + 3);
  converge(inf, "/api/v1/pods", "labelSelector=apisim.kctrld.io%2Fapp%3Dapp-4", 10000);
  assert_int_equal(st.consistency_diffs, 50);
  assert_int_equal(st.relists, 1);
  close_inf(inf);
  kc_decode_pool_free(POOL);
  POOL = NULL;
  run_ms(50);
  set_free(&c.deleted);
}

/* A Pod informer with streamingList: auto (spec in *sp, which must outlive
 * it), after resetting the simulator's counters; checks its sync: all 3000
 * Pods added, equal to the server, after one sendInitialEvents request. */
static kc_informer *streaming_informer(kc_informer_spec *sp, counts *c) {
  ctl("DELETE", "counters", NULL);
  *sp = pod_spec();
  sp->streaming_list = KC_STREAMING_AUTO;
  kc_informer *inf = informer(sp, &PODS, c);
  assert_int_equal(c->adds, 3000);
  assert_true(matches_server(inf, "/api/v1/pods", NULL, false));
  assert_int_equal(count_requests("sendInitialEvents=true"), 1);
  return inf;
}

/* Streaming list (sendInitialEvents, the default streamingList: auto): the
 * sync is one watch request, no LIST; later changes arrive on the same
 * stream; after compaction and dropped watches the informer streams again
 * and ends equal to the server, with the deletes it missed. */
static void test_streaming_list(void **state) {
  counts c = {0};
  kc_informer_spec sp;
  kc_informer *inf = streaming_informer(&sp, &c);
  assert_int_equal(count_requests("limit="), 0);
  ctl("POST", "modify", "{\"resource\":\"pods\",\"count\":500,\"rate\":0}");
  wait_modify_done(20000);
  converge(inf, "/api/v1/pods", NULL, 10000);
  /* Deletes while cut off, then history compacted: a new stream at "". */
  ctl("POST", "config", "{\"bookmarkIntervalMs\":0}");
  ctl("POST", "drop-watches", NULL);
  kc_obj_vec vec = {0};
  assert_true(kc_informer_list(inf, (kc_str){0}, NULL, &vec) >= 5);
  for (size_t i = 0; i < 5; i++) {
    char path[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%.*s/pods/%.*s",
             (int)kc_obj_namespace(vec.v[i]).len, kc_obj_namespace(vec.v[i]).ptr,
             (int)kc_obj_name(vec.v[i]).len, kc_obj_name(vec.v[i]).ptr);
    assert_int_equal(http("DELETE", path, NULL, NULL, NULL), 200);
  }
  kc_obj_vec_release(&vec);
  ctl("POST", "compact", NULL);
  ctl("POST", "drop-watches", NULL);
  converge(inf, "/api/v1/pods", NULL, 20000);
  assert_true(c.deletes >= 5);
  assert_true(count_requests("sendInitialEvents=true") >= 2);
  assert_int_equal(count_requests("limit="), 0);
  close_inf(inf);
  set_free(&c.deleted);
}

/* A server without WatchList answers 422: the informer falls back to
 * LIST+WATCH at once and stays there. */
static void test_streaming_fallback(void **state) {
  ctl("POST", "config", "{\"watchList\":false}");
  counts c = {0};
  kc_informer_spec sp;
  kc_informer *inf = streaming_informer(&sp, &c);
  assert_true(count_requests("limit=500") >= 1);
  ctl("POST", "compact", NULL);
  ctl("POST", "drop-watches", NULL);
  converge(inf, "/api/v1/pods", NULL, 20000);
  assert_int_equal(count_requests("sendInitialEvents=true"), 1); /* never again */
  ctl("POST", "config", "{\"watchList\":true}");
  close_inf(inf);
  set_free(&c.deleted);
}

/* ---- shardSelector (KEP-5866) ---- */

#define SEL_LO "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
#define SEL_HI "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
/* the same, URL-encoded, for the test's own LIST */
#define Q_LO "shardSelector=shardRange%28object.metadata.uid%2C%20%270x0000000000000000%27%2C%20%270x8000000000000000%27%29"
#define Q_HI "shardSelector=shardRange%28object.metadata.uid%2C%20%270x8000000000000000%27%2C%20%270x10000000000000000%27%29"

/* Every cached object's uid hashes into r; returns how many there are. */
static size_t cached_in(kc_informer *inf, const kc_shard_range *r) {
  kc_obj_vec vec = {0};
  assert_true(kc_informer_list(inf, (kc_str){0}, NULL, &vec) >= 0);
  size_t n = vec.n;
  for (size_t i = 0; i < vec.n; i++)
    if (!kc_shard_range_contains(r,
                                 kc_shard_hash(kc_obj_uid(vec.v[i]).ptr, kc_obj_uid(vec.v[i]).len)))
      fail_msg("cached %.*s (uid %.*s) is outside the shard", (int)kc_obj_name(vec.v[i]).len,
               kc_obj_name(vec.v[i]).ptr, (int)kc_obj_uid(vec.v[i]).len, kc_obj_uid(vec.v[i]).ptr);
  kc_obj_vec_release(&vec);
  return n;
}

static char *informers_json(kc_informer *inf) {
  kc_informer *const infs[] = {inf};
  kc_ops_view v = {.informers = infs, .ninformers = 1};
  kc_buf b = {0};
  assert_int_equal(kc_ops_informers_json(&v, &b), 0);
  return kc_buf_take(&b);
}

/* With the ShardedListAndWatch gate the cache holds exactly the objects of
 * the ranges (as the server lists them with the same selector): after the
 * sync, through a modification stream with dropped watches, after a change
 * of the selector (relisted by a streaming list, since the support is
 * known), and all of them once it is cleared. /debug/informers shows it. */
static void test_shard_selector_server(void **state) {
  ctl("POST", "config", "{\"shardedListAndWatch\":true}");
  ctl("DELETE", "counters", NULL);
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  sp.streaming_list = KC_STREAMING_AUTO;
  kc_informer *inf = informer_sel(&sp, &PODS, &c, SEL_LO);
  assert_int_equal(kc_informer_shard_support(inf), KC_SHARD_SUPPORT_SERVER);
  assert_string_equal(kc_informer_shard_selector(inf), SEL_LO);
  kc_shard_range lo, hi;
  kc_shard_ranges_split(2, 0, &lo);
  kc_shard_ranges_split(2, 1, &hi);
  size_t n_lo = cached_in(inf, &lo);
  assert_true(n_lo > 1000 && n_lo < 2000); /* about half of 3000 */
  assert_int_equal(c.adds, n_lo);
  assert_true(matches_server(inf, "/api/v1/pods", Q_LO, false));
  assert_int_equal(count_requests("sendInitialEvents=true"), 0); /* the first list is a LIST */
  char *dbg = informers_json(inf);
  assert_non_null(strstr(dbg, "\"shardSelector\":\"" SEL_LO "\",\"shardSupport\":\"server\""));
  free(dbg);

  ctl("POST", "modify", "{\"resource\":\"pods\",\"count\":1000,\"rate\":2000}");
  run_ms(200);
  ctl("POST", "drop-watches", NULL);
  wait_modify_done(30000);
  converge(inf, "/api/v1/pods", Q_LO, 10000);
  assert_true(c.updates > 0 && c.updates < 1000); /* only the modifications of its half */

  unsigned deletes = c.deletes;
  assert_int_equal(kc_informer_set_shard_selector(inf, SEL_HI), 0);
  converge(inf, "/api/v1/pods", Q_HI, 20000);
  assert_int_equal(cached_in(inf, &hi), 3000 - n_lo);
  assert_int_equal(c.deletes - deletes, n_lo); /* the other half left the cache */
  assert_true(count_requests("sendInitialEvents=true") >= 1);
  assert_int_equal(kc_informer_shard_support(inf), KC_SHARD_SUPPORT_SERVER);

  assert_int_equal(kc_informer_set_shard_selector(inf, NULL), 0);
  assert_null(kc_informer_shard_selector(inf));
  converge(inf, "/api/v1/pods", NULL, 20000);
  kc_informer_stats st;
  kc_informer_stats_get(inf, &st);
  assert_int_equal(st.objects, 3000);
  dbg = informers_json(inf);
  assert_non_null(strstr(dbg, "\"shardSelector\":null,\"shardSupport\":\"server\""));
  free(dbg);
  close_inf(inf);
  set_free(&c.deleted);
  ctl("POST", "config", "{\"shardedListAndWatch\":false}");
}

/* Without the gate the server ignores the parameter: support NONE, the
 * cache holds everything, and a new selector does not relist. */
static void test_shard_selector_ignored(void **state) {
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  kc_informer *inf = informer_sel(&sp, &PODS, &c, SEL_LO);
  assert_int_equal(kc_informer_shard_support(inf), KC_SHARD_SUPPORT_NONE);
  assert_int_equal(c.adds, 3000);
  assert_true(matches_server(inf, "/api/v1/pods", NULL, false));
  kc_informer_stats st;
  kc_informer_stats_get(inf, &st);
  uint64_t lists = st.lists;
  assert_int_equal(kc_informer_set_shard_selector(inf, SEL_HI), 0);
  run_ms(300);
  kc_informer_stats_get(inf, &st);
  assert_int_equal(st.lists, lists);
  assert_int_equal(st.objects, 3000);
  char *dbg = informers_json(inf);
  assert_non_null(strstr(dbg, "\"shardSelector\":\"" SEL_HI "\",\"shardSupport\":\"none\""));
  free(dbg);
  close_inf(inf);
  set_free(&c.deleted);
}

/* A selector the server refuses (400): listed and watched without it. */
static void test_shard_selector_refused(void **state) {
  ctl("POST", "config", "{\"shardedListAndWatch\":true}");
  counts c = {0};
  kc_informer_spec sp = pod_spec();
  kc_informer *inf = informer_sel(&sp, &PODS, &c, "shardRange(object.metadata.uid, '0x0', '0x8')");
  assert_int_equal(kc_informer_shard_support(inf), KC_SHARD_SUPPORT_NONE);
  assert_int_equal(c.adds, 3000);
  assert_true(matches_server(inf, "/api/v1/pods", NULL, false));
  ctl("POST", "modify", "{\"resource\":\"pods\",\"count\":100,\"rate\":0}");
  wait_modify_done(20000);
  converge(inf, "/api/v1/pods", NULL, 10000);
  close_inf(inf);
  set_free(&c.deleted);
  ctl("POST", "config", "{\"shardedListAndWatch\":false}");
}

int main(void) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  /* The simulator is not under test: prefer the release build's, so a
   * sanitizer report inside the simulator does not fail the daemon's
   * sanitizer run (KC_APISIM overrides). */
  if (getenv("KC_APISIM"))
    snprintf(apisim_path, sizeof apisim_path, "%s", getenv("KC_APISIM"));
  else if (access("build/kube-apisim", X_OK) == 0)
    snprintf(apisim_path, sizeof apisim_path, "%s", "build/kube-apisim");
  else
    snprintf(apisim_path, sizeof apisim_path, "%s/../kube-apisim", self);
  if (access(apisim_path, X_OK) != 0) {
    printf("1..1\nok 1 - test_informer_apisim # SKIP %s not built\n", apisim_path);
    return 0;
  }
  /* The simulator generates its Pods from the fixtures: without them the
   * objects would not be the realistic ones these tests are about. */
  if (access(KC_FIXTURES_DIR "/objects", R_OK) != 0) {
    printf("1..1\nnot ok 1 - test_informer_apisim: fixtures %s: %s\n", KC_FIXTURES_DIR "/objects",
           strerror(errno));
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  kc_log_set_level(KC_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_paged_sync_and_resume, setup, teardown),
      cmocka_unit_test_setup_teardown(test_410_relist_deletes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_injected_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_relist_returns_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_metadata_only_and_transform, setup, teardown),
      cmocka_unit_test_setup_teardown(test_selectors_and_indexes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_large_objects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_server_restart, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restart_history_past_rv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restart_history_same_rv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restart_history_smaller_rv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_history_reseeded_in_another_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_consistency_check_repairs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_streaming_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_streaming_fallback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_server, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_refused, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
