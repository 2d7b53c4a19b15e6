/* SPDX-License-Identifier: Apache-2.0 */
/* writeobserver: who hears of the writes a plugin call makes. The runtime
 * sets an observer on a worker thread around a reconcile (to trace the
 * key's writes, runtime/keytrace.h); hostenv.c's API request reports every
 * request other than GET it sends on that thread (the host functions'
 * create, update, patch, apply and delete, dry-run ones too, and desired
 * state's) once answered: verb, URL path, HTTP code (0: no answer) and the
 * written object's resourceVersion from a 2xx body ("" when it carries
 * none).
 *
 * Owns one thread-local observer per thread; nothing is shared.
 * Threads: any; each call concerns the calling thread only.
 */
#ifndef KC_WRITEOBSERVER_H
#define KC_WRITEOBSERVER_H

#include <stddef.h>

typedef void (*kc_write_observer_fn)(void *ud, const char *verb, const char *path, long code,
                                     const char *resource_version);

/* Sets the calling thread's observer; NULL clears it. */
void kc_write_observer_set(kc_write_observer_fn fn, void *ud);

/* A write answered with code (0: none) and body (may be NULL): tells the
 * calling thread's observer, if any (the body is read only then). */
void kc_write_observer_report(const char *verb, const char *path, long code, const char *body,
                              size_t body_len);

#endif
