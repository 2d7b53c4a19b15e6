/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/idset: kc_idset through each representation
 * (inline, array, hash table, bitmap) and back, checked against a plain bitmap
 * after every operation; kc_iddict with colliding hashes (backward-shift
 * deletion must keep every other entry reachable), borrowed and copied
 * keys, pairs with and without a second string, and a large dictionary
 * that grows and shrinks a few entries per call, checked against the keys
 * it must hold. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/hash.h"
#include "cache/idset.h"

#define UNIVERSE 2048

/* The set holds exactly the ids marked in `in`, each once when iterated. */
static void same_as(const kc_idset *s, const bool *in) {
  static unsigned seen[UNIVERSE];
  memset(seen, 0, sizeof seen);
  uint32_t n = 0, id;
  kc_iditer it = kc_iditer_start(s);
  while (kc_iditer_next(&it, &id)) {
    assert_true(id < UNIVERSE);
    assert_true(in[id]);
    seen[id]++;
    n++;
  }
  assert_int_equal(n, s->n);
  for (uint32_t i = 0; i < UNIVERSE; i++) {
    assert_int_equal(seen[i], in[i] ? 1 : 0);
    assert_int_equal(kc_idset_has(s, i), in[i]);
  }
}

static void test_idset_representations(void **state) {
  (void)state;
  static bool in[UNIVERSE];
  memset(in, 0, sizeof in);
  kc_idset s = {0};
  same_as(&s, in);
  /* inline (2), array (up to KC_IDSET_SMALL), then a hash table */
  for (uint32_t id = 0; id < 600; id++) {
    assert_int_equal(kc_idset_add(&s, id * 3), 0);
    in[id * 3] = true;
    if (id == 1) assert_int_equal(s.cap, 0);
    if (id == KC_IDSET_SMALL - 1) assert_true(s.cap > 0 && s.cap <= KC_IDSET_SMALL);
    if (id == KC_IDSET_SMALL) assert_true(s.cap > KC_IDSET_SMALL);
    if (id < 20 || id % 97 == 0) same_as(&s, in);
  }
  same_as(&s, in);
  /* ids 0, 3, ..., 1797: a bitmap (1 bit per id up to the largest) is
   * smaller than a table of 4 bytes per slot */
  assert_true(s.cap & KC_IDSET_BITMAP);
  assert_int_equal(kc_idset_bytes(&s), (1797 / 64 + 1) * sizeof(uint64_t));
  assert_false(kc_idset_remove(&s, 1)); /* never a member */
  assert_false(kc_idset_remove(&s, UNIVERSE - 1));
  /* and back down: shrinks to the array, then inline */
  for (uint32_t id = 0; id < 600; id++) {
    assert_true(kc_idset_remove(&s, id * 3));
    assert_false(kc_idset_remove(&s, id * 3));
    in[id * 3] = false;
    if (id % 53 == 0 || id > 590) same_as(&s, in);
  }
  assert_int_equal(s.n, 0);
  assert_int_equal(s.cap, 0);
  assert_int_equal(kc_idset_bytes(&s), 0);
  kc_idset_free(&s);
}

/* Random adds and removes against the bitmap, across every size. */
static void test_idset_random(void **state) {
  (void)state;
  static bool in[UNIVERSE];
  memset(in, 0, sizeof in);
  kc_idset s = {0};
  uint64_t rng = 0x9e3779b97f4a7c15ULL;
  for (int step = 0; step < 20000; step++) {
    /* The range of ids grows and shrinks so that the set passes through
     * every representation several times. */
    uint32_t range = 1 + (uint32_t)((step / 2000) % 2 ? 16 : 1500);
    uint32_t id = (uint32_t)(kc_xorshift64s(&rng) % range);
    if (in[id]) {
      assert_true(kc_idset_remove(&s, id));
      in[id] = false;
    } else {
      assert_int_equal(kc_idset_add(&s, id), 0);
      in[id] = true;
    }
    if (step % 1000 == 0) same_as(&s, in);
  }
  same_as(&s, in);
  kc_idset_free(&s);
  assert_int_equal(s.n, 0);
}

