/* SPDX-License-Identifier: Apache-2.0 */
/* memtrim: gives the heap's free memory back to the OS (malloc_trim(0) on
 * glibc; nothing elsewhere). The one place that does so, called where a large
 * amount was just freed: after a complete list (daemon/reflector.c: the
 * decode stream's input copies and, after a relist, the replaced objects)
 * and after a workqueue that held many keys drained (daemon/workqueue.c: the
 * per-key records). glibc returns only the top of a heap by itself, so
 * without this freed small chunks below live objects stay resident
 * (docs/benchmarks.md "Where the bytes above the JSON size go").
 *
 * Cost: one walk over the free chunks of every arena (about 0.3 ms after a
 * 10k-Pod sync), never over live objects; callers rate-limit it.
 * Threads: any (malloc_trim locks each arena); the counter is atomic.
 * Errors: none (best effort). Ownership: nothing.
 */
#ifndef KC_MEMTRIM_H
#define KC_MEMTRIM_H

#include <stdint.h>

/* Returns free heap memory to the OS and counts the call. */
void kc_mem_give_back(void);

/* Calls of kc_mem_give_back since the process started (test seam). */
uint64_t kc_mem_give_backs(void);

#endif
