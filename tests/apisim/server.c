/* SPDX-License-Identifier: Apache-2.0 */
#include "server.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "control.h"
#include "rbac.h"
#include "store.h"
#include "watch.h"

atomic_bool sim_shutting_down;

static struct MHD_Daemon *daemon_;
static char *token_;
static char *token_file_;
static bool need_client_cert_;
static pthread_mutex_t tok_mu = PTHREAD_MUTEX_INITIALIZER;
static char *file_token_;
static struct stat file_token_st_;

const char *sim_req_query(struct sim_req *r, const char *key)
{
  const char *v = NULL;
  size_t vlen = 0;
  if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v, &vlen) != MHD_YES)
    return NULL;
  return v ? v : "";
}

const char *sim_req_header(struct sim_req *r, const char *key)
{
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

void sim_status_json(struct sim_buf *b, int code, const char *reason, const struct sim_details *d,
                     const char *msg)
{
  sim_buf_puts(b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{");
  if (d && d->continue_token) {
    sim_buf_puts(b, "\"continue\":");
    sim_buf_put_jstr(b, d->continue_token, strlen(d->continue_token));
  }
  sim_buf_puts(b, "},\"status\":\"Failure\",\"message\":");
  sim_buf_put_jstr(b, msg, strlen(msg));
  if (reason && *reason) {
    sim_buf_puts(b, ",\"reason\":");
    sim_buf_put_jstr(b, reason, strlen(reason));
  }
  bool det = d && (d->name || (d->group && *d->group) || d->kind || d->uid || d->cmsg ||
                   d->retry_after);
  if (det) {
    sim_buf_puts(b, ",\"details\":{");
    bool first = true;
#define FIELD(k, v)                                                   \
  if ((v) && *(v)) {                                                  \
    if (!first) sim_buf_putc(b, ',');                                 \
    first = false;                                                    \
    sim_buf_puts(b, "\"" k "\":");                                    \
    sim_buf_put_jstr(b, (v), strlen(v));                              \
  }
    FIELD("name", d->name)
    FIELD("group", d->group)
    FIELD("kind", d->kind)
    FIELD("uid", d->uid)
#undef FIELD
    if (d->cmsg || d->creason) {
      if (!first) sim_buf_putc(b, ',');
      first = false;
      sim_buf_puts(b, "\"causes\":[{");
      bool f2 = true;
      if (d->creason) {
        sim_buf_puts(b, "\"reason\":");
        sim_buf_put_jstr(b, d->creason, strlen(d->creason));
        f2 = false;
      }
      if (d->cmsg) {
        sim_buf_puts(b, f2 ? "\"message\":" : ",\"message\":");
        sim_buf_put_jstr(b, d->cmsg, strlen(d->cmsg));
        f2 = false;
      }
      if (d->cfield) {
        sim_buf_puts(b, f2 ? "\"field\":" : ",\"field\":");
        sim_buf_put_jstr(b, d->cfield, strlen(d->cfield));
      }
      sim_buf_puts(b, "}]");
    }
    if (d->retry_after) {
      if (!first) sim_buf_putc(b, ',');
      sim_buf_printf(b, "\"retryAfterSeconds\":%d", d->retry_after);
    }
    sim_buf_putc(b, '}');
  }
  sim_buf_printf(b, ",\"code\":%d}", code);
}

void sim_resp_status(struct sim_resp *r, int code, const char *reason, const struct sim_details *d,
                     const char *fmt, ...)
{
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->code = code;
  r->body.len = 0;
  sim_status_json(&r->body, code, reason, d, msg);
}

/* ---- auth ---- */

/* The token file holds one token per line, each optionally followed by a
 * space and its expiry in unix seconds ("tok-1 1796119200"): a token past
 * its expiry is refused (401), which is how tests make tokens expire. */
static bool file_token_ok(const char *tok)
{
  struct stat st;
  pthread_mutex_lock(&tok_mu);
  /* Re-read when the file changes: tokens rotate on disk. */
  if (stat(token_file_, &st) == 0 &&
      (!file_token_ || st.st_ino != file_token_st_.st_ino || st.st_dev != file_token_st_.st_dev ||
       st.st_size != file_token_st_.st_size || st.st_mtim.tv_sec != file_token_st_.st_mtim.tv_sec ||
       st.st_mtim.tv_nsec != file_token_st_.st_mtim.tv_nsec)) {
    size_t n;
    char *t = sim_read_file(token_file_, &n);
    if (t) {
      free(file_token_);
      file_token_ = t;
      file_token_st_ = st;
    }
  }
  bool ok = false;
  size_t tl = strlen(tok);
  time_t now = time(NULL);
  for (const char *line = file_token_; line && *line && !ok;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
    const char *sp = memchr(line, ' ', len);
    size_t toklen = sp ? (size_t)(sp - line) : len;
    if (toklen == tl && tl && memcmp(line, tok, tl) == 0) {
      long long exp = sp ? strtoll(sp + 1, NULL, 10) : 0;
      ok = !sp || exp > (long long)now;
    }
    line = end ? end + 1 : NULL;
  }
  pthread_mutex_unlock(&tok_mu);
  return ok;
}

typedef int (*verify_fn)(void *session, unsigned int *status);
typedef const void *(*peers_fn)(void *session, unsigned int *n);

static bool client_cert_ok(struct MHD_Connection *c)
{
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (!ci || !ci->tls_session) return false;
  /* libmicrohttpd links GnuTLS; use its verifier without linking it ourselves. */
  static verify_fn verify;
  static peers_fn peers;
  if (!verify) {
    verify = (verify_fn)dlsym(RTLD_DEFAULT, "gnutls_certificate_verify_peers2");
    peers = (peers_fn)dlsym(RTLD_DEFAULT, "gnutls_certificate_get_peers");
  }
  if (!verify || !peers) return false;
  unsigned n = 0, status = 1;
  if (!peers(ci->tls_session, &n) || n == 0) return false;
  return verify(ci->tls_session, &status) == 0 && status == 0;
}

const struct sim_user *sim_server_authenticate(const char *token)
{
  const struct sim_user *u = sim_rbac_user_for_token(token);
  if (u) return u;
  if (*token && ((token_ && strcmp(token, token_) == 0) || (token_file_ && file_token_ok(token))))
    return &sim_admin_user;
  return NULL;
}

static bool authorized(struct sim_req *req)
{
  if (!token_ && !token_file_ && !need_client_cert_ && !sim_rbac_enabled) return true;
  const char *h = sim_req_header(req, "Authorization");
  if (h && strncmp(h, "Bearer ", 7) == 0) {
    const char *t = h + 7;
    if (token_ && strcmp(t, token_) == 0) return true;
    if ((req->user = sim_rbac_user_for_token(t))) return true;
    if (token_file_ && file_token_ok(t)) return true;
  }
  if (need_client_cert_ && client_cert_ok(req->conn)) return true;
  return false;
}

/* ---- request plumbing ---- */

static void query_string(struct sim_req *req, struct sim_buf *q);

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
  struct sim_buf *b = cls;
  (void)kind;
  if (b->len) sim_buf_putc(b, '&');
  sim_buf_puts(b, key);
  if (value) {
    sim_buf_putc(b, '=');
    for (const char *p = value; *p; p++) {
      unsigned char ch = (unsigned char)*p;
      if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          strchr("-_.~", ch))
        sim_buf_putc(b, (char)ch);
      else
        sim_buf_printf(b, "%%%02X", ch);
    }
  }
  return MHD_YES;
}

static void query_string(struct sim_req *req, struct sim_buf *q)
{
  MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, collect_arg, q);
}

