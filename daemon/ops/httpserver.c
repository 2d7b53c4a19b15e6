/* SPDX-License-Identifier: Apache-2.0 */
/* httpserver: see httpserver.h. */
#include "ops/httpserver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"

struct kc_httpserver {
  uv_loop_t *loop;
  kc_metrics *reg;
  kc_httpserver_hooks hooks;
  uint64_t heartbeat_ms, stall_ms, fresh_ms, wait_ms, probe_wait_ms;
  uint16_t port;
  unsigned endpoints; /* KC_HTTP_* */
  kc_tlscert *tls;    /* borrowed; NULL: plain HTTP */
  unsigned (*authorize)(void *ud, const char *authorization, const char *method, const char *path,
                        char *msg, size_t cap);
  void *authorize_ud;
  struct MHD_Daemon *mhd;
  uv_timer_t heartbeat;
  uv_async_t wake;
  int open_handles;

  /* Loop-owned back buffers, swapped with the front ones under mu. */
  kc_buf back_metrics, back_json, back_shards;
  kc_health_results back_checks;

  /* Shared with the server threads: everything below is guarded by mu,
   * except last_beat_ms (atomic, read lock-free by the ping check). */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  kc_buf metrics, json, shards;
  uint64_t generation;     /* snapshots published so far */
  uint64_t rendered_ms;    /* when the front snapshot was rendered */
  bool requested;          /* a snapshot is asked of the loop */
  bool closing;
  kc_health_results checks; /* the readiness checks' last results */
  uint64_t checks_generation; /* check runs published so far */
  uint64_t checks_ms;         /* when the last run was */
  bool checks_requested;      /* a check run is asked of the loop */
  struct admin_call *calls;   /* /debug requests for hooks.admin, waiting for the loop */
  _Atomic uint64_t last_beat_ms;
};

/* One /debug request for hooks.admin: queued by a server thread, answered
 * by the loop. taken: the loop has it (then only the loop frees it, when
 * the server thread gave up: abandoned). */
struct admin_call {
  struct admin_call *next;
  kc_admin_request req;
  kc_buf answer;
  int rc;
  bool taken, done, abandoned;
};

static void admin_call_free(struct admin_call *c) {
  kc_buf_free(&c->answer);
  free(c);
}

/* --- bind address ------------------------------------------------------------- */

int kc_httpserver_parse_bind(const char *bind, char *host, size_t hostcap, uint16_t *port) {
  if (!bind || !*bind || strcmp(bind, "0") == 0) return 1;
  const char *colon, *h = bind;
  size_t hlen;
  if (bind[0] == '[') {
    const char *end = strchr(bind, ']');
    if (!end || end[1] != ':') return -EINVAL;
    h = bind + 1;
    hlen = (size_t)(end - h);
    colon = end + 1;
  } else {
    colon = strrchr(bind, ':');
    if (!colon || memchr(bind, ':', (size_t)(colon - bind))) return -EINVAL; /* bare v6 */
    hlen = (size_t)(colon - bind);
  }
  if (hlen >= hostcap) return -EINVAL;
  const char *p = colon + 1;
  if (!*p || strlen(p) > 5) return -EINVAL;
  unsigned long v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return -EINVAL;
    v = v * 10 + (unsigned long)(*p - '0');
  }
  if (v > 65535) return -EINVAL;
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  *port = (uint16_t)v;
  return 0;
}

static int listen_on(const char *addr, int *fd_out, uint16_t *port_out) {
  char host[256];
  uint16_t port;
  int rc = kc_httpserver_parse_bind(addr, host, sizeof host, &port);
  if (rc != 0) return rc < 0 ? rc : -EINVAL;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  char portstr[8];
  snprintf(portstr, sizeof portstr, "%u", (unsigned)port);
  int gai = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res);
  if (gai != 0) {
    kc_error("httpserver", "cannot resolve bind address %s: %s", addr, gai_strerror(gai));
    return -EINVAL;
  }
  int err = -EADDRNOTAVAIL;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = -errno;
      continue;
    }
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
      err = -errno;
      close(fd);
      continue;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
      err = -errno;
      close(fd);
      continue;
    }
    *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    freeaddrinfo(res);
    return 0;
  }
  freeaddrinfo(res);
  kc_error("httpserver", "cannot listen on %s: %s", addr, strerror(-err));
  return err;
}

