/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi: see fakeapi.h. */
#include "fakeapi.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "mini_server.h"
#include "testutil.h"

#define MAX_RES 8
#define MAX_HOLD 8
#define QUIET_WATCH_MS 1100

typedef struct fobj {
  unsigned res;
  char *ns, *name, *json;
} fobj;

typedef struct fevent {
  unsigned res;
  char *ns;
  char *line; /* {"type":..,"object":..}\n */
  uint64_t rv;
} fevent;

struct fakeapi {
  mini_server *srv;
  char url[64];
  fakeapi_resource res[MAX_RES];
  unsigned nres;
  pthread_mutex_t mu;
  pthread_cond_t cond; /* new event, hold released, stopping */
  bool stopping, expire;
  uint64_t rv;
  fobj *objs;
  size_t nobjs;
  fevent *events;
  size_t nevents;
  char *held[MAX_HOLD];
  struct {
    char *ns;
    unsigned n;
  } lists[16];
  char **owned; /* reply bodies: they must outlive the responses */
  size_t nowned;
};

static void *grow(void *p, size_t n, size_t size) {
  void *q = realloc(p, (n + 1) * size);
  if (!q) fail_msg("fakeapi: out of memory");
  return q;
}

static char *xstrdup(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d) fail_msg("fakeapi: out of memory");
  return d;
}

/* Under mu. The body is freed at stop. */
static const char *own(fakeapi *f, char *body) {
  f->owned = grow(f->owned, f->nowned, sizeof *f->owned);
  f->owned[f->nowned++] = body;
  return body;
}

static int find_res(const fakeapi *f, const char *resource) {
  for (unsigned i = 0; i < f->nres; i++)
    if (strcmp(f->res[i].resource, resource) == 0) return (int)i;
  return -1;
}

/* "/api/v1/namespaces/NS/R" or "/api/v1/R" -> resource index and ns ("" =
 * all); with "/NAME" after R, *name points at NAME (else NULL). -1 when not
 * served. */
static int parse_path(const fakeapi *f, const char *path, char *ns, size_t cap, const char **name) {
  *name = NULL;
  for (unsigned i = 0; i < f->nres; i++) {
    size_t n = strlen(f->res[i].api_path);
    if (strncmp(path, f->res[i].api_path, n) != 0) continue;
    const char *rest = path + n;
    ns[0] = 0;
    if (strncmp(rest, "/namespaces/", 12) == 0) {
      const char *s = rest + 12, *slash = strchr(s, '/');
      if (!slash || (size_t)(slash - s) >= cap) continue;
      memcpy(ns, s, (size_t)(slash - s));
      ns[slash - s] = 0;
      rest = slash;
    }
    if (rest[0] == '/' && strcmp(rest + 1, f->res[i].resource) == 0) return (int)i;
    size_t rl = strlen(f->res[i].resource);
    if (rest[0] == '/' && strncmp(rest + 1, f->res[i].resource, rl) == 0 && rest[1 + rl] == '/' &&
        rest[2 + rl] && !strchr(rest + 2 + rl, '/')) {
      *name = rest + 2 + rl;
      return (int)i;
    }
  }
  return -1;
}

/* GET of one object (the reflector's history check reads a few). */
static void serve_get(fakeapi *f, unsigned res, const char *ns, const char *name,
                      mini_server_reply *reply) {
  for (size_t i = 0; i < f->nobjs; i++)
    if (f->objs[i].res == res && strcmp(f->objs[i].ns, ns) == 0 && strcmp(f->objs[i].name, name) == 0) {
      reply->body = own(f, xstrdup(f->objs[i].json));
      return;
    }
  reply->status = 404;
  reply->body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"NotFound\",\"code\":404}";
}

static bool in_scope(unsigned res, const char *ns, unsigned want_res, const char *want_ns) {
  return res == want_res && (!want_ns[0] || strcmp(ns, want_ns) == 0);
}

static bool is_held(const fakeapi *f, const char *ns) {
  for (unsigned i = 0; i < MAX_HOLD; i++)
    if (f->held[i] && strcmp(f->held[i], ns) == 0) return true;
  return false;
}

static void count_list(fakeapi *f, const char *ns) {
  for (unsigned i = 0; i < sizeof f->lists / sizeof f->lists[0]; i++) {
    if (f->lists[i].ns && strcmp(f->lists[i].ns, ns) == 0) {
      f->lists[i].n++;
      return;
    }
    if (!f->lists[i].ns) {
      f->lists[i].ns = xstrdup(ns);
      f->lists[i].n = 1;
      return;
    }
  }
}