static int conn_fd(struct MHD_Connection *c)
{
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  return ci ? ci->connect_fd : -1;
}

/* Blocks a stalled request until the client leaves or we shut down. */
static void stall(struct MHD_Connection *c)
{
  int fd = conn_fd(c);
  for (int i = 0; i < 3600 && !atomic_load(&sim_shutting_down); i++) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (fd >= 0 && poll(&p, 1, 1000) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) break;
    if (fd < 0) sleep(1);
  }
}

static enum MHD_Result send_resp(struct sim_req *req, struct sim_resp *resp)
{
  struct MHD_Response *r;
  if (resp->watch) {
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, sim_watch_read,
                                          resp->watch, sim_watch_free);
  } else {
    size_t len;
    char *body = sim_buf_steal(&resp->body, &len);
    r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) free(body);
  }
  if (!r) {
    if (resp->watch) sim_watch_free(resp->watch);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", resp->ctype ? resp->ctype : "application/json");
  MHD_add_response_header(r, "Cache-Control", "no-cache, private");
  if (resp->retry_after >= 0) {
    char ra[16];
    snprintf(ra, sizeof ra, "%d", resp->retry_after);
    MHD_add_response_header(r, "Retry-After", ra);
  }
  if (resp->warning) MHD_add_response_header(r, "Warning", resp->warning);
  enum MHD_Result ret = MHD_queue_response(req->conn, (unsigned)resp->code, r);
  MHD_destroy_response(r);
  return ret;
}

