/* SPDX-License-Identifier: Apache-2.0 */
/* idset: see idset.h. */
#include "cache/idset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/kstr.h"

/* ---- kc_idset ------------------------------------------------------------ */

/* Rebuilds as a hash table of `cap` slots holding the current members. */
static int rehash(kc_idset *s, uint32_t cap) {
  uint32_t *nt = malloc((size_t)cap * sizeof *nt);
  if (!nt) return -ENOMEM;
  memset(nt, 0xff, (size_t)cap * sizeof *nt);
  kc_iditer it = kc_iditer_start(s);
  for (uint32_t id; kc_iditer_next(&it, &id);) kc_idtab_put(nt, cap - 1, id);
  if (s->cap) free(s->u.tab);
  s->u.tab = nt;
  s->cap = cap;
  return 0;
}

static bool is_bitmap(const kc_idset *s) { return (s->cap & KC_IDSET_BITMAP) != 0; }
static uint32_t bitmap_words(const kc_idset *s) { return s->cap & ~KC_IDSET_BITMAP; }

/* A bitmap is kept while it costs at most this many bytes per member. */
#define BITMAP_MAX_BYTES_PER_MEMBER 32u

/* Smallest table (power of two, > KC_IDSET_SMALL) holding n members. */
static uint32_t table_cap(uint32_t n) {
  uint32_t cap = 2 * KC_IDSET_SMALL;
  while ((uint64_t)n * 4 > (uint64_t)cap * 3) cap *= 2;
  return cap;
}

/* Rebuilds as a bitmap of `words` words (every member below 64 * words). */
static int to_bitmap(kc_idset *s, uint32_t words) {
  uint64_t *b = calloc(words, sizeof *b);
  if (!b) return -ENOMEM;
  kc_iditer it = kc_iditer_start(s);
  for (uint32_t id; kc_iditer_next(&it, &id);) b[id / 64] |= 1ull << (id % 64);
  if (s->cap) free(s->u.tab);
  s->u.bits = b;
  s->cap = KC_IDSET_BITMAP | words;
  return 0;
}

/* The set must grow to hold `id` too (array full, or table at its load
 * limit): to a bitmap when one covering every member is no larger than the
 * current table, else to a table of `cap` slots. */
static int grow(kc_idset *s, uint32_t id, uint32_t cap) {
  uint32_t max = id;
  kc_iditer it = kc_iditer_start(s);
  for (uint32_t m; kc_iditer_next(&it, &m);)
    if (m > max) max = m;
  uint64_t words = (uint64_t)max / 64 + 1;
  if (words * sizeof(uint64_t) <= (uint64_t)s->cap * sizeof(uint32_t)) return to_bitmap(s, (uint32_t)words);
  return rehash(s, cap);
}

static int bitmap_add(kc_idset *s, uint32_t id) {
  uint32_t words = bitmap_words(s), w = id / 64;
  if (w >= words) {
    uint64_t need = (uint64_t)w + 1, most = (uint64_t)(s->n + 1) * BITMAP_MAX_BYTES_PER_MEMBER / 8;
    if (need > most) {
      /* too sparse: a table */
      if (rehash(s, table_cap(s->n + 1)) < 0) return -ENOMEM;
      kc_idtab_put(s->u.tab, s->cap - 1, id);
      s->n++;
      return 0;
    }
    uint64_t nw = (uint64_t)words + words / 4 + 1; /* geometric: ids arrive in order */
    if (nw < need) nw = need;
    if (nw > most) nw = most;
    uint64_t *b = realloc(s->u.bits, (size_t)nw * sizeof *b);
    if (!b) return -ENOMEM;
    memset(b + words, 0, (size_t)(nw - words) * sizeof *b);
    s->u.bits = b;
    s->cap = KC_IDSET_BITMAP | (uint32_t)nw;
  }
  s->u.bits[w] |= 1ull << (id % 64);
  s->n++;
  return 0;
}

