/* SPDX-License-Identifier: Apache-2.0 */
/* applymemo: what one controller's desired-state commits (desired.h) last
 * applied, so that a commit can leave a child alone that nothing changed
 * since: per child object, by its uid, the 64-bit hash and length of the
 * last apply body that succeeded and the resourceVersion of the object the
 * server answered with. A child whose cached object still has that
 * resourceVersion and whose new body has that hash and length was neither
 * changed by anyone since our apply nor changed in what we want: applying
 * it again would change nothing.
 *
 * Also owns the process's count of applies left out, per controller name
 * (kept for the life of the process, so that a counter survives a reload),
 * behind kctrld_desired_applies_skipped_total.
 *
 * Bounds: at most the cap's entries (KC_APPLYMEMO_CAP by default) per
 * memo; remembering one more drops the oldest remembered. An entry is 104
 * bytes (112 with glibc's malloc), so a full table is about 7 MiB plus its
 * 128 KiB of buckets, allocated on the first remember. A uid or
 * resourceVersion longer than kept (KC_APPLYMEMO_UID_MAX, _RV_MAX) is not
 * remembered: that child is applied every time.
 *
 * Threads: any thread; a memo's mutex guards its table (the reconciles of
 * a controller run on its worker threads at once), another mutex the skip
 * counts.
 * Errors: none to report: out of memory only means not remembered.
 * Ownership: strings are copied.
 */
#ifndef KC_APPLYMEMO_H
#define KC_APPLYMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KC_APPLYMEMO_CAP 65536u
#define KC_APPLYMEMO_UID_MAX 39 /* a uid is a UUID: 36 */
#define KC_APPLYMEMO_RV_MAX 23  /* etcd's: a uint64, 20 digits */

typedef struct kc_applymemo kc_applymemo;

/* cap 0: KC_APPLYMEMO_CAP. NULL on ENOMEM. */
kc_applymemo *kc_applymemo_new(unsigned cap);
void kc_applymemo_free(kc_applymemo *m);

/* After an apply of body (hash, len) that answered with the object uid at
 * resourceVersion rv: replaces what uid had. An empty or too long uid or
 * rv forgets uid instead. */
void kc_applymemo_remember(kc_applymemo *m, const char *uid, size_t uid_len, const char *rv,
                           size_t rv_len, uint64_t hash, size_t len);

/* Whether the object uid, cached at resourceVersion rv, is what our last
 * remembered apply of a body (hash, len) made of it. */
bool kc_applymemo_unchanged(kc_applymemo *m, const char *uid, size_t uid_len, const char *rv,
                            size_t rv_len, uint64_t hash, size_t len);

/* Drops what uid had (its object is deleted). */
void kc_applymemo_forget(kc_applymemo *m, const char *uid, size_t uid_len);

/* Entries held. */
size_t kc_applymemo_size(kc_applymemo *m);

/* Counts one apply of controller left out. */
void kc_applymemo_count_skip(const char *controller);

/* Calls fn for every controller counted so far, in the order first counted. */
void kc_applymemo_each_skips(void (*fn)(const char *controller, uint64_t n, void *ud), void *ud);

/* The count of controller; 0 when never counted. */
uint64_t kc_applymemo_skips_of(const char *controller);

#endif
