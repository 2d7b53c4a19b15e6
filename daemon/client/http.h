/* SPDX-License-Identifier: Apache-2.0 */
/* http: asynchronous HTTP client on libcurl's multi-socket API, driven by a
 * libuv loop (docs/api-contract.md 16.4).
 *
 * Owns: one CURLM, one uv_timer_t for libcurl's timeout, one uv_poll_t per
 * socket libcurl asks us to watch (keyed by socket, so HTTP/2 streams sharing
 * a connection share one poll handle), and every in-flight request. No
 * polling timers: the loop wakes only on socket readiness, libcurl's own
 * timeout and per-request inactivity timers.
 *
 * Responses are streamed: on_response(status) fires once the final response
 * headers are complete (headers readable with kc_http_req_header), then
 * on_data(buf, len) for every piece of body as it arrives (never buffered
 * whole), then on_done(result) exactly once. Callbacks may return
 * KC_HTTP_ABORT to stop the transfer (on_done then reports -ECANCELED).
 *
 * Re-entrancy: request callbacks may call kc_http_request (the new transfer
 * is started once libcurl has returned) and kc_http_cancel on any request,
 * including their own (deferred; no further callback of a cancelled request
 * runs, not even on_done). No libcurl function is ever called from inside a
 * libcurl callback.
 *
 * Context: every function here is loop thread only, except
 * kc_http_global_init (call once at startup before any thread exists).
 * Errors: 0 or a negative errno. A function that fails never invokes its
 * callbacks.
 * Ownership: a kc_http_req is owned by the kc_http; the caller's pointer is
 * valid until on_done returns or until kc_http_cancel returns, whichever is
 * first. All strings and the body passed in kc_http_request_opts are copied.
 */
#ifndef KC_HTTP_H
#define KC_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct kc_http kc_http;
typedef struct kc_http_req kc_http_req;

/* Return values of on_response / on_data. KC_HTTP_PAUSE (on_data only):
 * the bytes were NOT taken; the transfer stops reading the socket until
 * kc_http_resume, which hands the same bytes again. */
enum { KC_HTTP_CONTINUE = 0, KC_HTTP_ABORT = 1, KC_HTTP_PAUSE = 2 };

/* TLS settings of one request. Borrowed for the duration of
 * kc_http_request only (libcurl copies them). Data fields are PEM bytes and
 * win over the file forms. */
typedef struct kc_http_tls {
  const char *ca_file;
  const void *ca_data;
  size_t ca_len;
  const char *cert_file;
  const void *cert_data;
  size_t cert_len;
  const char *key_file;
  const void *key_data;
  size_t key_len;
  bool insecure; /* skip peer and host name verification */
  /* "HOST:PORT:CONNECT-HOST:CONNECT-PORT" (CURLOPT_CONNECT_TO), used to
   * verify a server name other than the URL's host (tls-server-name). */
  const char *connect_to;
  /* CURLOPT_PROXY (kubeconfig proxy-url: http://, https://, socks5://), or
   * NULL: then libcurl's usual proxy environment variables apply, as
   * client-go's ProxyFromEnvironment. */
  const char *proxy;
} kc_http_tls;

/* Outcome of one request, borrowed until on_done returns. */
typedef struct kc_http_result {
  /* 0: an HTTP response was received completely (see status). Otherwise
   * -ETIME (inactivity timer, see idle_timeout), -ETIMEDOUT (connect or total
   * timeout), -ECANCELED (a callback returned KC_HTTP_ABORT),
   * -ECONNREFUSED, -EHOSTUNREACH, -ECONNRESET (connection lost mid-way),
   * -EPROTO (TLS or protocol failure), -ENOMEM, -EIO (other). */
  int error;
  long status;          /* HTTP status of the final response; 0 if none */
  bool idle_timeout;    /* true exactly when error == -ETIME */
  const char *message;  /* curl's error text, or "HTTP <status>" */
  uint64_t body_bytes;  /* body bytes handed to on_data */
  long new_connections; /* connections opened for this request (0 = reused) */
  long http_version;    /* 11 or 20 (0 unknown) */
} kc_http_result;

typedef int (*kc_http_response_cb)(kc_http_req *req, long status, void *ud);
typedef int (*kc_http_data_cb)(kc_http_req *req, const char *buf, size_t len, void *ud);
typedef void (*kc_http_done_cb)(kc_http_req *req, const kc_http_result *res, void *ud);

typedef struct kc_http_request_opts {
  const char *method; /* NULL = "GET" */
  const char *url;
  const char *const *headers; /* "Name: value" lines, nheaders of them */
  size_t nheaders;
  const void *body; /* NULL = no body */
  size_t body_len;
  uint64_t connect_timeout_ms; /* 0 = 10 s */
  uint64_t timeout_ms;         /* whole transfer; 0 = none (watches) */
  uint64_t idle_timeout_ms;    /* no byte received for this long -> -ETIME; 0 = off */
  const kc_http_tls *tls;      /* NULL = system CA store */
  kc_http_response_cb on_response; /* may be NULL */
  kc_http_data_cb on_data;         /* may be NULL (body discarded) */
  kc_http_done_cb on_done;         /* may be NULL */
  void *ud;
} kc_http_request_opts;

/* Initialises libcurl once for the process. Context: main thread at
 * startup, before any other thread exists (idempotent). Returns 0 or -EIO. */
int kc_http_global_init(void);

/* Creates a client on `loop`. Returns 0 and *out, or -ENOMEM/-EIO. */
int kc_http_new(uv_loop_t *loop, kc_http **out);

/* Cancels every request without calling its callbacks, releases libcurl and
 * closes the handles; memory is freed from close callbacks, so the caller
 * runs the loop afterwards. Not from inside a request callback.
 * kc_http_close(NULL) is a no-op. */
void kc_http_close(kc_http *http);

/* Starts a request. Returns 0 and *out (may be NULL if the caller does not
 * need the handle), or -EINVAL (no url) / -ENOMEM / -EIO. */
int kc_http_request(kc_http *http, const kc_http_request_opts *opts, kc_http_req **out);

/* Stops a request; none of its callbacks run after this returns (if called
 * inside its own on_done, it is a no-op). The handle is invalid afterwards.
 * kc_http_cancel(NULL) is a no-op. */
void kc_http_cancel(kc_http_req *req);
/* Resumes a transfer paused by on_data returning KC_HTTP_PAUSE; on_data may
 * run (again) before this returns. A no-op for a request that is not paused.
 * Loop thread, not from inside this request's callbacks. */
void kc_http_resume(kc_http_req *req);

/* Returns the value of response header `name` (case-insensitive) of the
 * final response, trimmed, not NUL-terminated, length in *len; NULL when
 * absent. Valid from on_response until on_done returns. */
const char *kc_http_req_header(const kc_http_req *req, const char *name, size_t *len);

/* Helpers shared with synchronous users of libcurl (apiclient workers), so
 * that both paths configure transfers identically. `easy` is a CURL *.
 * kc_http_easy_defaults sets NOSIGNAL, HTTP/2 over TLS, TCP keepalive,
 * http/https only and the connect timeout (0 = 10 s); kc_http_easy_tls
 * applies tls except connect_to (proxy included). Return 0 or -EINVAL. Context: any thread,
 * on an easy handle the caller owns. */
int kc_http_easy_defaults(void *easy, uint64_t connect_timeout_ms);
int kc_http_easy_tls(void *easy, const kc_http_tls *tls);
/* Maps a CURLcode to the negative errno of kc_http_result.error. */
int kc_http_map_curl_error(int curl_code);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Number of requests in flight. */
size_t kc_http_active(const kc_http *http);

#endif