int kc_idset_add(kc_idset *s, uint32_t id) {
  if (is_bitmap(s)) return bitmap_add(s, id);
  if (s->cap == 0) {
    if (s->n < 2) {
      s->u.inl[s->n++] = id;
      return 0;
    }
    uint32_t *t = malloc(4 * sizeof *t);
    if (!t) return -ENOMEM;
    t[0] = s->u.inl[0];
    t[1] = s->u.inl[1];
    s->u.tab = t;
    s->cap = 4;
  }
  if (s->cap <= KC_IDSET_SMALL) {
    if (s->n == s->cap) {
      if (s->cap < KC_IDSET_SMALL) {
        uint32_t *t = realloc(s->u.tab, KC_IDSET_SMALL * sizeof *t);
        if (!t) return -ENOMEM;
        s->u.tab = t;
        s->cap = KC_IDSET_SMALL;
      } else if (grow(s, id, 2 * KC_IDSET_SMALL) < 0) {
        return -ENOMEM;
      }
    }
    if (is_bitmap(s)) return bitmap_add(s, id);
    if (s->cap <= KC_IDSET_SMALL) {
      s->u.tab[s->n++] = id;
      return 0;
    }
  }
  if ((s->n + 1) * 4 > s->cap * 3) {
    if (grow(s, id, s->cap * 2) < 0) return -ENOMEM;
    if (is_bitmap(s)) return bitmap_add(s, id);
  }
  kc_idtab_put(s->u.tab, s->cap - 1, id);
  s->n++;
  return 0;
}

/* Back to the array (the caller checked n <= KC_IDSET_SMALL); best effort. */
static void to_array(kc_idset *s) {
  uint32_t *a = malloc(KC_IDSET_SMALL * sizeof *a);
  if (!a) return;
  uint32_t n = 0;
  kc_iditer it = kc_iditer_start(s);
  for (uint32_t id; kc_iditer_next(&it, &id);) a[n++] = id;
  free(s->u.tab);
  s->u.tab = a;
  s->cap = KC_IDSET_SMALL;
}

/* Shrinking is best effort: an allocation failure keeps the larger
 * representation. */
bool kc_idset_remove(kc_idset *s, uint32_t id) {
  if (is_bitmap(s)) {
    uint32_t w = id / 64;
    uint64_t bit = 1ull << (id % 64);
    if (w >= bitmap_words(s) || !(s->u.bits[w] & bit)) return false;
    s->u.bits[w] &= ~bit;
    s->n--;
    if (s->n <= KC_IDSET_SMALL / 2) to_array(s);
    else if ((uint64_t)bitmap_words(s) * 8 > (uint64_t)s->n * BITMAP_MAX_BYTES_PER_MEMBER)
      (void)rehash(s, table_cap(s->n));
    return true;
  }
  if (s->cap <= KC_IDSET_SMALL) {
    uint32_t *a = s->cap == 0 ? s->u.inl : s->u.tab;
    uint32_t i = 0;
    while (i < s->n && a[i] != id) i++;
    if (i == s->n) return false;
    a[i] = a[--s->n];
    if (s->cap && s->n <= 1) {
      uint32_t keep = s->n ? a[0] : 0;
      free(s->u.tab);
      s->cap = 0;
      s->u.inl[0] = keep;
    }
    return true;
  }
  uint32_t mask = s->cap - 1, i = kc_idtab_home(id) & mask;
  uint32_t *t = s->u.tab;
  while (t[i] != id) {
    if (t[i] == KC_IDSET_NONE) return false;
    i = (i + 1) & mask;
  }
  kc_idtab_delete(t, mask, i);
  s->n--;
  if (s->n <= KC_IDSET_SMALL / 2) {
    to_array(s);
  } else if (s->cap > 4 * KC_IDSET_SMALL && s->n * 8 < s->cap) {
    (void)rehash(s, s->cap / 2);
  }
  return true;
}

void kc_idset_free(kc_idset *s) {
  if (s->cap) free(s->u.tab);
  s->n = s->cap = 0;
}

bool kc_idset_has(const kc_idset *s, uint32_t id) {
  if (is_bitmap(s))
    return id / 64 < bitmap_words(s) && (s->u.bits[id / 64] >> (id % 64) & 1);
  if (s->cap > KC_IDSET_SMALL) {
    uint32_t mask = s->cap - 1, i = kc_idtab_home(id) & mask;
    for (; s->u.tab[i] != KC_IDSET_NONE; i = (i + 1) & mask)
      if (s->u.tab[i] == id) return true;
    return false;
  }
  kc_iditer it = kc_iditer_start(s);
  uint32_t v;
  while (kc_iditer_next(&it, &v))
    if (v == id) return true;
  return false;
}

