/* SPDX-License-Identifier: Apache-2.0 */
/* apiclient: see apiclient.h. */
#include "client/apiclient.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "client/execcred.h"
#include "client/restmetrics.h"
#include "base/log.h"

#define COMPONENT "apiclient"
#define USER_AGENT "User-Agent: kctrld/" KCTRLD_VERSION
#define TOKEN_MAX_AGE_MS 50000 /* client-go: 1 min, refreshed 10 s early */
#define ERROR_BODY_MAX KC_STATUS_MAX_BYTES

struct kc_api {
  uv_loop_t *loop;
  kc_http *http;
  char *base;       /* URL prefix requests are sent to */
  char *connect_to; /* tls-server-name: "SNI:PORT:HOST:PORT" */
  kc_http_tls tls;  /* points into creds */
  kc_kube_creds *creds;
  kc_execcred *exec; /* exec credential plugin (its own locking), or NULL */
  pthread_mutex_t mu; /* guards the token cache below */
  char *token;
  uint64_t token_read_ms; /* monotonic; 0 = must read */
  uint64_t token_gen;     /* bumped whenever the cached token changes */
  struct cred_notice *notice; /* kc_api_on_credentials, or NULL */
  kc_api_health health;       /* under mu */
  char host[KC_REST_HOST_MAX]; /* the server URL's host:port, the metrics' host label */
};

/* Wakes the loop when a new credential is stored (any thread). */
typedef struct cred_notice {
  uv_async_t async;
  void (*fn)(void *ud);
  void *ud;
} cred_notice;

struct kc_api_call {
  kc_api *api;
  kc_http_req *req;
  int (*on_response)(kc_api_call *, long, void *);
  int (*on_data)(kc_api_call *, const char *, size_t, void *);
  void (*on_done)(kc_api_call *, const kc_api_result *, void *);
  void *ud;
  long status;
  uint64_t token_gen;
  bool in_done;
  bool counted;       /* its response (or failure) is in rest_client_requests_total */
  bool timed;         /* not a watch: its duration is observed when it ends */
  uint64_t start_ns;
  char method[16];
  kc_buf errbody; /* non-2xx body (its start), NUL-terminated */
};

struct kc_api_worker {
  kc_api *api;
  CURL *easy;
  struct curl_slist *connect_to;
  kc_buf body;
  char retry_after[32];
  char errbuf[CURL_ERROR_SIZE];
};

/* ---- Status ---- */

static const char *const known_reasons[] = {
    "Unauthorized", "Forbidden",         "NotFound",          "AlreadyExists",
    "Conflict",     "Gone",              "Invalid",           "ServerTimeout",
    "StoreReadError", "Timeout",         "TooManyRequests",   "BadRequest",
    "MethodNotAllowed", "NotAcceptable", "RequestEntityTooLarge", "UnsupportedMediaType",
    "InternalError", "Expired",          "ServiceUnavailable",
};

static bool reason_known(const char *r) {
  for (size_t i = 0; i < sizeof known_reasons / sizeof known_reasons[0]; i++)
    if (strcmp(r, known_reasons[i]) == 0) return true;
  return false;
}

/* client-go's reasonAndCodeForError test: the reason when set and known,
 * else the code. */
static bool is_reason(const kc_status *st, const char *reason, int code) {
  if (strcmp(st->reason, reason) == 0) return true;
  return code && st->code == code && !reason_known(st->reason);
}

bool kc_api_is_not_found(const kc_status *st) { return is_reason(st, "NotFound", 404); }
bool kc_api_is_already_exists(const kc_status *st) { return is_reason(st, "AlreadyExists", 0); }
bool kc_api_is_conflict(const kc_status *st) { return is_reason(st, "Conflict", 409); }
bool kc_api_is_gone(const kc_status *st) {
  return is_reason(st, "Expired", 410) || strcmp(st->reason, "Gone") == 0;
}
bool kc_api_is_unauthorized(const kc_status *st) { return is_reason(st, "Unauthorized", 401); }
bool kc_api_is_forbidden(const kc_status *st) { return is_reason(st, "Forbidden", 403); }
bool kc_api_is_invalid(const kc_status *st) { return is_reason(st, "Invalid", 422); }
bool kc_api_is_too_many_requests(const kc_status *st) {
  return strcmp(st->reason, "TooManyRequests") == 0 || st->code == 429;
}
bool kc_api_is_retryable(const kc_status *st) {
  if (st->code == 429 || st->code >= 500) return true;
  static const char *const r[] = {"ServerTimeout", "Timeout", "ServiceUnavailable",
                                  "TooManyRequests", "InternalError"};
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
    if (strcmp(st->reason, r[i]) == 0) return true;
  return false;
}
bool kc_api_is_too_large_rv(const kc_status *st) {
  if (!is_reason(st, "Timeout", 504)) return false;
  return st->rv_too_large || strstr(st->message, "Too large resource version") != NULL;
}

