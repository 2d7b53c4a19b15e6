/* SPDX-License-Identifier: Apache-2.0 */
/* admin: the answers of `kctrld ctl` (docs/operations.md "kctrld ctl"):
 * a request (adminreq.h) against the daemon's view (ops.h kc_ops_view)
 * into one JSON document. The admin socket (adminsock.h) serves them; the
 * client renders tables from the same documents.
 *
 *  queues     {"controllers":[{"name","running","active","paused","depth",
 *              "inflight","backoff","failing","oldestWaitSeconds",
 *              "depthByPriority":{"high","normal","low"}}]}
 *  keys       {"controller","keys":[{"key","state","priority","attempts",
 *              "lastError","nextRetrySeconds"}]}: every key the queue holds (queued,
 *              inflight, backoff) or whose last reconcile failed
 *              ("failing"), sorted by key; state is the first of
 *              inflight, queued, backoff, failing that holds
 *  trace      {"controller","key","entries":[{"time","stage","detail"}],
 *              "matched","ringEntries","ringBytes"}: oldest first
 *  requeue    {"controller","key","requeued":true}
 *  pause, resume {"controller","paused","running"[,"warning"]}: with the
 *              view's paused set, a configured controller that is not
 *              running is paused or resumed there (it applies when the
 *              controller starts); warning: the set could not be written
 *              to the state directory (the pause holds until a restart)
 *  informers  {"informers":[...]}: the /debug/informers array
 * An error is {"error":"no such controller \"x\" (controllers: a, b)"}.
 *
 * Threads: loop thread (it reads and changes controllers). Errors:
 * kc_admin_answer returns 0 with the document, or a negative errno with
 * the {"error":...} document (-ENOENT no such controller, -EAGAIN the
 * controller is not running, -ENOMEM).
 */
#ifndef KC_ADMIN_H
#define KC_ADMIN_H

#include "base/buf.h"
#include "ops/adminreq.h"
#include "ops/ops.h"

/* Appends the answer to r (a JSON document and a newline) to out. */
int kc_admin_answer(const kc_ops_view *v, const kc_admin_request *r, kc_buf *out);

/* Appends {"error": message} and a newline. */
void kc_admin_error(kc_buf *out, const char *message);

#endif