static void serve_list(fakeapi *f, unsigned res, const char *ns, mini_server_reply *reply) {
  while (is_held(f, ns) && !f->stopping) pthread_cond_wait(&f->cond, &f->mu);
  count_list(f, ns);
  char *body = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&body, &len);
  if (!m) fail_msg("fakeapi: out of memory");
  fprintf(m, "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"%llu\"},"
          "\"items\":[",
          f->res[res].kind, f->res[res].api_version, (unsigned long long)f->rv);
  bool first = true;
  for (size_t i = 0; i < f->nobjs; i++) {
    if (!in_scope(f->objs[i].res, f->objs[i].ns, res, ns)) continue;
    fprintf(m, "%s%s", first ? "" : ",", f->objs[i].json);
    first = false;
  }
  fputs("]}", m);
  if (fclose(m) != 0) fail_msg("fakeapi: out of memory");
  reply->body = own(f, body);
}

static void serve_watch(fakeapi *f, unsigned res, const char *ns, uint64_t from,
                        mini_server_reply *reply) {
  if (f->expire) {
    f->expire = false;
    reply->status = 410;
    reply->body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                  "\"message\":\"too old resource version\",\"reason\":\"Expired\",\"code\":410}";
    return;
  }
  uint64_t end = tu_mono_ms() + QUIET_WATCH_MS;
  for (;;) {
    char *body = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&body, &len);
    if (!m) fail_msg("fakeapi: out of memory");
    for (size_t i = 0; i < f->nevents; i++)
      if (f->events[i].rv > from && in_scope(f->events[i].res, f->events[i].ns, res, ns))
        fputs(f->events[i].line, m);
    if (fclose(m) != 0) fail_msg("fakeapi: out of memory");
    if (len || f->stopping || tu_mono_ms() >= end) {
      reply->body = own(f, body);
      return;
    }
    free(body);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 20 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&f->cond, &f->mu, &ts);
  }
}

static void handler(const mini_server_request *rq, mini_server_reply *reply, void *ud) {
  fakeapi *f = ud;
  char ns[128];
  pthread_mutex_lock(&f->mu);
  const char *name = NULL;
  int res = strcmp(rq->method, "GET") == 0 ? parse_path(f, rq->path, ns, sizeof ns, &name) : -1;
  if (res >= 0 && name) {
    serve_get(f, (unsigned)res, ns, name, reply);
  } else if (res < 0) {
    reply->status = 404;
    reply->body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":404}";
  } else {
    const char *watch = mini_server_query(rq, "watch");
    const char *rv = mini_server_query(rq, "resourceVersion");
    if (watch && (strcmp(watch, "true") == 0 || strcmp(watch, "1") == 0))
      serve_watch(f, (unsigned)res, ns, rv ? strtoull(rv, NULL, 10) : 0, reply);
    else
      serve_list(f, (unsigned)res, ns, reply);
  }
  pthread_mutex_unlock(&f->mu);
}

fakeapi *fakeapi_start(const fakeapi_resource *res, unsigned n) {
  if (n > MAX_RES) return NULL;
  fakeapi *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  memcpy(f->res, res, n * sizeof *res);
  f->nres = n;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (pthread_mutex_init(&f->mu, NULL) != 0 || pthread_cond_init(&f->cond, &ca) != 0) {
    pthread_condattr_destroy(&ca);
    free(f);
    return NULL;
  }
  pthread_condattr_destroy(&ca);
  f->srv = mini_server_start(handler, f, NULL, NULL);
  if (!f->srv) {
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return NULL;
  }
  snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", mini_server_port(f->srv));
  return f;
}

void fakeapi_stop(fakeapi *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  f->stopping = true;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->mu);
  mini_server_stop(f->srv);
  for (size_t i = 0; i < f->nobjs; i++) free(f->objs[i].ns), free(f->objs[i].name), free(f->objs[i].json);
  for (size_t i = 0; i < f->nevents; i++) free(f->events[i].ns), free(f->events[i].line);
  for (size_t i = 0; i < f->nowned; i++) free(f->owned[i]);
  for (unsigned i = 0; i < MAX_HOLD; i++) free(f->held[i]);
  for (unsigned i = 0; i < sizeof f->lists / sizeof f->lists[0]; i++) free(f->lists[i].ns);
  free(f->objs), free(f->events), free(f->owned);
  pthread_cond_destroy(&f->cond);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

const char *fakeapi_url(const fakeapi *f) { return f->url; }

static char *printf_dup(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *printf_dup(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) fail_msg("fakeapi: out of memory");
  return s;
}