/* Dense sets of small ids (the store's slot numbers: a label every object
 * has) cost a bit per id, not 5-11 bytes per member; sparse ones stay
 * tables, and a bitmap that becomes sparse turns back into one. */
static void test_idset_bitmap(void **state) {
  (void)state;
  enum { N = 10000 };
  kc_idset s = {0};
  for (uint32_t id = 0; id < N; id++) assert_int_equal(kc_idset_add(&s, id), 0);
  assert_int_equal(s.n, N);
  assert_true(kc_idset_bytes(&s) <= N / 8 + N / 32); /* a table: 16384 * 4 bytes */
  for (uint32_t id = 0; id < N + 100; id++) assert_int_equal(kc_idset_has(&s, id), id < N);
  uint32_t count = 0, sum_ok = 1, prev = 0, id;
  kc_iditer it = kc_iditer_start(&s);
  while (kc_iditer_next(&it, &id)) {
    if (count && id <= prev) sum_ok = 0;
    prev = id;
    count++;
  }
  assert_int_equal(count, N);
  assert_true(sum_ok);
  /* every 10th id left: still dense enough for the bitmap */
  for (uint32_t i = 0; i < N; i++)
    if (i % 10) assert_true(kc_idset_remove(&s, i));
  assert_int_equal(s.n, N / 10);
  assert_true(s.cap & KC_IDSET_BITMAP);
  assert_false(kc_idset_remove(&s, 1));
  assert_false(kc_idset_remove(&s, 5 * N)); /* beyond the bitmap */
  /* every 1000th: a bitmap would cost 125 bytes per member: a table again */
  for (uint32_t i = 0; i < N; i += 10)
    if (i % 1000) assert_true(kc_idset_remove(&s, i));
  assert_int_equal(s.n, N / 1000);
  assert_false(s.cap & KC_IDSET_BITMAP);
  for (uint32_t i = 0; i < N; i++) assert_int_equal(kc_idset_has(&s, i), i % 1000 == 0);
  kc_idset_free(&s);
  /* sparse from the start: a table whose size follows the members */
  for (uint32_t i = 0; i < 1000; i++) assert_int_equal(kc_idset_add(&s, i * 4099), 0);
  assert_false(s.cap & KC_IDSET_BITMAP);
  assert_true(kc_idset_bytes(&s) <= 2048 * sizeof(uint32_t));
  /* a bitmap asked to hold an id far beyond its members turns into a table */
  kc_idset_free(&s);
  for (uint32_t i = 0; i < 64; i++) assert_int_equal(kc_idset_add(&s, i), 0);
  assert_true(s.cap & KC_IDSET_BITMAP);
  assert_int_equal(kc_idset_add(&s, 3000000000u), 0);
  assert_false(s.cap & KC_IDSET_BITMAP);
  assert_int_equal(s.n, 65);
  for (uint32_t i = 0; i < 64; i++) assert_true(kc_idset_has(&s, i));
  assert_true(kc_idset_has(&s, 3000000000u));
  assert_false(kc_idset_has(&s, 64));
  kc_idset_free(&s);
}

static const char *const WORDS[] = {"default", "kube-system", "web", "app", "tier", "db", "",
                                    "x", "frontend", "backend", "a.b/c", "monitoring"};
#define NWORDS (sizeof WORDS / sizeof WORDS[0])

static uint32_t bad_hash(size_t i) { return (uint32_t)(i % 3); } /* collisions on purpose */

