/* SPDX-License-Identifier: Apache-2.0 */
/* http: see http.h. Integration of libcurl multi-socket with libuv follows
 * docs/api-contract.md 16.4 step by step. */
#include "client/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/log.h"

#define COMPONENT "http"

enum req_state {
  REQ_PENDING,  /* queued: created inside a libcurl callback, added later */
  REQ_ACTIVE,   /* in the multi handle */
  REQ_FINISHED, /* removed from the multi, on_done about to be dispatched */
};

struct kc_http_req {
  kc_http *http;
  kc_http_req *prev, *next; /* http->reqs (every live request) */
  kc_http_req *next_work;   /* http->pending / cancelled / finished list */
  CURL *easy;
  struct curl_slist *headers;
  struct curl_slist *connect_to;
  char *body;
  enum req_state state;
  bool cancelled;     /* no more callbacks; freed by the next work pass */
  bool on_work_list;  /* linked through next_work */
  bool in_done;       /* on_done is running */
  bool headers_done;  /* on_response has been dispatched */
  bool aborted;       /* a callback returned KC_HTTP_ABORT */
  bool idle_fired;
  bool idle_inited;
  bool paused;        /* on_data returned KC_HTTP_PAUSE */
  CURLcode result;
  uint64_t idle_ms;
  uint64_t last_activity; /* uv_now when a byte last arrived */
  uint64_t body_bytes;
  uv_timer_t idle;
  kc_buf resp_headers; /* header lines of the current response */
  kc_http_response_cb on_response;
  kc_http_data_cb on_data;
  kc_http_done_cb on_done;
  void *ud;
  char errbuf[CURL_ERROR_SIZE];
};

struct kc_http {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer; /* libcurl's single timeout */
  int in_curl;      /* > 0 while inside curl_multi_socket_action */
  bool closing;
  kc_http_req *reqs; /* every live request */
  size_t nreqs;
  kc_http_req *pending;   /* created inside callbacks, to add */
  kc_http_req *cancelled; /* cancelled inside callbacks, to remove */
};

/* One per socket libcurl watches; freed only in the poll close callback. */
struct sock_ctx {
  uv_poll_t poll;
  curl_socket_t fd;
  kc_http *http;
};

static void process_work(kc_http *http);

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_rc;