/* ---- kc_iddict ----------------------------------------------------------- */

/* Tables of more than this many bytes are mapped on their own: their pages
 * are zeroed when first written (spread over the adds that fill them), not
 * all at once by calloc, whose memory may come from the heap's top and be
 * cleared there in one go. */
#define MAPPED_TABLE_BYTES ((size_t)1 << 20)

/* A zeroed table of n elements of `size` bytes. */
static void *zeroed_table(size_t n, size_t size) {
  size_t bytes = n * size;
  if (bytes < MAPPED_TABLE_BYTES) return calloc(n, size);
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void zeroed_table_free(void *t, size_t n, size_t size) {
  if (!t) return;
  if (n * size < MAPPED_TABLE_BYTES) free(t);
  else munmap(t, n * size);
}

static kc_iddict_ent *table_new(uint32_t cap) { return zeroed_table(cap, sizeof(kc_iddict_ent)); }

static void table_free(kc_iddict_ent *t, uint32_t cap) {
  zeroed_table_free(t, cap, sizeof(kc_iddict_ent));
}

static kc_iddict_ent *table_find(kc_iddict_ent *tab, uint32_t cap, const char *a, size_t alen,
                                 const char *b, size_t blen, uint32_t h) {
  if (!cap) return NULL;
  uint32_t mask = cap - 1;
  for (uint32_t i = h & mask;; i = (i + 1) & mask) {
    kc_iddict_ent *e = &tab[i];
    if (e->set.n == 0) return NULL;
    if (e->hash == h && kc_str_eq((kc_str){e->a, e->alen}, (kc_str){a, alen}) &&
        kc_str_eq((kc_str){e->b, e->blen}, (kc_str){b, blen}))
      return e;
  }
}

kc_iddict_ent *kc_iddict_find(const kc_iddict *d, const char *a, size_t alen, const char *b,
                              size_t blen, uint32_t h) {
  kc_iddict_ent *e = table_find(d->tab, d->cap, a, alen, b, blen, h);
  if (!e && d->old) e = table_find(d->old, d->oldcap, a, alen, b, blen, h);
  return e;
}

static kc_iddict_ent *table_put(kc_iddict_ent *tab, uint32_t cap, const kc_iddict_ent *e) {
  uint32_t mask = cap - 1, i = e->hash & mask;
  while (tab[i].set.n) i = (i + 1) & mask;
  tab[i] = *e;
  return &tab[i];
}

/* Empties slot i: the entries after it shift back (no tombstones). */
static void table_delete(kc_iddict_ent *tab, uint32_t cap, uint32_t i) {
  uint32_t mask = cap - 1, j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (tab[j].set.n == 0) break;
    if (kc_probe_shifts(i, j, tab[j].hash & mask)) {
      tab[i] = tab[j];
      i = j;
    }
  }
  memset(&tab[i], 0, sizeof tab[i]);
}

/* Moves up to `moves` entries of the old table into the new one (all of
 * them for UINT32_MAX); frees the old table once it is empty. The cursor
 * stays on a slot until it is empty, because the backward shift may pull a
 * later entry into it; it wraps, since a shift may also carry an entry of
 * the first slots back across the end. */
static void move_some(kc_iddict *d, uint32_t moves) {
  uint32_t mask = d->oldcap - 1, empties = moves == UINT32_MAX ? UINT32_MAX : 8 * moves;
  while (d->oldn && moves && empties) {
    kc_iddict_ent *e = &d->old[d->cursor];
    if (e->set.n == 0) {
      d->cursor = (d->cursor + 1) & mask;
      if (empties != UINT32_MAX) empties--;
      continue;
    }
    table_put(d->tab, d->cap, e);
    table_delete(d->old, d->oldcap, d->cursor);
    d->oldn--;
    moves--;
  }
  if (d->oldn == 0) {
    table_free(d->old, d->oldcap);
    d->old = NULL;
    d->oldcap = d->cursor = 0;
  }
}

/* A new table of `cap` slots takes over; the current one's entries follow
 * it all at once (small tables) or a few per add and remove. A resize under
 * way is finished first. Fails with nothing changed. */
