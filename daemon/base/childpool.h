/* SPDX-License-Identifier: Apache-2.0 */
/* childpool: the worker slots of a program that reconciles in child
 * processes (an exec hook's persistent children, an isolated plugin's
 * children): one slot per worker, each with at most one running child, and
 * the rule of who pays when a child is lost (docs/hooks.md "Exec hooks",
 * docs/plugins.md "Process isolation").
 *
 * The rule:
 *  - a child lost while reconciling a key (it exited, was killed, hung, broke
 *    the protocol, or could not be started) is the fault of that key alone:
 *    the caller fails the key (the workqueue's per-key backoff delays its
 *    retry) and the slot starts a new child for the next key at once;
 *  - only when KC_CHILDPOOL_BREAK_KEYS distinct keys in a row lost a child,
 *    with no good answer from any child in between, is the program taken to
 *    fail for every key: then no child starts until a backoff has passed
 *    (base_ms, doubling with each further loss once it has passed, up to
 *    max_ms). A key that finds no free slot with a running child meanwhile
 *    is not run: kc_childpool_take says how long to hold it, and the caller
 *    requeues it for then without charging it (no error, no attempt). A
 *    running child still serves. Any good answer ends this and forgets the
 *    losses.
 * So a few poison keys never cost the other keys anything, however often
 * they come back, and a program that fails for every key backs off as a
 * whole instead of being restarted in a loop.
 *
 * The children are the caller's (opaque here): it starts them into the
 * slot it took, uses and kills them; this component only records which slot
 * holds which child and whether a slot is taken.
 *
 * Owns: the slots, the hashes of the keys lost since the last good answer,
 * the backoff and the text of the last loss.
 * Threads: any, concurrently (one mutex, held only inside these calls). A
 * taken slot and its child belong to the taker until kc_childpool_release;
 * a slot nobody takes (before the first take, after the last release: init
 * and fini) to whoever owns the pool.
 * Errors: negative errno values.
 */
#ifndef KC_CHILDPOOL_H
#define KC_CHILDPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Distinct keys losing a child in a row (no good answer in between) that
 * make the whole program back off. More than a handful, so that the
 * poison keys of a working program, which come back on their own per-key
 * backoff, never reach it between two good answers of healthy keys. */
#define KC_CHILDPOOL_BREAK_KEYS 10

typedef struct kc_childpool kc_childpool;

/* A pool of nslots (at least 1) empty slots; the program's backoff goes
 * from base_ms doubling to max_ms. NULL when out of memory. */
kc_childpool *kc_childpool_new(size_t nslots, uint64_t base_ms, uint64_t max_ms);

/* Frees the pool. Its children must have been taken out (kc_childpool_child)
 * and stopped by the caller. NULL ok. */
void kc_childpool_free(kc_childpool *p);

size_t kc_childpool_nslots(const kc_childpool *p);

/* Takes a slot for one reconcile: a free slot with a running child first;
 * else a free one without (the caller starts its child), unless the program
 * backs off. Returns the slot's index; -EBUSY when every slot is taken;
 * -EAGAIN when the program backs off and no free slot has a running child:
 * the key is not run, *hold_ns says how long the backoff has left and why
 * (when not NULL) gets the last loss. */
int kc_childpool_take(kc_childpool *p, uint64_t *hold_ns, char *why, size_t whylen);

/* The child of slot i (NULL: none running), for the slot's owner to start,
 * use, kill or take out (by assigning). */
void **kc_childpool_child(kc_childpool *p, size_t i);

enum kc_childpool_outcome {
  KC_CHILDPOOL_ANSWERED, /* the child answered well: the program works */
  KC_CHILDPOOL_LOST,     /* the child was lost reconciling the key (killed by the caller) */
  KC_CHILDPOOL_UNUSED,   /* the slot served nothing (the request never went out) */
};

/* Gives back a slot taken by kc_childpool_take, with what happened in it.
 * LOST: the slot's child must be NULL by now; key (borrowed) is the one
 * whose reconcile lost it and why (borrowed; kept for the holds' message)
 * the reason. Returns the backoff this loss started (ns), 0 when none (the
 * usual case: only that key pays). */
uint64_t kc_childpool_release(kc_childpool *p, size_t i, enum kc_childpool_outcome outcome,
                              const char *key, const char *why);

/* Takes the running child off slot i when the slot is free and
 * dead(child) says so (a child that died between reconciles), under the
 * lock the takers use, so no reconcile gets it meanwhile. Returns it (the
 * caller's now, to reap) or NULL. No key is charged. */
void *kc_childpool_take_dead(kc_childpool *p, size_t i, bool (*dead)(const void *child));

#endif
