/* SPDX-License-Identifier: Apache-2.0 */
/* history: the witnesses of a reflector's history check for caches too large
 * for the LIST comparison (reflector.h, "History check"), the verdict on
 * what the server answers for each, and the LIST comparison's limit.
 *
 * What it owns: KC_HISTORY_WITNESSES copies of the identity of objects the
 * cache was built from: [0] the one with the highest resourceVersion (a
 * non-numeric RV only replaces a missing one), the others a uniform sample
 * (reservoir sampling) of the objects offered since the last forget; and
 * the progress of one check over them. It does no I/O: the reflector GETs
 * the witness kc_history_next names and hands a 2xx answer to
 * kc_history_judge.
 *
 * Threads: none of its own and no locking; one kc_history per reflector,
 * used on that reflector's loop thread.
 */
#ifndef KC_HISTORY_H
#define KC_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/kobj.h"

/* Objects read back by a history check: the newest cached one and a random
 * sample of 16 others. */
#define KC_HISTORY_WITNESSES 17
/* Caches of at most this many objects are compared whole with the server's
 * state at the resourceVersion the watch would resume from (one
 * metadata-only LIST, about 300 bytes an object); larger ones read the
 * witnesses. */
#define KC_HISTORY_LIST_MAX 5000

typedef struct kc_history_witness {
  bool set;
  char ns[254], name[254], uid[64], rv[64];
  uint64_t rvn; /* rv as a number; 0: not numeric */
} kc_history_witness;

/* Zero-initialised: no witness, no check running. */
typedef struct kc_history {
  kc_history_witness witness[KC_HISTORY_WITNESSES];
  uint64_t seen; /* objects offered to the sample since the last forget */
  unsigned next; /* the witness the running check reads */
} kc_history;

/* Drops every witness and restarts the sample (a new list began). */
void kc_history_forget(kc_history *h);
/* Offers a cached object: it becomes witness 0 when its RV is the highest
 * yet, a sampled witness gets its newer RV, and otherwise it may replace a
 * sampled one (rng: the caller's xorshift64 state, base/hash.h). Objects
 * whose name, namespace, uid or RV do not fit a witness are skipped. */
void kc_history_note(kc_history *h, const kc_obj *obj, uint64_t *rng);
/* The object (namespace, name) is gone from the cache: no witness. */
void kc_history_drop(kc_history *h, const kc_obj *obj);
/* Whether any witness is set. */
bool kc_history_any(const kc_history *h);

/* Starts a check at the first witness. */
void kc_history_begin(kc_history *h);
/* The witness to read next, skipping unset ones and a sampled one that is
 * witness 0 as well (each object once); NULL when every witness passed. */
const kc_history_witness *kc_history_next(kc_history *h);
/* Judges the server's 2xx answer (a metadata-only object, `len` bytes of
 * `body`) for the witness kc_history_next returned, `resume_rv` being the
 * RV the watch would resume from: true (call kc_history_passed) when the
 * same history could hold it: unchanged (same uid and RV), or changed after
 * resume_rv (a numeric RV above it: the watch brings that change); false
 * with the reason in why otherwise (an RV at or below resume_rv other than
 * the cached one exists in another history only). */
bool kc_history_judge(const kc_history *h, const char *body, size_t len, const char *resume_rv,
                      char *why, size_t cap);
/* The current witness passed: kc_history_next moves on. */
void kc_history_passed(kc_history *h);

#endif
