/* SPDX-License-Identifier: Apache-2.0 */
/* keytrace: one controller's memory of what happened to its keys, for
 * `kctrld ctl trace` and `kctrld ctl keys` (docs/operations.md "kctrld ctl").
 *
 * Owns two things:
 *  - a ring of the last `capacity` stages of any key: the watch event that
 *    queued it and why (its own event, an owned child, a mapping, a resync,
 *    a shard range, an operator's requeue), its dequeue, the reconcile's
 *    result and duration, the writes the reconcile made, its requeue. Each
 *    entry is fixed size (struct kc_keytrace_entry, 256 bytes), so the ring
 *    costs capacity x 256 bytes whatever the traffic (KC_KEYTRACE_DEFAULT
 *    entries: 256 KiB per controller); old entries are overwritten. A key
 *    is matched by a 64-bit hash of its text; details longer than the entry
 *    holds are cut;
 *  - the last error of every key whose last reconcile failed (cleared by a
 *    success), at most KC_KEYTRACE_MAX_ERRORS keys (beyond that a failure
 *    is counted but its message not kept).
 *
 * Threads: any. The loop records events, dequeues and results; worker
 * threads record writes (host/hostapi.h write observer); the admin socket
 * reads on the loop. One mutex guards both parts.
 * Errors: 0 or a negative errno.
 */
#ifndef KC_KEYTRACE_H
#define KC_KEYTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KC_KEYTRACE_DEFAULT 1024u
#define KC_KEYTRACE_DETAIL_MAX 224u
#define KC_KEYTRACE_ERROR_MAX 256u
#define KC_KEYTRACE_MAX_ERRORS 65536u

enum kc_keytrace_stage {
  KC_TRACE_QUEUED = 0, /* an event or a request put the key in the queue (or found it there) */
  KC_TRACE_DEQUEUED,   /* handed to a worker */
  KC_TRACE_RESULT,     /* the reconcile's result and duration */
  KC_TRACE_WRITE,      /* a write the reconcile made */
  KC_TRACE_REQUEUE,    /* what the result did to the queue */
  KC_TRACE_NSTAGES
};

/* "queued", "dequeued", "result", "write", "requeue". */
const char *kc_keytrace_stage_name(enum kc_keytrace_stage s);

typedef struct kc_keytrace_entry {
  uint64_t seq;      /* 1, 2, ... in recording order */
  uint64_t wall_ms;  /* wall-clock time, ms since the epoch */
  uint64_t key_hash;
  uint32_t stage;    /* enum kc_keytrace_stage */
  uint32_t pad;
  char detail[KC_KEYTRACE_DETAIL_MAX]; /* NUL-terminated */
} kc_keytrace_entry;

typedef struct kc_keytrace kc_keytrace;

/* capacity 0: KC_KEYTRACE_DEFAULT. NULL on ENOMEM. */
kc_keytrace *kc_keytrace_new(size_t capacity);
void kc_keytrace_free(kc_keytrace *t); /* NULL: no-op */

uint64_t kc_keytrace_hash(const char *key);

/* Records one stage of key; detail is printf-formatted and cut to fit.
 * t NULL: no-op. */
void kc_keytrace_add(kc_keytrace *t, const char *key, enum kc_keytrace_stage stage,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Copies the ring's entries of key, oldest first, into out (at most max);
 * returns how many there are (may exceed max: the newest max are copied). */
size_t kc_keytrace_find(kc_keytrace *t, const char *key, kc_keytrace_entry *out, size_t max);

/* The last error of key: message NULL clears it (a success). 0, or -ENOMEM,
 * or -ENOSPC (KC_KEYTRACE_MAX_ERRORS keys kept already). */
int kc_keytrace_set_error(kc_keytrace *t, const char *key, const char *message);
/* Copies the key's last error into buf (cut to cap); false when the key's
 * last reconcile did not fail (or its message was not kept). */
bool kc_keytrace_last_error(kc_keytrace *t, const char *key, char *buf, size_t cap);
/* Keys with a last error. */
size_t kc_keytrace_failing(kc_keytrace *t);
/* Calls fn for every key with a last error (under the lock: fn must not
 * call back into t). */
void kc_keytrace_each_error(kc_keytrace *t, void (*fn)(const char *key, const char *message, void *ud),
                            void *ud);

size_t kc_keytrace_capacity(const kc_keytrace *t);
/* Entries recorded since creation (the ring holds the last capacity). */
uint64_t kc_keytrace_recorded(kc_keytrace *t);
/* The ring and the error table, in bytes. */
size_t kc_keytrace_mem_bytes(kc_keytrace *t);

#endif