/* --- server threads ----------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             const char *body, size_t len) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  enum MHD_Result ok = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *text) {
  return reply(conn, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* Loop age in ms, or 0 while it beats in time. */
static uint64_t stalled_for(kc_httpserver *s) {
  uint64_t last = atomic_load(&s->last_beat_ms), now = kc_clock_now_ms();
  return now > last && now - last > s->stall_ms ? now - last : 0;
}

/* Waits on cv (mu held) until *generation reaches target, the server
 * closes, or wait_ms pass: the loop answers a request by bumping it. */
static void await_generation(kc_httpserver *s, const uint64_t *generation, uint64_t target, uint64_t wait_ms) {
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += (time_t)(wait_ms / 1000);
  dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  while (*generation < target && !s->closing)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT) break;
}

/* Waits (bounded) for a snapshot younger than fresh_ms; call with mu held. */
static void await_snapshot(kc_httpserver *s) {
  uint64_t now = kc_clock_now_ms();
  if (s->closing || (s->generation && now - s->rendered_ms <= s->fresh_ms)) return;
  uint64_t target = s->generation + 1;
  if (!s->requested) {
    s->requested = true;
    uv_async_send(&s->wake);
  }
  await_generation(s, &s->generation, target, s->wait_ms);
}

enum doc { DOC_METRICS, DOC_INFORMERS, DOC_SHARDS, DOC_NONE };

static enum MHD_Result serve_snapshot(kc_httpserver *s, struct MHD_Connection *conn, enum doc d) {
  pthread_mutex_lock(&s->mu);
  await_snapshot(s);
  enum MHD_Result ok;
  bool metrics = d == DOC_METRICS;
  const kc_buf *b = metrics ? &s->metrics : d == DOC_INFORMERS ? &s->json : &s->shards;
  if (!s->generation)
    ok = reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "no snapshot yet: the event loop has not answered\n");
  else
    ok = reply(conn, MHD_HTTP_OK, metrics ? KC_METRICS_CONTENT_TYPE : "application/json", b->p ? b->p : "",
               b->len);
  pthread_mutex_unlock(&s->mu);
  return ok;
}

/* /debug/queues, /debug/keys, /debug/trace: the request from the URL's
 * arguments, answered by the loop (hooks.admin). */
static enum MHD_Result serve_admin(kc_httpserver *s, struct MHD_Connection *conn,
                                   enum kc_admin_command command) {
  kc_admin_request r = {.command = command};
  const char *controller = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "controller");
  const char *key = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "key");
  const char *state = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "state");
  char err[256];
  kc_buf line = {0};
  /* The socket's parser checks the arguments: the same request, the same
   * refusals. Fields that do not fit are refused by it, not cut. */
  kc_buf_puts(&line, "{\"command\":");
  kc_buf_json_c(&line, kc_admin_command_name(command));
  const char *names[] = {"controller", "key", "state"}, *values[] = {controller, key, state};
  for (size_t i = 0; i < 3; i++)
    if (values[i]) {
      kc_buf_printf(&line, ",\"%s\":", names[i]);
      kc_buf_json_c(&line, values[i]);
    }
  kc_buf_puts(&line, "}");
  int rc = line.err ? line.err : kc_admin_request_parse(line.p, line.len, &r, err, sizeof err);
  kc_buf_free(&line);
  if (rc < 0) {
    kc_buf b = {0};
    kc_buf_puts(&b, "{\"error\":");
    kc_buf_json_c(&b, rc == -ENOMEM ? "out of memory" : err);
    kc_buf_puts(&b, "}\n");
    enum MHD_Result ok = b.err ? MHD_NO
                               : reply(conn, MHD_HTTP_BAD_REQUEST, "application/json", b.p, b.len);
    kc_buf_free(&b);
    return ok;
  }
  struct admin_call *c = calloc(1, sizeof *c);
  if (!c) return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
  c->req = r;
  pthread_mutex_lock(&s->mu);
  c->next = s->calls;
  s->calls = c;
  uv_async_send(&s->wake);
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += (time_t)(s->wait_ms / 1000);
  dl.tv_nsec += (long)(s->wait_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  while (!c->done && !s->closing)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT) break;
  enum MHD_Result ok;
  if (c->done) {
    unsigned status = c->rc == 0          ? MHD_HTTP_OK
                      : c->rc == -ENOENT  ? MHD_HTTP_NOT_FOUND
                      : c->rc == -EAGAIN  ? MHD_HTTP_SERVICE_UNAVAILABLE
                                          : MHD_HTTP_INTERNAL_SERVER_ERROR;
    ok = c->answer.err || !c->answer.p
             ? reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n")
             : reply(conn, status, "application/json", c->answer.p, c->answer.len);
    admin_call_free(c);
  } else {
    if (c->taken) {
      c->abandoned = true; /* the loop frees it once answered */
    } else {
      for (struct admin_call **pp = &s->calls; *pp; pp = &(*pp)->next)
        if (*pp == c) {
          *pp = c->next;
          break;
        }
      admin_call_free(c);
    }
    ok = reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "the event loop did not answer in time\n");
  }
  pthread_mutex_unlock(&s->mu);
  return ok;
}

