/* SPDX-License-Identifier: Apache-2.0 */
/* sharedtext: immutable pieces of JSON text kept once however many cached
 * objects contain them (docs/design.md "Shared pieces of text").
 *
 * Owns: the process-wide pool of pieces, keyed by their bytes. The builder
 * (kbuild.c) hands it the text of a value that is typically the same in
 * many objects (metadata.managedFields[].fieldsV1: every Pod of a
 * ReplicaSet or DaemonSet carries the same one from its controller) and
 * gets back the piece already in the pool, or a new one; the object then
 * holds a reference instead of the bytes (kobj.h "Shared pieces").
 *
 * Threads: any. The pool is one mutex-protected table; a lookup costs one
 * hash over the bytes (32 bytes per step) and one memcmp on a hit, the
 * release one lock. Pieces are immutable and freed with their last
 * reference, so the pool holds only pieces some object still uses.
 * Errors: NULL with errno ENOMEM (or EINVAL for an empty or oversized text).
 * Ownership: kc_shared_text_get returns a new reference; the caller gives
 * it back with kc_shared_text_put.
 */
#ifndef KC_SHAREDTEXT_H
#define KC_SHAREDTEXT_H

#include <stddef.h>
#include <stdint.h>

typedef struct kc_shared_text {
  struct kc_shared_text *next; /* pool bucket chain: the pool's, under its lock */
  uint64_t hash;
  uint32_t refs;               /* under the pool's lock */
  uint32_t len;                /* bytes of text, without the NUL */
  char text[];                 /* NUL-terminated */
} kc_shared_text;

/* The piece holding exactly these bytes (1 <= len < 2^32), with a new
 * reference: the pool's copy when one exists, else a new one. */
kc_shared_text *kc_shared_text_get(const char *s, size_t len);

/* Gives a reference back; the last one frees the piece. NULL: no-op. */
void kc_shared_text_put(kc_shared_text *t);

/* What the pool holds now: distinct pieces, their bytes (text only) and
 * the references to them (one per place an object uses one). */
typedef struct kc_shared_text_stats {
  uint64_t pieces, bytes, refs;
} kc_shared_text_stats;
kc_shared_text_stats kc_shared_text_stats_now(void);

#endif
