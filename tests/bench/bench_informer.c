/* SPDX-License-Identifier: Apache-2.0 */
/* bench_informer: the observing path end to end (http -> decode -> store ->
 * informer handlers) against a local HTTP server that replays a generated
 * list body and watch stream, so that the numbers measure kctrld and not a
 * simulator. Pods are built from the fixtures (store_podgen.h).
 *
 *   build/bench/bench_informer [N ...]        (default: 10000 100000)
 *   BENCH_TEMPLATE=0|1|2|mix  fixture: 0 coredns (default, 7.5 KB with
 *                             managedFields), 1 prometheus, 2 sidecar, mix
 *   BENCH_EVENTS=M            watch events replayed (default 20000)
 *   BENCH_DUMP_LIST=FILE      write the list body of the last scenario to FILE
 *   BENCH_PAGE_DELAY_MS=D     replay paged LIST: the server waits D ms before
 *                             answering each page (what an API server spends
 *                             reading and encoding it; default 0: instant), so
 *                             that requesting the next page early (reflector.h
 *                             "Pipelined pages") shows
 *
 * Each scenario runs in its own process (clean peak RSS); the server runs
 * in a child of that process and builds its bodies after the fork, so none
 * of its memory is counted. Prints one table.
 *
 * A second table (decoding off the loop; BENCH_POOL=0 skips it):
 * the initial sync of N Pods with a decode pool (decodepool.h) of
 * kc_decode_pool_default_threads() threads (BENCH_DECODE_THREADS=T
 * overrides) and inline (0 threads), from two sources: kube-apisim
 * (--generate pods=N, the build's own, next to this binary) with the
 * streaming list, and the replay server serving prepared pages of 500
 * (paginated LIST). Each row is BENCH_SYNC_RUNS (default 3) paired runs
 * against one server: yajl alone once over the same bytes (the streaming
 * watch's initial events captured by a plain GET in a child that exits
 * before the sync, or the page bodies, timed in the server process), then
 * one sync in a fresh child process. A pair's ratio compares two measurements taken seconds
 * apart, so a VM whose speed drifts between runs moves both; the row shown
 * is the pair with the median ratio, with the lowest and highest beside it
 * (BENCH_DEBUG=1 prints every pair on stderr).
 * It prints wall s, CPU s of the process
 * (utime + stime, all threads; the servers are other processes), CPU/wall,
 * wall / yajl alone and the largest loop lag (looplag.h probe) during the
 * sync, and the CPU s of the loop thread, of the decode threads and of the
 * rest over the sync (/proc/self/task/TID/stat), with the busiest thread's
 * CPU as a share of wall: the thread that bounds the sync, and the minor page
 * faults of the loop and decode threads (first touches of fresh memory).
 * BENCH_SYNC_SOURCE=streaming|paged and BENCH_SYNC_THREADS=pool|inline run
 * one row of it alone (to profile that row under perf).
 */
#include <dirent.h>
#include <errno.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "../unit/store_podgen.h"
#include "client/apiclient.h"
#include "watch/decodepool.h"
#include "cache/informer.h"
#include "base/log.h"
#include "ops/looplag.h"
#include "base/memtrim.h"
#include "kube/selector.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long status_kib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, strlen(field)) == 0) v = atol(line + strlen(field));
  fclose(f);
  return v;
}

/* ---- the replay server (child process) ----------------------------------- */

typedef struct growbuf {
  char *p;
  size_t n, cap;
} growbuf;

static void gb_put(growbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static growbuf LIST_BODY, WATCH_BODY;
/* Paginated mode (PAGE_SIZE > 0): PAGES[k] answers continue=k. */
static long PAGE_SIZE;
static growbuf *PAGES;
static long NPAGES;
static atomic_int watches_served;
static long PAGE_DELAY_MS; /* BENCH_PAGE_DELAY_MS */

struct rd {
  const growbuf *b;
  bool hang;
};

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
  struct rd *r = cls;
  if (r->hang) {
    sleep(1);
    return 0; /* nothing yet; MHD calls again */
  }
  if (pos >= r->b->n) return MHD_CONTENT_READER_END_OF_STREAM;
  size_t n = r->b->n - pos < max ? r->b->n - pos : max;
  memcpy(buf, r->b->p + pos, n);
  return (ssize_t)n;
}

static enum MHD_Result on_req(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *ver, const char *up, size_t *upn,
                              void **ctx) {
  if (!*ctx) {
    *ctx = (void *)1;
    return MHD_YES;
  }
  const char *w = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch");
  struct MHD_Response *resp;
  if (w) {
    struct rd *r = calloc(1, sizeof *r);
    r->b = &WATCH_BODY;
    r->hang = atomic_fetch_add(&watches_served, 1) > 0; /* only the first watch replays */
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024, reader, r, free);
  } else if (PAGE_SIZE > 0) {
    const char *cont = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "continue");
    long k = cont ? atol(cont) : 0;
    if (k < 0 || k >= NPAGES) k = 0;
    if (PAGE_DELAY_MS > 0) usleep((useconds_t)PAGE_DELAY_MS * 1000); /* this connection's thread */
    resp = MHD_create_response_from_buffer(PAGES[k].n, PAGES[k].p, MHD_RESPMEM_PERSISTENT);
  } else {
    resp = MHD_create_response_from_buffer(LIST_BODY.n, LIST_BODY.p, MHD_RESPMEM_PERSISTENT);
  }
  MHD_add_response_header(resp, "Content-Type", "application/json");
  enum MHD_Result rc = MHD_queue_response(c, 200, resp);
  MHD_destroy_response(resp);
  return rc;
}

