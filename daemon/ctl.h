/* SPDX-License-Identifier: Apache-2.0 */
/* ctl: the client side of `kctrld ctl` (docs/operations.md "kctrld ctl"):
 * one request (ops/adminreq.h) to the daemon's admin socket
 * (ops/adminsock.h), its JSON answer (ops/admin.h) printed as a table or,
 * with -o json, as it came. Errors name what is wrong: no socket at the
 * path, the connection refused (a stale socket: the daemon is not
 * running), permission denied (the socket is the daemon user's, 0600), no
 * answer in KC_CTL_TIMEOUT_MS, or the daemon's own error (no such
 * controller).
 *
 * Threads: the main thread (a short-lived command; blocking I/O).
 */
#ifndef KC_CTL_H
#define KC_CTL_H

#include "cli.h"

#define KC_CTL_TIMEOUT_MS 30000
#define KC_CTL_ANSWER_MAX (256u << 20) /* bytes of one answer */

/* `kctrld ctl`: argv[0] is "ctl". Returns the exit status: 0, 1 (the
 * daemon's error or no daemon), 2 (usage). */
int kc_ctl_main(int argc, char **argv);

#endif
