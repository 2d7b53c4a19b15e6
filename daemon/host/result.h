/* SPDX-License-Identifier: Apache-2.0 */
/* result: what one reconcile returns, shared by everything that runs a
 * reconcile (the plugin host, hooks, isolated children) and the worker pool
 * that carries it back to the loop.
 *
 * Owns: types only. Threads: any.
 */
#ifndef KC_RESULT_H
#define KC_RESULT_H

#include <stdbool.h>
#include <stdint.h>

/* Values equal the public KCTRLD_RESULT_* codes (kctrld/plugin.h). */
enum kc_result_kind {
  KC_RESULT_DONE = 0,
  KC_RESULT_REQUEUE = 1,
  KC_RESULT_REQUEUE_AFTER = 2,
  KC_RESULT_ERROR = 3,
  /* An error no retry can fix (controller-runtime's TerminalError): logged
   * and counted like an error, but the key is not requeued; the next event
   * that queues it runs it again. */
  KC_RESULT_TERMINAL = 4,
};

#define KC_RESULT_MESSAGE_MAX 512

typedef struct kc_reconcile_result {
  enum kc_result_kind kind;
  uint64_t after_ms;                     /* KC_RESULT_REQUEUE_AFTER */
  char message[KC_RESULT_MESSAGE_MAX];   /* KC_RESULT_ERROR/TERMINAL, NUL-terminated */
  /* KC_RESULT_REQUEUE_AFTER only: the key was not run at all (the program
   * it goes to backs off as a whole, base/childpool.h), so it comes back
   * after after_ms with its failure count kept: no attempt is charged and
   * no backoff forgotten. */
  bool held;
  /* The level the key is requeued at, when has_priority (a public
   * KCTRLD_PRIORITY_* value: below 0 low, 0 normal, above 0 high); else the
   * level it ran at. Set by result_requeue_priority. */
  bool has_priority;
  int priority;
} kc_reconcile_result;

/* Runs on a worker thread. *res arrives as {KC_RESULT_DONE, 0, "", false, false, 0}.
 * Ownership: key and res are borrowed for the call. */
typedef void (*kc_reconcile_fn)(void *ud, const char *key, kc_reconcile_result *res);

#endif