/* Under mu: appends an event about json and wakes the watches. */
static void add_event(fakeapi *f, unsigned res, const char *ns, const char *type, const char *json) {
  f->events = grow(f->events, f->nevents, sizeof *f->events);
  f->events[f->nevents++] = (fevent){res, xstrdup(ns),
                                     printf_dup("{\"type\":\"%s\",\"object\":%s}\n", type, json), f->rv};
  pthread_cond_broadcast(&f->cond);
}

static size_t find_obj(const fakeapi *f, unsigned res, const char *ns, const char *name) {
  for (size_t i = 0; i < f->nobjs; i++)
    if (f->objs[i].res == res && strcmp(f->objs[i].ns, ns) == 0 && strcmp(f->objs[i].name, name) == 0)
      return i;
  return f->nobjs;
}

static char *object_json(const fakeapi *f, unsigned res, const char *ns, const char *name,
                         const char *meta, const char *rest) {
  return printf_dup("{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"name\":\"%s\","
                    "\"namespace\":\"%s\",\"resourceVersion\":\"%llu\"%s%s}%s%s}",
                    f->res[res].api_version, f->res[res].kind, name, ns, (unsigned long long)f->rv,
                    meta && *meta ? "," : "", meta ? meta : "", rest && *rest ? "," : "",
                    rest ? rest : "");
}

uint64_t fakeapi_put(fakeapi *f, const char *resource, const char *ns, const char *name,
                     const char *meta, const char *rest) {
  int res = find_res(f, resource);
  if (res < 0) fail_msg("fakeapi: resource %s is not served", resource);
  pthread_mutex_lock(&f->mu);
  f->rv++;
  char *json = object_json(f, (unsigned)res, ns, name, meta, rest);
  size_t i = find_obj(f, (unsigned)res, ns, name);
  bool added = i == f->nobjs;
  if (added) {
    f->objs = grow(f->objs, f->nobjs, sizeof *f->objs);
    f->objs[f->nobjs++] = (fobj){(unsigned)res, xstrdup(ns), xstrdup(name), json};
  } else {
    free(f->objs[i].json);
    f->objs[i].json = json;
  }
  add_event(f, (unsigned)res, ns, added ? "ADDED" : "MODIFIED", json);
  uint64_t rv = f->rv;
  pthread_mutex_unlock(&f->mu);
  return rv;
}

uint64_t fakeapi_delete(fakeapi *f, const char *resource, const char *ns, const char *name) {
  int res = find_res(f, resource);
  if (res < 0) fail_msg("fakeapi: resource %s is not served", resource);
  pthread_mutex_lock(&f->mu);
  size_t i = find_obj(f, (unsigned)res, ns, name);
  uint64_t rv = 0;
  if (i < f->nobjs) {
    rv = ++f->rv;
    /* The DELETED event carries the last state at the deletion's RV. */
    const char *at = strstr(f->objs[i].json, "\"resourceVersion\":\"");
    char *json = NULL;
    if (at) {
      const char *end = strchr(at + 19, '"');
      json = printf_dup("%.*s\"resourceVersion\":\"%llu%s", (int)(at - f->objs[i].json), f->objs[i].json,
                        (unsigned long long)rv, end);
    }
    add_event(f, (unsigned)res, ns, "DELETED", json ? json : f->objs[i].json);
    free(json);
    free(f->objs[i].ns), free(f->objs[i].name), free(f->objs[i].json);
    f->objs[i] = f->objs[--f->nobjs];
  }
  pthread_mutex_unlock(&f->mu);
  return rv;
}

void fakeapi_hold(fakeapi *f, const char *ns, bool hold) {
  pthread_mutex_lock(&f->mu);
  for (unsigned i = 0; i < MAX_HOLD; i++) {
    if (!hold && f->held[i] && strcmp(f->held[i], ns) == 0) {
      free(f->held[i]);
      f->held[i] = NULL;
    }
  }
  for (unsigned i = 0; hold && i < MAX_HOLD; i++) {
    if (!f->held[i]) {
      f->held[i] = xstrdup(ns);
      break;
    }
  }
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->mu);
}

void fakeapi_expire(fakeapi *f) {
  pthread_mutex_lock(&f->mu);
  f->expire = true;
  pthread_mutex_unlock(&f->mu);
}

unsigned fakeapi_lists(fakeapi *f, const char *ns) {
  unsigned n = 0;
  pthread_mutex_lock(&f->mu);
  for (unsigned i = 0; i < sizeof f->lists / sizeof f->lists[0]; i++)
    if (f->lists[i].ns && strcmp(f->lists[i].ns, ns) == 0) n = f->lists[i].n;
  pthread_mutex_unlock(&f->mu);
  return n;
}