static void test_iddict_collisions(void **state) {
  (void)state;
  kc_iddict d = {0};
  assert_null(kc_iddict_find(&d, "x", 1, NULL, 0, 0));
  /* (word) and (word, "v") are different keys with the same hash. */
  for (size_t i = 0; i < NWORDS; i++) {
    const char *w = WORDS[i];
    assert_int_equal(kc_iddict_add(&d, w, strlen(w), NULL, 0, bad_hash(i), (uint32_t)i), 0);
    assert_int_equal(kc_iddict_add(&d, w, strlen(w), "v", 1, bad_hash(i), (uint32_t)(100 + i)), 0);
    assert_int_equal(kc_iddict_add(&d, w, strlen(w), NULL, 0, bad_hash(i), (uint32_t)(200 + i)), 0);
  }
  assert_int_equal(d.n, 2 * NWORDS);
  assert_int_equal(kc_iddict_members(&d), 3 * NWORDS);
  for (size_t i = 0; i < NWORDS; i++) {
    const char *w = WORDS[i];
    kc_iddict_ent *e = kc_iddict_find(&d, w, strlen(w), NULL, 0, bad_hash(i));
    assert_non_null(e);
    assert_ptr_equal(e->a, w); /* borrowed, not copied */
    assert_int_equal(e->set.n, 2);
    assert_true(kc_idset_has(&e->set, (uint32_t)i) && kc_idset_has(&e->set, (uint32_t)(200 + i)));
    e = kc_iddict_find(&d, w, strlen(w), "v", 1, bad_hash(i));
    assert_non_null(e);
    assert_int_equal(e->set.n, 1);
    assert_null(kc_iddict_find(&d, w, strlen(w), "w", 1, bad_hash(i)));
    assert_null(kc_iddict_find(&d, w, strlen(w), NULL, 0, bad_hash(i) + 1)); /* other hash */
  }
  /* Remove every other word: the rest stay reachable behind the holes. */
  for (size_t i = 0; i < NWORDS; i += 2) {
    const char *w = WORDS[i];
    kc_iddict_remove(&d, kc_iddict_find(&d, w, strlen(w), NULL, 0, bad_hash(i)));
    assert_null(kc_iddict_find(&d, w, strlen(w), NULL, 0, bad_hash(i)));
  }
  for (size_t i = 0; i < NWORDS; i++) {
    const char *w = WORDS[i];
    assert_true((kc_iddict_find(&d, w, strlen(w), NULL, 0, bad_hash(i)) != NULL) == (i % 2 == 1));
    assert_non_null(kc_iddict_find(&d, w, strlen(w), "v", 1, bad_hash(i)));
  }
  assert_int_equal(d.n, NWORDS + NWORDS / 2);
  kc_iddict_free(&d);
  assert_int_equal(d.n, 0);
  assert_null(d.tab);
}

/* copy_a: the key is the dictionary's own copy (counted in bytes), so the
 * caller's buffer may change; many entries grow and shrink the table. */
static void test_iddict_copies_and_growth(void **state) {
  (void)state;
  kc_iddict d = {.copy_a = true};
  char buf[32];
  for (uint32_t i = 0; i < 1000; i++) {
    int n = snprintf(buf, sizeof buf, "value-%u", i);
    assert_int_equal(kc_iddict_add(&d, buf, (size_t)n, NULL, 0, (uint32_t)kc_mix64(i), i), 0);
  }
  memset(buf, 'z', sizeof buf);
  assert_int_equal(d.n, 1000);
  size_t grown = kc_iddict_bytes(&d);
  assert_true(grown >= 1000 * (sizeof(kc_iddict_ent) + 8));
  for (uint32_t i = 0; i < 1000; i++) {
    int n = snprintf(buf, sizeof buf, "value-%u", i);
    kc_iddict_ent *e = kc_iddict_find(&d, buf, (size_t)n, NULL, 0, (uint32_t)kc_mix64(i));
    assert_non_null(e);
    assert_true(e->owned);
    assert_ptr_not_equal(e->a, buf);
    assert_true(kc_idset_has(&e->set, i));
    if (i >= 10) kc_iddict_remove(&d, e);
  }
  assert_int_equal(d.n, 10);
  assert_int_equal(kc_iddict_members(&d), 10);
  assert_true(kc_iddict_bytes(&d) < grown / 8); /* the table shrank */
  for (uint32_t i = 0; i < 10; i++) {
    int n = snprintf(buf, sizeof buf, "value-%u", i);
    assert_non_null(kc_iddict_find(&d, buf, (size_t)n, NULL, 0, (uint32_t)kc_mix64(i)));
  }
  kc_iddict_free(&d); /* frees the remaining copies (ASan checks) */
}