typedef struct server_info {
  int port;
  double yajl_s;     /* yajl alone over the list body */
  double list_bytes;
  double event_bytes;
} server_info;

/* yajl alone (no callbacks, one buffer, like json_verify and
 * bench_yajl.c): seconds, or -1 when the bytes do not parse. `multi`: a
 * stream of values (watch events). */
static double yajl_alone(const char *p, size_t n, bool multi) {
  yajl_handle h = yajl_alloc(NULL, NULL, NULL);
  if (!h) return -1;
  if (multi) yajl_config(h, yajl_allow_multiple_values, 1);
  double t0 = now_s();
  bool ok = yajl_parse(h, (const unsigned char *)p, n) == yajl_status_ok &&
            yajl_complete_parse(h) == yajl_status_ok;
  double dt = now_s() - t0;
  yajl_free(h);
  return ok ? dt : -1;
}

static int pick_tmpl(const char *t, long i) {
  if (!t || strcmp(t, "mix") != 0) return t ? atoi(t) : 0;
  return (int)(i % PODGEN_NTMPL);
}

static void pod_spec_for(long i, long gen, podspec *p, char *bufs, size_t cap) {
  /* bufs: name | uid | rv | node | app | hash, 48 bytes each */
  char *name = bufs, *uid = bufs + 48, *rv = bufs + 96, *node = bufs + 144, *app = bufs + 192,
       *hash = bufs + 240;
  snprintf(name, 48, "pod-%07ld", i);
  snprintf(uid, 48, "0b9c4a2e-1111-4c2b-9d7e-%012ld", i);
  snprintf(rv, 48, "%ld", 1000 + gen);
  /* A hash, so that event streams spread pods over all values. */
  uint64_t mix = ((uint64_t)i * 2654435761u) ^ ((uint64_t)gen * 0x9e3779b97f4a7c15ull);
  mix ^= mix >> 29;
  snprintf(node, 48, "node-%ld", gen ? (long)(mix % 500) : i % 500);
  snprintf(app, 48, "app-%ld", gen ? (long)((mix >> 16) % 10) : i % 10);
  snprintf(hash, 48, "h-%ld", i);
  static char ns[32];
  snprintf(ns, sizeof ns, "ns-%ld", i % 20);
  *p = (podspec){.ns = ns, .name = name, .uid = uid, .rv = rv, .node = node,
                 .lk = {"app", "pod-template-hash", "tier"}, .lv = {app, hash, "backend"},
                 .nlabels = 3};
}

/* Timing on request, for paired runs (sync_table): the replay server,
 * which holds the page bodies, reads a byte from req, times yajl alone once
 * and writes the seconds (a double) to resp; it returns when req is
 * closed. */
typedef struct yajl_pipes {
  int req, resp;
} yajl_pipes;
static yajl_pipes YAJL_REQ = {-1, -1}; /* the replay server's, when asked */

static double served_yajl_once(void);

static void yajl_answer(const yajl_pipes *yp) {
  char c;
  while (read(yp->req, &c, 1) == 1) {
    double dt = served_yajl_once();
    if (write(yp->resp, &dt, sizeof dt) != sizeof dt) break;
  }
}

/* The parent's side: one timing, or -1. */
static double yajl_request(const yajl_pipes *yp) {
  double dt;
  if (write(yp->req, "t", 1) != 1 || read(yp->resp, &dt, sizeof dt) != sizeof dt) return -1;
  return dt;
}

/* Both ends of a request pipe pair: mine (req write end, resp read end) and
 * the server's (req read end, resp write end). */
static int yajl_pipes_open(yajl_pipes *mine, yajl_pipes *theirs) {
  int a[2], b[2];
  if (pipe(a) != 0) return -1;
  if (pipe(b) != 0) {
    close(a[0]);
    close(a[1]);
    return -1;
  }
  *theirs = (yajl_pipes){a[0], b[1]};
  *mine = (yajl_pipes){a[1], b[0]};
  return 0;
}

