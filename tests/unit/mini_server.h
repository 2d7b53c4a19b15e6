/* SPDX-License-Identifier: Apache-2.0 */
/* mini_server: a tiny HTTP(S) server for unit tests, on libmicrohttpd, bound
 * to 127.0.0.1 on an ephemeral port. One thread per connection, so replies
 * can be streamed slowly (chunks with delays, silent hangs).
 *
 * Context: start/stop from the test's main thread; the handler runs on
 * server threads (it must only touch thread-safe state). Counters are
 * atomic.
 * Ownership: reply strings and chunk data are borrowed and must outlive the
 * server (use static data or memory freed after mini_server_stop).
 */
#ifndef MINI_SERVER_H
#define MINI_SERVER_H

#include <stdbool.h>
#include <stddef.h>

typedef struct mini_server mini_server;

typedef struct mini_server_chunk {
  const char *data;
  size_t len;         /* 0 = strlen(data) */
  unsigned delay_ms;  /* sleep before sending this chunk */
  bool held;          /* ... or until mini_server_release, whichever comes first */
} mini_server_chunk;

typedef struct mini_server_reply {
  int status;               /* default 200 */
  const char *content_type; /* default application/json */
  const char *headers[8];   /* extra "Name: value" lines */
  const char *body;         /* fixed body (Content-Length); NULL = empty */
  size_t body_len;          /* 0 = strlen(body) */
  const mini_server_chunk *chunks; /* if set: chunked body made of these */
  size_t nchunks;
  unsigned hang_ms; /* after the last chunk, stay silent this long */
  bool hang_held;   /* ... or until mini_server_release, whichever comes first */
} mini_server_reply;

typedef struct mini_server_request {
  const char *method;
  const char *path;
  const char *body; /* NUL-terminated copy of the request body */
  size_t body_len;
  void *conn_; /* internal */
} mini_server_request;

typedef void (*mini_server_handler)(const mini_server_request *rq, mini_server_reply *reply,
                                    void *ud);

/* Starts a server; with cert_pem/key_pem it speaks HTTPS. NULL on failure. */
mini_server *mini_server_start(mini_server_handler h, void *ud, const char *cert_pem,
                               const char *key_pem);
void mini_server_stop(mini_server *s);
/* Ends every held delay and hang, now and from now on: a test holds a
 * response back until it has seen what it waits for, instead of for a fixed
 * time. Any thread. */
void mini_server_release(mini_server *s);
int mini_server_port(const mini_server *s);
/* Request header / query argument, or NULL. */
const char *mini_server_header(const mini_server_request *rq, const char *name);
const char *mini_server_query(const mini_server_request *rq, const char *name);
/* TCP connections accepted / requests answered so far. */
unsigned mini_server_connections(const mini_server *s);
unsigned mini_server_requests(const mini_server *s);
/* True when libmicrohttpd was built with TLS. */
bool mini_server_tls_supported(void);

#endif