/* Large dictionaries resize a few entries per call (idset.h): while a
 * resize is under way every key stays reachable in one of the two tables,
 * removals reach entries in either, no call moves more than
 * KC_IDTABLE_MOVES entries, and growth and shrinking both finish. Every
 * 16th key hashes to the table's last slots, so clusters wrap around its
 * end. */
#define BIG 20000u

static uint32_t big_hash(uint32_t i) {
  return i % 16 ? (uint32_t)kc_mix64(i) : UINT32_MAX - i % 13;
}

static int big_key(char *buf, uint32_t i) { return snprintf(buf, 16, "k%u", i); }

static void big_check(const kc_iddict *d, const bool *in, uint32_t upto) {
  char buf[16];
  size_t want = 0;
  for (uint32_t i = 0; i < upto; i++) {
    int n = big_key(buf, i);
    kc_iddict_ent *e = kc_iddict_find(d, buf, (size_t)n, NULL, 0, big_hash(i));
    assert_true((e != NULL) == in[i]);
    if (e) {
      assert_int_equal(e->set.n, 1);
      assert_true(kc_idset_has(&e->set, i));
      want++;
    }
  }
  assert_int_equal(d->n, want);
  assert_int_equal(kc_iddict_members(d), want);
}

static void test_iddict_incremental_resize(void **state) {
  (void)state;
  static bool in[BIG];
  memset(in, 0, sizeof in);
  kc_iddict d = {.copy_a = true};
  char buf[16];
  bool saw_old = false, removed_from_old = false;
  uint64_t rng = 42;
  for (uint32_t i = 0; i < BIG; i++) {
    uint32_t before = d.oldn;
    bool was = d.old != NULL;
    int n = big_key(buf, i);
    assert_int_equal(kc_iddict_add(&d, buf, (size_t)n, NULL, 0, big_hash(i), i), 0);
    in[i] = true;
    if (was && d.old) assert_true(before - d.oldn <= KC_IDTABLE_MOVES);
    if (d.old) {
      saw_old = true;
      assert_true(d.oldcap > KC_IDTABLE_INCREMENTAL_MIN);
      /* a removal while the resize is under way, of an entry still in the
       * old table when one is found there */
      rng = kc_mix64(rng);
      uint32_t j = (uint32_t)(rng % (i + 1));
      if (in[j]) {
        n = big_key(buf, j);
        kc_iddict_ent *e = kc_iddict_find(&d, buf, (size_t)n, NULL, 0, big_hash(j));
        assert_non_null(e);
        if (e >= d.old && e < d.old + d.oldcap) removed_from_old = true;
        before = d.oldn;
        kc_iddict_remove(&d, e);
        in[j] = false;
        if (d.old) assert_true(before - d.oldn <= KC_IDTABLE_MOVES + 1);
      }
    }
    if (i % 4999 == 0 || (d.old && i % 1009 == 0)) big_check(&d, in, i + 1);
  }
  assert_true(saw_old);
  assert_true(removed_from_old);
  big_check(&d, in, BIG);
  /* Remove nearly all: the table shrinks step by step to a small one. */
  size_t peak = kc_iddict_bytes(&d);
  bool shrank_incrementally = false;
  for (uint32_t i = 0; i < BIG; i++) {
    if (!in[i] || i % 1000 == 0) continue;
    int n = big_key(buf, i);
    uint32_t before = d.oldn;
    bool was = d.old != NULL;
    kc_iddict_remove(&d, kc_iddict_find(&d, buf, (size_t)n, NULL, 0, big_hash(i)));
    in[i] = false;
    if (was && d.old) {
      shrank_incrementally = true;
      assert_true(before - d.oldn <= KC_IDTABLE_MOVES + 1);
    }
    if (i % 3001 == 0) big_check(&d, in, BIG);
  }
  assert_true(shrank_incrementally);
  big_check(&d, in, BIG);
  assert_true(kc_iddict_bytes(&d) < peak / 64);
  kc_iddict_free(&d); /* both tables and every copy (ASan checks) */
  assert_null(d.tab);
  assert_null(d.old);
  assert_true(d.copy_a);
}