static void copy_str(char *dst, size_t cap, const char *src, size_t len) {
  if (len >= cap) len = cap - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

void kc_api_status_parse(kc_status *st, long code, const char *method, const char *body,
                         size_t len, const char *retry_after, size_t ra_len) {
  char why[120];
  why[0] = '\0';
  if (body && len && kc_status_parse(st, body, len, why, sizeof why) == 0) {
    if (!st->code) st->code = (int)code;
  } else {
    kc_status_clear(st);
    st->code = (int)code;
    const char *reason = "", *msg;
    switch (code) {
    case 400: reason = "BadRequest"; msg = "the server rejected our request for an unknown reason"; break;
    case 401: reason = "Unauthorized"; msg = "the server has asked for the client to provide credentials"; break;
    case 403: reason = "Forbidden"; msg = "the server does not allow access to the requested resource"; break;
    case 404: reason = "NotFound"; msg = "the server could not find the requested resource"; break;
    case 405: reason = "MethodNotAllowed"; msg = "the server does not allow this method on the requested resource"; break;
    case 406: reason = "NotAcceptable"; msg = "the server was unable to respond with a content type that the client supports"; break;
    case 409:
      reason = method && strcmp(method, "POST") == 0 ? "AlreadyExists" : "Conflict";
      msg = "the server reported a conflict";
      break;
    case 415: reason = "UnsupportedMediaType"; msg = "the server does not support the media type of the request"; break;
    case 422: reason = "Invalid"; msg = "the server rejected our request due to an error in our request"; break;
    case 429: reason = "TooManyRequests"; msg = "the server has received too many requests and has asked us to try again later"; break;
    case 503: reason = "ServiceUnavailable"; msg = "the server is currently unable to handle the request"; break;
    case 504: reason = "Timeout"; msg = "the server was unable to return a response in the time allotted, but may still be processing the request"; break;
    default:
      if (code >= 500) {
        reason = "InternalError";
        msg = "an error on the server has prevented the request from succeeding";
      } else {
        msg = "unexpected response from the server";
      }
    }
    copy_str(st->reason, sizeof st->reason, reason, strlen(reason));
    /* Keep the server's text (APF's plain text, a proxy's page) for the log;
     * of a Status nested too deep, what was wrong with it. */
    size_t n = 0;
    while (body && n < len && n < 200 && body[n] != '\n' && body[n] != '\r') n++;
    if (why[0]) snprintf(st->message, sizeof st->message, "%s (unreadable Status body: %s)", msg, why);
    else if (n) snprintf(st->message, sizeof st->message, "%s (%.*s)", msg, (int)n, body);
    else copy_str(st->message, sizeof st->message, msg, strlen(msg));
  }
  if (st->retry_after_seconds < 0 && retry_after && ra_len && ra_len < 10) {
    int v = 0;
    size_t i = 0;
    for (; i < ra_len && retry_after[i] >= '0' && retry_after[i] <= '9'; i++)
      v = v * 10 + (retry_after[i] - '0');
    if (i == ra_len) st->retry_after_seconds = v;
  }
}

static void transport_status(kc_status *st, const char *message) {
  kc_status_clear(st);
  copy_str(st->message, sizeof st->message, message, strlen(message));
}

/* ---- token ---- */

static int read_token_file(const char *path, char **out) {
  FILE *f = fopen(path, "re");
  if (!f) return -errno;
  char *buf = malloc(16385);
  if (!buf) {
    fclose(f);
    return -ENOMEM;
  }
  size_t n = fread(buf, 1, 16384, f);
  fclose(f);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) n--;
  buf[n] = '\0';
  *out = buf;
  return 0;
}

/* The exec plugin's credential: the header line and, in *cred, a client
 * certificate for the TLS settings. Waits up to wait_ms (0 on the loop). */