static void global_init_once(void) {
  global_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

int kc_http_global_init(void) {
  pthread_once(&global_once, global_init_once);
  return global_rc;
}

/* ---- request bookkeeping ---- */

static void link_req(kc_http *http, kc_http_req *req) {
  req->prev = NULL;
  req->next = http->reqs;
  if (http->reqs) http->reqs->prev = req;
  http->reqs = req;
  http->nreqs++;
}

static void unlink_req(kc_http *http, kc_http_req *req) {
  if (req->prev) req->prev->next = req->next;
  else http->reqs = req->next;
  if (req->next) req->next->prev = req->prev;
  req->prev = req->next = NULL;
  http->nreqs--;
}

static void free_req_memory(kc_http_req *req) {
  curl_easy_cleanup(req->easy);
  curl_slist_free_all(req->headers);
  curl_slist_free_all(req->connect_to);
  free(req->body);
  kc_buf_free(&req->resp_headers);
  free(req);
}

static void on_idle_closed(uv_handle_t *h) { free_req_memory(h->data); }

/* Releases a request that is no longer in the multi handle. */
static void destroy_req(kc_http_req *req) {
  unlink_req(req->http, req);
  if (req->idle_inited) {
    uv_timer_stop(&req->idle);
    uv_close((uv_handle_t *)&req->idle, on_idle_closed);
  } else {
    free_req_memory(req);
  }
}

static void remove_from_multi(kc_http_req *req) {
  CURLMcode rc = curl_multi_remove_handle(req->http->multi, req->easy);
  if (rc != CURLM_OK)
    kc_error(COMPONENT, "curl_multi_remove_handle failed error=\"%s\"", curl_multi_strerror(rc));
}

int kc_http_map_curl_error(int code) {
  switch ((CURLcode)code) {
  case CURLE_OK: return 0;
  case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
  case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY: return -EHOSTUNREACH;
  case CURLE_WRITE_ERROR:
  case CURLE_ABORTED_BY_CALLBACK: return -ECANCELED;
  case CURLE_OUT_OF_MEMORY: return -ENOMEM;
  case CURLE_RECV_ERROR:
  case CURLE_SEND_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_PARTIAL_FILE:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM: return -ECONNRESET;
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_WEIRD_SERVER_REPLY: return -EPROTO;
  default: return -EIO;
  }
}

/* Calls on_done (unless cancelled) and frees the request. The request is no
 * longer in the multi handle. */
static void finish_req(kc_http_req *req) {
  if (!req->cancelled && req->on_done) {
    kc_http_result res = {0};
    char msg[CURL_ERROR_SIZE + 32];
    long v = 0;
    curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &res.status);
    if (curl_easy_getinfo(req->easy, CURLINFO_NUM_CONNECTS, &v) == CURLE_OK)
      res.new_connections = v;
    if (curl_easy_getinfo(req->easy, CURLINFO_HTTP_VERSION, &v) == CURLE_OK)
      res.http_version = v == CURL_HTTP_VERSION_2_0 ? 20 : v == CURL_HTTP_VERSION_1_1 ? 11 : 0;
    res.body_bytes = req->body_bytes;
    if (req->idle_fired) {
      res.error = -ETIME;
      res.idle_timeout = true;
      snprintf(msg, sizeof msg, "no data received for %llu ms",
               (unsigned long long)req->idle_ms);
    } else if (req->aborted) {
      res.error = -ECANCELED;
      snprintf(msg, sizeof msg, "aborted by callback");
    } else if (req->result != CURLE_OK) {
      res.error = kc_http_map_curl_error(req->result);
      snprintf(msg, sizeof msg, "%s", req->errbuf[0] ? req->errbuf
                                                      : curl_easy_strerror(req->result));
    } else {
      snprintf(msg, sizeof msg, "HTTP %ld", res.status);
    }
    res.message = msg;
    req->in_done = true;
    req->on_done(req, &res, req->ud);
  }
  destroy_req(req);
}

/* ---- libcurl callbacks (no libcurl calls in here) ---- */

static int dispatch_response(kc_http_req *req) {
  long status = 0;
  req->headers_done = true;
  if (req->cancelled || !req->on_response) return KC_HTTP_CONTINUE;
  curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
  return req->on_response(req, status, req->ud);
}

static size_t header_cb(char *buf, size_t size, size_t n, void *ud) {
  kc_http_req *req = ud;
  size_t len = size * n;
  req->last_activity = uv_now(req->http->loop);
  if (req->cancelled) return 0;
  if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
    /* A new response (after 1xx): forget the previous header block. */
    kc_buf_reset(&req->resp_headers);
    req->headers_done = false;
  }
  if (len == 2 && buf[0] == '\r' && buf[1] == '\n') {
    long status = 0;
    curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 100 && status < 200) return len; /* interim response */
    if (dispatch_response(req) != KC_HTTP_CONTINUE) {
      req->aborted = true;
      return 0;
    }
    return req->cancelled ? 0 : len;
  }
  kc_buf_add(&req->resp_headers, buf, len);
  if (req->resp_headers.err) return 0;
  return len;
}

static size_t write_cb(char *buf, size_t size, size_t n, void *ud) {
  kc_http_req *req = ud;
  size_t len = size * n;
  req->last_activity = uv_now(req->http->loop);
  if (req->cancelled) return 0;
  if (!req->headers_done && dispatch_response(req) != KC_HTTP_CONTINUE) {
    req->aborted = true;
    return 0;
  }
  if (req->on_data && !req->cancelled) {
    int rc = req->on_data(req, buf, len, req->ud);
    if (rc == KC_HTTP_PAUSE && !req->cancelled) {
      /* libcurl keeps these bytes and hands them again after the resume. */
      req->paused = true;
      return CURL_WRITEFUNC_PAUSE;
    }
    if (rc != KC_HTTP_CONTINUE) {
      req->aborted = true;
      return 0;
    }
  }
  req->body_bytes += len;
  return req->cancelled ? 0 : len;
}