/* kc_idmap: ids keyed by hashes the owner keeps (store.c's object map). */
#define MAPN 300000u /* the table passes 1 MiB: its mapped path is taken too */

/* As big_hash, but every 256th id hashes to the table's last slots: the
 * clusters there still wrap around its end, and a full check of the map
 * (every id looked up, each probing its cluster) stays linear enough to run
 * often. */
static uint32_t map_home(uint32_t i) {
  return i % 256 ? (uint32_t)kc_mix64(i) : UINT32_MAX - i % 13;
}

static bool map_same(uint32_t id, const void *ud) { return id == *(const uint32_t *)ud; }

static void map_check(const kc_idmap *m, const uint32_t *homes, const bool *in, uint32_t upto) {
  uint32_t want = 0;
  for (uint32_t i = 0; i < upto; i++) {
    uint32_t got = kc_idmap_find(m, homes, homes[i], map_same, &i);
    assert_true(got == (in[i] ? i : KC_IDSET_NONE));
    want += in[i];
  }
  assert_int_equal(m->n, want);
}

static bool in_old(const kc_idmap *m, uint32_t id) {
  for (uint32_t i = 0; m->old && i < m->oldcap; i++)
    if (m->old[i] == id + 1) return true;
  return false;
}

static void test_idmap_incremental_resize(void **state) {
  (void)state;
  static bool in[MAPN];
  static uint32_t homes[MAPN];
  memset(in, 0, sizeof in);
  kc_idmap m = {0};
  bool saw_old = false, removed_from_old = false;
  uint64_t rng = 7;
  for (uint32_t i = 0; i < MAPN; i++) {
    homes[i] = map_home(i); /* clusters at the table's end: probes wrap */
    uint32_t before = m.oldn;
    bool was = m.old != NULL;
    assert_int_equal(kc_idmap_reserve(&m, homes, m.n + 1), 0);
    kc_idmap_put(&m, homes, i);
    in[i] = true;
    if (was && m.old) assert_true(before - m.oldn <= KC_IDTABLE_MOVES);
    if (m.old) {
      saw_old = true;
      assert_true(m.oldcap > KC_IDTABLE_INCREMENTAL_MIN);
      rng = kc_mix64(rng);
      uint32_t j = (uint32_t)(rng % (i + 1));
      if (in[j] && (i % 64 == 0 || i < BIG)) {
        if (!removed_from_old && in_old(&m, j)) removed_from_old = true;
        before = m.oldn;
        kc_idmap_remove(&m, homes, j);
        in[j] = false;
        if (m.old) assert_true(before - m.oldn <= KC_IDTABLE_MOVES + 1);
      }
    }
    if (i % 49999 == 0 || (i < BIG && m.old && i % 1009 == 0)) map_check(&m, homes, in, i + 1);
  }
  assert_true(saw_old);
  assert_true(removed_from_old);
  map_check(&m, homes, in, MAPN);
  assert_true(kc_idmap_bytes(&m) >= (size_t)1 << 20);
  /* Empty it: every remove finds its id, wherever it is. */
  for (uint32_t i = 0; i < MAPN; i++)
    if (in[i]) {
      kc_idmap_remove(&m, homes, i);
      in[i] = false;
    }
  map_check(&m, homes, in, MAPN);
  kc_idmap_free(&m); /* both tables (ASan checks) */
  assert_null(m.tab);
  assert_null(m.old);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idset_representations),
      cmocka_unit_test(test_idset_random),
      cmocka_unit_test(test_idset_bitmap),
      cmocka_unit_test(test_iddict_collisions),
      cmocka_unit_test(test_iddict_copies_and_growth),
      cmocka_unit_test(test_iddict_incremental_resize),
      cmocka_unit_test(test_idmap_incremental_resize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
