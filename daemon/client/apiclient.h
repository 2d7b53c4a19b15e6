/* SPDX-License-Identifier: Apache-2.0 */
/* apiclient: the Kubernetes request layer on top of http.c.
 *
 * Owns the connection config (server URL, TLS material, proxy, bearer token,
 * token file or exec credential plugin (execcred.h)) and applies it to every
 * request with the headers of contract
 * Appendix B: Accept (application/json unless given), User-Agent
 * kctrld/<version>, Authorization: Bearer, Content-Type on writes. Token
 * files are re-read when the cached copy is older than 50 s (client-go: one
 * minute, refreshed 10 s early) and after a 401 answered to a request made
 * with the current copy. An exec plugin's credential is read per request
 * (never waiting on the loop thread; a worker waits for a running plugin)
 * and a 401 re-runs the plugin once per credential generation; kc_api_do
 * retries a request that got a 401 once when the credential changed.
 *
 * Errors from the server are parsed into a kc_status (kstatus.h, docs/api-contract.md
 * section 6): a Status body is used as is; any other body (plain text from APF, HTML
 * from a proxy, empty) is mapped by HTTP code as client-go does. Retry-After
 * (integer seconds) fills retry_after_seconds when the body has none.
 *
 * Every attempt is counted in client-go's rest_client_requests_total and
 * every request but a watch timed in rest_client_request_duration_seconds
 * (restmetrics.h), on both ways to send.
 *
 * Two ways to send:
 *  - kc_api_request: asynchronous, on the loop (reflectors, discovery,
 *    lease). Successful (2xx) bodies are streamed to on_data as they arrive;
 *    error bodies are collected (up to 64 KiB) and parsed for on_done.
 *  - kc_api_do: synchronous, for worker threads, on a kc_api_worker (one
 *    reused curl easy handle per worker thread, with a timeout). Workers
 *    write to the API server without touching the loop.
 *
 * Context: kc_api_new / kc_api_close / kc_api_request / kc_api_cancel: loop
 * thread only (kc_api_new may run before the loop starts). kc_api_worker_*,
 * kc_api_do, kc_api_is_* and kc_api_status_parse: any thread; a
 * kc_api_worker is used by one thread at a time. The kc_api itself is
 * shared read-only (its token cache is locked).
 * Errors: 0 or a negative errno. Functions taking callbacks never call them
 * when they fail.
 * Ownership: documented per function; strings in results are borrowed.
 */
#ifndef KC_APICLIENT_H
#define KC_APICLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "client/http.h"
#include "client/kubeconfig.h"
#include "kube/kstatus.h"

typedef struct kc_api kc_api;
typedef struct kc_api_call kc_api_call;
typedef struct kc_api_worker kc_api_worker;

/* Classification (client-go rules: the reason first, the code only when the
 * reason is empty or unknown). */
bool kc_api_is_not_found(const kc_status *st);
bool kc_api_is_already_exists(const kc_status *st);
bool kc_api_is_conflict(const kc_status *st);
bool kc_api_is_gone(const kc_status *st); /* 410 Expired or Gone */
bool kc_api_is_unauthorized(const kc_status *st);
bool kc_api_is_forbidden(const kc_status *st);
bool kc_api_is_invalid(const kc_status *st);
bool kc_api_is_too_many_requests(const kc_status *st);
/* 429, any 5xx, and reasons ServerTimeout / Timeout / ServiceUnavailable /
 * TooManyRequests / InternalError. */
bool kc_api_is_retryable(const kc_status *st);
/* 504 Timeout whose cause is ResourceVersionTooLarge (or whose message says
 * "Too large resource version"). */
bool kc_api_is_too_large_rv(const kc_status *st);

/* Fills st from an HTTP status, a response body (may be NULL) and the
 * Retry-After header value (may be NULL): a Status body as kc_status_parse
 * reads it (its code, else the HTTP one), any other body mapped by HTTP code.
 * `method` picks AlreadyExists vs Conflict for a non-Status 409.
 * Context: any thread. */
void kc_api_status_parse(kc_status *st, long code, const char *method, const char *body,
                         size_t len, const char *retry_after, size_t retry_after_len);

/* Creates a client from resolved credentials (copied). `loop` may be NULL
 * for a client used only through workers. Returns 0, -ENOMEM, -EIO. */
int kc_api_new(uv_loop_t *loop, const kc_kube_creds *creds, kc_api **out);
/* Closes the async side (cancels requests without callbacks); the caller
 * runs the loop afterwards to let handles close. Every worker must be freed
 * before. kc_api_close(NULL) is a no-op. */
void kc_api_close(kc_api *api);
/* With an exec credential plugin (execcred.h): waits up to wait_ms for its
 * first credential. Blocks: call before the loop runs (daemon startup).
 * Returns 0, or -EAGAIN when none came in time (requests then go without
 * until it does). Without a plugin returns 0 at once. */
int kc_api_prime_credentials(kc_api *api, uint64_t wait_ms);

