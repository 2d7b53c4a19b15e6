/* SPDX-License-Identifier: Apache-2.0 */
/* hook_health: whether each controller's hook answers, for the readiness
 * check controller/NAME (ops.h). A hook is "not answering" when its latest
 * exchange ended without an answer (timed out, the child exited or closed
 * its pipes first, the child or the connection could not be started; the
 * persistent exec hook reports a lost child only once its program backs
 * off as a whole: one poison key is not the hook's fault) and
 * none has answered since, or when an exchange has been outstanding longer
 * than the hook's timeout (plus one second for the kill). Any answer, even
 * an error or a malformed one, clears it: the hook is there.
 *
 * Owns: a process-wide list of entries, one per hook instance (exec or
 * webhook), under one mutex; a reload's new instance and the old one being
 * retired may both exist for a while: the controller is not answering if
 * either says so.
 * Threads: any (reconciles on worker threads, the check on the loop).
 * Errors: kc_hook_health_register returns NULL when out of memory (the
 * instance then reports nothing: its controller counts as answering).
 */
#ifndef KC_HOOK_HEALTH_H
#define KC_HOOK_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kc_hook_health_entry kc_hook_health_entry;

kc_hook_health_entry *kc_hook_health_register(const char *controller, uint64_t timeout_ms);
void kc_hook_health_unregister(kc_hook_health_entry *e); /* NULL: no-op */

/* An exchange starts: returns a token for kc_hook_health_end (-1 when too
 * many are outstanding to track; end accepts it). e may be NULL. */
int kc_hook_health_begin(kc_hook_health_entry *e);
/* The exchange ended: answered, or not with why (copied). */
void kc_hook_health_end(kc_hook_health_entry *e, int token, bool answered, const char *why);

/* The exchange ended in a way that says nothing of the hook as a whole (a
 * child lost on one poison key): the verdict stays what it was. */
void kc_hook_health_abandon(kc_hook_health_entry *e, int token);

/* true when every hook instance of controller answers (or there is none);
 * else false with "hook not answering: ..." in why. */
bool kc_hook_health(const char *controller, char *why, size_t cap);

#endif