static void serve(long n, long events, int wfd) {
  podgen pg;
  if (podgen_init(&pg) != 0) _exit(2);
  PAGE_DELAY_MS = getenv("BENCH_PAGE_DELAY_MS") ? atol(getenv("BENCH_PAGE_DELAY_MS")) : 0;
  const char *t = getenv("BENCH_TEMPLATE");
  const char *head = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1000\"},\"items\":[";
  gb_put(&LIST_BODY, head, strlen(head));
  char bufs[300];
  for (long i = 0; i < n; i++) {
    podspec p;
    pod_spec_for(i, 0, &p, bufs, sizeof bufs);
    p.tmpl = pick_tmpl(t, i);
    kc_obj *o = podgen_make(&pg, &p);
    if (!o) _exit(2);
    if (i) gb_put(&LIST_BODY, ",", 1);
    gb_put(&LIST_BODY, o->json, o->json_len);
    kc_obj_unref(o);
  }
  gb_put(&LIST_BODY, "]}", 2);
  if (PAGE_SIZE > 0) {
    /* The same items, cut into pages of PAGE_SIZE with continue tokens. */
    NPAGES = (n + PAGE_SIZE - 1) / PAGE_SIZE;
    if (NPAGES == 0) NPAGES = 1;
    PAGES = calloc((size_t)NPAGES, sizeof *PAGES);
    if (!PAGES) _exit(2);
    for (long k = 0; k < NPAGES; k++) {
      char meta[256];
      long rest = n - (k + 1) * PAGE_SIZE;
      if (rest > 0)
        snprintf(meta, sizeof meta, "{\"resourceVersion\":\"1000\",\"continue\":\"%ld\","
                 "\"remainingItemCount\":%ld}", k + 1, rest);
      else
        snprintf(meta, sizeof meta, "{\"resourceVersion\":\"1000\"}");
      static const char ph[] = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":";
      gb_put(&PAGES[k], ph, sizeof ph - 1);
      gb_put(&PAGES[k], meta, strlen(meta));
      static const char pi[] = ",\"items\":[";
      gb_put(&PAGES[k], pi, sizeof pi - 1);
      for (long i = k * PAGE_SIZE; i < n && i < (k + 1) * PAGE_SIZE; i++) {
        podspec p;
        pod_spec_for(i, 0, &p, bufs, sizeof bufs);
        p.tmpl = pick_tmpl(t, i);
        kc_obj *o = podgen_make(&pg, &p);
        if (!o) _exit(2);
        if (i > k * PAGE_SIZE) gb_put(&PAGES[k], ",", 1);
        gb_put(&PAGES[k], o->json, o->json_len);
        kc_obj_unref(o);
      }
      gb_put(&PAGES[k], "]}", 2);
    }
  }
  /* Watch: MODIFIED events that move pods between nodes and app labels. */
  for (long e = 0; e < events; e++) {
    long i = (e * 7919) % n;
    podspec p;
    pod_spec_for(i, e + 1, &p, bufs, sizeof bufs);
    p.tmpl = pick_tmpl(t, i);
    kc_obj *o = podgen_make(&pg, &p);
    if (!o) _exit(2);
    { static const char pre[] = "{\"type\":\"MODIFIED\",\"object\":"; gb_put(&WATCH_BODY, pre, sizeof pre - 1); }
    gb_put(&WATCH_BODY, o->json, o->json_len);
    gb_put(&WATCH_BODY, "}\n", 2);
    kc_obj_unref(o);
  }
  podgen_free(&pg);
  /* BENCH_DUMP_LIST=FILE writes the list body, e.g. to count yajl's own
   * instructions under callgrind with the same bytes. */
  const char *dump = getenv("BENCH_DUMP_LIST");
  if (dump) {
    FILE *f = fopen(dump, "w");
    if (!f || fwrite(LIST_BODY.p, 1, LIST_BODY.n, f) != LIST_BODY.n || fclose(f) != 0) _exit(6);
  }
  /* Baseline: yajl alone over the same bytes (what json_verify does); best
   * of 3 here, or one run per request on YAJL_REQ (below). */
  double best = 1e9, served = (double)LIST_BODY.n;
  if (PAGE_SIZE > 0) {
    served = 0;
    for (long j = 0; j < NPAGES; j++) served += (double)PAGES[j].n;
  }
  for (int k = 0; k < 3 && YAJL_REQ.req < 0; k++) {
    double dt = served_yajl_once();
    if (dt < 0) _exit(3);
    if (dt < best) best = dt;
  }
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct MHD_Daemon *d =
      MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
                       NULL, on_req, NULL, MHD_OPTION_SOCK_ADDR, &sin, MHD_OPTION_END);
  if (!d) _exit(4);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  server_info si = {info->port, best, served,
                    events ? (double)WATCH_BODY.n / (double)events : 0};
  if (write(wfd, &si, sizeof si) != sizeof si) _exit(5);
  close(wfd);
  if (YAJL_REQ.req >= 0) yajl_answer(&YAJL_REQ); /* MHD serves meanwhile */
  pause(); /* until the parent kills us */
  _exit(0);
}

/* yajl alone once over what the replay server serves: the page bodies
 * (paginated mode) or the list body. */
static double served_yajl_once(void) {
  if (PAGE_SIZE <= 0) return yajl_alone(LIST_BODY.p, LIST_BODY.n, false);
  double dt = 0;
  for (long j = 0; j < NPAGES; j++) {
    double one = yajl_alone(PAGES[j].p, PAGES[j].n, false);
    if (one < 0) return -1;
    dt += one;
  }
  return dt;
}

/* ---- the measured side ------------------------------------------------------ */

static struct {
  long updates;
  double first, last;
  long target;
} W;

static void h_update(void *ud, kc_informer *inf, kc_obj *old, kc_obj *o) {
  double t = now_s();
  if (!W.updates) W.first = t;
  W.updates++;
  if (W.updates == W.target) W.last = t;
}