#define MAX_EXCLUDES 16

typedef struct probe_args {
  bool verbose;
  const char *exclude[MAX_EXCLUDES];
  size_t nexclude;
} probe_args;

static enum MHD_Result probe_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  probe_args *a = cls;
  if (strcmp(key, "verbose") == 0) a->verbose = true;
  if (strcmp(key, "exclude") == 0 && value && *value && a->nexclude < MAX_EXCLUDES)
    a->exclude[a->nexclude++] = value;
  return MHD_YES;
}

/* Runs the readiness checks on the loop (bounded wait, see the header) and
 * copies their results after out's ping; call with mu held. Returns false
 * when the loop did not answer in time (out then gets the last results). */
static bool await_checks(kc_httpserver *s, kc_health_results *out) {
  uint64_t target = s->checks_generation + 1;
  if (!s->checks_requested) {
    s->checks_requested = true;
    uv_async_send(&s->wake);
  }
  await_generation(s, &s->checks_generation, target, s->probe_wait_ms);
  bool fresh = s->checks_generation >= target;
  for (size_t i = 0; i < s->checks.n; i++)
    kc_health_append(out, s->checks.v[i].name, s->checks.v[i].ok, s->checks.v[i].why);
  return fresh;
}

/* /livez, /healthz: ping only (never waits for the loop); /readyz: ping and
 * the readiness checks, run for this request. */