/* Whether the API server answers and accepts the credential, from every
 * request's outcome: any HTTP answer other than 401/403 clears both
 * streaks; a 401/403 starts (or continues) the auth streak; a request with
 * no HTTP answer starts the unreachable streak. Copied by kc_api_health_get
 * (any thread). */
typedef struct kc_api_health {
  uint64_t auth_failing_since_ms;  /* monotonic ms of the streak's first 401/403; 0 = none */
  int64_t auth_failing_since_unix; /* the same moment, wall clock seconds (for messages) */
  char auth_status[48];            /* the latest: "401 Unauthorized" or "403 Forbidden" */
  uint64_t unreachable_since_ms;   /* monotonic ms of the first unanswered request; 0 = none */
  int64_t unreachable_since_unix;
  char unreachable_error[160];     /* the latest transport error */
} kc_api_health;

void kc_api_health_get(kc_api *api, kc_api_health *out);

/* Without an exec plugin: true. With one: whether it has given a valid
 * credential (never blocks). Any thread. */
bool kc_api_has_credential(kc_api *api);

/* fn(ud) runs on the loop thread soon after a different credential is
 * stored: an exec plugin's new credential (its first one too) or a token
 * file whose content changed. One listener; loop thread. 0, -EINVAL (no
 * loop, or one already set), -ENOMEM or a uv error. */
int kc_api_on_credentials(kc_api *api, void (*fn)(void *ud), void *ud);

typedef struct kc_api_result {
  int error;     /* 0: a response arrived (see status.code); else as kc_http_result */
  bool idle_timeout;
  kc_status status; /* filled for code >= 300 and transport errors */
  uint64_t body_bytes;
} kc_api_result;

typedef struct kc_api_request_opts {
  const char *method;       /* NULL = GET */
  const char *path;         /* "/api/v1/pods?limit=500" (path + query, escaped) */
  const char *accept;       /* NULL = application/json */
  const char *content_type; /* for bodies; NULL = application/json */
  const void *body;         /* copied */
  size_t body_len;
  uint64_t timeout_ms;      /* 0 = none (watches) */
  uint64_t idle_timeout_ms; /* 0 = off */
  /* Called once for a 2xx response; the Content-Type is readable with
   * kc_api_call_header. Return KC_HTTP_ABORT to stop. May be NULL. */
  int (*on_response)(kc_api_call *call, long status, void *ud);
  /* 2xx body bytes as they arrive. May be NULL. */
  int (*on_data)(kc_api_call *call, const char *buf, size_t len, void *ud);
  /* Exactly once unless cancelled. The call is freed after it returns. */
  void (*on_done)(kc_api_call *call, const kc_api_result *res, void *ud);
  void *ud;
} kc_api_request_opts;

/* Starts an asynchronous request. Returns 0 and *out (may be NULL), or
 * -EINVAL / -ENOMEM / -EIO. Context: loop thread. */
int kc_api_request(kc_api *api, const kc_api_request_opts *opts, kc_api_call **out);
/* Cancels: no callback runs afterwards; the call is freed. Safe inside the
 * call's own callbacks (a no-op inside its on_done). NULL is a no-op. */
void kc_api_cancel(kc_api_call *call);
/* Resumes a call whose on_data returned KC_HTTP_PAUSE (see kc_http_resume).
 * Context: loop thread, outside the call's callbacks. NULL is a no-op. */
void kc_api_call_resume(kc_api_call *call);

/* ---- synchronous requests from worker threads ---- */

typedef struct kc_api_response {
  int error;          /* 0, or a transport error as in kc_http_result */
  long code;          /* HTTP status, 0 if none */
  const char *body;   /* NUL-terminated; borrowed until the next kc_api_do on
                         this worker or kc_api_worker_free */
  size_t body_len;
  kc_status status; /* filled for code >= 300 and transport errors */
} kc_api_response;

/* Creates a worker handle (one per thread). Returns 0, -ENOMEM, -EIO. */
int kc_api_worker_new(kc_api *api, kc_api_worker **out);
void kc_api_worker_free(kc_api_worker *w);
/* Sends one request and waits for the whole response, at most timeout_ms
 * (0 = 30 s). On a 401 after which the token file holds a different token,
 * retries once. Returns 0 when a response arrived (whatever its code; see
 * out->code and out->status), or the negative transport error (also in
 * out->error). Context: the worker's thread. */
int kc_api_do(kc_api_worker *w, const char *method, const char *path, const char *content_type,
              const void *body, size_t body_len, uint64_t timeout_ms, kc_api_response *out);

/* --- Test seam: for tests only, not called by the daemon --- */
/* The default namespace of the credentials. Borrowed. */
const char *kc_api_namespace(const kc_api *api);

/* The underlying HTTP client (loop only). */
kc_http *kc_api_http(kc_api *api);

/* Response header of the call (see kc_http_req_header). */
const char *kc_api_call_header(const kc_api_call *call, const char *name, size_t *len);

#endif
