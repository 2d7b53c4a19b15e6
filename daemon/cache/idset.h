/* SPDX-License-Identifier: Apache-2.0 */
/* idset: the two containers of the store's indexes (store.c), general
 * enough for any owner of 32-bit ids:
 *  - kc_idset, a compact set of uint32_t ids (KC_IDSET_NONE excluded): up to
 *    2 members inline (no allocation), up to KC_IDSET_SMALL in an unsorted
 *    array, beyond that an open-addressing hash table (power of two), or a
 *    bitmap over ids 0..64*words when that is smaller (dense sets of small
 *    ids, e.g. the store's label sets that hold most of its slots: 1 bit per
 *    slot instead of 5-11 bytes per member); a bitmap is left for a table
 *    when it would cost more than 32 bytes per member, so iterating it
 *    stays O(members);
 *  - kc_iddict, a dictionary from a string pair (a, b) (b may be absent:
 *    NULL, 0) to a non-empty kc_idset, with the hash chosen by the caller;
 *  - kc_idmap, a table of ids whose hashes the owner keeps (store.c's
 *    object map).
 * All three use linear probing with backward-shift deletion (no
 * tombstones), so lookups stay short under churn; sets and dictionaries
 * shrink as they empty (best effort), the map keeps its size.
 *
 * Owns: a set its table; a dictionary its table, every entry's set, and the
 * copies of `a` when copy_a is set. Otherwise a and b are borrowed: the
 * owner keeps them valid while the entry exists, and may re-point an
 * entry's a/b (equal bytes) at other memory, as store.c does when the
 * object its strings pointed into leaves.
 * Threads: none of its own; the owner serializes (store.c: its lock).
 * Errors: 0 or -ENOMEM; a failed add changes nothing.
 * A zeroed kc_idset / kc_iddict is empty and valid.
 */
#ifndef KC_IDSET_H
#define KC_IDSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KC_IDSET_NONE UINT32_MAX
#define KC_IDSET_SMALL 8u

/* cap with this bit set: a bitmap of (cap & ~KC_IDSET_BITMAP) 64-bit words */
#define KC_IDSET_BITMAP 0x80000000u

typedef struct kc_idset {
  uint32_t n;
  uint32_t cap; /* 0: inline; <= KC_IDSET_SMALL: array; KC_IDSET_BITMAP|words:
                   bitmap; else hash table */
  union {
    uint32_t inl[2];
    uint32_t *tab;
    uint64_t *bits;
  } u;
} kc_idset;

/* Adds an id that is not a member (the caller knows it is not). */
int kc_idset_add(kc_idset *s, uint32_t id);
/* Removes a member; false if id was not one. */
bool kc_idset_remove(kc_idset *s, uint32_t id);
/* Frees the table; the set is empty afterwards. */
void kc_idset_free(kc_idset *s);
static inline size_t kc_idset_bytes(const kc_idset *s) {
  if (s->cap & KC_IDSET_BITMAP) return (size_t)(s->cap & ~KC_IDSET_BITMAP) * sizeof(uint64_t);
  return (size_t)s->cap * sizeof(uint32_t);
}

/* Members in no particular order; the set must not change meanwhile. */
typedef struct kc_iditer {
  const uint32_t *a;
  const uint64_t *bits; /* bitmap sets: the words, `word` the rest of bits[i - 1] */
  uint64_t word;
  uint32_t i, lim;
  bool hash;
} kc_iditer;

static inline kc_iditer kc_iditer_start(const kc_idset *s) {
  if (s->cap & KC_IDSET_BITMAP)
    return (kc_iditer){NULL, s->u.bits, 0, 0, s->cap & ~KC_IDSET_BITMAP, false};
  bool hash = s->cap > KC_IDSET_SMALL;
  return (kc_iditer){s->cap ? s->u.tab : s->u.inl, NULL, 0, 0, hash ? s->cap : s->n, hash};
}

static inline bool kc_iditer_next(kc_iditer *it, uint32_t *id) {
  if (it->bits) {
    while (!it->word) {
      if (it->i >= it->lim) return false;
      it->word = it->bits[it->i++];
    }
    *id = (it->i - 1) * 64u + (uint32_t)__builtin_ctzll(it->word);
    it->word &= it->word - 1;
    return true;
  }
  while (it->i < it->lim) {
    uint32_t v = it->a[it->i++];
    if (!it->hash || v != KC_IDSET_NONE) {
      *id = v;
      return true;
    }
  }
  return false;
}

/* Linear probing, backward-shift deletion: may the entry at j, whose home
 * slot is k, move into the hole at i? */
static inline bool kc_probe_shifts(uint32_t i, uint32_t j, uint32_t k) {
  return (j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j));
}

/* kc_idset's hash tables (power of two, KC_IDSET_NONE = free). An id's
 * home slot is a hash of the id itself. (kc_idmap below keeps its ids as
 * id + 1, so that a new table is zero pages.) */
static inline uint32_t kc_idtab_home(uint32_t id) { return id * 0x9e3779b1u; }

static inline void kc_idtab_put(uint32_t *tab, uint32_t mask, uint32_t id) {
  uint32_t i = kc_idtab_home(id) & mask;
  while (tab[i] != KC_IDSET_NONE) i = (i + 1) & mask;
  tab[i] = id;
}

