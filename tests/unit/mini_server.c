/* SPDX-License-Identifier: Apache-2.0 */
/* mini_server: see mini_server.h. */
#include "mini_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mini_server {
  struct MHD_Daemon *d;
  mini_server_handler handler;
  void *ud;
  int port;
  atomic_uint connections;
  atomic_uint requests;
  atomic_bool stopping;
  atomic_bool released; /* held delays and hangs end */
};

struct upload {
  char *buf;
  size_t len;
};

struct stream {
  mini_server *s;
  mini_server_reply r;
  size_t chunk;  /* index of the chunk being sent */
  size_t off;    /* bytes of it already sent */
  bool delayed;  /* its delay has been slept */
};

/* Sleeps in small slices so that stopping the server (or releasing a held
 * nap) is never slow. */
static void nap(mini_server *s, unsigned ms, bool held) {
  while (ms > 0 && !atomic_load(&s->stopping) && !(held && atomic_load(&s->released))) {
    unsigned step = ms < 5 ? ms : 5;
    struct timespec ts = {0, (long)step * 1000000L};
    nanosleep(&ts, NULL);
    ms -= step;
  }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  struct stream *st = cls;
  while (st->chunk < st->r.nchunks) {
    const mini_server_chunk *c = &st->r.chunks[st->chunk];
    size_t len = c->len ? c->len : strlen(c->data);
    if (!st->delayed) {
      nap(st->s, c->delay_ms, c->held);
      st->delayed = true;
    }
    if (atomic_load(&st->s->stopping)) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (st->off < len) {
      size_t n = len - st->off < max ? len - st->off : max;
      memcpy(buf, c->data + st->off, n);
      st->off += n;
      if (st->off == len) {
        st->chunk++;
        st->off = 0;
        st->delayed = false;
      }
      return (ssize_t)n;
    }
    st->chunk++;
    st->off = 0;
    st->delayed = false;
  }
  if (st->r.hang_ms) {
    nap(st->s, st->r.hang_ms, st->r.hang_held);
    st->r.hang_ms = 0;
  }
  return MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls) { free(cls); }

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size,
                                  void **con_cls) {
  mini_server *s = cls;
  struct upload *up = *con_cls;
  if (!up) {
    up = calloc(1, sizeof *up);
    if (!up) return MHD_NO;
    *con_cls = up;
    return MHD_YES;
  }
  if (*upload_size) {
    char *p = realloc(up->buf, up->len + *upload_size + 1);
    if (!p) return MHD_NO;
    memcpy(p + up->len, upload_data, *upload_size);
    up->buf = p;
    up->len += *upload_size;
    up->buf[up->len] = '\0';
    *upload_size = 0;
    return MHD_YES;
  }
  mini_server_request rq = {method, url, up->buf ? up->buf : "", up->len, conn};
  mini_server_reply reply = {0};
  s->handler(&rq, &reply, s->ud);
  struct MHD_Response *resp;
  if (reply.chunks) {
    struct stream *st = calloc(1, sizeof *st);
    if (!st) return MHD_NO;
    st->s = s;
    st->r = reply;
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, st,
                                             stream_free);
  } else {
    const char *body = reply.body ? reply.body : "";
    size_t len = reply.body_len ? reply.body_len : strlen(body);
    resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
  }
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, "Content-Type",
                          reply.content_type ? reply.content_type : "application/json");
  for (size_t i = 0; i < sizeof reply.headers / sizeof reply.headers[0] && reply.headers[i];
       i++) {
    char name[128];
    const char *colon = strchr(reply.headers[i], ':');
    if (!colon || (size_t)(colon - reply.headers[i]) >= sizeof name) continue;
    memcpy(name, reply.headers[i], (size_t)(colon - reply.headers[i]));
    name[colon - reply.headers[i]] = '\0';
    const char *v = colon + 1;
    while (*v == ' ') v++;
    MHD_add_response_header(resp, name, v);
  }
  enum MHD_Result r = MHD_queue_response(conn, (unsigned)(reply.status ? reply.status : 200), resp);
  MHD_destroy_response(resp);
  atomic_fetch_add(&s->requests, 1);
  return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct upload *up = *con_cls;
  if (up) {
    free(up->buf);
    free(up);
    *con_cls = NULL;
  }
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  mini_server *s = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) atomic_fetch_add(&s->connections, 1);
}

mini_server *mini_server_start(mini_server_handler h, void *ud, const char *cert_pem,
                               const char *key_pem) {
  mini_server *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->handler = h;
  s->ud = ud;
  struct sockaddr_in sin = {0};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
  if (cert_pem) flags |= MHD_USE_TLS;
  if (cert_pem)
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &sin,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_HTTPS_MEM_CERT,
                            cert_pem, MHD_OPTION_HTTPS_MEM_KEY, key_pem, MHD_OPTION_END);
  else
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &sin,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
  if (!s->d) {
    free(s);
    return NULL;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : 0;
  return s;
}

void mini_server_stop(mini_server *s) {
  if (!s) return;
  atomic_store(&s->stopping, true);
  MHD_stop_daemon(s->d);
  free(s);
}

void mini_server_release(mini_server *s) { atomic_store(&s->released, true); }

int mini_server_port(const mini_server *s) { return s->port; }

const char *mini_server_header(const mini_server_request *rq, const char *name) {
  return MHD_lookup_connection_value(rq->conn_, MHD_HEADER_KIND, name);
}

const char *mini_server_query(const mini_server_request *rq, const char *name) {
  return MHD_lookup_connection_value(rq->conn_, MHD_GET_ARGUMENT_KIND, name);
}

unsigned mini_server_connections(const mini_server *s) {
  return atomic_load(&((mini_server *)s)->connections);
}

unsigned mini_server_requests(const mini_server *s) {
  return atomic_load(&((mini_server *)s)->requests);
}

bool mini_server_tls_supported(void) { return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES; }