static int exec_auth(kc_api *api, uint64_t wait_ms, char **out, uint64_t *gen,
                     kc_exec_cred *cred) {
  uint64_t stale = *gen; /* in: a generation a 401 rejected, or 0 */
  int rc = kc_execcred_current(api->exec, wait_ms, stale, cred, gen);
  if (rc == -EAGAIN) return 0; /* none yet: sent without; a 401 asks again */
  if (rc < 0) return rc;
  if (cred->token && asprintf(out, "Authorization: Bearer %s", cred->token) < 0) {
    *out = NULL;
    kc_exec_cred_clear(cred);
    return -ENOMEM;
  }
  return 0;
}

/* Returns a malloc'd "Authorization: Bearer ..." line (or NULL when there is
 * no token) and the token generation it was built from; with an exec plugin
 * also its credential in *cred (cleared by the caller; may be NULL when
 * only the generation matters). */
static int auth_header_ex(kc_api *api, uint64_t wait_ms, char **out, uint64_t *gen,
                          kc_exec_cred *cred) {
  *out = NULL;
  if (api->exec) {
    kc_exec_cred tmp;
    int rc = exec_auth(api, wait_ms, out, gen, cred ? cred : &tmp);
    if (!cred) kc_exec_cred_clear(&tmp);
    return rc;
  }
  *gen = 0;
  if (!api->creds->token && !api->creds->token_file) return 0;
  pthread_mutex_lock(&api->mu);
  if (!api->creds->token) {
    uint64_t now = kc_clock_now_ms();
    if (!api->token || api->token_read_ms == 0 || now - api->token_read_ms >= TOKEN_MAX_AGE_MS) {
      char *fresh = NULL;
      int rc = read_token_file(api->creds->token_file, &fresh);
      if (rc == 0) {
        if (!api->token || strcmp(api->token, fresh) != 0) {
          if (api->token && api->notice) uv_async_send(&api->notice->async);
          api->token_gen++;
        }
        if (api->token) explicit_bzero(api->token, strlen(api->token));
        free(api->token);
        api->token = fresh;
        api->token_read_ms = now;
      } else if (!api->token) {
        pthread_mutex_unlock(&api->mu);
        kc_error(COMPONENT, "cannot read token file path=%s error=\"%s\"",
                 api->creds->token_file, strerror(-rc));
        return 0; /* send without; the server answers 401 */
      } else {
        kc_warn(COMPONENT, "cannot re-read token file, keeping the cached token path=%s "
                "error=\"%s\"", api->creds->token_file, strerror(-rc));
      }
    }
  }
  const char *tok = api->creds->token ? api->creds->token : api->token;
  int rc = asprintf(out, "Authorization: Bearer %s", tok) < 0 ? -ENOMEM : 0;
  if (rc < 0) *out = NULL;
  *gen = api->token_gen;
  pthread_mutex_unlock(&api->mu);
  return rc;
}


/* What answered a request: feeds kc_api_health. code 0 with error: no
 * HTTP answer (connection, TLS, timeout). Any thread. */
static void note_outcome(kc_api *api, long code, int error, const char *message) {
  if (!api) return;
  pthread_mutex_lock(&api->mu);
  kc_api_health *h = &api->health;
  uint64_t now = kc_clock_now_ms();
  if (code == 0 && error) {
    if (!h->unreachable_since_ms) {
      h->unreachable_since_ms = now;
      h->unreachable_since_unix = (int64_t)time(NULL);
    }
    snprintf(h->unreachable_error, sizeof h->unreachable_error, "%s",
             message && *message ? message : strerror(-error));
  } else if (code == 401 || code == 403) {
    h->unreachable_since_ms = 0;
    if (!h->auth_failing_since_ms) {
      h->auth_failing_since_ms = now;
      h->auth_failing_since_unix = (int64_t)time(NULL);
    }
    snprintf(h->auth_status, sizeof h->auth_status, "%ld %s", code,
             code == 401 ? "Unauthorized" : "Forbidden");
  } else if (code > 0) {
    h->unreachable_since_ms = h->auth_failing_since_ms = 0;
  }
  pthread_mutex_unlock(&api->mu);
}

void kc_api_health_get(kc_api *api, kc_api_health *out) {
  pthread_mutex_lock(&api->mu);
  *out = api->health;
  pthread_mutex_unlock(&api->mu);
}