static enum MHD_Result serve_probe(kc_httpserver *s, struct MHD_Connection *conn, const char *probe,
                                   const char *check) {
  bool readyz = strcmp(probe, "readyz") == 0;
  probe_args args = {0};
  MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, probe_arg, &args);
  kc_health_results res = {0};
  char why[160] = "";
  uint64_t stall = stalled_for(s);
  if (stall)
    snprintf(why, sizeof why, "event loop stalled: no heartbeat for %llu ms", (unsigned long long)stall);
  kc_health_append(&res, "ping", !stall, why);
  if (readyz && (!check || strcmp(check, "ping") != 0)) {
    pthread_mutex_lock(&s->mu);
    uint64_t age = s->checks_generation ? kc_clock_now_ms() - s->checks_ms : 0;
    bool fresh = !stall && !s->closing && await_checks(s, &res);
    if (stall || s->closing) /* no wait: the last results as they are */
      for (size_t i = 0; i < s->checks.n; i++)
        kc_health_append(&res, s->checks.v[i].name, s->checks.v[i].ok, s->checks.v[i].why);
    pthread_mutex_unlock(&s->mu);
    if (!fresh && !stall && res.n) {
      res.v[0].ok = false;
      snprintf(res.v[0].why, sizeof res.v[0].why,
               "event loop did not answer within %llu ms; the other checks are %llu ms old",
               (unsigned long long)s->probe_wait_ms, (unsigned long long)age);
    }
  }
  enum MHD_Result ok;
  if (res.err) {
    ok = reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
  } else {
    kc_buf body = {0};
    kc_health_query q = {.verbose = args.verbose, .exclude = args.exclude, .nexclude = args.nexclude};
    unsigned status = kc_health_render(&res, probe, check, &q,
                                       readyz ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                       &body);
    ok = body.err ? reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n")
                  : reply(conn, status, "text/plain; charset=utf-8", body.p ? body.p : "", body.len);
    kc_buf_free(&body);
  }
  kc_health_results_free(&res);
  return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  kc_httpserver *s = cls;
  if (*upload_size) { /* no endpoint takes a body: discard it */
    *upload_size = 0;
    return MHD_YES;
  }
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
  bool metrics = s->endpoints & KC_HTTP_METRICS, probes = s->endpoints & KC_HTTP_PROBES;
  enum doc d = strcmp(url, "/metrics") == 0          ? DOC_METRICS
               : strcmp(url, "/debug/informers") == 0 ? DOC_INFORMERS
               : strcmp(url, "/debug/shards") == 0    ? DOC_SHARDS
                                                      : DOC_NONE;
  /* hooks.admin's documents: behind the same authorization as the others. */
  int admin = !s->hooks.admin                         ? -1
              : strcmp(url, "/debug/queues") == 0     ? KC_ADMIN_QUEUES
              : strcmp(url, "/debug/keys") == 0       ? KC_ADMIN_KEYS
              : strcmp(url, "/debug/trace") == 0      ? KC_ADMIN_TRACE
                                                      : -1;
  if (metrics && (d != DOC_NONE || admin >= 0)) {
    if (s->authorize) {
      char msg[256] = "";
      const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
      unsigned status = s->authorize(s->authorize_ud, authz, method, url, msg, sizeof msg);
      if (status) {
        size_t n = strlen(msg);
        if (n + 1 < sizeof msg && (n == 0 || msg[n - 1] != '\n')) {
          msg[n] = '\n';
          msg[n + 1] = '\0';
        }
        return reply_text(conn, status, msg);
      }
    }
    if (admin >= 0) return serve_admin(s, conn, (enum kc_admin_command)admin);
    return serve_snapshot(s, conn, d);
  }
  if (probes) {
    static const char *const probe_names[] = {"livez", "readyz", "healthz"};
    for (size_t i = 0; i < 3; i++) {
      size_t n = strlen(probe_names[i]);
      if (url[0] == '/' && strncmp(url + 1, probe_names[i], n) == 0 &&
          (url[1 + n] == '\0' || (url[1 + n] == '/' && url[2 + n])))
        return serve_probe(s, conn, probe_names[i], url[1 + n] ? url + 2 + n : NULL);
    }
  }
  return reply_text(conn, MHD_HTTP_NOT_FOUND, "404 page not found\n");
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap) {
  kc_logv(KC_LOG_WARN, "httpserver", fmt, ap);
}

/* --- loop side ---------------------------------------------------------------- */

static void on_heartbeat(uv_timer_t *t) {
  kc_httpserver *s = t->data;
  atomic_store(&s->last_beat_ms, kc_clock_now_ms());
}

