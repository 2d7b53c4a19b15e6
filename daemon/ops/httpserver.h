/* SPDX-License-Identifier: Apache-2.0 */
/* httpserver: the operator's HTTP endpoint on libmicrohttpd: /metrics
 * (Prometheus text 0.0.4), the probes /livez and /healthz (the loop is
 * alive) and /readyz (every readiness check passes), each with per-check
 * paths, ?verbose and ?exclude= (healthcheck.h), /debug/informers and
 * /debug/shards (JSON); anything else is 404, methods other than GET and
 * HEAD are 405. A server may serve only the metrics side (/metrics and
 * the debug documents) or only the probes: options.endpoints; the others are then 404.
 *
 * Threading (docs/api-contract.md 15.1: the loop owns all daemon state):
 * requests are served on libmicrohttpd's threads (one per connection, at most
 * 32), which never read daemon state. They read only what the loop
 * published under a mutex:
 *  - a heartbeat: a loop timer stamps the monotonic time every
 *    heartbeat_ms. The "ping" check fails once the stamp is older than
 *    stall_factor x heartbeat_ms: /livez and /healthz are ping alone and
 *    never wait for the loop (a hung loop fails liveness at once);
 *  - readiness answered from the current state: each /readyz request wakes
 *    the loop with uv_async_send and waits on a condition variable, at most
 *    probe_wait_ms, for the loop to run hooks.checks() after the request
 *    arrived (concurrent requests share one run). If the loop does not
 *    answer in time, ping fails ("did not answer") and the other lines are
 *    the last results, with their age;
 *  - a snapshot (metrics text + informers JSON): a scrape that finds the
 *    snapshot older than fresh_ms wakes the loop the same way and waits,
 *    at most scrape_wait_ms, for the loop to run hooks.collect() and swap
 *    in a new one; if the loop is wedged the scrape gets the last snapshot
 *    after that wait. Rendering happens on the loop into a back buffer; the
 *    lock is held only to swap buffers, so a scrape never blocks the loop
 *    and a wedged loop never blocks a scrape for long.
 *
 * With options.tls the listener speaks HTTPS only; with options.authorize
 * each request for /metrics and the debug documents is first put to it (on
 * the server thread: it may block, e.g. on an API request, for as long as
 * it likes within the 10 s connection timeout).
 *
 * Context: kc_httpserver_start/close: loop thread only (close stops and
 * joins the server threads). kc_httpserver_port: any thread.
 * Errors: 0 or a negative errno (-EINVAL for a bad bind address,
 * -EADDRINUSE ... from bind/listen).
 * Ownership: the registry is borrowed (it must outlive the server; the
 * server resets and renders it on the loop thread); hooks are copied;
 * options' strings are read during start only.
 */
#ifndef KC_HTTPSERVER_H
#define KC_HTTPSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/metrics.h"
#include "ops/adminreq.h"
#include "base/tlscert.h"
#include "ops/healthcheck.h"

typedef struct kc_httpserver kc_httpserver;

typedef struct kc_httpserver_hooks {
  /* Loop thread: set every sample into reg (already reset) and append the
   * /debug/informers document (a JSON value) to json (already empty). */
  void (*collect)(void *ud, kc_metrics *reg, kc_buf *json);
  /* Loop thread, per /readyz request: appends the readiness checks'
   * results (healthcheck.h). May be NULL (then ping is the only check). */
  void (*checks)(void *ud, kc_health_results *out);
  void *ud;
  /* Loop thread, with collect: append the /debug/shards document (a JSON
   * value) to json (already empty). NULL: "[]". */
  void (*collect_shards)(void *ud, kc_buf *json);
  /* Loop thread, per request of /debug/queues, /debug/keys?controller=C
   * [&state=S] and /debug/trace?controller=C&key=K (the read-only commands
   * of kctrld ctl): append the answer (ops/admin.h) to out; 0, or the
   * negative errno of an error answer (-ENOENT: 404, -EAGAIN: 503, else
   * 500). NULL: those paths are 404. The server thread waits for the loop
   * at most scrape_wait_ms (then 503). */
  int (*admin)(void *ud, const kc_admin_request *r, kc_buf *out);
} kc_httpserver_hooks;

enum {
  KC_HTTP_METRICS = 1u << 0, /* /metrics, /debug/informers, /debug/shards (and hooks.admin's) */
  KC_HTTP_PROBES = 1u << 1,  /* /livez, /readyz, /healthz and their checks */
};

typedef struct kc_httpserver_options {
  const char *bind;        /* "host:port", "[v6addr]:port", ":port" (all); "0"/NULL/"": disabled */
  unsigned endpoints;      /* KC_HTTP_* mask; 0: both */
  uint64_t heartbeat_ms;   /* 0: 1000 */
  unsigned stall_factor;   /* 0: 3 */
  uint64_t fresh_ms;       /* 0: 100 */
  uint64_t scrape_wait_ms; /* 0: 1000 */
  uint64_t probe_wait_ms;  /* 0: 500 (under kubelet's default 1 s probe timeout) */
  /* TLS: the certificate store served (borrowed; start activates it,
   * close deactivates it). NULL: plain HTTP. */
  kc_tlscert *tls;
  /* Server threads, before a metrics-side endpoint answers (never for the
   * probes): 0 lets the request through, else the HTTP status to answer
   * (401, 403, 500...) with msg (plain text) as the body. authorization is
   * the request's Authorization header or NULL; method is as sent ("GET"),
   * path is the URL path. NULL: every request passes. */
  unsigned (*authorize)(void *ud, const char *authorization, const char *method, const char *path,
                        char *msg, size_t cap);
  void *authorize_ud;
} kc_httpserver_options;

/* Parses a bind address into host (brackets removed, "" for all
 * interfaces) and port. Returns 0, 1 when the address says "disabled", or
 * -EINVAL. Any thread. */
int kc_httpserver_parse_bind(const char *bind, char *host, size_t hostcap, uint16_t *port);

/* Binds, listens and starts serving. Returns 0 with *out set, 0 with *out
 * NULL when the bind address disables the server, or a negative errno (the
 * reason is logged with the address). Port 0 picks a free port: read it
 * with kc_httpserver_port (it is also logged). */
int kc_httpserver_start(uv_loop_t *loop, kc_metrics *reg, const kc_httpserver_options *opts,
                        const kc_httpserver_hooks *hooks, kc_httpserver **out);

/* Stops serving (joins the server threads; waiting scrapes return at
 * once), closes the loop handles; memory is freed in their close callback.
 * kc_httpserver_close(NULL) is a no-op. */
void kc_httpserver_close(kc_httpserver *s);

/* --- Test seam: for tests only, not called by the daemon --- */
/* The bound TCP port. Any thread. */
uint16_t kc_httpserver_port(const kc_httpserver *s);

#endif