typedef struct result {
  double sync_s, yajl_s, list_mb, json_per_obj;
  long rss_base_kib, rss_after_kib, hwm_kib;
  double store_bytes_per_obj;
  double events_per_s;
  double sel1_us, sel10_us; /* label list: 1 match, 10 % of the pods */
  long sel10_n;
} result;

static void on_tick(uv_timer_t *t) {}

static double time_list(kc_informer *inf, const char *sel, long *count) {
  kc_label_selector *ls = NULL;
  kc_sel_error err;
  if (kc_label_selector_parse(sel, strlen(sel), &ls, &err) != 0) return -1;
  kc_obj_vec v = {0};
  int reps = 0;
  double t0 = now_s(), dt;
  do {
    kc_obj_vec_clear(&v);
    int n = kc_informer_list(inf, (kc_str){0}, ls, &v);
    if (count) *count = n;
    reps++;
    dt = now_s() - t0;
  } while (dt < 0.2);
  kc_obj_vec_release(&v);
  kc_label_selector_free(ls);
  return dt / reps * 1e6;
}

static int scenario(long n, long events, bool drop_mf, result *res) {
  int pfd[2];
  if (pipe(pfd) != 0) return -1;
  pid_t srv = fork();
  if (srv == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(pfd[0]);
    serve(n, events, pfd[1]);
  }
  close(pfd[1]);
  server_info si;
  if (read(pfd[0], &si, sizeof si) != sizeof si) return -1;
  close(pfd[0]);

  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_timer_t tick;
  uv_timer_init(&loop, &tick);
  uv_timer_start(&tick, on_tick, 10, 10);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", si.port);
  kc_kube_creds cr = {.server = url, .token = "t"};
  kc_api *api = NULL;
  if (kc_api_new(&loop, &cr, &api) != 0) return -1;
  static const char *const drop[] = {"metadata.managedFields"};
  kc_index_spec idx[] = {{.name = "byNode", .path = "spec.nodeName"}};
  kc_informer_spec sp = {.api_version = "v1", .kind = "Pod", .group = "", .label_selector = "",
                         .field_selector = "", .page_size = 500, .watch_timeout_ms = 300000,
                         .watch_inactivity_ms = 0, .identity = "bench", .indexes = idx,
                         .nindexes = 1, .drop = drop_mf ? drop : NULL, .ndrop = drop_mf ? 1 : 0,
                         /* The replay server knows LIST and one WATCH, not sendInitialEvents. */
                         .streaming_list = KC_STREAMING_OFF};
  kc_resource_ref ref = {"/api/v1", "pods", true};
  kc_informer *inf = NULL;
  if (kc_informer_new(&loop, api, NULL, &sp, &ref, &inf) != 0) return -1;
  kc_informer_handler h = {NULL, h_update, NULL, NULL, NULL};
  kc_informer_add_handler(inf, &h);
  memset(&W, 0, sizeof W);
  W.target = events;
  res->rss_base_kib = status_kib("VmRSS:");
  double t0 = now_s();
  kc_informer_start(inf);
  while (!kc_informer_synced(inf)) uv_run(&loop, UV_RUN_ONCE);
  res->sync_s = now_s() - t0;
  res->rss_after_kib = status_kib("VmRSS:");
  res->yajl_s = si.yajl_s;
  res->list_mb = si.list_bytes / 1e6;
  res->json_per_obj = si.list_bytes / (double)n;
  kc_informer_stats st;
  kc_informer_stats_get(inf, &st);
  res->store_bytes_per_obj = (double)st.bytes / (double)n;
  /* The watch replays `events` MODIFIED events (store + label and node
   * indexes updated, handler called for each). */
  double deadline = now_s() + 600;
  while (W.updates < events && now_s() < deadline) uv_run(&loop, UV_RUN_ONCE);
  res->events_per_s = W.updates >= events && W.last > W.first
                          ? (double)(events - 1) / (W.last - W.first)
                          : 0;
  res->hwm_kib = status_kib("VmHWM:");
  if (getenv("BENCH_DEBUG")) {
    kc_obj_vec all = {0};
    kc_informer_list(inf, (kc_str){0}, NULL, &all);
    long brute = 0;
    for (size_t i = 0; i < all.n; i++)
      if (kc_str_eq_c(kc_obj_label(all.v[i], kc_str_c("app")), "app-3")) brute++;
    printf("objects %zu, app=app-3 by scan %ld\n", all.n, brute);
    fflush(stdout);
    kc_obj_vec_release(&all);
  }
  res->sel1_us = time_list(inf, "pod-template-hash=h-77", NULL);
  res->sel10_us = time_list(inf, "app=app-3,tier=backend", &res->sel10_n);
  kc_informer_close(inf);
  kc_api_close(api);
  uv_close((uv_handle_t *)&tick, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  kill(srv, SIGKILL);
  waitpid(srv, NULL, 0);
  return 0;
}

/* ---- the initial sync with and without the decode pool ------------------ */

enum source { SRC_APISIM_STREAM, SRC_REPLAY_PAGED };

typedef struct sync_result {
  double wall_s, cpu_s, yajl_s, mb, lag_max_s;
  double loop_cpu_s, dec_cpu_s, rest_cpu_s; /* per-thread CPU over the sync */
  unsigned long loop_flt, dec_flt;           /* and minor page faults */
  unsigned threads;
  long objects;
} sync_result;

static double cpu_now(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* CPU seconds (utime + stime) of this process's threads, split into the
 * loop (the main thread: the bench runs the loop on it), the decode pool's
 * threads (named "kctrld-dec*" by decodepool.c) and the rest (libcurl's
 * resolver, libuv's threadpool). From /proc/self/task/TID/stat; a thread
 * that ended between two samples is missing from the later one. */
typedef struct thread_cpu {
  double loop, dec, rest;
  unsigned long loop_flt, dec_flt; /* minor page faults: first touches of fresh memory */
} thread_cpu;

static int thread_cpu_now(thread_cpu *out) {
  *out = (thread_cpu){0};
  DIR *d = opendir("/proc/self/task");
  if (!d) return -errno;
  long tick = sysconf(_SC_CLK_TCK);
  if (tick <= 0) tick = 100;
  pid_t self = getpid();
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* the thread ended */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* pid (comm) state ... : comm may hold spaces and ')' : split at the last ')'. */
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close || close < open) continue;
    unsigned long flt = 0, ut = 0, st = 0;
    /* Fields after ')': 3 state, ..., 10 minflt, ..., 14 utime, 15 stime. */
    if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %lu %*u %*u %*u %lu %lu", &flt, &ut,
               &st) != 3)
      continue;
    double secs = (double)(ut + st) / (double)tick;
    *close = 0;
    const char *comm = open + 1;
    if (atol(e->d_name) == (long)self) {
      out->loop += secs;
      out->loop_flt += flt;
    } else if (strncmp(comm, "kctrld-dec", 10) == 0) {
      out->dec += secs;
      out->dec_flt += flt;
    } else
      out->rest += secs;
  }
  closedir(d);
  return 0;
}

