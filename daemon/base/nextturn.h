/* SPDX-License-Identifier: Apache-2.0 */
/* nextturn: runs a callback once in the event loop's next iteration, after
 * the loop has polled for I/O.
 *
 * Long work on the loop is cut into slices, each run in its own loop turn so
 * that sockets, probes and Lease renewal are served between them. A 0 ms uv
 * timer re-armed from its own callback does not do that with libuv 1.44
 * (Debian 12): the timer phase runs every timer whose due time is not after
 * the loop's time, and a 0 ms timer started in that phase is due at once,
 * so the whole chain of slices ran in one timer phase without a poll. An
 * idle handle is run once per iteration (one started from its callback waits
 * for the next) and makes that iteration's poll non-blocking, so a chain of
 * slices costs no sleep either.
 *
 * The loop-lag probe (ops/looplag.h) counts the time between polls, so a
 * phase that forgets to yield shows up there.
 *
 * Context: loop thread only (the loop the handle was initialised on).
 * Ownership: embedded in its owner; kc_next_turn_close closes the handle
 * and the owner frees its memory in the close callback.
 * Errors: kc_next_turn_init returns 0 or a negative errno (uv_idle_init).
 */
#ifndef KC_NEXTTURN_H
#define KC_NEXTTURN_H

#include <stdbool.h>
#include <uv.h>

typedef struct kc_next_turn kc_next_turn;
typedef void (*kc_next_turn_cb)(kc_next_turn *nt);

struct kc_next_turn {
  uv_idle_t idle; /* idle.data is this struct until closed; use `data` */
  kc_next_turn_cb cb;
  void *data; /* the owner's */
};

int kc_next_turn_init(uv_loop_t *loop, kc_next_turn *nt, void *data);
/* cb runs once in the next loop iteration; a pending run is replaced. */
void kc_next_turn_start(kc_next_turn *nt, kc_next_turn_cb cb);
/* Cancels a pending run (no-op when none). */
void kc_next_turn_stop(kc_next_turn *nt);
bool kc_next_turn_pending(const kc_next_turn *nt);
/* Cancels and closes; close_cb (may be NULL) gets the idle handle, whose
 * data is then `data`, the owner's (as for the owner's other handles). */
void kc_next_turn_close(kc_next_turn *nt, uv_close_cb close_cb);

#endif