static void on_sock_closed(uv_handle_t *h) { free(h->data); }

static void on_poll(uv_poll_t *poll, int status, int events) {
  struct sock_ctx *ctx = poll->data;
  kc_http *http = ctx->http;
  int flags = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  int running;
  http->in_curl++;
  CURLMcode rc = curl_multi_socket_action(http->multi, ctx->fd, flags, &running);
  http->in_curl--;
  if (rc != CURLM_OK)
    kc_error(COMPONENT, "curl_multi_socket_action failed error=\"%s\"", curl_multi_strerror(rc));
  /* ctx may have been closed by REMOVE above, but is freed only later. */
  process_work(http);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *clientp, void *socketp) {
  kc_http *http = clientp;
  struct sock_ctx *ctx = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (ctx) {
      /* Stop now: libcurl closes the fd right after we return. */
      uv_poll_stop(&ctx->poll);
      curl_multi_assign(http->multi, s, NULL);
      uv_close((uv_handle_t *)&ctx->poll, on_sock_closed);
    }
    return 0;
  }
  if (!ctx) {
    if (http->closing) return 0; /* shutdown: acknowledge, never register */
    ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
      kc_error(COMPONENT, "out of memory for socket fd=%d", (int)s);
      return 0; /* -1 would fail every transfer; the request times out instead */
    }
    ctx->fd = s;
    ctx->http = http;
    int rc = uv_poll_init_socket(http->loop, &ctx->poll, s);
    if (rc < 0) {
      kc_error(COMPONENT, "uv_poll_init_socket failed fd=%d error=\"%s\"", (int)s, uv_strerror(rc));
      free(ctx);
      return 0;
    }
    ctx->poll.data = ctx;
    curl_multi_assign(http->multi, s, ctx);
  }
  int events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= UV_READABLE;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= UV_WRITABLE;
  int rc = uv_poll_start(&ctx->poll, events, on_poll);
  if (rc < 0)
    kc_error(COMPONENT, "uv_poll_start failed fd=%d error=\"%s\"", (int)s, uv_strerror(rc));
  return 0;
}

static void on_curl_timeout(uv_timer_t *t) {
  kc_http *http = t->data;
  int running;
  http->in_curl++;
  CURLMcode rc = curl_multi_socket_action(http->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  http->in_curl--;
  if (rc != CURLM_OK)
    kc_error(COMPONENT, "curl_multi_socket_action failed error=\"%s\"", curl_multi_strerror(rc));
  process_work(http);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *clientp) {
  kc_http *http = clientp;
  if (timeout_ms < 0) {
    uv_timer_stop(&http->timer);
  } else {
    /* 0 means "soon", which must still happen from the loop, not from here. */
    uv_timer_start(&http->timer, on_curl_timeout, timeout_ms ? (uint64_t)timeout_ms : 1, 0);
  }
  return 0;
}

/* ---- deferred work, run from loop context after libcurl returned ---- */

static void add_to_multi(kc_http_req *req) {
  CURLMcode rc = curl_multi_add_handle(req->http->multi, req->easy);
  if (rc != CURLM_OK) {
    kc_error(COMPONENT, "curl_multi_add_handle failed error=\"%s\"", curl_multi_strerror(rc));
    req->state = REQ_FINISHED;
    req->result = CURLE_FAILED_INIT;
    snprintf(req->errbuf, sizeof req->errbuf, "curl_multi_add_handle: %s",
             curl_multi_strerror(rc));
    finish_req(req);
    return;
  }
  req->state = REQ_ACTIVE;
}

static void process_work(kc_http *http) {
  /* Completed transfers first: collect them all before dispatching any
   * callback, so that a callback cancelling another finished request only
   * flags it, and no message is read for an easy handle already freed. */
  kc_http_req *finished = NULL, **tail = &finished;
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(http->multi, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL *easy = msg->easy_handle;
    CURLcode result = msg->data.result;
    kc_http_req *req = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&req);
    curl_multi_remove_handle(http->multi, easy); /* msg is invalid from here */
    if (!req) continue;
    req->result = result;
    req->state = REQ_FINISHED;
    if (req->on_work_list) continue; /* cancelled: freed below */
    req->next_work = NULL;
    req->on_work_list = true;
    *tail = req;
    tail = &req->next_work;
  }
  while (finished) {
    kc_http_req *req = finished;
    finished = req->next_work;
    req->on_work_list = false;
    finish_req(req);
  }
  /* Requests cancelled from inside libcurl callbacks. */
  while (http->cancelled) {
    kc_http_req *req = http->cancelled;
    http->cancelled = req->next_work;
    req->on_work_list = false;
      if (req->state == REQ_ACTIVE) remove_from_multi(req);
    destroy_req(req);
  }
  /* Requests created from inside libcurl callbacks. */
  while (http->pending && !http->in_curl) {
    kc_http_req *req = http->pending;
    http->pending = req->next_work;
    req->on_work_list = false;
    if (req->cancelled) destroy_req(req);
    else add_to_multi(req);
  }
}