static char APISIM_BIN[4096];

/* Starts kube-apisim with N generated Pods; returns its pid, URL in url. */
static pid_t apisim_start(long n, char *url, size_t cap) {
  int pfd[2];
  if (pipe(pfd) != 0) return -1;
  char gen[64];
  snprintf(gen, sizeof gen, "pods=%ld", n);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(pfd[1], 1);
    close(pfd[0]);
    close(pfd[1]);
    execl(APISIM_BIN, APISIM_BIN, "--listen", "127.0.0.1:0", "--generate", gen, (char *)NULL);
    _exit(127);
  }
  close(pfd[1]);
  size_t len = 0;
  while (len < cap - 1) {
    ssize_t r = read(pfd[0], url + len, 1);
    if (r <= 0 || url[len] == '\n') break;
    len++;
  }
  url[len] = 0;
  close(pfd[0]);
  if (strncmp(url, "http://", 7) != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  return pid;
}

/* The streaming list's initial events as a plain client gets them. */
typedef struct capture {
  growbuf b;
  size_t mark; /* > 0: 1 + where the initial-events-end annotation starts */
  size_t end;  /* > 0: the bytes up to the initial-events-end bookmark's newline */
} capture;

static size_t on_capture(char *data, size_t size, size_t nmemb, void *ud) {
  capture *c = ud;
  size_t len = size * nmemb, from = c->b.n > 64 ? c->b.n - 64 : 0;
  gb_put(&c->b, data, len);
  if (!c->mark) {
    char *m = memmem(c->b.p + from, c->b.n - from, "k8s.io/initial-events-end", 25);
    if (m) c->mark = (size_t)(m - c->b.p) + 1;
  }
  /* The bookmark's newline may come in a later piece than the annotation. */
  if (c->mark) {
    char *m = c->b.p + c->mark - 1, *nl = memchr(m, '\n', (size_t)(c->b.p + c->b.n - m));
    if (nl) {
      c->end = (size_t)(nl + 1 - c->b.p);
      return 0; /* enough: stop the transfer */
    }
  }
  return len;
}

/* yajl alone once over the streaming list's initial events, in a child
 * (its memory is not the bench's) that GETs them, times yajl (after one
 * untimed pass that warms the bytes) and exits before the sync starts.
 * Kept alive during the sync, its 758 MB made the sync's fresh pages cold
 * on this VM (the decode thread's clear_page_erms samples rose from 85 to
 * 1,438 with the same 122k faults), which measures the hypervisor.
 * Returns the seconds (bytes in *bytes), or -1. */
static double apisim_yajl_once(const char *url, double *bytes) {
  int pfd[2];
  if (pipe(pfd) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(pfd[0]);
    char full[512];
    snprintf(full, sizeof full, "%s/api/v1/pods?allowWatchBookmarks=true&resourceVersion=&"
             "resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true", url);
    capture c = {0};
    CURL *h = curl_easy_init();
    if (!h) _exit(2);
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_capture);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 600L);
    curl_easy_perform(h);
    curl_easy_cleanup(h);
    if (!c.end || yajl_alone(c.b.p, c.end, true) < 0) _exit(3);
    double r[2] = {yajl_alone(c.b.p, c.end, true), (double)c.end};
    if (write(pfd[1], r, sizeof r) != sizeof r) _exit(5);
    _exit(0);
  }
  close(pfd[1]);
  double r[2];
  ssize_t got = read(pfd[0], r, sizeof r);
  close(pfd[0]);
  waitpid(pid, NULL, 0);
  if (got != sizeof r) return -1;
  *bytes = r[1];
  return r[0];
}

