/* SPDX-License-Identifier: Apache-2.0 */
#include "control.h"

#include <errno.h>
#include <stdio.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "seed.h"
#include "store.h"
#include "types.h"
#include "watch.h"

struct fault {
  int id;
  int remaining; /* < 0: unlimited */
  char *method, *path_prefix;
  int watch; /* -1 any, 0 non-watch, 1 watch */
  struct sim_fault_hit hit;
};

struct latency {
  unsigned ms;
  char *method, *path_prefix;
  bool events; /* "watchEvents": matching watches also deliver each event ms late */
};

#define LOG_CAP 4096

struct logent {
  char *line; /* JSON object */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fault *faults;
static size_t nfaults;
static int next_fault_id = 1;
static struct latency *lats;
static size_t nlats;
static uint64_t cnt_total, cnt_faults;
static struct { char *verb; uint64_t n; } verbs[32];
static size_t nverbs;
static struct { int code; uint64_t n; } codes[64];
static size_t ncodes;
static struct logent reqlog[LOG_CAP];
static uint64_t nlog;

/* modification stream */
static pthread_t mod_thread;
static bool mod_running, mod_joinable;
static atomic_bool mod_stop;
static struct {
  struct sim_rtype *rt;
  uint64_t count, done;
  double rate;
  bool spec;
  uint64_t start_ms, end_ms;
} mod;

static bool matches(const char *m, const char *prefix, const char *method, const char *url)
{
  if (m && *m && strcmp(m, method) != 0) return false;
  if (prefix && *prefix && strncmp(url, prefix, strlen(prefix)) != 0) return false;
  return true;
}

bool sim_control_take_fault(const char *method, const char *url, bool watch,
                            struct sim_fault_hit *out)
{
  bool hit = false;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nfaults; i++) {
    struct fault *f = &faults[i];
    if (f->remaining == 0) continue;
    if (f->watch >= 0 && f->watch != (int)watch) continue;
    if (!matches(f->method, f->path_prefix, method, url)) continue;
    *out = f->hit;
    if (f->remaining > 0) f->remaining--;
    cnt_faults++;
    hit = true;
    break;
  }
  pthread_mutex_unlock(&mu);
  return hit;
}

unsigned sim_control_event_latency_ms(const char *method, const char *url)
{
  unsigned ms = 0;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nlats; i++)
    if (lats[i].events && matches(lats[i].method, lats[i].path_prefix, method, url) && lats[i].ms > ms)
      ms = lats[i].ms;
  pthread_mutex_unlock(&mu);
  return ms;
}

unsigned sim_control_latency_ms(const char *method, const char *url)
{
  unsigned ms = 0;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nlats; i++)
    if (matches(lats[i].method, lats[i].path_prefix, method, url) && lats[i].ms > ms) ms = lats[i].ms;
  pthread_mutex_unlock(&mu);
  return ms;
}

void sim_control_record(const char *method, const char *url, const char *query, const char *verb,
                        int code)
{
  struct sim_buf b = {0};
  sim_buf_puts(&b, "{\"method\":");
  sim_buf_put_jstr(&b, method, strlen(method));
  sim_buf_puts(&b, ",\"path\":");
  sim_buf_put_jstr(&b, url, strlen(url));
  sim_buf_puts(&b, ",\"query\":");
  sim_buf_put_jstr(&b, query ? query : "", query ? strlen(query) : 0);
  sim_buf_puts(&b, ",\"verb\":");
  sim_buf_put_jstr(&b, verb ? verb : "", verb ? strlen(verb) : 0);
  sim_buf_printf(&b, ",\"code\":%d}", code);
  char *line = sim_buf_steal(&b, NULL);
  pthread_mutex_lock(&mu);
  cnt_total++;
  if (verb) {
    size_t i;
    for (i = 0; i < nverbs; i++)
      if (strcmp(verbs[i].verb, verb) == 0) break;
    if (i == nverbs && nverbs < 32) verbs[nverbs++].verb = sim_xstrdup(verb);
    if (i < 32) verbs[i].n++;
  }
  size_t j;
  for (j = 0; j < ncodes; j++)
    if (codes[j].code == code) break;
  if (j == ncodes && ncodes < 64) codes[ncodes++].code = code;
  if (j < 64) codes[j].n++;
  struct logent *e = &reqlog[nlog % LOG_CAP];
  free(e->line);
  e->line = line;
  nlog++;
  pthread_mutex_unlock(&mu);
}

