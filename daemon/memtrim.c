/* SPDX-License-Identifier: Apache-2.0 */
/* memtrim: see memtrim.h. */
#include "memtrim.h"

#include <stdatomic.h>
#include <stdlib.h>
#ifdef __GLIBC__ /* defined by <stdlib.h> */
#include <malloc.h>
#endif

#include <string.h>

static _Atomic uint64_t give_backs;
static bool pad_ours = true;  /* kc_mem_init: no operator top_pad */
static unsigned lists;        /* lists in progress (loop thread) */
static size_t pad_now;        /* what was last asked of mallopt */

int kc_mem_init(const char *tunables) {
  /* GLIBC_TUNABLES is "name=value:name=value" */
  for (const char *p = tunables; p && (p = strstr(p, "glibc.malloc.top_pad=")) != NULL; p++)
    if (p == tunables || p[-1] == ':') return pad_ours = false, 0;
#ifdef __GLIBC__
  return pad_ours = true, 1;
#else
  return pad_ours = false, 0;
#endif
}

static void set_pad(size_t pad) {
  if (!pad_ours) return;
#ifdef __GLIBC__
  if (mallopt(M_TOP_PAD, (int)pad) == 1) pad_now = pad;
#else
  (void)pad;
#endif
}

void kc_mem_list_begin(bool *listing) {
  if (*listing) return;
  *listing = true;
  if (lists++ == 0) set_pad(KC_MEM_LIST_PAD);
}

void kc_mem_list_end(bool *listing) {
  if (!*listing) return;
  *listing = false;
  if (--lists == 0) set_pad(KC_MEM_DEFAULT_PAD);
}

unsigned kc_mem_lists(void) { return lists; }

size_t kc_mem_pad(void) { return pad_ours ? pad_now : 0; }

void kc_mem_give_back(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  atomic_fetch_add_explicit(&give_backs, 1, memory_order_relaxed);
}

uint64_t kc_mem_give_backs(void) {
  return atomic_load_explicit(&give_backs, memory_order_relaxed);
}
