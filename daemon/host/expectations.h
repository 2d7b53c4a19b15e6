/* SPDX-License-Identifier: Apache-2.0 */
/* expectations: kube-controller-manager's ControllerExpectations for one
 * controller: how many creations and deletions of owned objects a key still
 * waits to see in the cache before it may act on the cache again.
 *
 * Owns: one record per key with outstanding expectations (a record whose
 * expectations are all observed is dropped, which behaves exactly like
 * kube's fulfilled record), so memory is bounded by keys in flight.
 *
 * Threads: any thread (plugins set expectations from workers, the loop
 * observes events); a mutex guards the map.
 * Errors: 0 or a negative errno. Ownership: keys are copied.
 */
#ifndef KC_EXPECTATIONS_H
#define KC_EXPECTATIONS_H

#include <stdbool.h>
#include <stdint.h>

/* kube's ExpectationsTimeout. */
#define KC_EXPECTATIONS_TTL_NS (5ull * 60 * 1000000000ull)

typedef struct kc_expectations kc_expectations;

/* ttl_ns 0 means KC_EXPECTATIONS_TTL_NS. Returns NULL on ENOMEM. */
kc_expectations *kc_expectations_new(uint64_t ttl_ns);
void kc_expectations_free(kc_expectations *e);

/* SetExpectations: replaces key's record with (adds, dels) stamped now_ns
 * (kube's ExpectCreations(n) = set(n, 0), ExpectDeletions(n) = set(0, n)).
 * Returns 0, -EINVAL (negative counts, empty key), -ENOMEM. */
int kc_expectations_set(kc_expectations *e, const char *key, int64_t adds, int64_t dels,
                        uint64_t now_ns);

/* LowerExpectations: one creation / deletion observed. Unknown keys are ignored. */
void kc_expectations_observe(kc_expectations *e, const char *key, int64_t adds, int64_t dels);

/* SatisfiedExpectations: true with no record, when all is observed, or when
 * the record is older than the TTL. */
bool kc_expectations_satisfied(kc_expectations *e, const char *key, uint64_t now_ns);

/* DeleteExpectations. */
void kc_expectations_forget(kc_expectations *e, const char *key);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Records held. */
unsigned kc_expectations_count(kc_expectations *e);

#endif