bool kc_api_has_credential(kc_api *api) {
  if (!api->exec) return true;
  kc_exec_cred cred;
  uint64_t gen;
  int rc = kc_execcred_current(api->exec, 0, 0, &cred, &gen);
  kc_exec_cred_clear(&cred);
  return rc == 0;
}

static void on_cred_notice(uv_async_t *a) {
  cred_notice *n = a->data;
  n->fn(n->ud);
}

static void exec_new_cred(void *ud) {
  cred_notice *n = ud;
  uv_async_send(&n->async);
}

int kc_api_on_credentials(kc_api *api, void (*fn)(void *ud), void *ud) {
  if (!api->loop || !fn || api->notice) return -EINVAL;
  cred_notice *n = calloc(1, sizeof *n);
  if (!n) return -ENOMEM;
  n->fn = fn;
  n->ud = ud;
  int rc = uv_async_init(api->loop, &n->async, on_cred_notice);
  if (rc < 0) {
    free(n);
    return rc;
  }
  n->async.data = n;
  pthread_mutex_lock(&api->mu);
  api->notice = n;
  pthread_mutex_unlock(&api->mu);
  if (api->exec) kc_execcred_on_new(api->exec, exec_new_cred, n);
  return 0;
}

static void on_notice_closed(uv_handle_t *h) { free(h->data); }

static void free_secret(char *s) {
  if (!s) return;
  explicit_bzero(s, strlen(s));
  free(s);
}

/* A 401 to a request sent with generation `gen` discards that token (an
 * exec plugin is re-run, once per generation). */
static void token_rejected(kc_api *api, uint64_t gen) {
  if (api->exec) {
    kc_execcred_rejected(api->exec, gen);
    return;
  }
  pthread_mutex_lock(&api->mu);
  if (gen == api->token_gen) api->token_read_ms = 0;
  pthread_mutex_unlock(&api->mu);
}

/* ---- client ---- */

static char *dup_mem(const char *p, size_t n) {
  char *r = malloc(n + 1);
  if (!r) return NULL;
  memcpy(r, p, n);
  r[n] = '\0';
  return r;
}

static char *dup_opt(const char *s, bool *fail) {
  if (!s) return NULL;
  char *r = strdup(s);
  if (!r) *fail = true;
  return r;
}

/* Computes the URL prefix; with tls-server-name the URL names that host and
 * CURLOPT_CONNECT_TO sends the connection to the real one. */
static int set_base(kc_api *api) {
  const char *server = api->creds->server;
  const char *sni = api->creds->tls_server_name;
  if (!sni) {
    api->base = strdup(server);
    return api->base ? 0 : -ENOMEM;
  }
  const char *p = strstr(server, "://");
  if (!p) return -EINVAL;
  const char *host = p + 3, *hend, *rest;
  if (*host == '[') {
    hend = strchr(host, ']');
    if (!hend) return -EINVAL;
    hend++;
  } else {
    hend = host + strcspn(host, ":/");
  }
  const char *port = strncmp(server, "https", 5) == 0 ? "443" : "80";
  size_t portlen = strlen(port);
  rest = hend;
  if (*rest == ':') {
    port = rest + 1;
    portlen = strcspn(port, "/");
    rest = port + portlen;
  }
  if (asprintf(&api->base, "%.*s%s:%.*s%s", (int)(host - server), server, sni, (int)portlen,
               port, rest) < 0 ||
      asprintf(&api->connect_to, "%s:%.*s:%.*s:%.*s", sni, (int)portlen, port,
               (int)(hend - host), host, (int)portlen, port) < 0)
    return -ENOMEM;
  api->tls.connect_to = api->connect_to;
  return 0;
}

