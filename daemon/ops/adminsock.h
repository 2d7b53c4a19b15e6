/* SPDX-License-Identifier: Apache-2.0 */
/* adminsock: the admin socket that `kctrld ctl` talks to
 * (docs/operations.md "kctrld ctl"): a Unix stream socket served by the
 * loop (uv_pipe). A client sends one request line (adminreq.h, at most
 * KC_ADMIN_REQUEST_MAX bytes) and gets one JSON document (admin.h), then
 * the connection closes. At most KC_ADMINSOCK_MAX_CLIENTS connections at
 * once (more are closed at once); a client that sends nothing for
 * KC_ADMINSOCK_IDLE_MS is dropped.
 *
 * Owns the socket file: created mode 0600 (the daemon's user alone), or
 * with a group 0660 (the daemon's user and the group's members): bound
 * under a umask of 0177, then given its group, then chmod'ed, so it is
 * never wider than asked at any moment; a stale socket at the path (nobody
 * answering) is replaced, a live one or any other file is an error; the
 * file is removed at close.
 *
 * Threads: loop thread only. Errors: 0 or a negative errno (-ENAMETOOLONG
 * for a path longer than a socket address holds, -EADDRINUSE when another
 * process serves the path, -EEXIST when something else is there, -EPERM
 * when the group cannot be given: the daemon is neither root nor a member).
 */
#ifndef KC_ADMINSOCK_H
#define KC_ADMINSOCK_H

#include <sys/types.h>
#include <uv.h>

#include "ops/ops.h"

#define KC_ADMINSOCK_MAX_CLIENTS 8
#define KC_ADMINSOCK_IDLE_MS 5000

typedef struct kc_adminsock kc_adminsock;

#define KC_ADMINSOCK_NO_GROUP ((gid_t)-1)

/* Serves path; view fills the daemon's view for each request (ops.h).
 * group: KC_ADMINSOCK_NO_GROUP for mode 0600, else the group of a 0660
 * socket (kc_adminsock_group_id). path is copied. */
int kc_adminsock_start(uv_loop_t *loop, const char *path, gid_t group, kc_ops_view_fn view,
                       void *ud, kc_adminsock **out);

/* The id of the group named name (adminSocketGroup): 0, -ENOENT when there
 * is no such group, another negative errno when the group database cannot
 * be read. Any thread. */
int kc_adminsock_group_id(const char *name, gid_t *out);
/* Stops serving, closes every connection, removes the socket file; the
 * memory goes once libuv has closed the handles. NULL: no-op. */
void kc_adminsock_close(kc_adminsock *s);

#endif
