/* SPDX-License-Identifier: Apache-2.0 */
/* adminsock: the admin socket that `kctrld ctl` talks to
 * (docs/operations.md "kctrld ctl"): a Unix stream socket served by the
 * loop (uv_pipe). A client sends one request line (adminreq.h, at most
 * KC_ADMIN_REQUEST_MAX bytes) and gets one JSON document (admin.h), then
 * the connection closes. At most KC_ADMINSOCK_MAX_CLIENTS connections at
 * once (more are closed at once); a client that sends nothing for
 * KC_ADMINSOCK_IDLE_MS is dropped.
 *
 * Owns the socket file: created mode 0600 (the daemon's user alone;
 * created under a umask of 0177, then chmod'ed, so it is never wider);
 * a stale socket at the path (nobody answering) is replaced, a live one or
 * any other file is an error; the file is removed at close.
 *
 * Threads: loop thread only. Errors: 0 or a negative errno (-ENAMETOOLONG
 * for a path longer than a socket address holds, -EADDRINUSE when another
 * process serves the path, -EEXIST when something else is there).
 */
#ifndef KC_ADMINSOCK_H
#define KC_ADMINSOCK_H

#include <uv.h>

#include "ops/ops.h"

#define KC_ADMINSOCK_MAX_CLIENTS 8
#define KC_ADMINSOCK_IDLE_MS 5000

typedef struct kc_adminsock kc_adminsock;

/* Serves path; view fills the daemon's view for each request (ops.h).
 * path is copied. */
int kc_adminsock_start(uv_loop_t *loop, const char *path, kc_ops_view_fn view, void *ud,
                       kc_adminsock **out);
/* Stops serving, closes every connection, removes the socket file; the
 * memory goes once libuv has closed the handles. NULL: no-op. */
void kc_adminsock_close(kc_adminsock *s);

#endif