int kc_api_new(uv_loop_t *loop, const kc_kube_creds *creds, kc_api **out) {
  int rc = kc_http_global_init();
  if (rc < 0) return rc;
  kc_api *api = calloc(1, sizeof *api);
  if (!api) return -ENOMEM;
  kc_kube_creds *c = calloc(1, sizeof *c);
  bool fail = !c;
  if (c) {
    c->server = dup_opt(creds->server, &fail);
    c->ca_file = dup_opt(creds->ca_file, &fail);
    c->cert_file = dup_opt(creds->cert_file, &fail);
    c->key_file = dup_opt(creds->key_file, &fail);
    c->token = dup_opt(creds->token, &fail);
    c->token_file = dup_opt(creds->token_file, &fail);
    c->tls_server_name = dup_opt(creds->tls_server_name, &fail);
    c->namespace_ = dup_opt(creds->namespace_ ? creds->namespace_ : "default", &fail);
    c->source = dup_opt(creds->source, &fail);
    c->proxy_url = dup_opt(creds->proxy_url, &fail);
    c->insecure = creds->insecure;
    c->in_cluster = creds->in_cluster;
    if (creds->ca_data && !(c->ca_data = dup_mem(creds->ca_data, creds->ca_len))) fail = true;
    if (creds->cert_data && !(c->cert_data = dup_mem(creds->cert_data, creds->cert_len)))
      fail = true;
    if (creds->key_data && !(c->key_data = dup_mem(creds->key_data, creds->key_len))) fail = true;
    c->ca_len = creds->ca_len;
    c->cert_len = creds->cert_len;
    c->key_len = creds->key_len;
  }
  api->creds = c;
  if (c && c->server) { /* paths start with '/' */
    size_t n = strlen(c->server);
    while (n > 0 && c->server[n - 1] == '/') c->server[--n] = '\0';
  }
  if (fail || !creds->server) {
    kc_kube_creds_free(c);
    free(api);
    return fail ? -ENOMEM : -EINVAL;
  }
  api->tls = (kc_http_tls){.ca_file = c->ca_file, .ca_data = c->ca_data, .ca_len = c->ca_len,
                           .cert_file = c->cert_file, .cert_data = c->cert_data,
                           .cert_len = c->cert_len, .key_file = c->key_file,
                           .key_data = c->key_data, .key_len = c->key_len,
                           .insecure = c->insecure, .proxy = c->proxy_url};
  pthread_mutex_init(&api->mu, NULL);
  api->loop = loop;
  kc_rest_host_of(c->server, api->host, sizeof api->host);
  rc = set_base(api);
  if (rc == 0 && loop) rc = kc_http_new(loop, &api->http);
  if (rc == 0 && creds->exec) rc = kc_execcred_new(creds, &api->exec);
  if (rc < 0) {
    api->http = NULL;
    kc_api_close(api);
    return rc;
  }
  *out = api;
  return 0;
}

void kc_api_close(kc_api *api) {
  if (!api) return;
  kc_http_close(api->http);
  kc_execcred_free(api->exec); /* joins its thread: no notice is sent after */
  if (api->notice) uv_close((uv_handle_t *)&api->notice->async, on_notice_closed);
  pthread_mutex_destroy(&api->mu);
  free_secret(api->token);
  free(api->base);
  free(api->connect_to);
  kc_kube_creds_free(api->creds);
  free(api);
}

const char *kc_api_namespace(const kc_api *api) { return api->creds->namespace_; }

int kc_api_prime_credentials(kc_api *api, uint64_t wait_ms) {
  if (!api->exec) return 0;
  kc_exec_cred cred;
  uint64_t gen;
  int rc = kc_execcred_current(api->exec, wait_ms, 0, &cred, &gen);
  kc_exec_cred_clear(&cred);
  return rc;
}

/* The TLS settings of one request: the client's, with the exec plugin's
 * client certificate when it gave one. */
static kc_http_tls request_tls(const kc_api *api, const kc_exec_cred *cred) {
  kc_http_tls t = api->tls;
  if (cred->cert && cred->key) {
    t.cert_file = t.key_file = NULL;
    t.cert_data = cred->cert;
    t.cert_len = cred->cert_len;
    t.key_data = cred->key;
    t.key_len = cred->key_len;
  }
  return t;
}
kc_http *kc_api_http(kc_api *api) { return api->http; }

/* ---- async calls ---- */

static void free_call(kc_api_call *call) {
  kc_buf_free(&call->errbody);
  free(call);
}

/* A watch (?watch=true, also a streaming list): counted when it starts, not
 * timed, as client-go's Watch. */
static bool is_watch(const char *path) {
  const char *q = strchr(path, '?');
  for (const char *p = q; p; p = strchr(p + 1, '&')) {
    if (strncmp(p + 1, "watch=", 6) == 0) {
      const char *v = p + 7;
      size_t n = strcspn(v, "&#");
      return (n == 4 && strncmp(v, "true", 4) == 0) || (n == 1 && v[0] == '1');
    }
  }
  return false;
}