static const char *reason_for(int code)
{
  switch (code) {
  case 400: return "BadRequest";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "NotFound";
  case 405: return "MethodNotAllowed";
  case 409: return "Conflict";
  case 410: return "Expired";
  case 422: return "Invalid";
  case 429: return "TooManyRequests";
  case 500: return "InternalError";
  case 503: return "ServiceUnavailable";
  case 504: return "Timeout";
  default: return "";
  }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
  (void)cls;
  (void)version;
  struct sim_req *req = *con_cls;
  if (!req) {
    req = sim_xcalloc(1, sizeof *req);
    req->conn = c;
    req->method = method;
    req->url = url;
    *con_cls = req;
    return MHD_YES;
  }
  if (*upload_size) {
    if (req->blen + *upload_size > SIM_MAX_BODY) {
      req->too_large = true;
    } else if (!req->too_large) {
      req->body = sim_xrealloc(req->body, req->blen + *upload_size + 1);
      memcpy(req->body + req->blen, upload, *upload_size);
      req->blen += *upload_size;
      req->body[req->blen] = 0;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  struct sim_resp resp = {.code = 500, .retry_after = -1};
  if (strncmp(url, "/_apisim/", 9) == 0 || strcmp(url, "/_apisim") == 0) {
    sim_control_handle(req, &resp);
    return send_resp(req, &resp);
  }
  struct sim_buf q = {0};
  query_string(req, &q);
  enum MHD_Result ret;
  if (!authorized(req)) {
    struct sim_details d = {0};
    sim_resp_status(&resp, 401, "Unauthorized", &d, "Unauthorized");
    ret = send_resp(req, &resp);
    sim_control_record(method, url, q.p, NULL, 401);
    goto out;
  }
  const char *w = sim_req_query(req, "watch");
  req->is_watch = w && strcmp(w, "0") != 0 && strcasecmp(w, "false") != 0;
  unsigned lat = sim_control_latency_ms(method, url);
  if (lat) usleep(lat * 1000u);
  struct sim_fault_hit f;
  bool faulted = sim_control_take_fault(method, url, req->is_watch, &f);
  if (faulted && f.action == SIM_FAULT_STATUS) {
    struct sim_details d = {0};
    if (f.retry_after >= 0) {
      resp.retry_after = f.retry_after;
      d.retry_after = f.retry_after;
    }
    if (f.plain) {
      resp.code = f.code;
      resp.ctype = "text/plain; charset=utf-8";
      sim_buf_puts(&resp.body, f.message);
    } else {
      sim_resp_status(&resp, f.code, reason_for(f.code), &d, "%s", f.message);
    }
    ret = send_resp(req, &resp);
    sim_control_record(method, url, q.p, "fault", f.code);
    goto out;
  }
  if (faulted && f.action == SIM_FAULT_RESET) {
    sim_control_record(method, url, q.p, "fault", 0);
    ret = MHD_NO;
    goto out;
  }
  if (faulted && f.action == SIM_FAULT_STALL && !req->is_watch) {
    stall(c);
    sim_control_record(method, url, q.p, "fault", 0);
    ret = MHD_NO;
    goto out;
  }
  sim_api_handle(req, &resp);
  if (resp.watch)
    sim_watch_set_conn(resp.watch, conn_fd(c), faulted && f.action == SIM_FAULT_STALL,
                       faulted && f.action == SIM_FAULT_WATCH_RESET ? f.after_events : -1,
                       faulted && f.action == SIM_FAULT_CHUNKS ? (f.chunk ? f.chunk : 1) : 0);
  sim_control_record(method, url, q.p, req->verb, resp.code);
  ret = send_resp(req, &resp);
out:
  sim_buf_free(&resp.body);
  free(resp.warning);
  sim_buf_free(&q);
  return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
  (void)cls;
  (void)c;
  (void)toe;
  struct sim_req *req = *con_cls;
  if (!req) return;
  free(req->body);
  free(req);
  *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
  (void)cls;
  if (!sim_verbose) return;
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  sim_log("mhd: %s", buf);
}

int sim_server_start(const struct sim_server_opts *o, uint16_t *port_out)
{
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(o->port)};
  if (inet_pton(AF_INET, o->host, &sa.sin_addr) != 1) return -EINVAL;
  token_ = o->token ? sim_xstrdup(o->token) : NULL;
  token_file_ = o->token_file ? sim_xstrdup(o->token_file) : NULL;
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                   MHD_USE_ERROR_LOG | MHD_USE_POLL;
  char *cert = NULL, *key = NULL, *ca = NULL;
  if (o->tls_cert || o->tls_key || o->cert_pem) {
    if (!o->cert_pem && (!o->tls_cert || !o->tls_key)) return -EINVAL;
    cert = o->cert_pem ? sim_xstrdup(o->cert_pem) : sim_read_file(o->tls_cert, NULL);
    key = o->cert_pem ? sim_xstrdup(o->key_pem) : sim_read_file(o->tls_key, NULL);
    if (!cert || !key) {
      free(cert);
      free(key);
      return -ENOENT;
    }
    flags |= MHD_USE_TLS;
    if (o->client_ca) {
      ca = sim_read_file(o->client_ca, NULL);
      if (!ca) {
        free(cert);
        free(key);
        return -ENOENT;
      }
      need_client_cert_ = true;
    }
  }
  struct MHD_OptionItem opts[] = {
    {MHD_OPTION_SOCK_ADDR, 0, &sa},
    {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL},
    {MHD_OPTION_CONNECTION_LIMIT, 4096, NULL},
    {MHD_OPTION_CONNECTION_TIMEOUT, 0, NULL},
    {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
    {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL},
    {MHD_OPTION_THREAD_STACK_SIZE, 512 * 1024, NULL},
    {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
    {MHD_OPTION_HTTPS_MEM_KEY, 0, key},
    {ca ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, ca},
    {MHD_OPTION_END, 0, NULL},
  };
  daemon_ = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_ARRAY, opts,
                             MHD_OPTION_END);
  free(cert);
  if (key) explicit_bzero(key, strlen(key));
  free(key);
  free(ca);
  if (!daemon_) return -EADDRINUSE;
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  *port_out = di ? di->port : o->port;
  return 0;
}

void sim_server_stop(void)
{
  atomic_store(&sim_shutting_down, true);
  pthread_mutex_lock(&sim_mu);
  pthread_cond_broadcast(&sim_cond);
  pthread_mutex_unlock(&sim_mu);
  sim_control_stop();
  if (daemon_) MHD_stop_daemon(daemon_);
  daemon_ = NULL;
}
