/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/memtrim: kc_mem_init leaves an operator's
 * GLIBC_TUNABLES top_pad alone; the large pad holds while any list is in
 * progress and the default comes back after the last; under it a fresh
 * thread's heap is writable whole at once instead of growing once per
 * allocation (the mprotect per cached object it removes); kc_mem_init turns
 * glibc's fastbins off unless the operator set glibc.malloc.mxfast;
 * kc_mem_give_back counts its calls. The growth and fastbin tests read
 * glibc's mallinfo2 and skip under an allocator that does not report it
 * (sanitizers, valgrind). */
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "base/memtrim.h"

static void test_operator_top_pad_wins(void **state) {
  (void)state;
  bool a = false;
  assert_int_equal(kc_mem_init("glibc.malloc.top_pad=0"), 0);
  kc_mem_list_begin(&a);
  assert_true(a);
  assert_int_equal(kc_mem_pad(), 0); /* not ours: nothing asked of malloc */
  kc_mem_list_end(&a);
  assert_int_equal(kc_mem_init("glibc.malloc.arena_max=2:glibc.malloc.top_pad=65536"), 0);
  /* a name that only ends like it is not the tunable */
  int ours = kc_mem_init("x.glibc.malloc.top_pad=1");
  assert_int_equal(kc_mem_init("glibc.malloc.arena_max=2"), ours);
  assert_int_equal(kc_mem_init(""), ours);
  assert_int_equal(kc_mem_init(NULL), ours);
}

/* The pad checks hold where the allocator takes mallopt (glibc's own; a
 * sanitizer's refuses it, and then nothing is asked); the count always. */
static void test_pad_while_lists_run(void **state) {
  (void)state;
  if (kc_mem_init(NULL) != 1) skip();
  bool a = false, b = false;
  unsigned n = kc_mem_lists();
  kc_mem_list_begin(&a);
  bool takes = kc_mem_pad() == KC_MEM_LIST_PAD;
  kc_mem_list_begin(&a); /* the same list again: counted once */
  kc_mem_list_begin(&b);
  assert_int_equal(kc_mem_lists(), n + 2);
  kc_mem_list_end(&a);
  if (takes) assert_int_equal(kc_mem_pad(), KC_MEM_LIST_PAD); /* b still lists */
  kc_mem_list_end(&a);                                        /* a again: nothing */
  assert_int_equal(kc_mem_lists(), n + 1);
  kc_mem_list_end(&b);
  assert_false(a || b);
  assert_int_equal(kc_mem_lists(), n);
  if (takes) assert_int_equal(kc_mem_pad(), KC_MEM_DEFAULT_PAD);
  kc_mem_list_end(&b);
  assert_int_equal(kc_mem_lists(), n);
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  assert_true(takes); /* glibc's malloc takes it */
#endif
}

#ifdef __GLIBC__
/* In a thread of its own (a fresh heap): 16 MiB in 5 KB objects, counting
 * how often the bytes the heaps hold from the system change. */
struct growth {
  int steps;
  size_t first;
};

static void *grow(void *arg) {
  struct growth *g = arg;
  enum { N = 3300 };
  static void *objs[N];
  size_t last = mallinfo2().arena;
  for (int i = 0; i < N; i++) {
    objs[i] = malloc(5000);
    if (objs[i] == NULL) return NULL;
    memset(objs[i], 1, 5000);
    size_t now = mallinfo2().arena;
    if (now != last) {
      if (g->steps++ == 0) g->first = now - last;
      last = now;
    }
  }
  for (int i = 0; i < N; i++) free(objs[i]);
  return g;
}

static void test_heap_writable_whole_while_listing(void **state) {
  (void)state;
  if (kc_mem_init(NULL) != 1) skip();
  bool listing = false;
  kc_mem_list_begin(&listing);
  struct growth g = {0};
  pthread_t t;
  void *ret = NULL;
  assert_int_equal(pthread_create(&t, NULL, grow, &g), 0);
  assert_int_equal(pthread_join(t, &ret), 0);
  kc_mem_list_end(&listing);
  assert_non_null(ret);
  if (g.steps == 0) skip(); /* an allocator without mallinfo2 */
  /* one step for the whole heap; with the default pad it grows ~4000 times */
  assert_true(g.steps <= 2);
  assert_true(g.first >= (size_t)16 << 20);
}
#endif

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* Bytes in glibc's fastbins after 2000 small chunks were freed (beyond the
 * few the thread's tcache keeps). */
static size_t fastbin_bytes_after_frees(void) {
  enum { N = 2000 };
  static void *p[N];
  for (int i = 0; i < N; i++) assert_non_null(p[i] = malloc(40));
  for (int i = 0; i < N; i++) free(p[i]);
  return mallinfo2().fsmblks;
}

/* kc_mem_init turns the fastbins off (so a trim has no pile of small
 * chunks to merge), unless the operator set glibc.malloc.mxfast. */
static void test_fastbins_off_unless_operator(void **state) {
  (void)state;
  void *probe = malloc(64);
  assert_non_null(probe);
  size_t reported = mallinfo2().uordblks;
  free(probe);
  if (reported == 0) skip(); /* an allocator that reports nothing (valgrind's) */
  if (mallopt(M_MXFAST, 128) != 1) skip(); /* glibc's default on 64-bit; refused: not glibc's */
  kc_mem_init("glibc.malloc.arena_max=2:glibc.malloc.mxfast=128");
  assert_false(kc_mem_fastbins_off());
  assert_true(fastbin_bytes_after_frees() > 0); /* the operator's setting stands */
  kc_mem_init(NULL);
  assert_true(kc_mem_fastbins_off());
  malloc_trim(0); /* empties the fastbins filled above */
  assert_int_equal(fastbin_bytes_after_frees(), 0);
  kc_mem_init("x.glibc.malloc.mxfast=1"); /* not the tunable */
  assert_true(kc_mem_fastbins_off());
}
#endif

static void test_give_back_counts(void **state) {
  (void)state;
  uint64_t n = kc_mem_give_backs();
  kc_mem_give_back();
  kc_mem_give_back();
  assert_int_equal(kc_mem_give_backs(), n + 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_operator_top_pad_wins),
      cmocka_unit_test(test_pad_while_lists_run),
#ifdef __GLIBC__
      cmocka_unit_test(test_heap_writable_whole_while_listing),
#endif
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
      cmocka_unit_test(test_fastbins_off_unless_operator),
#endif
      cmocka_unit_test(test_give_back_counts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