void kc_http_resume(kc_http_req *req) {
  if (!req || !req->paused || req->cancelled || req->state != REQ_ACTIVE) return;
  kc_http *http = req->http;
  req->paused = false;
  /* A pause is not silence from the server. */
  req->last_activity = uv_now(http->loop);
  http->in_curl++;
  CURLcode rc = curl_easy_pause(req->easy, CURLPAUSE_CONT);
  http->in_curl--;
  if (rc != CURLE_OK)
    kc_error(COMPONENT, "curl_easy_pause failed error=\"%s\"", curl_easy_strerror(rc));
  process_work(http);
}

/* ---- inactivity timer ---- */

static void on_idle_timer(uv_timer_t *t) {
  kc_http_req *req = t->data;
  uint64_t now = uv_now(req->http->loop);
  uint64_t quiet = now - req->last_activity;
  if (quiet < req->idle_ms) {
    /* Bytes arrived meanwhile: re-arm for the rest (no per-chunk timer ops). */
    uv_timer_start(&req->idle, on_idle_timer, req->idle_ms - quiet, 0);
    return;
  }
  if (req->state != REQ_ACTIVE || req->cancelled) return;
  req->idle_fired = true;
  remove_from_multi(req);
  req->state = REQ_FINISHED;
  finish_req(req);
}

/* ---- public API ---- */