static long SYNC_ADDS;
static void h_add_count(void *ud, kc_informer *inf, kc_obj *o) { SYNC_ADDS++; }

/* One initial sync from url, in this process: what a row's run measures. */
static int sync_once(char *url, enum source src, unsigned threads, sync_result *res) {
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) return -1;
  kc_kube_creds cr = {.server = url, .token = "t"};
  kc_api *api = NULL;
  kc_decode_pool *pool = NULL;
  kc_looplag lag;
  if (kc_api_new(&loop, &cr, &api) != 0 || kc_decode_pool_new(&loop, threads, &pool) != 0 ||
      kc_looplag_start(&loop, &lag, 0) != 0)
    return -1;
  res->threads = kc_decode_pool_threads(pool);
  kc_informer_spec sp = {.api_version = "v1", .kind = "Pod", .group = "", .label_selector = "",
                         .field_selector = "", .page_size = 500, .watch_timeout_ms = 300000,
                         .watch_inactivity_ms = 0, .identity = "bench",
                         .streaming_list = src == SRC_APISIM_STREAM ? KC_STREAMING_ON
                                                                    : KC_STREAMING_OFF};
  kc_resource_ref ref = {"/api/v1", "pods", true};
  kc_informer *inf = NULL;
  if (kc_informer_new(&loop, api, pool, &sp, &ref, &inf) != 0) return -1;
  kc_informer_handler h = {h_add_count, NULL, NULL, NULL, NULL};
  kc_informer_add_handler(inf, &h);
  SYNC_ADDS = 0;
  /* Lag samples from before the sync are not the sync's. */
  uv_run(&loop, UV_RUN_NOWAIT);
  lag.max_seconds = 0;
  thread_cpu tc0, tc1;
  if (thread_cpu_now(&tc0) != 0) return -1;
  double t0 = now_s(), c0 = cpu_now();
  kc_informer_start(inf);
  while (!kc_informer_synced(inf)) uv_run(&loop, UV_RUN_ONCE);
  res->wall_s = now_s() - t0;
  res->cpu_s = cpu_now() - c0;
  if (thread_cpu_now(&tc1) != 0) return -1;
  res->loop_cpu_s = tc1.loop - tc0.loop;
  res->dec_cpu_s = tc1.dec - tc0.dec;
  res->rest_cpu_s = tc1.rest - tc0.rest;
  res->loop_flt = tc1.loop_flt - tc0.loop_flt;
  res->dec_flt = tc1.dec_flt - tc0.dec_flt;
  res->lag_max_s = lag.max_seconds;
  res->objects = SYNC_ADDS;
  kc_informer_close(inf);
  kc_looplag_close(&lag, NULL);
  kc_api_close(api);
  uv_run(&loop, UV_RUN_DEFAULT);
  kc_decode_pool_free(pool);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return 0;
}

/* sync_once in a fresh child, so that every run starts, as a daemon does,
 * with no freed memory of an earlier sync to reuse. */
static int sync_in_child(char *url, enum source src, unsigned threads, sync_result *res) {
  int pfd[2];
  if (pipe(pfd) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(pfd[0]);
    sync_result r = {0};
    int rc = sync_once(url, src, threads, &r);
    if (rc == 0 && write(pfd[1], &r, sizeof r) != sizeof r) rc = -1;
    _exit(rc ? 1 : 0);
  }
  close(pfd[1]);
  ssize_t got = read(pfd[0], res, sizeof *res);
  close(pfd[0]);
  waitpid(pid, NULL, 0);
  return got == sizeof *res ? 0 : -1;
}

static int by_ratio(const void *a, const void *b) {
  const sync_result *x = a, *y = b;
  double rx = x->wall_s / x->yajl_s, ry = y->wall_s / y->yajl_s;
  return rx < ry ? -1 : rx > ry;
}

/* One row: the server started once, then `runs` pairs back to back, each
 * yajl alone once over the bytes and one sync in a fresh child. *res is
 * the pair with the median wall / yajl ratio; lo and hi the range. */