/* Runs the readiness checks and publishes their results. */
static void run_checks(kc_httpserver *s) {
  kc_health_results_reset(&s->back_checks);
  if (s->hooks.checks) s->hooks.checks(s->hooks.ud, &s->back_checks);
  if (s->back_checks.err) {
    kc_health_results_reset(&s->back_checks);
    kc_health_append(&s->back_checks, "checks", false, "out of memory running the checks");
  }
  pthread_mutex_lock(&s->mu);
  kc_health_results t = s->checks;
  s->checks = s->back_checks;
  s->back_checks = t;
  s->checks_generation++;
  s->checks_ms = kc_clock_now_ms();
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void render_snapshot(kc_httpserver *s);

/* Answers the /debug calls taken from the list (outside the lock: the
 * answers walk controllers' queues). */
static void run_admin_calls(kc_httpserver *s, struct admin_call *calls) {
  for (struct admin_call *c = calls; c; c = c->next)
    c->rc = s->hooks.admin(s->hooks.ud, &c->req, &c->answer);
  pthread_mutex_lock(&s->mu);
  while (calls) {
    struct admin_call *c = calls;
    calls = c->next;
    c->done = true;
    if (c->abandoned) admin_call_free(c);
  }
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void on_wake(uv_async_t *a) {
  kc_httpserver *s = a->data;
  pthread_mutex_lock(&s->mu);
  bool snapshot = s->requested, checks = s->checks_requested;
  s->requested = s->checks_requested = false;
  struct admin_call *calls = s->calls;
  s->calls = NULL;
  for (struct admin_call *c = calls; c; c = c->next) c->taken = true;
  pthread_mutex_unlock(&s->mu);
  /* The loop answers readiness first: it is what kubelet waits for. */
  atomic_store(&s->last_beat_ms, kc_clock_now_ms());
  if (checks) run_checks(s);
  if (snapshot) render_snapshot(s);
  if (calls) run_admin_calls(s, calls);
}

static void render_snapshot(kc_httpserver *s) {
  kc_metrics_reset(s->reg);
  kc_buf_reset(&s->back_metrics);
  kc_buf_reset(&s->back_json);
  kc_buf_reset(&s->back_shards);
  if (s->hooks.collect) s->hooks.collect(s->hooks.ud, s->reg, &s->back_json);
  if (s->hooks.collect_shards) s->hooks.collect_shards(s->hooks.ud, &s->back_shards);
  else kc_buf_puts(&s->back_shards, "[]");
  if (kc_metrics_render(s->reg, &s->back_metrics) < 0 || s->back_json.err || s->back_shards.err) {
    kc_error("httpserver", "cannot render the metrics snapshot: out of memory");
    return; /* the scrape gets the previous snapshot after its wait */
  }
  pthread_mutex_lock(&s->mu);
  kc_buf t = s->metrics;
  s->metrics = s->back_metrics;
  s->back_metrics = t;
  t = s->json;
  s->json = s->back_json;
  s->back_json = t;
  t = s->shards;
  s->shards = s->back_shards;
  s->back_shards = t;
  s->generation++;
  s->rendered_ms = kc_clock_now_ms();
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void server_free(kc_httpserver *s) {
  while (s->calls) { /* none: every server thread left with its call (MHD_stop_daemon) */
    struct admin_call *c = s->calls;
    s->calls = c->next;
    admin_call_free(c);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  kc_buf_free(&s->metrics);
  kc_buf_free(&s->json);
  kc_buf_free(&s->shards);
  kc_buf_free(&s->back_shards);
  kc_buf_free(&s->back_metrics);
  kc_buf_free(&s->back_json);
  kc_health_results_free(&s->checks);
  kc_health_results_free(&s->back_checks);
  free(s);
}

static void on_closed(uv_handle_t *h) {
  kc_httpserver *s = h->data;
  if (--s->open_handles == 0) server_free(s);
}

int kc_httpserver_start(uv_loop_t *loop, kc_metrics *reg, const kc_httpserver_options *opts,
                        const kc_httpserver_hooks *hooks, kc_httpserver **out) {
  *out = NULL;
  char host[256];
  uint16_t port;
  int rc = kc_httpserver_parse_bind(opts->bind, host, sizeof host, &port);
  unsigned endpoints = opts->endpoints ? opts->endpoints : KC_HTTP_METRICS | KC_HTTP_PROBES;
  const char *what = endpoints == KC_HTTP_PROBES    ? "health probe endpoints"
                     : endpoints == KC_HTTP_METRICS ? "metrics endpoints"
                                                    : "metrics and health endpoints";
  if (rc == 1) {
    kc_info("httpserver", "%s disabled (bind address \"%s\")", what, opts->bind ? opts->bind : "");
    return 0;
  }
  if (rc < 0) {
    kc_error("httpserver", "invalid bind address \"%s\": want host:port, [v6]:port or :port",
             opts->bind);
    return rc;
  }
  kc_httpserver *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  s->loop = loop;
  s->reg = reg;
  s->endpoints = endpoints;
  s->hooks = *hooks;
  s->tls = opts->tls;
  s->authorize = opts->authorize;
  s->authorize_ud = opts->authorize_ud;
  s->heartbeat_ms = opts->heartbeat_ms ? opts->heartbeat_ms : 1000;
  s->stall_ms = s->heartbeat_ms * (opts->stall_factor ? opts->stall_factor : 3);
  s->fresh_ms = opts->fresh_ms ? opts->fresh_ms : 100;
  s->wait_ms = opts->scrape_wait_ms ? opts->scrape_wait_ms : 1000;
  s->probe_wait_ms = opts->probe_wait_ms ? opts->probe_wait_ms : 500;
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) != 0) {
    free(s);
    return -ENOMEM;
  }
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  rc = pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0) {
    free(s);
    return -rc;
  }
  if ((rc = pthread_mutex_init(&s->mu, NULL)) != 0) {
    pthread_cond_destroy(&s->cv);
    free(s);
    return -rc;
  }
  int fd = -1;
  rc = listen_on(opts->bind, &fd, &s->port);
  if (rc < 0) {
    server_free(s);
    return rc;
  }
  /* Handles first, so the server threads never see an uninitialised async. */
  if ((rc = uv_async_init(loop, &s->wake, on_wake)) < 0) {
    close(fd);
    server_free(s);
    return rc;
  }
  s->wake.data = s;
  s->open_handles = 1;
  uv_timer_init(loop, &s->heartbeat);
  s->heartbeat.data = s;
  s->open_handles++;
  atomic_store(&s->last_beat_ms, kc_clock_now_ms());
  uv_timer_start(&s->heartbeat, on_heartbeat, s->heartbeat_ms, s->heartbeat_ms);
  if (s->tls && (rc = kc_tlscert_activate(s->tls)) < 0) {
    kc_error("httpserver", "another TLS listener is active in this process: cannot serve TLS on %s", opts->bind);
    close(fd);
    kc_httpserver_close(s);
    return rc;
  }
  struct MHD_OptionItem tls_opts[] = {
      {s->tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, 0, s->tls ? kc_tlscert_retrieve_fn() : NULL},
      {MHD_OPTION_END, 0, NULL},
  };
  s->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                                MHD_USE_ERROR_LOG | (s->tls ? MHD_USE_TLS : 0),
                            0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, 32u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
  if (!s->mhd) {
    kc_error("httpserver", "libmicrohttpd refused to start on %s", opts->bind);
    close(fd);
    s->mhd = NULL;
    kc_httpserver_close(s);
    return -EIO;
  }
  /* "serving ... port=N" names the metrics port (tests and docs read it). */
  if (endpoints == KC_HTTP_PROBES)
    kc_info("httpserver", "health probes /livez /readyz /healthz listening bind=%s port=%u", opts->bind,
            (unsigned)s->port);
  else
    kc_info("httpserver", "serving /metrics /debug/informers%s%s bind=%s port=%u%s%s",
            s->hooks.admin ? " /debug/queues /debug/keys /debug/trace" : "",
            endpoints & KC_HTTP_PROBES ? " /livez /readyz /healthz" : "", opts->bind, (unsigned)s->port,
            s->tls ? " tls=on" : "", s->authorize ? " authorization=on" : "");
  *out = s;
  return 0;
}

uint16_t kc_httpserver_port(const kc_httpserver *s) { return s ? s->port : 0; }

void kc_httpserver_close(kc_httpserver *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->closing = true;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (s->mhd) MHD_stop_daemon(s->mhd); /* joins every server thread, closes the socket */
  s->mhd = NULL;
  if (s->tls) kc_tlscert_deactivate(s->tls);
  uv_timer_stop(&s->heartbeat);
  uv_close((uv_handle_t *)&s->heartbeat, on_closed);
  uv_close((uv_handle_t *)&s->wake, on_closed);
}