int kc_http_new(uv_loop_t *loop, kc_http **out) {
  int rc = kc_http_global_init();
  if (rc < 0) return rc;
  kc_http *http = calloc(1, sizeof *http);
  if (!http) return -ENOMEM;
  http->loop = loop;
  http->multi = curl_multi_init();
  if (!http->multi) {
    free(http);
    return -ENOMEM;
  }
  rc = uv_timer_init(loop, &http->timer);
  if (rc < 0) {
    curl_multi_cleanup(http->multi);
    free(http);
    return rc;
  }
  http->timer.data = http; /* the multi-uv.c example forgets this */
  curl_multi_setopt(http->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt(http->multi, CURLMOPT_SOCKETDATA, http);
  curl_multi_setopt(http->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(http->multi, CURLMOPT_TIMERDATA, http);
  /* HTTP/2: many watches share one connection. */
  curl_multi_setopt(http->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  *out = http;
  return 0;
}

static void on_http_closed(uv_handle_t *h) { free(h->data); }

void kc_http_close(kc_http *http) {
  if (!http) return;
  http->closing = true;
  while (http->reqs) {
    kc_http_req *req = http->reqs;
    if (req->state == REQ_ACTIVE) remove_from_multi(req);
    req->cancelled = true;
    destroy_req(req);
  }
  http->pending = http->cancelled = NULL;
  /* May call socket_cb with REMOVE for cached connections: http and the loop
   * are still alive here. */
  curl_multi_cleanup(http->multi);
  http->multi = NULL;
  uv_timer_stop(&http->timer);
  uv_close((uv_handle_t *)&http->timer, on_http_closed);
}

int kc_http_easy_tls(void *easy, const kc_http_tls *tls) {
  CURL *e = easy;
  CURLcode c = CURLE_OK;
  if (tls->ca_data && tls->ca_len) {
    struct curl_blob b = {(void *)tls->ca_data, tls->ca_len, CURL_BLOB_COPY};
    c |= curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
  } else if (tls->ca_file) {
    c |= curl_easy_setopt(e, CURLOPT_CAINFO, tls->ca_file);
#if LIBCURL_VERSION_NUM >= 0x075700 /* 7.87.0 */
    /* libcurl (OpenSSL, 7.87+) may cache the parsed CA store for 24 h: a
     * rotated CA file would not be seen until then. Re-read it for every new
     * connection (a TLS failure drops the connection, so the next one uses
     * the new file); connections are long-lived HTTP/2, so this is rare.
     * (A libcurl built with a default CA path, as Debian's, never caches;
     * tests/integration/test_execcred.py test_ca_file_rotation checks the
     * behaviour either way.) */
    c |= curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 0L);
#endif
  }
  if (tls->cert_data && tls->cert_len) {
    struct curl_blob b = {(void *)tls->cert_data, tls->cert_len, CURL_BLOB_COPY};
    c |= curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
    c |= curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (tls->cert_file) {
    c |= curl_easy_setopt(e, CURLOPT_SSLCERT, tls->cert_file);
  }
  if (tls->key_data && tls->key_len) {
    struct curl_blob b = {(void *)tls->key_data, tls->key_len, CURL_BLOB_COPY};
    c |= curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b);
    c |= curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (tls->key_file) {
    c |= curl_easy_setopt(e, CURLOPT_SSLKEY, tls->key_file);
  }
  if (tls->insecure) {
    c |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    c |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (tls->proxy) c |= curl_easy_setopt(e, CURLOPT_PROXY, tls->proxy);
  return c == CURLE_OK ? 0 : -EINVAL;
}

int kc_http_easy_defaults(void *easy, uint64_t connect_timeout_ms) {
  CURL *e = easy;
  CURLcode c = CURLE_OK;
  c |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  c |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
  /* No CURLOPT_PIPEWAIT: with libcurl 7.88 a transfer waiting for a
   * connection that turns out to be HTTP/1.1 stays parked until another
   * transfer ends, which for a watch may be never. The first request (
   * discovery) establishes the HTTP/2 connection that later ones share. */
  c |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  c |= curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
  c |= curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
  c |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                        (long)(connect_timeout_ms ? connect_timeout_ms : 10000));
  c |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  return c == CURLE_OK ? 0 : -EINVAL;
}

int kc_http_request(kc_http *http, const kc_http_request_opts *o, kc_http_req **out) {
  if (out) *out = NULL;
  if (!o || !o->url || http->closing) return -EINVAL;
  kc_http_req *req = calloc(1, sizeof *req);
  if (!req) return -ENOMEM;
  req->http = http;
  req->on_response = o->on_response;
  req->on_data = o->on_data;
  req->on_done = o->on_done;
  req->ud = o->ud;
  req->easy = curl_easy_init();
  if (!req->easy) {
    free(req);
    return -ENOMEM;
  }
  CURL *e = req->easy;
  CURLcode c = CURLE_OK;
  c |= curl_easy_setopt(e, CURLOPT_URL, o->url);
  c |= curl_easy_setopt(e, CURLOPT_PRIVATE, req);
  if (kc_http_easy_defaults(e, o->connect_timeout_ms) < 0) c = CURLE_BAD_FUNCTION_ARGUMENT;
  if (o->timeout_ms) c |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
  c |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->errbuf);
  c |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
  c |= curl_easy_setopt(e, CURLOPT_HEADERDATA, req);
  c |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
  c |= curl_easy_setopt(e, CURLOPT_WRITEDATA, req);
  const char *method = o->method ? o->method : "GET";
  if (o->body) {
    req->body = malloc(o->body_len ? o->body_len : 1);
    if (!req->body) goto nomem;
    memcpy(req->body, o->body, o->body_len);
    c |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
    c |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body);
  }
  if (strcmp(method, "HEAD") == 0) c |= curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  else if (strcmp(method, "GET") != 0 && !(o->body && strcmp(method, "POST") == 0))
    c |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  for (size_t i = 0; i < o->nheaders; i++) {
    struct curl_slist *l = curl_slist_append(req->headers, o->headers[i]);
    if (!l) goto nomem;
    req->headers = l;
  }
  if (o->body) {
    /* No "Expect: 100-continue" round trip for large bodies. */
    struct curl_slist *l = curl_slist_append(req->headers, "Expect:");
    if (!l) goto nomem;
    req->headers = l;
  }
  if (req->headers) c |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, req->headers);
  if (o->tls) {
    if (kc_http_easy_tls(e, o->tls) < 0) c = CURLE_BAD_FUNCTION_ARGUMENT;
    if (o->tls->connect_to) {
      req->connect_to = curl_slist_append(NULL, o->tls->connect_to);
      if (!req->connect_to) goto nomem;
      c |= curl_easy_setopt(e, CURLOPT_CONNECT_TO, req->connect_to);
    }
  }
  if (c != CURLE_OK) {
    kc_error(COMPONENT, "curl_easy_setopt failed url=%s", o->url);
    free_req_memory(req);
    return -EINVAL;
  }
  if (o->idle_timeout_ms) {
    int rc = uv_timer_init(http->loop, &req->idle);
    if (rc < 0) {
      free_req_memory(req);
      return rc;
    }
    req->idle.data = req;
    req->idle_inited = true;
    req->idle_ms = o->idle_timeout_ms;
    req->last_activity = uv_now(http->loop);
    uv_timer_start(&req->idle, on_idle_timer, req->idle_ms, 0);
  }
  link_req(http, req);
  if (out) *out = req;
  if (http->in_curl) {
    req->state = REQ_PENDING;
    req->on_work_list = true;
    req->next_work = http->pending;
    http->pending = req;
    return 0;
  }
  CURLMcode mc = curl_multi_add_handle(http->multi, req->easy);
  if (mc != CURLM_OK) {
    kc_error(COMPONENT, "curl_multi_add_handle failed error=\"%s\"", curl_multi_strerror(mc));
    if (out) *out = NULL;
    req->cancelled = true;
    destroy_req(req);
    return mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
  }
  req->state = REQ_ACTIVE;
  return 0;
nomem:
  free_req_memory(req);
  return -ENOMEM;
}

void kc_http_cancel(kc_http_req *req) {
  if (!req || req->cancelled || req->in_done) return;
  kc_http *http = req->http;
  req->cancelled = true;
  if (req->state == REQ_FINISHED) return; /* collected: freed without on_done */
  if (http->in_curl || req->on_work_list) {
    if (req->on_work_list) return; /* pending start: dropped by process_work */
    req->on_work_list = true;
    req->next_work = http->cancelled;
    http->cancelled = req;
    return;
  }
  remove_from_multi(req);
  destroy_req(req);
}

const char *kc_http_req_header(const kc_http_req *req, const char *name, size_t *len) {
  size_t nlen = strlen(name);
  const char *p = req->resp_headers.p, *end = p ? p + req->resp_headers.len : NULL;
  while (p && p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    if ((size_t)(eol - p) > nlen && p[nlen] == ':' && strncasecmp(p, name, nlen) == 0) {
      const char *v = p + nlen + 1, *ve = eol;
      while (v < ve && (*v == ' ' || *v == '\t')) v++;
      while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t')) ve--;
      if (len) *len = (size_t)(ve - v);
      return v;
    }
    p = eol + 1;
  }
  return NULL;
}

size_t kc_http_active(const kc_http *http) { return http->nreqs; }
