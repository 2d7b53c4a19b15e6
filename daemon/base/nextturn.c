/* SPDX-License-Identifier: Apache-2.0 */
/* nextturn: see nextturn.h. */
#include "base/nextturn.h"

static void on_idle(uv_idle_t *h) {
  kc_next_turn *nt = h->data;
  uv_idle_stop(h);
  kc_next_turn_cb cb = nt->cb;
  nt->cb = NULL;
  if (cb) cb(nt);
}

int kc_next_turn_init(uv_loop_t *loop, kc_next_turn *nt, void *data) {
  nt->cb = NULL;
  nt->data = data;
  int rc = uv_idle_init(loop, &nt->idle);
  if (rc == 0) nt->idle.data = nt;
  return rc;
}

void kc_next_turn_start(kc_next_turn *nt, kc_next_turn_cb cb) {
  nt->cb = cb;
  uv_idle_start(&nt->idle, on_idle); /* no-op when already active */
}

void kc_next_turn_stop(kc_next_turn *nt) {
  nt->cb = NULL;
  uv_idle_stop(&nt->idle);
}

bool kc_next_turn_pending(const kc_next_turn *nt) { return nt->cb != NULL; }

void kc_next_turn_close(kc_next_turn *nt, uv_close_cb close_cb) {
  kc_next_turn_stop(nt);
  /* No run can follow: the handle's data may now be the owner's, so one
   * close callback serves this handle and the owner's others alike. */
  nt->idle.data = nt->data;
  uv_close((uv_handle_t *)&nt->idle, close_cb);
}