static double seconds_since(uint64_t start_ns) {
  uint64_t now = kc_clock_now_ns();
  return now > start_ns ? (double)(now - start_ns) / 1e9 : 0;
}

static int call_on_response(kc_http_req *req, long status, void *ud) {
  kc_api_call *call = ud;
  call->status = status;
  note_outcome(call->api, status, 0, NULL);
  if (!call->counted) {
    call->counted = true;
    kc_rest_metrics_result(call->method, call->api->host, status);
  }
  if (status >= 200 && status < 300 && call->on_response)
    return call->on_response(call, status, call->ud);
  return KC_HTTP_CONTINUE;
}

static int call_on_data(kc_http_req *req, const char *buf, size_t len, void *ud) {
  kc_api_call *call = ud;
  if (call->status >= 200 && call->status < 300)
    return call->on_data ? call->on_data(call, buf, len, call->ud) : KC_HTTP_CONTINUE;
  size_t have = call->errbody.len;
  if (have >= ERROR_BODY_MAX) return KC_HTTP_CONTINUE; /* keep the start only */
  /* Out of memory keeps what came so far: the status is still reported, by code. */
  kc_buf_add(&call->errbody, buf, len > ERROR_BODY_MAX - have ? ERROR_BODY_MAX - have : len);
  return KC_HTTP_CONTINUE;
}

void kc_api_call_resume(kc_api_call *call) {
  if (call) kc_http_resume(call->req);
}

static void call_on_done(kc_http_req *req, const kc_http_result *hr, void *ud) {
  kc_api_call *call = ud;
  kc_api_result res = {.error = hr->error, .idle_timeout = hr->idle_timeout,
                       .body_bytes = hr->body_bytes};
  if (!call->status) note_outcome(call->api, hr->status, hr->error, hr->message);
  if (!call->counted) {
    call->counted = true;
    kc_rest_metrics_result(call->method, call->api->host, hr->status);
  }
  if (call->timed) kc_rest_metrics_latency(call->method, call->api->host, seconds_since(call->start_ns));
  if (hr->error) {
    transport_status(&res.status, hr->message);
    res.status.code = (int)hr->status;
  } else if (hr->status >= 300) {
    size_t ralen = 0;
    const char *ra = kc_http_req_header(req, "Retry-After", &ralen);
    kc_api_status_parse(&res.status, hr->status, call->method, call->errbody.p, call->errbody.len, ra,
                        ralen);
    if (hr->status == 401) token_rejected(call->api, call->token_gen);
  } else {
    res.status.code = (int)hr->status;
    res.status.retry_after_seconds = -1;
  }
  if (call->on_done) {
    call->in_done = true;
    call->on_done(call, &res, call->ud);
  }
  free_call(call);
}

static int build_headers(kc_api *api, uint64_t wait_ms, kc_exec_cred *cred, const char *accept,
                         const char *content_type, bool body, char **auth, uint64_t *gen,
                         char *accept_buf, size_t accept_cap, char *ct_buf, size_t ct_cap,
                         const char **hdrs, size_t *n) {
  *n = 0;
  snprintf(accept_buf, accept_cap, "Accept: %s", accept ? accept : "application/json");
  hdrs[(*n)++] = accept_buf;
  hdrs[(*n)++] = USER_AGENT;
  int rc = auth_header_ex(api, wait_ms, auth, gen, cred);
  if (rc < 0) return rc;
  if (*auth) hdrs[(*n)++] = *auth;
  if (body) {
    snprintf(ct_buf, ct_cap, "Content-Type: %s", content_type ? content_type : "application/json");
    hdrs[(*n)++] = ct_buf;
  }
  return 0;
}