static int resize(kc_iddict *d, uint32_t cap) {
  kc_iddict_ent *nt = table_new(cap);
  if (!nt) return -ENOMEM;
  if (d->old) move_some(d, UINT32_MAX);
  d->old = d->tab;
  d->oldcap = d->cap;
  d->oldn = d->n;
  d->cursor = 0;
  d->tab = nt;
  d->cap = cap;
  if (!d->old) d->oldcap = d->oldn = 0;
  else if (d->oldcap <= KC_IDTABLE_INCREMENTAL_MIN || d->oldn == 0) move_some(d, UINT32_MAX);
  return 0;
}

kc_iddict_ent *kc_iddict_next(const kc_iddict *d, uint32_t *pos) {
  while (*pos < d->cap + d->oldcap) {
    uint32_t i = (*pos)++;
    kc_iddict_ent *e = i < d->cap ? &d->tab[i] : &d->old[i - d->cap];
    if (e->set.n) return e;
  }
  return NULL;
}

void kc_iddict_free(kc_iddict *d) {
  uint32_t pos = 0;
  for (kc_iddict_ent *e; (e = kc_iddict_next(d, &pos));) {
    kc_idset_free(&e->set);
    if (e->owned) free((char *)e->a);
  }
  table_free(d->tab, d->cap);
  table_free(d->old, d->oldcap);
  bool copy_a = d->copy_a;
  *d = (kc_iddict){.copy_a = copy_a};
}

size_t kc_iddict_bytes(const kc_iddict *d) {
  size_t b = ((size_t)d->cap + d->oldcap) * sizeof(kc_iddict_ent);
  uint32_t pos = 0;
  for (const kc_iddict_ent *e; (e = kc_iddict_next(d, &pos));) {
    b += kc_idset_bytes(&e->set);
    if (e->owned) b += e->alen + 1;
  }
  return b;
}

int kc_iddict_add(kc_iddict *d, const char *a, size_t alen, const char *b, size_t blen,
                  uint32_t h, uint32_t id) {
  kc_iddict_ent *e = kc_iddict_find(d, a, alen, b, blen, h);
  if (e) return kc_idset_add(&e->set, id);
  /* The new table's load counts every entry, moved or not: it never fills
   * before the old one is empty. */
  if ((d->n + 1) * 4 > d->cap * 3 && resize(d, d->cap ? d->cap * 2 : 8) < 0) return -ENOMEM;
  const char *acopy = a;
  if (d->copy_a) {
    char *c = malloc(alen + 1);
    if (!c) return -ENOMEM;
    if (alen) memcpy(c, a, alen);
    c[alen] = '\0';
    acopy = c;
  }
  if (d->old) move_some(d, KC_IDTABLE_MOVES);
  table_put(d->tab, d->cap,
            &(kc_iddict_ent){.a = acopy, .b = b, .alen = (uint32_t)alen, .blen = (uint32_t)blen,
                             .hash = h, .owned = d->copy_a, .set = {.n = 1, .u.inl = {id, 0}}});
  d->n++;
  return 0;
}

void kc_iddict_remove(kc_iddict *d, kc_iddict_ent *e) {
  kc_idset_free(&e->set);
  if (e->owned) free((char *)e->a);
  if (d->old && e >= d->old && e < d->old + d->oldcap) {
    table_delete(d->old, d->oldcap, (uint32_t)(e - d->old));
    d->oldn--;
  } else {
    table_delete(d->tab, d->cap, (uint32_t)(e - d->tab));
  }
  d->n--;
  if (d->old) move_some(d, KC_IDTABLE_MOVES);
  else if (d->cap > 16 && d->n * 8 < d->cap) (void)resize(d, d->cap / 2);
}

size_t kc_iddict_members(const kc_iddict *d) {
  size_t n = 0;
  uint32_t pos = 0;
  for (const kc_iddict_ent *e; (e = kc_iddict_next(d, &pos));) n += e->set.n;
  return n;
}

/* ---- kc_idmap ------------------------------------------------------------ */

static void idmap_put_in(uint32_t *tab, uint32_t cap, const uint32_t *homes, uint32_t id) {
  uint32_t mask = cap - 1, i = homes[id] & mask;
  while (tab[i]) i = (i + 1) & mask;
  tab[i] = id + 1;
}

