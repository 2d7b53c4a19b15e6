/* SPDX-License-Identifier: Apache-2.0 */
/* memtrim: see memtrim.h. */
#include "base/memtrim.h"

#include <stdatomic.h>
#include <stdlib.h>
#ifdef __GLIBC__ /* defined by <stdlib.h> */
#include <malloc.h>
#endif

#include <string.h>

static _Atomic uint64_t give_backs;
static bool pad_ours = true;  /* kc_mem_init: no operator top_pad */
static bool fastbins_off;     /* kc_mem_init turned glibc's fastbins off */
static unsigned lists;        /* lists in progress (loop thread) */
static size_t pad_now;        /* what was last asked of mallopt */

/* Does `tunables` ("name=value:name=value", may be NULL) set `name`? */
static bool tunable_set(const char *tunables, const char *name) {
  size_t n = strlen(name);
  for (const char *p = tunables; p && (p = strstr(p, name)) != NULL; p++)
    if ((p == tunables || p[-1] == ':') && p[n] == '=') return true;
  return false;
}

int kc_mem_init(const char *tunables) {
#ifdef __GLIBC__
  fastbins_off = !tunable_set(tunables, "glibc.malloc.mxfast") && mallopt(M_MXFAST, 0) == 1;
  pad_ours = !tunable_set(tunables, "glibc.malloc.top_pad");
#else
  pad_ours = false;
#endif
  return pad_ours ? 1 : 0;
}

bool kc_mem_fastbins_off(void) { return fastbins_off; }

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
