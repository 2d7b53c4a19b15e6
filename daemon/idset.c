/* SPDX-License-Identifier: Apache-2.0 */
/* idset: see idset.h. */
#include "idset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kstr.h"

/* ---- kc_idset ------------------------------------------------------------ */

/* Rebuilds as a hash table of `cap` slots holding the current members. */
static int rehash(kc_idset *s, uint32_t cap) {
  uint32_t *nt = malloc((size_t)cap * sizeof *nt);
  if (!nt) return -ENOMEM;
  memset(nt, 0xff, (size_t)cap * sizeof *nt);
  kc_iditer it = kc_iditer_start(s);
  for (uint32_t id; kc_iditer_next(&it, &id);) kc_idtab_put(nt, cap - 1, NULL, id);
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
      kc_idtab_put(s->u.tab, s->cap - 1, NULL, id);
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
  kc_idtab_put(s->u.tab, s->cap - 1, NULL, id);
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
  uint32_t mask = s->cap - 1, i = kc_idtab_home(NULL, id) & mask;
  uint32_t *t = s->u.tab;
  while (t[i] != id) {
    if (t[i] == KC_IDSET_NONE) return false;
    i = (i + 1) & mask;
  }
  kc_idtab_delete(t, mask, NULL, i);
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
    uint32_t mask = s->cap - 1, i = kc_idtab_home(NULL, id) & mask;
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

kc_iddict_ent *kc_iddict_find(const kc_iddict *d, const char *a, size_t alen, const char *b,
                              size_t blen, uint32_t h) {
  if (!d->cap) return NULL;
  uint32_t mask = d->cap - 1;
  for (uint32_t i = h & mask;; i = (i + 1) & mask) {
    kc_iddict_ent *e = &d->tab[i];
    if (e->set.n == 0) return NULL;
    if (e->hash == h && kc_str_eq((kc_str){e->a, e->alen}, (kc_str){a, alen}) &&
        kc_str_eq((kc_str){e->b, e->blen}, (kc_str){b, blen}))
      return e;
  }
}

static int resize(kc_iddict *d, uint32_t cap) {
  kc_iddict_ent *nt = calloc(cap, sizeof *nt);
  if (!nt) return -ENOMEM;
  uint32_t mask = cap - 1;
  for (uint32_t i = 0; i < d->cap; i++) {
    if (d->tab[i].set.n == 0) continue;
    uint32_t j = d->tab[i].hash & mask;
    while (nt[j].set.n) j = (j + 1) & mask;
    nt[j] = d->tab[i];
  }
  free(d->tab);
  d->tab = nt;
  d->cap = cap;
  return 0;
}

void kc_iddict_free(kc_iddict *d) {
  for (uint32_t i = 0; i < d->cap; i++) {
    if (d->tab[i].set.n == 0) continue;
    kc_idset_free(&d->tab[i].set);
    if (d->tab[i].owned) free((char *)d->tab[i].a);
  }
  free(d->tab);
  d->tab = NULL;
  d->cap = d->n = 0;
}

size_t kc_iddict_bytes(const kc_iddict *d) {
  size_t b = (size_t)d->cap * sizeof(kc_iddict_ent);
  for (uint32_t i = 0; i < d->cap; i++) {
    const kc_iddict_ent *e = &d->tab[i];
    if (e->set.n == 0) continue;
    b += kc_idset_bytes(&e->set);
    if (e->owned) b += e->alen + 1;
  }
  return b;
}

int kc_iddict_add(kc_iddict *d, const char *a, size_t alen, const char *b, size_t blen,
                  uint32_t h, uint32_t id) {
  kc_iddict_ent *e = kc_iddict_find(d, a, alen, b, blen, h);
  if (e) return kc_idset_add(&e->set, id);
  if ((d->n + 1) * 4 > d->cap * 3 && resize(d, d->cap ? d->cap * 2 : 8) < 0) return -ENOMEM;
  const char *acopy = a;
  if (d->copy_a) {
    char *c = malloc(alen + 1);
    if (!c) return -ENOMEM;
    if (alen) memcpy(c, a, alen);
    c[alen] = '\0';
    acopy = c;
  }
  uint32_t mask = d->cap - 1, i = h & mask;
  while (d->tab[i].set.n) i = (i + 1) & mask;
  e = &d->tab[i];
  *e = (kc_iddict_ent){.a = acopy, .b = b, .alen = (uint32_t)alen, .blen = (uint32_t)blen,
                       .hash = h, .owned = d->copy_a, .set = {.n = 1, .u.inl = {id, 0}}};
  d->n++;
  return 0;
}

void kc_iddict_remove(kc_iddict *d, kc_iddict_ent *e) {
  kc_idset_free(&e->set);
  if (e->owned) free((char *)e->a);
  uint32_t i = (uint32_t)(e - d->tab);
  uint32_t mask = d->cap - 1, j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (d->tab[j].set.n == 0) break;
    uint32_t k = d->tab[j].hash & mask;
    if (kc_probe_shifts(i, j, k)) {
      d->tab[i] = d->tab[j];
      i = j;
    }
  }
  memset(&d->tab[i], 0, sizeof d->tab[i]);
  d->n--;
  if (d->cap > 16 && d->n * 8 < d->cap) (void)resize(d, d->cap / 2);
}

size_t kc_iddict_members(const kc_iddict *d) {
  size_t n = 0;
  for (uint32_t i = 0; i < d->cap; i++) n += d->tab[i].set.n;
  return n;
}