/* ---- helpers ---- */

static void ok_json(struct sim_resp *resp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok_json(struct sim_resp *resp, const char *fmt, ...)
{
  va_list ap;
  char buf[4096];
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  resp->code = 200;
  sim_buf_puts(&resp->body, buf);
}

static void bad(struct sim_resp *resp, const char *msg)
{
  struct sim_details d = {0};
  sim_resp_status(resp, 400, "BadRequest", &d, "%s", msg);
}

static jv *body_json(struct sim_req *req, struct sim_resp *resp)
{
  if (!req->blen) return jv_new(J_OBJ);
  char err[256];
  jv *d = jv_parse(req->body, req->blen, err, sizeof err);
  if (!d || d->t != J_OBJ) {
    bad(resp, d ? "body must be a JSON object" : err);
    jv_free(d);
    return NULL;
  }
  return d;
}

static int64_t geti(const jv *o, const char *k, int64_t def)
{
  int64_t v;
  return jv_int(jv_get(o, k), &v) ? v : def;
}

static bool getb(const jv *o, const char *k, bool def)
{
  const jv *v = jv_get(o, k);
  if (!v) return def;
  return v->t == J_TRUE;
}

static char *gets_dup(const jv *o, const char *k)
{
  const char *s = jv_gets(o, k);
  return s && *s ? sim_xstrdup(s) : NULL;
}

/* ---- faults ---- */

static void faults_json(struct sim_buf *b)
{
  sim_buf_puts(b, "{\"faults\":[");
  for (size_t i = 0; i < nfaults; i++) {
    struct fault *f = &faults[i];
    static const char *names[] = {"status", "reset", "stall", "watch-reset", "chunks"};
    sim_buf_printf(b, "%s{\"id\":%d,\"remaining\":%d,\"action\":\"%s\",\"code\":%d,\"method\":\"%s\",\"pathPrefix\":",
                   i ? "," : "", f->id, f->remaining, names[f->hit.action], f->hit.code,
                   f->method ? f->method : "");
    sim_buf_put_jstr(b, f->path_prefix ? f->path_prefix : "", f->path_prefix ? strlen(f->path_prefix) : 0);
    sim_buf_puts(b, "}");
  }
  sim_buf_puts(b, "]}");
}

static void add_fault(struct sim_req *req, struct sim_resp *resp)
{
  jv *d = body_json(req, resp);
  if (!d) return;
  struct fault f = {0};
  const char *action = jv_gets(d, "action");
  f.hit.code = (int)geti(d, "code", 500);
  if (!action || strcmp(action, "status") == 0) f.hit.action = SIM_FAULT_STATUS;
  else if (strcmp(action, "reset") == 0) f.hit.action = SIM_FAULT_RESET;
  else if (strcmp(action, "stall") == 0) f.hit.action = SIM_FAULT_STALL;
  else if (strcmp(action, "watch-reset") == 0) f.hit.action = SIM_FAULT_WATCH_RESET;
  else if (strcmp(action, "chunks") == 0) f.hit.action = SIM_FAULT_CHUNKS;
  else {
    bad(resp, "action must be one of status, reset, stall, watch-reset, chunks");
    jv_free(d);
    return;
  }
  if (f.hit.action == SIM_FAULT_STATUS && (f.hit.code < 400 || f.hit.code > 599)) {
    bad(resp, "code must be 4xx or 5xx");
    jv_free(d);
    return;
  }
  f.remaining = (int)geti(d, "count", 1);
  f.hit.retry_after = (int)geti(d, "retryAfter", f.hit.code == 429 ? 1 : -1);
  f.hit.after_events = (int)geti(d, "afterEvents", 0);
  f.hit.chunk = (size_t)geti(d, "chunkBytes", 1);
  f.hit.plain = getb(d, "plainText", false);
  const char *msg = jv_gets(d, "message");
  if (msg) snprintf(f.hit.message, sizeof f.hit.message, "%s", msg);
  else if (f.hit.code == 429) snprintf(f.hit.message, sizeof f.hit.message, "%s", f.hit.plain ? "Too many requests, please try again later.\n" : "Too many requests, please try again later.");
  else if (f.hit.code == 503) snprintf(f.hit.message, sizeof f.hit.message, "The server is currently unable to handle the request");
  else if (f.hit.code == 504) snprintf(f.hit.message, sizeof f.hit.message, "Timeout: request did not complete within the allotted timeout");
  else snprintf(f.hit.message, sizeof f.hit.message, "Internal error occurred: injected fault");
  f.method = gets_dup(d, "method");
  f.path_prefix = gets_dup(d, "pathPrefix");
  const jv *w = jv_get(d, "watch");
  f.watch = !w || w->t == J_NULL ? -1 : w->t == J_TRUE;
  jv_free(d);
  pthread_mutex_lock(&mu);
  f.id = next_fault_id++;
  faults = sim_xrealloc(faults, (nfaults + 1) * sizeof *faults);
  faults[nfaults++] = f;
  pthread_mutex_unlock(&mu);
  ok_json(resp, "{\"id\":%d}", f.id);
}

static void clear_faults(void)
{
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nfaults; i++) {
    free(faults[i].method);
    free(faults[i].path_prefix);
  }
  free(faults);
  faults = NULL;
  nfaults = 0;
  for (size_t i = 0; i < nlats; i++) {
    free(lats[i].method);
    free(lats[i].path_prefix);
  }
  free(lats);
  lats = NULL;
  nlats = 0;
  pthread_mutex_unlock(&mu);
}