static int scenario_sync(enum source src, long n, unsigned threads, int runs, sync_result *res,
                         double *lo, double *hi) {
  char url[160];
  pid_t srv;
  yajl_pipes yp = {-1, -1}; /* the replay server's */
  double bytes = 0;
  if (src == SRC_APISIM_STREAM) {
    srv = apisim_start(n, url, sizeof url);
    if (srv < 0) return -1;
  } else {
    int pfd[2];
    yajl_pipes theirs;
    if (pipe(pfd) != 0 || yajl_pipes_open(&yp, &theirs) != 0) return -1;
    srv = fork();
    if (srv == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(pfd[0]);
      close(yp.req);
      close(yp.resp);
      PAGE_SIZE = 500;
      YAJL_REQ = theirs;
      serve(n, 0, pfd[1]);
    }
    close(pfd[1]);
    close(theirs.req);
    close(theirs.resp);
    server_info si;
    if (read(pfd[0], &si, sizeof si) != sizeof si) return -1;
    close(pfd[0]);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", si.port);
    bytes = si.list_bytes;
  }
  sync_result all[16];
  if (runs > 16) runs = 16;
  int rc = 0;
  for (int k = 0; k < runs && rc == 0; k++) {
    double y = src == SRC_APISIM_STREAM ? apisim_yajl_once(url, &bytes) : yajl_request(&yp);
    if (y <= 0 || sync_in_child(url, src, threads, &all[k]) != 0) rc = -1;
    all[k].yajl_s = y;
    all[k].mb = bytes / 1e6;
    if (rc == 0 && getenv("BENCH_DEBUG"))
      fprintf(stderr, "run %d: yajl alone %.2f s, sync %.2f s (loop %.2f s, decode %.2f s)\n", k,
              y, all[k].wall_s, all[k].loop_cpu_s, all[k].dec_cpu_s);
  }
  if (yp.req >= 0) {
    close(yp.req);
    close(yp.resp);
  }
  kill(srv, SIGKILL);
  waitpid(srv, NULL, 0);
  if (rc) return -1;
  qsort(all, (size_t)runs, sizeof all[0], by_ratio);
  *res = all[runs / 2];
  *lo = all[0].wall_s / all[0].yajl_s;
  *hi = all[runs - 1].wall_s / all[runs - 1].yajl_s;
  return 0;
}

/* What a row's process hands back. */
struct row_out {
  sync_result r;
  double lo, hi;
};

static void sync_table(const long *sizes, int nsizes) {
  unsigned pool_threads = getenv("BENCH_DECODE_THREADS")
                              ? (unsigned)atoi(getenv("BENCH_DECODE_THREADS"))
                              : kc_decode_pool_default_threads();
  int runs = getenv("BENCH_SYNC_RUNS") ? atoi(getenv("BENCH_SYNC_RUNS")) : 3;
  if (runs < 1) runs = 1;
  printf("\ninitial sync, decode pool vs inline; yajl alone = one core, same bytes; "
         "median of %d paired runs\n", runs > 16 ? 16 : runs);
  printf("%-8s %-22s %7s %8s %8s %8s %8s %8s %11s %10s %7s %7s %7s %8s %8s %-6s\n", "pods",
         "source", "threads", "MB", "wall s", "CPU s", "CPU/wall", "x yajl", "x range",
         "lag max ms", "loop s", "dec s", "rest s", "loop flt", "dec flt", "busiest");
  static const char *const names[] = {"kube-apisim streaming", "replay paged LIST"};
  /* One row alone, when asked (header comment). */
  const char *only_src = getenv("BENCH_SYNC_SOURCE"), *only_th = getenv("BENCH_SYNC_THREADS");
  for (int i = 0; i < nsizes; i++)
    for (int src = 0; src < 2; src++)
      for (int inl = 0; inl < 2; inl++) {
        if (only_src && strcmp(only_src, src ? "paged" : "streaming") != 0) continue;
        if (only_th && strcmp(only_th, inl ? "inline" : "pool") != 0) continue;
        unsigned th = inl ? 0 : pool_threads;
        int pfd[2];
        if (pipe(pfd) != 0) return;
        pid_t pid = fork();
        if (pid == 0) {
          close(pfd[0]);
          struct row_out ro = {0};
          int rc = scenario_sync((enum source)src, sizes[i], th, runs, &ro.r, &ro.lo, &ro.hi);
          if (rc == 0 && write(pfd[1], &ro, sizeof ro) != sizeof ro) rc = -1;
          _exit(rc ? 1 : 0);
        }
        close(pfd[1]);
        struct row_out ro;
        ssize_t got = read(pfd[0], &ro, sizeof ro);
        sync_result r = ro.r;
        close(pfd[0]);
        waitpid(pid, NULL, 0);
        if (got != sizeof ro) {
          printf("%-8ld %-22s %7u failed\n", sizes[i], names[src], th);
          continue;
        }
        /* The busiest thread: the decode threads' CPU is per thread (the
         * pool spreads streams, one stream decodes on one thread at a time). */
        double dec1 = r.threads ? r.dec_cpu_s / r.threads : 0;
        const char *busiest = r.loop_cpu_s >= dec1 ? "loop" : "decode";
        double share = (r.loop_cpu_s >= dec1 ? r.loop_cpu_s : dec1) / r.wall_s;
        char range[32];
        snprintf(range, sizeof range, "%.2f-%.2f", ro.lo, ro.hi);
        printf("%-8ld %-22s %7u %8.1f %8.2f %8.2f %8.2f %8.2f %11s %10.1f %7.2f %7.2f %7.2f "
               "%8lu %8lu %s %.0f%%%s\n",
               sizes[i], names[src], r.threads, r.mb, r.wall_s, r.cpu_s, r.cpu_s / r.wall_s,
               r.wall_s / r.yajl_s, range, r.lag_max_s * 1e3, r.loop_cpu_s, r.dec_cpu_s, r.rest_cpu_s,
               r.loop_flt, r.dec_flt, busiest, share * 100,
               r.objects == sizes[i] ? "" : " (object count wrong)");
        fflush(stdout);
      }
  printf("columns: threads = decode pool threads (0: inline on the loop); MB = bytes parsed (the "
         "streaming watch's initial events up to the initial-events-end bookmark, or all LIST "
         "pages); wall s = kc_informer_start to synced; CPU s = utime+stime of the process (loop, "
         "curl and decode threads) over that time; x yajl = wall / yajl alone (one run, one "
         "core, no callbacks) over the same bytes, timed right before the run; the row is the run "
         "with the median x yajl, x range the lowest and highest of the runs (BENCH_SYNC_RUNS, "
         "each sync in a fresh process); lag max = largest looplag.h sample during the sync; loop s / dec s / rest s = CPU s of the loop thread, of the decode threads "
         "(together) and of the other threads (curl resolver, libuv pool) over the sync, from "
         "/proc/self/task/*/stat (clock ticks); loop flt / dec flt = minor page faults of the "
         "loop and decode threads over the sync (each a first touch of fresh memory, which the "
         "kernel zeroes); busiest = the thread with the most CPU (a "
         "decode thread: dec s / threads) and its CPU as a share of wall: near 100%% it is "
         "the bottleneck\n");
}