/* Frees slot i; the entries after it shift back. */
static inline void kc_idtab_delete(uint32_t *tab, uint32_t mask, uint32_t i) {
  for (uint32_t j = (i + 1) & mask; tab[j] != KC_IDSET_NONE; j = (j + 1) & mask) {
    if (kc_probe_shifts(i, j, kc_idtab_home(tab[j]) & mask)) {
      tab[i] = tab[j];
      i = j;
    }
  }
  tab[i] = KC_IDSET_NONE;
}

typedef struct kc_iddict_ent {
  const char *a, *b;
  uint32_t alen, blen;
  uint32_t hash;
  uint32_t owned; /* a is the dictionary's copy */
  kc_idset set;   /* n == 0 marks an empty table slot */
} kc_iddict_ent;

/* kc_idmap and kc_iddict: a large table is resized a little at a time:
 * the new table takes every new entry, and each add or remove moves a few
 * entries over from the old one (KC_IDTABLE_MOVES), so no single call
 * rehashes 100k entries on the loop (a 12 MiB table took 25-40 ms there,
 * zeroing and faulting in pages included). Lookups meanwhile try both
 * tables. Tables of
 * KC_IDTABLE_INCREMENTAL_MIN slots or fewer are rebuilt at once. */
#define KC_IDTABLE_INCREMENTAL_MIN 4096u
#define KC_IDTABLE_MOVES 8u

/* kc_idmap: a table of ids keyed by the owner's hashes (homes[id]):
 * store.c's object map, "namespace/name" -> slot. Slots hold id + 1 (0:
 * free), so a new table is zero pages, written as it fills. The owner
 * keeps homes[id] unchanged while id is in the map. */
typedef struct kc_idmap {
  uint32_t *tab;
  uint32_t cap, n; /* n: entries in both tables */
  uint32_t *old;   /* being emptied into tab; NULL when no resize is under way */
  uint32_t oldcap, oldn, cursor;
} kc_idmap;

/* Room for `total` entries in all (a resize starts when the table would
 * pass 3/4 full). Fails with nothing changed. */
int kc_idmap_reserve(kc_idmap *m, const uint32_t *homes, uint32_t total);
/* Adds id (not in the map; room reserved). */
void kc_idmap_put(kc_idmap *m, const uint32_t *homes, uint32_t id);
/* Removes id, which is in the map. */
void kc_idmap_remove(kc_idmap *m, const uint32_t *homes, uint32_t id);
/* The id with hash h for which same(id, ud) holds, or KC_IDSET_NONE. Reads
 * only: callers may share a map between readers while nobody writes.
 * Inline, so that `same` is inlined into the owner's lookup. */
static inline uint32_t kc_idmap_find_in(const uint32_t *tab, uint32_t cap, const uint32_t *homes,
                                        uint32_t h, bool (*same)(uint32_t, const void *),
                                        const void *ud) {
  if (!cap) return KC_IDSET_NONE;
  uint32_t mask = cap - 1;
  for (uint32_t i = h & mask; tab[i]; i = (i + 1) & mask) {
    uint32_t id = tab[i] - 1;
    if (homes[id] == h && same(id, ud)) return id;
  }
  return KC_IDSET_NONE;
}

static inline uint32_t kc_idmap_find(const kc_idmap *m, const uint32_t *homes, uint32_t h,
                                     bool (*same)(uint32_t id, const void *ud), const void *ud) {
  uint32_t id = kc_idmap_find_in(m->tab, m->cap, homes, h, same, ud);
  if (id == KC_IDSET_NONE && m->old) id = kc_idmap_find_in(m->old, m->oldcap, homes, h, same, ud);
  return id;
}
void kc_idmap_free(kc_idmap *m);

/* kc_iddict: as kc_idmap above, a large table is resized a little at a
 * time. */
typedef struct kc_iddict {
  kc_iddict_ent *tab;
  uint32_t cap, n; /* n: entries in both tables */
  kc_iddict_ent *old; /* being emptied into tab; NULL when no resize is under way */
  uint32_t oldcap, oldn, cursor; /* oldn: its entries; cursor: where moving resumes */
  bool copy_a; /* new entries copy a (else they point at the caller's bytes) */
} kc_iddict;

/* The entry of (a, b) with hash h, or NULL. Valid until the next add or
 * remove. */
kc_iddict_ent *kc_iddict_find(const kc_iddict *d, const char *a, size_t alen, const char *b,
                              size_t blen, uint32_t h);
/* Adds id (not a member) to the set of (a, b), creating the entry. */
int kc_iddict_add(kc_iddict *d, const char *a, size_t alen, const char *b, size_t blen,
                  uint32_t h, uint32_t id);
/* Deletes entry e (from kc_iddict_find) with its set and copy. */
void kc_iddict_remove(kc_iddict *d, kc_iddict_ent *e);
void kc_iddict_free(kc_iddict *d);
/* Every entry, both tables: start with *pos = 0; NULL at the end. The
 * dictionary must not change meanwhile. */
kc_iddict_ent *kc_iddict_next(const kc_iddict *d, uint32_t *pos);

/* --- Test seam: for tests only, not called by the daemon --- */
bool kc_idset_has(const kc_idset *s, uint32_t id);
size_t kc_idmap_bytes(const kc_idmap *m);
/* Table, sets and copies. */
size_t kc_iddict_bytes(const kc_iddict *d);
/* Sum of the sets' sizes. */
size_t kc_iddict_members(const kc_iddict *d);

#endif