int kc_api_request(kc_api *api, const kc_api_request_opts *o, kc_api_call **out) {
  if (out) *out = NULL;
  if (!api->http || !o || !o->path || o->path[0] != '/') return -EINVAL;
  kc_api_call *call = calloc(1, sizeof *call);
  if (!call) return -ENOMEM;
  call->api = api;
  call->on_response = o->on_response;
  call->on_data = o->on_data;
  call->on_done = o->on_done;
  call->ud = o->ud;
  snprintf(call->method, sizeof call->method, "%s", o->method ? o->method : "GET");
  call->timed = !is_watch(o->path);
  call->start_ns = kc_clock_now_ns();
  char *url = NULL, *auth = NULL;
  char accept[256], ct[128];
  const char *hdrs[4];
  size_t n;
  kc_exec_cred cred = {0};
  int rc = build_headers(api, 0, &cred, o->accept, o->content_type, o->body != NULL, &auth,
                         &call->token_gen, accept, sizeof accept, ct, sizeof ct, hdrs, &n);
  kc_http_tls tls = request_tls(api, &cred);
  if (rc == 0 && asprintf(&url, "%s%s", api->base, o->path) < 0) {
    url = NULL;
    rc = -ENOMEM;
  }
  if (rc == 0) {
    kc_http_request_opts ho = {.method = call->method, .url = url, .headers = hdrs,
                               .nheaders = n, .body = o->body, .body_len = o->body_len,
                               .timeout_ms = o->timeout_ms,
                               .idle_timeout_ms = o->idle_timeout_ms, .tls = &tls,
                               .on_response = call_on_response, .on_data = call_on_data,
                               .on_done = call_on_done, .ud = call};
    rc = kc_http_request(api->http, &ho, &call->req);
  }
  free(url);
  free_secret(auth);
  kc_exec_cred_clear(&cred); /* libcurl copied the blobs */
  if (rc < 0) {
    free_call(call);
    return rc;
  }
  if (out) *out = call;
  return 0;
}

void kc_api_cancel(kc_api_call *call) {
  if (!call || call->in_done) return;
  kc_http_cancel(call->req);
  free_call(call);
}

const char *kc_api_call_header(const kc_api_call *call, const char *name, size_t *len) {
  return kc_http_req_header(call->req, name, len);
}

/* ---- synchronous requests (worker threads) ---- */

static size_t worker_write(char *buf, size_t size, size_t nmemb, void *ud) {
  kc_api_worker *w = ud;
  size_t len = size * nmemb;
  kc_buf_add(&w->body, buf, len);
  if (w->body.err) return 0;
  return len;
}

static size_t worker_header(char *buf, size_t size, size_t nmemb, void *ud) {
  kc_api_worker *w = ud;
  size_t len = size * nmemb;
  if (len > 12 && strncasecmp(buf, "Retry-After:", 12) == 0) {
    const char *v = buf + 12, *e = buf + len;
    while (v < e && (*v == ' ' || *v == '\t')) v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ')) e--;
    copy_str(w->retry_after, sizeof w->retry_after, v, (size_t)(e - v));
  }
  return len;
}

int kc_api_worker_new(kc_api *api, kc_api_worker **out) {
  kc_api_worker *w = calloc(1, sizeof *w);
  if (!w) return -ENOMEM;
  w->api = api;
  w->easy = curl_easy_init();
  if (!w->easy) {
    free(w);
    return -ENOMEM;
  }
  int rc = kc_http_easy_defaults(w->easy, 0);
  if (rc == 0) rc = kc_http_easy_tls(w->easy, &api->tls);
  if (rc == 0 && api->connect_to) {
    w->connect_to = curl_slist_append(NULL, api->connect_to);
    if (!w->connect_to ||
        curl_easy_setopt(w->easy, CURLOPT_CONNECT_TO, w->connect_to) != CURLE_OK)
      rc = -ENOMEM;
  }
  CURLcode c = CURLE_OK;
  c |= curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, worker_write);
  c |= curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
  c |= curl_easy_setopt(w->easy, CURLOPT_HEADERFUNCTION, worker_header);
  c |= curl_easy_setopt(w->easy, CURLOPT_HEADERDATA, w);
  c |= curl_easy_setopt(w->easy, CURLOPT_ERRORBUFFER, w->errbuf);
  if (rc == 0 && c != CURLE_OK) rc = -EIO;
  if (rc < 0) {
    kc_api_worker_free(w);
    return rc;
  }
  *out = w;
  return 0;
}

void kc_api_worker_free(kc_api_worker *w) {
  if (!w) return;
  curl_easy_cleanup(w->easy);
  curl_slist_free_all(w->connect_to);
  kc_buf_free(&w->body);
  free(w);
}

