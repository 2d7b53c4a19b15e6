/* SPDX-License-Identifier: Apache-2.0 */
/* adminreq: the request of the admin socket (`kctrld ctl`), one line of
 * JSON: {"command":"keys","controller":"web","state":"failing"}, with
 * "key" for trace and requeue. Owns its parsing (a bounded line, a flat
 * object of known string fields, the fields each command needs) and its
 * formatting (the client's side; parse(format(r)) == r).
 *
 * Threads: any (no state). Errors: 0 or -EINVAL with the reason in err
 * ("unknown command \"x\"", "keys needs \"controller\"", ...).
 */
#ifndef KC_ADMINREQ_H
#define KC_ADMINREQ_H

#include <stddef.h>

#include "base/buf.h"

/* The longest request line, its newline included; a longer one is refused. */
#define KC_ADMIN_REQUEST_MAX 4096u
#define KC_ADMIN_NAME_MAX 256u /* controller names */
#define KC_ADMIN_KEY_MAX 512u  /* "namespace/name" */

enum kc_admin_command {
  KC_ADMIN_QUEUES = 0,
  KC_ADMIN_KEYS,
  KC_ADMIN_TRACE,
  KC_ADMIN_REQUEUE,
  KC_ADMIN_PAUSE,
  KC_ADMIN_RESUME,
  KC_ADMIN_INFORMERS,
  KC_ADMIN_NCOMMANDS
};

/* `kctrld ctl keys --state`: which keys to list. */
enum kc_admin_state {
  KC_ADMIN_STATE_ANY = 0,
  KC_ADMIN_STATE_QUEUED,
  KC_ADMIN_STATE_INFLIGHT,
  KC_ADMIN_STATE_BACKOFF,
  KC_ADMIN_STATE_FAILING,
};

typedef struct kc_admin_request {
  enum kc_admin_command command;
  char controller[KC_ADMIN_NAME_MAX]; /* "" when the command takes none */
  char key[KC_ADMIN_KEY_MAX];         /* "" when the command takes none */
  enum kc_admin_state state;
} kc_admin_request;

/* "queues", "keys", ... / "queued", "inflight", "backoff", "failing" ("" any). */
const char *kc_admin_command_name(enum kc_admin_command c);
const char *kc_admin_state_name(enum kc_admin_state s);
/* Name -> value; -EINVAL when unknown. */
int kc_admin_command_parse(const char *name, enum kc_admin_command *out);
int kc_admin_state_parse(const char *name, enum kc_admin_state *out);

/* One request line (len bytes, without its newline; need not be
 * NUL-terminated) into *out. 0, or -EINVAL / -E2BIG (longer than
 * KC_ADMIN_REQUEST_MAX - 1) with err set. */
int kc_admin_request_parse(const char *line, size_t len, kc_admin_request *out, char *err,
                           size_t errlen);

/* The request as one line, newline included, appended to out. */
void kc_admin_request_format(const kc_admin_request *r, kc_buf *out);

#endif
