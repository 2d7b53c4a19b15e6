/* SPDX-License-Identifier: Apache-2.0 */
/* server: the HTTP front end on libmicrohttpd (thread per connection):
 * request bodies (3 MiB limit), authentication (bearer token, TLS client
 * certificates), fault injection and latency hooks, counters, and the
 * response helpers every handler uses (Status objects).
 *
 * Threads: sim_server_start/stop from main; the handlers run on MHD
 * connection threads and may block (watch streams do).
 * Errors: sim_server_start returns 0 or a negative errno.
 * Ownership: a struct sim_resp owns its body buffer and watch; the server
 * frees both after sending.
 */
#ifndef APISIM_SERVER_H
#define APISIM_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <microhttpd.h>

#include "util.h"

#define SIM_MAX_BODY (3u * 1024u * 1024u)

struct sim_watch;
struct sim_user;

struct sim_req {
  struct MHD_Connection *conn;
  const char *method, *url;
  char *body;
  size_t blen;
  bool too_large;
  bool is_watch;
  const char *verb; /* for counters: list, watch, get, create, ... */
  const struct sim_user *user; /* --token-auth-file user; NULL: superuser or no auth (rbac.h) */
};

struct sim_resp {
  int code;
  const char *ctype;  /* NULL = application/json */
  struct sim_buf body;
  int retry_after;    /* < 0: no Retry-After header */
  char *warning;      /* Warning header text or NULL (owned) */
  struct sim_watch *watch; /* stream instead of body */
  bool reset;         /* drop the connection without a response */
};

struct sim_details {
  const char *name, *group, *kind, *uid;
  const char *cfield, *creason, *cmsg; /* one cause */
  int retry_after;                     /* 0 = none */
  const char *continue_token;
};

/* Query parameter: returns the value ("" for "?key"), NULL when absent. */
const char *sim_req_query(struct sim_req *r, const char *key);
const char *sim_req_header(struct sim_req *r, const char *key);

/* Fills resp with a Failure Status object. */
void sim_resp_status(struct sim_resp *r, int code, const char *reason,
                     const struct sim_details *d, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void sim_status_json(struct sim_buf *b, int code, const char *reason,
                     const struct sim_details *d, const char *msg);

struct sim_server_opts {
  const char *host;
  uint16_t port;
  const char *token, *token_file;
  const char *tls_cert, *tls_key, *client_ca;
  const char *cert_pem, *key_pem; /* in memory (certgen.h), instead of tls_cert/tls_key */
};

/* The user a bearer token authenticates as (a --token-auth-file user, or
 * sim_admin_user for the --token and --token-file tokens), or NULL. */
const struct sim_user *sim_server_authenticate(const char *token);

/* Starts listening; *port_out gets the bound port. */
int sim_server_start(const struct sim_server_opts *o, uint16_t *port_out);
void sim_server_stop(void);

extern atomic_bool sim_shutting_down;

#endif