static int do_once(kc_api_worker *w, const char *method, const char *path,
                   const char *content_type, const void *body, size_t body_len,
                   uint64_t timeout_ms, kc_api_response *out, uint64_t *gen) {
  kc_api *api = w->api;
  CURL *e = w->easy;
  char *url = NULL, *auth = NULL;
  char accept[64], ct[128];
  const char *hdrs[5];
  size_t n;
  kc_exec_cred cred = {0};
  int rc = build_headers(api, timeout_ms ? timeout_ms : 30000, &cred, NULL, content_type,
                         body != NULL, &auth, gen, accept, sizeof accept, ct, sizeof ct, hdrs, &n);
  if (rc < 0) return rc;
  if (cred.cert) { /* the plugin's certificate may change: set per request */
    kc_http_tls t = request_tls(api, &cred);
    rc = kc_http_easy_tls(e, &t);
  }
  if (body) hdrs[n++] = "Expect:";
  struct curl_slist *list = NULL;
  for (size_t i = 0; i < n && rc == 0; i++) {
    struct curl_slist *l = curl_slist_append(list, hdrs[i]);
    if (!l) rc = -ENOMEM;
    else list = l;
  }
  if (rc == 0 && asprintf(&url, "%s%s", api->base, path) < 0) {
    url = NULL;
    rc = -ENOMEM;
  }
  if (rc < 0) goto out;
  kc_buf_reset(&w->body);
  w->retry_after[0] = '\0';
  w->errbuf[0] = '\0';
  CURLcode c = CURLE_OK;
  c |= curl_easy_setopt(e, CURLOPT_URL, url);
  c |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
  c |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(timeout_ms ? timeout_ms : 30000));
  /* Reset the method state left by the previous request. */
  c |= curl_easy_setopt(e, CURLOPT_NOBODY, 0L);
  c |= curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  c |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, NULL);
  if (strcmp(method, "HEAD") == 0) c |= curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  if (body) {
    c |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    c |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  }
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 &&
      !(body && strcmp(method, "POST") == 0))
    c |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  if (c != CURLE_OK) {
    rc = -EINVAL;
    goto out;
  }
  CURLcode res = curl_easy_perform(e);
  long code = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
  /* The response's code even when its body then failed (client-go counts
   * the attempt when the headers arrive). */
  kc_rest_metrics_result(method, api->host, code);
  out->body = w->body.p ? w->body.p : "";
  out->body_len = w->body.len;
  out->code = code;
  note_outcome(api, code, res != CURLE_OK ? kc_http_map_curl_error(res) : 0,
               w->errbuf[0] ? w->errbuf : curl_easy_strerror(res));
  if (res != CURLE_OK) {
    out->error = rc = kc_http_map_curl_error(res);
    transport_status(&out->status, w->errbuf[0] ? w->errbuf : curl_easy_strerror(res));
    out->status.code = (int)code;
  } else if (code >= 300) {
    kc_api_status_parse(&out->status, code, method, out->body, out->body_len, w->retry_after,
                        strlen(w->retry_after));
  } else {
    out->status.code = (int)code;
    out->status.retry_after_seconds = -1;
  }
out:
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, NULL);
  curl_slist_free_all(list);
  free(url);
  free_secret(auth);
  kc_exec_cred_clear(&cred);
  return rc;
}

int kc_api_do(kc_api_worker *w, const char *method, const char *path, const char *content_type,
              const void *body, size_t body_len, uint64_t timeout_ms, kc_api_response *out) {
  memset(out, 0, sizeof *out);
  out->body = "";
  if (!method) method = "GET";
  if (!path || path[0] != '/') return -EINVAL;
  uint64_t gen = 0;
  uint64_t start_ns = kc_clock_now_ns();
  int rc = do_once(w, method, path, content_type, body, body_len, timeout_ms, out, &gen);
  bool rotates = w->api->exec || (w->api->creds->token_file && !w->api->creds->token);
  if (rc == 0 && out->code == 401 && rotates) {
    /* A rotated token or a re-run plugin: retry once if it changed (as
     * client-go's exec round tripper refreshes after a 401). */
    token_rejected(w->api, gen);
    char *auth = NULL;
    uint64_t gen2 = gen; /* wait for a credential newer than the rejected one */
    if (auth_header_ex(w->api, timeout_ms ? timeout_ms : 30000, &auth, &gen2, NULL) == 0 &&
        gen2 != gen) {
      memset(out, 0, sizeof *out);
      rc = do_once(w, method, path, content_type, body, body_len, timeout_ms, out, &gen);
    }
    free_secret(auth);
  }
  if (!is_watch(path)) kc_rest_metrics_latency(method, w->api->host, seconds_since(start_ns));
  return rc;
}
