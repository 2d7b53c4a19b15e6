/* SPDX-License-Identifier: Apache-2.0 */
/* memtrim: gives the heap's free memory back to the OS (malloc_trim(0) on
 * glibc; nothing elsewhere). The one place that does so, called where a large
 * amount was just freed: after a complete list (daemon/watch/reflector.c: the
 * decode stream's input copies and, after a relist, the replaced objects)
 * and after a workqueue that held many keys drained (daemon/runtime/workqueue.c: the
 * per-key records). glibc returns only the top of a heap by itself, so
 * without this freed small chunks below live objects stay resident
 * (docs/benchmarks.md "Where the bytes above the JSON size go").
 *
 * Cost: one walk over the free chunks of every arena (about 0.3 ms after a
 * 10k-Pod sync), never over live objects; callers rate-limit it. Small
 * chunks freed into glibc's fastbins are only merged by that walk: after a
 * workqueue of 100k keys drained, its 100k freed records made the Done that
 * trims take 7-9 ms on the loop (1M: 150-170 ms). kc_mem_init therefore
 * turns fastbins off (M_MXFAST 0: a small free merges at once, the
 * per-thread tcache still serves the hot sizes), and that Done takes 1.3 ms
 * (1M: 12-13 ms; build/bench/bench_workqueue, docs/benchmarks.md "Loop
 * stalls at a million keys").
 *
 * It also sets how the heap grows while lists are decoded: glibc grows a
 * thread's heap (the decode thread's holds the cached objects) by exactly
 * what one allocation lacks, one mprotect per new object: about 100k system
 * calls in a 100k-Pod sync, each taking the address-space lock the other
 * thread's page faults need (docs/benchmarks.md "Where the sync's system
 * time goes"). While any list is in progress (kc_mem_list_begin/_end), the
 * pad glibc adds to a new heap is KC_MEM_LIST_PAD, so each new heap is
 * writable whole at once; a heap made so never needs mprotect again. When
 * the last list ends the default pad is back, so freeing at the top of a
 * heap returns memory as before.
 *
 * Threads: kc_mem_init on the main thread before any other starts;
 * kc_mem_list_begin/_end and kc_mem_lists on the loop thread (mallopt takes
 * glibc's own lock); kc_mem_give_back any (malloc_trim locks each arena; its
 * counter is atomic).
 * Errors: none (best effort). Ownership: nothing.
 */
#ifndef KC_MEMTRIM_H
#define KC_MEMTRIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* glibc's largest thread heap (HEAP_MAX_SIZE on 64-bit): a pad this large
 * makes a new heap writable whole. Address space only: a page costs memory
 * once it is written. */
#define KC_MEM_LIST_PAD ((size_t)64 << 20)
#define KC_MEM_DEFAULT_PAD ((size_t)128 << 10) /* glibc's DEFAULT_TOP_PAD */

/* Records whether the pad is ours to change: not when `tunables` (the
 * process's GLIBC_TUNABLES, may be NULL) sets glibc.malloc.top_pad (the
 * operator's choice wins), nor without glibc. Returns 1 when it is ours.
 * Turns glibc's fastbins off unless `tunables` sets glibc.malloc.mxfast. */
int kc_mem_init(const char *tunables);

/* A list is in progress for the caller, who keeps `*listing` (false at
 * first): begin marks it and, for the first list in progress, sets the
 * large pad; end unmarks it and, after the last, sets the default pad back.
 * Both do nothing when `*listing` already says so, so every path that ends
 * a list may call end. */
void kc_mem_list_begin(bool *listing);
void kc_mem_list_end(bool *listing);

/* Returns free heap memory to the OS and counts the call. */
void kc_mem_give_back(void);

/* --- Test seam: for tests only, not called by the daemon --- */
/* kc_mem_init turned the fastbins off. */
bool kc_mem_fastbins_off(void);

/* Lists in progress. */
unsigned kc_mem_lists(void);

/* The pad now asked of the allocator: KC_MEM_LIST_PAD while a list is
 * in progress, KC_MEM_DEFAULT_PAD otherwise, 0 when not ours. */
size_t kc_mem_pad(void);

/* Calls of kc_mem_give_back since the process started. */
uint64_t kc_mem_give_backs(void);

#endif
