/* SPDX-License-Identifier: Apache-2.0 */
/* memtrim: see memtrim.h. */
#include "memtrim.h"

#include <stdatomic.h>
#include <stdlib.h>
#ifdef __GLIBC__ /* defined by <stdlib.h> */
#include <malloc.h>
#endif

static _Atomic uint64_t give_backs;

void kc_mem_give_back(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  atomic_fetch_add_explicit(&give_backs, 1, memory_order_relaxed);
}

uint64_t kc_mem_give_backs(void) {
  return atomic_load_explicit(&give_backs, memory_order_relaxed);
}