/* ---- modification stream ---- */

static void *mod_main(void *arg)
{
  (void)arg;
  char *cursor = NULL;
  uint64_t start = sim_now_ms();
  while (!atomic_load(&mod_stop) && mod.done < mod.count && !atomic_load(&sim_shutting_down)) {
    if (mod.rate > 0) {
      /* Pace against the schedule, not per event, so bursts catch up. */
      uint64_t due = start + (uint64_t)((double)mod.done * 1000.0 / mod.rate);
      uint64_t now = sim_now_ms();
      if (due > now) {
        usleep((useconds_t)((due - now) * 1000u));
        continue;
      }
    }
    if (sim_api_modify(mod.rt, &cursor, mod.spec, false) < 0) break;
    pthread_mutex_lock(&mu);
    mod.done++;
    pthread_mutex_unlock(&mu);
  }
  free(cursor);
  pthread_mutex_lock(&mu);
  mod.end_ms = sim_now_ms();
  mod_running = false;
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void mod_join(void)
{
  if (mod_joinable) {
    atomic_store(&mod_stop, true);
    pthread_join(mod_thread, NULL);
    mod_joinable = false;
  }
}

static void modify_start(struct sim_req *req, struct sim_resp *resp)
{
  jv *d = body_json(req, resp);
  if (!d) return;
  const char *res = jv_gets(d, "resource");
  pthread_mutex_lock(&sim_mu);
  struct sim_rtype *rt = res ? sim_type_by_name_locked(res) : NULL;
  pthread_mutex_unlock(&sim_mu);
  if (!rt) {
    bad(resp, "resource must name a served resource (\"pods\", \"deployments.apps\", ...)");
    jv_free(d);
    return;
  }
  mod_join();
  mod.rt = rt;
  mod.count = (uint64_t)geti(d, "count", 1000);
  const jv *rv = jv_get(d, "rate");
  mod.rate = rv && rv->t == J_NUM ? strtod(rv->u.s, NULL) : 0;
  mod.spec = getb(d, "spec", false);
  mod.done = 0;
  mod.start_ms = sim_now_ms();
  mod.end_ms = 0;
  jv_free(d);
  atomic_store(&mod_stop, false);
  mod_running = true;
  if (pthread_create(&mod_thread, NULL, mod_main, NULL) != 0) {
    mod_running = false;
    bad(resp, "cannot start thread");
    return;
  }
  mod_joinable = true;
  resp->code = 202;
  sim_buf_printf(&resp->body, "{\"started\":true,\"count\":%llu}", (unsigned long long)mod.count);
}

static void modify_status(struct sim_resp *resp)
{
  pthread_mutex_lock(&mu);
  uint64_t end = mod.end_ms ? mod.end_ms : sim_now_ms();
  uint64_t el = mod.start_ms ? end - mod.start_ms : 0;
  ok_json(resp, "{\"running\":%s,\"done\":%llu,\"count\":%llu,\"elapsedMs\":%llu,\"perSecond\":%.1f}",
          mod_running ? "true" : "false", (unsigned long long)mod.done,
          (unsigned long long)mod.count, (unsigned long long)el,
          el ? (double)mod.done * 1000.0 / (double)el : 0.0);
  pthread_mutex_unlock(&mu);
}

void sim_control_stop(void) { mod_join(); }

/* ---- dispatcher ---- */

static void counters(struct sim_resp *resp)
{
  struct sim_buf *b = &resp->body;
  pthread_mutex_lock(&mu);
  sim_buf_printf(b, "{\"requests\":%llu,\"faultsInjected\":%llu,\"byVerb\":{",
                 (unsigned long long)cnt_total, (unsigned long long)cnt_faults);
  for (size_t i = 0; i < nverbs; i++)
    sim_buf_printf(b, "%s\"%s\":%llu", i ? "," : "", verbs[i].verb, (unsigned long long)verbs[i].n);
  sim_buf_puts(b, "},\"byCode\":{");
  for (size_t i = 0; i < ncodes; i++)
    sim_buf_printf(b, "%s\"%d\":%llu", i ? "," : "", codes[i].code, (unsigned long long)codes[i].n);
  pthread_mutex_unlock(&mu);
  pthread_mutex_lock(&sim_mu);
  uint64_t rv = sim_rv, floor = sim_hist_floor, ev = sim_event_seq;
  pthread_mutex_unlock(&sim_mu);
  sim_buf_printf(b, "},\"watchesOpen\":%d,\"eventsSent\":%llu,\"eventsEmitted\":%llu,"
                    "\"resourceVersion\":\"%llu\",\"historyFloor\":\"%llu\"}",
                 sim_watch_count(), (unsigned long long)atomic_load(&sim_events_sent),
                 (unsigned long long)ev, (unsigned long long)rv, (unsigned long long)floor);
  resp->code = 200;
}

static void reset_counters(void)
{
  pthread_mutex_lock(&mu);
  cnt_total = cnt_faults = 0;
  for (size_t i = 0; i < nverbs; i++) verbs[i].n = 0;
  for (size_t i = 0; i < ncodes; i++) codes[i].n = 0;
  for (size_t i = 0; i < LOG_CAP; i++) {
    free(reqlog[i].line);
    reqlog[i].line = NULL;
  }
  nlog = 0;
  pthread_mutex_unlock(&mu);
}

static void requests(struct sim_resp *resp)
{
  struct sim_buf *b = &resp->body;
  sim_buf_puts(b, "{\"requests\":[");
  pthread_mutex_lock(&mu);
  uint64_t first = nlog > LOG_CAP ? nlog - LOG_CAP : 0;
  for (uint64_t i = first; i < nlog; i++) {
    if (i > first) sim_buf_putc(b, ',');
    sim_buf_puts(b, reqlog[i % LOG_CAP].line);
  }
  pthread_mutex_unlock(&mu);
  sim_buf_puts(b, "]}");
  resp->code = 200;
}

static void config_json(struct sim_resp *resp)
{
  ok_json(resp,
          "{\"bookmarkIntervalMs\":%u,\"watch410\":\"%s\",\"continueExpiry\":%s,\"watchList\":%s,"
          "\"rv0IgnoresLimit\":%s,\"watchChunkSplit\":%zu,\"minRequestTimeoutSeconds\":%u,"
          "\"shardedListAndWatch\":%s}",
          sim_bookmark_interval_ms, sim_cfg.watch_410_http ? "http" : "event",
          sim_cfg.continue_expiry ? "true" : "false", sim_cfg.watch_list ? "true" : "false",
          sim_cfg.rv0_ignores_limit ? "true" : "false", sim_cfg.watch_chunk_split,
          sim_cfg.min_request_timeout_s, sim_cfg.sharded_list_watch ? "true" : "false");
}

static void set_config(struct sim_req *req, struct sim_resp *resp)
{
  jv *d = body_json(req, resp);
  if (!d) return;
  sim_bookmark_interval_ms = (unsigned)geti(d, "bookmarkIntervalMs", sim_bookmark_interval_ms);
  const char *w = jv_gets(d, "watch410");
  if (w) sim_cfg.watch_410_http = strcmp(w, "http") == 0;
  sim_cfg.continue_expiry = getb(d, "continueExpiry", sim_cfg.continue_expiry);
  sim_cfg.watch_list = getb(d, "watchList", sim_cfg.watch_list);
  sim_cfg.rv0_ignores_limit = getb(d, "rv0IgnoresLimit", sim_cfg.rv0_ignores_limit);
  sim_cfg.watch_chunk_split = (size_t)geti(d, "watchChunkSplit", (int64_t)sim_cfg.watch_chunk_split);
  sim_cfg.min_request_timeout_s = (unsigned)geti(d, "minRequestTimeoutSeconds", sim_cfg.min_request_timeout_s);
  sim_cfg.sharded_list_watch = getb(d, "shardedListAndWatch", sim_cfg.sharded_list_watch);
  jv_free(d);
  config_json(resp);
}

/* POST /_apisim/reseed (seed.h sim_reseed): {"cluster": "same"|"new",
 * "shuffle": N, "items": [...], "resourceVersion": "N",
 * "endResourceVersion": "N", "drop": "clean"|"reset"}. */
static void reseed(struct sim_req *req, struct sim_resp *resp)
{
  jv *d = body_json(req, resp);
  if (!d) return;
  struct sim_reseed o = {0};
  const char *cluster = jv_gets(d, "cluster");
  const char *drop = jv_gets(d, "drop");
  const jv *items = jv_get(d, "items");
  if ((cluster && strcmp(cluster, "same") != 0 && strcmp(cluster, "new") != 0) ||
      (drop && strcmp(drop, "clean") != 0 && strcmp(drop, "reset") != 0) ||
      (items && items->t != J_ARR)) {
    bad(resp, "need {\"cluster\": \"same\"|\"new\", \"shuffle\": N, \"items\": [...], "
              "\"resourceVersion\": \"N\", \"endResourceVersion\": \"N\", \"drop\": \"clean\"|\"reset\"}");
    jv_free(d);
    return;
  }
  o.new_cluster = cluster && strcmp(cluster, "new") == 0;
  o.reset = drop && strcmp(drop, "reset") == 0;
  o.shuffle = (uint64_t)geti(d, "shuffle", 0);
  o.items = items;
  const char *s = jv_gets(d, "resourceVersion");
  o.start_rv = s ? strtoull(s, NULL, 10) : 0;
  s = jv_gets(d, "endResourceVersion");
  o.end_rv = s ? strtoull(s, NULL, 10) : 0;
  struct sim_reseed_result r;
  char *err = NULL;
  int rc = sim_reseed(&o, &r, &err);
  jv_free(d);
  if (rc < 0) {
    bad(resp, err ? err : "reseed failed");
    free(err);
    return;
  }
  ok_json(resp, "{\"resourceVersion\":\"%llu\",\"objects\":%zu,\"kubeSystemUid\":\"%s\"}",
          (unsigned long long)r.rv, r.objects, r.kube_system_uid);
}

void sim_control_handle(struct sim_req *req, struct sim_resp *resp)
{
  const char *p = req->url + strlen("/_apisim");
  const char *m = req->method;
  bool post = strcmp(m, "POST") == 0, get = strcmp(m, "GET") == 0, del = strcmp(m, "DELETE") == 0;
  if (strcmp(p, "/compact") == 0 && post) {
    pthread_mutex_lock(&sim_mu);
    sim_compact_locked();
    uint64_t rv = sim_rv;
    pthread_mutex_unlock(&sim_mu);
    ok_json(resp, "{\"resourceVersion\":\"%llu\"}", (unsigned long long)rv);
  } else if (strcmp(p, "/reseed") == 0 && post) {
    reseed(req, resp);
  } else if (strcmp(p, "/drop-watches") == 0 && post) {
    ok_json(resp, "{\"dropped\":%d}", sim_watch_drop_all());
  } else if (strcmp(p, "/faults") == 0 && post) {
    add_fault(req, resp);
  } else if (strcmp(p, "/faults") == 0 && get) {
    pthread_mutex_lock(&mu);
    faults_json(&resp->body);
    pthread_mutex_unlock(&mu);
    resp->code = 200;
  } else if ((strcmp(p, "/faults") == 0 || strcmp(p, "/latency") == 0) && del) {
    clear_faults();
    ok_json(resp, "{}");
  } else if (strcmp(p, "/latency") == 0 && post) {
    jv *d = body_json(req, resp);
    if (!d) return;
    struct latency l = {(unsigned)geti(d, "ms", 0), gets_dup(d, "method"), gets_dup(d, "pathPrefix"),
                        getb(d, "watchEvents", false)};
    jv_free(d);
    pthread_mutex_lock(&mu);
    lats = sim_xrealloc(lats, (nlats + 1) * sizeof *lats);
    lats[nlats++] = l;
    pthread_mutex_unlock(&mu);
    ok_json(resp, "{\"ms\":%u}", l.ms);
  } else if (strcmp(p, "/counters") == 0 && get) {
    counters(resp);
  } else if (strcmp(p, "/counters") == 0 && del) {
    reset_counters();
    ok_json(resp, "{}");
  } else if (strcmp(p, "/requests") == 0 && get) {
    requests(resp);
  } else if (strcmp(p, "/config") == 0 && get) {
    config_json(resp);
  } else if (strcmp(p, "/config") == 0 && (post || strcmp(m, "PUT") == 0)) {
    set_config(req, resp);
  } else if (strcmp(p, "/modify") == 0 && post) {
    modify_start(req, resp);
  } else if (strcmp(p, "/modify") == 0 && get) {
    modify_status(resp);
  } else if (strcmp(p, "/modify") == 0 && del) {
    mod_join();
    modify_status(resp);
  } else if (strcmp(p, "/lose-events") == 0 && post) {
    jv *d = body_json(req, resp);
    if (!d) return;
    const char *res = jv_gets(d, "resource");
    int64_t n = geti(d, "count", 1);
    pthread_mutex_lock(&sim_mu);
    struct sim_rtype *rt = res ? sim_type_by_name_locked(res) : NULL;
    pthread_mutex_unlock(&sim_mu);
    jv_free(d);
    if (!rt || n <= 0) {
      bad(resp, "need {\"resource\": a served resource, \"count\": N > 0}");
      return;
    }
    char *cursor = NULL;
    int64_t done = 0;
    while (done < n && sim_api_modify(rt, &cursor, false, true) == 0) done++;
    free(cursor);
    pthread_mutex_lock(&sim_mu);
    uint64_t rv = sim_rv;
    pthread_mutex_unlock(&sim_mu);
    ok_json(resp, "{\"modified\":%lld,\"resourceVersion\":\"%llu\"}", (long long)done,
            (unsigned long long)rv);
  } else if (strcmp(p, "/generate") == 0 && post) {
    jv *d = body_json(req, resp);
    if (!d) return;
    char *err = NULL;
    const char *res = jv_gets(d, "resource");
    int64_t n = geti(d, "count", 0);
    if (!res || n <= 0 || sim_generate(res, (size_t)n, &err) < 0) {
      bad(resp, err ? err : "need {\"resource\":..., \"count\": N > 0}");
    } else {
      pthread_mutex_lock(&sim_mu);
      uint64_t rv = sim_rv;
      pthread_mutex_unlock(&sim_mu);
      ok_json(resp, "{\"created\":%lld,\"resourceVersion\":\"%llu\"}", (long long)n, (unsigned long long)rv);
    }
    free(err);
    jv_free(d);
  } else {
    struct sim_details d = {0};
    sim_resp_status(resp, 404, "NotFound", &d, "unknown control call %s %s", m, req->url);
  }
}