int main(int argc, char **argv) {
  kc_mem_init(getenv("GLIBC_TUNABLES")); /* as daemon/main.c does */
  long sizes[8] = {10000, 100000};
  int nsizes = 2;
  if (argc > 1) {
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = atol(argv[i]);
  }
  long events = getenv("BENCH_EVENTS") ? atol(getenv("BENCH_EVENTS")) : 20000;
  const char *tmpl = getenv("BENCH_TEMPLATE") ? getenv("BENCH_TEMPLATE") : "0";
  kc_log_set_level(KC_LOG_WARN);
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  {
    char self[4000];
    ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sn <= 0) return 1;
    self[sn] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(APISIM_BIN, sizeof APISIM_BIN, "%s/../kube-apisim", self);
  }
  bool classic = !getenv("BENCH_CLASSIC") || atoi(getenv("BENCH_CLASSIC")) != 0;
  bool pool_table = !getenv("BENCH_POOL") || atoi(getenv("BENCH_POOL")) != 0;
  if (classic) {
    printf("bench_informer: list -> store -> handlers over loopback HTTP, Pods from fixture template %s\n",
           tmpl);
    printf("%-8s %-5s %9s %8s %8s %6s %9s %9s %9s %8s %9s %9s %9s\n", "pods", "mgdF", "list MB",
           "JSON/pod", "sync s", "x yajl", "RSS/pod", "store/pod", "peakRSS", "RSS/JSON", "events/s",
           "sel1 us", "sel10% us");
    for (int i = 0; i < nsizes; i++) {
      for (int drop = 0; drop < 2; drop++) {
        int pfd[2];
        if (pipe(pfd) != 0) return 1;
        pid_t pid = fork();
        if (pid == 0) {
          close(pfd[0]);
          result r = {0};
          int rc = scenario(sizes[i], events, drop, &r);
          if (rc == 0 && write(pfd[1], &r, sizeof r) != sizeof r) rc = -1;
          _exit(rc ? 1 : 0);
        }
        close(pfd[1]);
        result r;
        ssize_t got = read(pfd[0], &r, sizeof r);
        close(pfd[0]);
        int st;
        waitpid(pid, &st, 0);
        if (got != sizeof r) {
          printf("%-8ld %-5s failed\n", sizes[i], drop ? "drop" : "keep");
          continue;
        }
        double rss_per = (double)(r.rss_after_kib - r.rss_base_kib) * 1024.0 / (double)sizes[i];
        printf("%-8ld %-5s %9.1f %8.0f %8.2f %6.2f %9.0f %9.0f %8.0fM %8.2f %9.0f %9.1f %9.0f\n",
               sizes[i], drop ? "drop" : "keep", r.list_mb, r.json_per_obj, r.sync_s,
               r.sync_s / r.yajl_s, rss_per, r.store_bytes_per_obj, (double)r.hwm_kib / 1024.0,
               rss_per / r.json_per_obj, r.events_per_s, r.sel1_us, r.sel10_us);
        if (getenv("BENCH_DEBUG")) printf("sel10 matches %ld\n", r.sel10_n);
        fflush(stdout);
      }
    }
    printf("columns: mgdF = metadata.managedFields kept or dropped by the transform; JSON/pod = "
           "bytes of the list body per pod (managedFields included); x yajl = sync time / yajl "
           "alone parsing the same body; RSS/pod = RSS growth after sync per pod; store/pod = "
           "kc_store_bytes per pod; peakRSS = VmHWM of the process after sync + %ld watch events; "
           "events/s = MODIFIED events applied (store, label and spec.nodeName indexes, handler); "
           "sel1/sel10%% = kc_informer_list with a selector matching 1 pod / 10%% of pods\n",
           events);
  }
  if (pool_table) sync_table(sizes, nsizes);
  return 0;
}