/* Frees slot i; the entries after it shift back. */
static void idmap_delete_at(uint32_t *tab, uint32_t cap, const uint32_t *homes, uint32_t i) {
  uint32_t mask = cap - 1, j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (!tab[j]) break;
    if (kc_probe_shifts(i, j, homes[tab[j] - 1] & mask)) {
      tab[i] = tab[j];
      i = j;
    }
  }
  tab[i] = 0;
}

/* The slot holding id, or UINT32_MAX. */
static uint32_t idmap_slot_of(const uint32_t *tab, uint32_t cap, const uint32_t *homes,
                              uint32_t id) {
  if (!cap) return UINT32_MAX;
  uint32_t mask = cap - 1;
  for (uint32_t i = homes[id] & mask; tab[i]; i = (i + 1) & mask)
    if (tab[i] == id + 1) return i;
  return UINT32_MAX;
}

/* As kc_iddict's move_some: the cursor stays on a slot until it is empty
 * (a backward shift may pull a later entry into it) and wraps. */
static void idmap_move_some(kc_idmap *m, const uint32_t *homes, uint32_t moves) {
  uint32_t mask = m->oldcap - 1;
  uint64_t empties = 8ull * moves;
  while (m->oldn && moves && empties) {
    uint32_t v = m->old[m->cursor];
    if (!v) {
      m->cursor = (m->cursor + 1) & mask;
      empties--;
      continue;
    }
    idmap_put_in(m->tab, m->cap, homes, v - 1);
    idmap_delete_at(m->old, m->oldcap, homes, m->cursor);
    m->oldn--;
    moves--;
  }
  if (m->oldn == 0) {
    zeroed_table_free(m->old, m->oldcap, sizeof(uint32_t));
    m->old = NULL;
    m->oldcap = m->cursor = 0;
  }
}

int kc_idmap_reserve(kc_idmap *m, const uint32_t *homes, uint32_t total) {
  uint32_t cap = m->cap ? m->cap : 16;
  while ((uint64_t)total * 4 > (uint64_t)cap * 3) {
    if (cap > UINT32_MAX / 2) return -ENOMEM;
    cap *= 2;
  }
  if (cap == m->cap) return 0;
  uint32_t *nt = zeroed_table(cap, sizeof(uint32_t));
  if (!nt) return -ENOMEM;
  if (m->old) idmap_move_some(m, homes, UINT32_MAX);
  m->old = m->tab;
  m->oldcap = m->cap;
  m->oldn = m->n;
  m->cursor = 0;
  m->tab = nt;
  m->cap = cap;
  if (m->old && (m->oldcap <= KC_IDTABLE_INCREMENTAL_MIN || m->oldn == 0))
    idmap_move_some(m, homes, UINT32_MAX);
  return 0;
}

void kc_idmap_put(kc_idmap *m, const uint32_t *homes, uint32_t id) {
  if (m->old) idmap_move_some(m, homes, KC_IDTABLE_MOVES);
  idmap_put_in(m->tab, m->cap, homes, id);
  m->n++;
}

void kc_idmap_remove(kc_idmap *m, const uint32_t *homes, uint32_t id) {
  uint32_t i = idmap_slot_of(m->tab, m->cap, homes, id);
  if (i != UINT32_MAX) {
    idmap_delete_at(m->tab, m->cap, homes, i);
  } else {
    i = idmap_slot_of(m->old, m->oldcap, homes, id);
    if (i == UINT32_MAX) return; /* not in the map: the caller's bug, nothing to undo */
    idmap_delete_at(m->old, m->oldcap, homes, i);
    m->oldn--;
  }
  m->n--;
  if (m->old) idmap_move_some(m, homes, KC_IDTABLE_MOVES);
}

size_t kc_idmap_bytes(const kc_idmap *m) {
  return ((size_t)m->cap + m->oldcap) * sizeof(uint32_t);
}

void kc_idmap_free(kc_idmap *m) {
  zeroed_table_free(m->tab, m->cap, sizeof(uint32_t));
  zeroed_table_free(m->old, m->oldcap, sizeof(uint32_t));
  *m = (kc_idmap){0};
}
