/* SPDX-License-Identifier: Apache-2.0 */
/* applymemo: see applymemo.h.
 *
 * A chained hash table by uid plus a list in the order remembered (oldest
 * first) that says which entry a full table drops. */
#include "host/applymemo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/namedcounts.h"

#define NBUCKETS 16384u /* power of two: at the cap, chains of 4 */

struct entry {
  struct entry *chain;         /* next in its bucket */
  struct entry *older, *newer; /* the remembered order */
  uint64_t hash, len;          /* of the body applied */
  char uid[KC_APPLYMEMO_UID_MAX + 1];
  char rv[KC_APPLYMEMO_RV_MAX + 1];
};

_Static_assert(sizeof(struct entry) == 104, "applymemo.h states the size of an entry");

struct kc_applymemo {
  pthread_mutex_t mu;
  unsigned cap;
  size_t n;
  struct entry **buckets; /* NULL until the first remember */
  struct entry *oldest, *newest;
};

kc_applymemo *kc_applymemo_new(unsigned cap) {
  kc_applymemo *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  if (pthread_mutex_init(&m->mu, NULL) != 0) {
    free(m);
    return NULL;
  }
  m->cap = cap ? cap : KC_APPLYMEMO_CAP;
  return m;
}

void kc_applymemo_free(kc_applymemo *m) {
  if (!m) return;
  for (struct entry *e = m->oldest, *next; e; e = next) {
    next = e->newer;
    free(e);
  }
  free(m->buckets);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static bool fits(const char *s, size_t len, size_t max) { return s && len && len <= max; }

static uint64_t uid_hash(const char *uid, size_t len) { return kc_hash_bytes(uid, len); }

/* The link that points at uid's entry (*link NULL when absent); NULL
 * before the first remember. Under mu. */
static struct entry **find(kc_applymemo *m, const char *uid, size_t len) {
  if (!m->buckets) return NULL;
  struct entry **pp = &m->buckets[uid_hash(uid, len) & (NBUCKETS - 1)];
  while (*pp && !(strlen((*pp)->uid) == len && memcmp((*pp)->uid, uid, len) == 0)) pp = &(*pp)->chain;
  return pp;
}

/* Takes e out of the remembered order. Under mu. */
static void unlist(kc_applymemo *m, struct entry *e) {
  if (e->older) e->older->newer = e->newer;
  else m->oldest = e->newer;
  if (e->newer) e->newer->older = e->older;
  else m->newest = e->older;
  e->older = e->newer = NULL;
}

static void list_newest(kc_applymemo *m, struct entry *e) {
  e->older = m->newest;
  e->newer = NULL;
  if (m->newest) m->newest->newer = e;
  else m->oldest = e;
  m->newest = e;
}

/* Unlinks and frees the entry *pp points at. Under mu. */
static void drop(kc_applymemo *m, struct entry **pp) {
  struct entry *e = *pp;
  *pp = e->chain;
  unlist(m, e);
  free(e);
  m->n--;
}

static void forget_locked(kc_applymemo *m, const char *uid, size_t uid_len) {
  struct entry **pp = find(m, uid, uid_len);
  if (pp && *pp) drop(m, pp);
}

void kc_applymemo_remember(kc_applymemo *m, const char *uid, size_t uid_len, const char *rv,
                           size_t rv_len, uint64_t hash, size_t len) {
  if (!m || !fits(uid, uid_len, KC_APPLYMEMO_UID_MAX)) return;
  pthread_mutex_lock(&m->mu);
  if (!fits(rv, rv_len, KC_APPLYMEMO_RV_MAX)) {
    forget_locked(m, uid, uid_len);
    pthread_mutex_unlock(&m->mu);
    return;
  }
  if (!m->buckets) m->buckets = calloc(NBUCKETS, sizeof *m->buckets);
  struct entry **pp = find(m, uid, uid_len);
  struct entry *e = pp ? *pp : NULL;
  if (pp && !e) { /* new: make room first (the oldest may share the bucket) */
    if (m->n >= m->cap && m->oldest) {
      struct entry *old = m->oldest;
      forget_locked(m, old->uid, strlen(old->uid));
      pp = find(m, uid, uid_len);
    }
    e = calloc(1, sizeof *e);
    if (e) {
      memcpy(e->uid, uid, uid_len);
      e->chain = *pp;
      *pp = e;
      m->n++;
    }
  }
  if (e) {
    if (e->older || e->newer || m->newest == e) unlist(m, e);
    list_newest(m, e);
    e->hash = hash;
    e->len = len;
    memcpy(e->rv, rv, rv_len);
    e->rv[rv_len] = '\0';
  }
  pthread_mutex_unlock(&m->mu);
}

bool kc_applymemo_unchanged(kc_applymemo *m, const char *uid, size_t uid_len, const char *rv,
                            size_t rv_len, uint64_t hash, size_t len) {
  if (!m || !fits(uid, uid_len, KC_APPLYMEMO_UID_MAX) || !fits(rv, rv_len, KC_APPLYMEMO_RV_MAX))
    return false;
  pthread_mutex_lock(&m->mu);
  struct entry **pp = find(m, uid, uid_len);
  const struct entry *e = pp ? *pp : NULL;
  bool same = e && e->hash == hash && e->len == len && strlen(e->rv) == rv_len &&
              memcmp(e->rv, rv, rv_len) == 0;
  pthread_mutex_unlock(&m->mu);
  return same;
}

void kc_applymemo_forget(kc_applymemo *m, const char *uid, size_t uid_len) {
  if (!m || !fits(uid, uid_len, KC_APPLYMEMO_UID_MAX)) return;
  pthread_mutex_lock(&m->mu);
  forget_locked(m, uid, uid_len);
  pthread_mutex_unlock(&m->mu);
}

size_t kc_applymemo_size(kc_applymemo *m) {
  if (!m) return 0;
  pthread_mutex_lock(&m->mu);
  size_t n = m->n;
  pthread_mutex_unlock(&m->mu);
  return n;
}

/* ---- skip counts ---- */

static kc_named_counts skips = KC_NAMED_COUNTS_INIT;

void kc_applymemo_count_skip(const char *controller) { kc_named_counts_add(&skips, controller, 0); }

struct each_skip {
  void (*fn)(const char *controller, uint64_t n, void *ud);
  void *ud;
};

static void each_skip(const char *controller, unsigned column, uint64_t n, void *ud) {
  const struct each_skip *e = ud;
  e->fn(controller, n, e->ud);
}

void kc_applymemo_each_skips(void (*fn)(const char *controller, uint64_t n, void *ud), void *ud) {
  struct each_skip e = {fn, ud};
  kc_named_counts_each(&skips, each_skip, &e);
}

uint64_t kc_applymemo_skips_of(const char *controller) {
  return kc_named_counts_get(&skips, controller, 0);
}
