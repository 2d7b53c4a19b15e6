/* SPDX-License-Identifier: Apache-2.0 */
/* sharedtext: see sharedtext.h. A chained hash table under one mutex. */
#include "base/sharedtext.h"

#include "base/hash.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static kc_shared_text **buckets; /* nbuckets entries, a power of two */
static size_t nbuckets, npieces;
static uint64_t nbytes, nrefs;

/* Four independent 8-byte lanes per step: the pieces are kilobytes,
 * hashed once per object built, so the hash must cost far less than
 * copying them would (a single lane waits on each multiply). */
static uint64_t text_hash(const char *s, size_t n) {
  const uint64_t k = 0xff51afd7ed558ccdULL;
  uint64_t h[4] = {0x9e3779b97f4a7c15ULL ^ n, 0xc2b2ae3d27d4eb4fULL, 0x165667b19e3779f9ULL,
                   0x27d4eb2f165667c5ULL};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    memcpy(w, s + i, 32);
    for (int j = 0; j < 4; j++) {
      h[j] = (h[j] ^ w[j]) * k;
      h[j] ^= h[j] >> 29;
    }
  }
  uint64_t r = h[0] ^ kc_mix64(h[1]) ^ kc_mix64(h[2] + 1) ^ kc_mix64(h[3] + 2);
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    r = (r ^ w) * k;
    r ^= r >> 29;
  }
  uint64_t w = 0;
  memcpy(&w, s + i, n - i);
  return kc_mix64(r ^ w);
}

/* Doubles the table (at one piece per bucket); a failure only leaves the
 * chains longer. Under the lock. */
static void grow(void) {
  size_t ncap = nbuckets ? nbuckets * 2 : 256;
  kc_shared_text **nb = calloc(ncap, sizeof *nb);
  if (!nb) return;
  for (size_t i = 0; i < nbuckets; i++)
    for (kc_shared_text *t = buckets[i], *next; t; t = next) {
      next = t->next;
      kc_shared_text **slot = &nb[t->hash & (ncap - 1)];
      t->next = *slot;
      *slot = t;
    }
  free(buckets);
  buckets = nb;
  nbuckets = ncap;
}

/* The piece with these bytes in its bucket, or NULL. Under the lock. */
static kc_shared_text *find(uint64_t h, const char *s, size_t len) {
  if (!nbuckets) return NULL;
  for (kc_shared_text *t = buckets[h & (nbuckets - 1)]; t; t = t->next)
    if (t->hash == h && t->len == len && memcmp(t->text, s, len) == 0) return t;
  return NULL;
}

kc_shared_text *kc_shared_text_get(const char *s, size_t len) {
  if (!s || len == 0 || len >= UINT32_MAX) {
    errno = EINVAL;
    return NULL;
  }
  uint64_t h = text_hash(s, len);
  pthread_mutex_lock(&pool_lock);
  if (npieces >= nbuckets) grow();
  kc_shared_text *t = find(h, s, len);
  if (t) {
    t->refs++;
    nrefs++;
    pthread_mutex_unlock(&pool_lock);
    return t;
  }
  pthread_mutex_unlock(&pool_lock);
  /* Copy outside the lock; a racing builder may insert the same bytes
   * meanwhile, then one of the two copies is dropped. */
  kc_shared_text *n = malloc(sizeof *n + len + 1);
  if (!n) {
    errno = ENOMEM;
    return NULL;
  }
  memcpy(n->text, s, len);
  n->text[len] = '\0';
  n->hash = h;
  n->len = (uint32_t)len;
  n->refs = 1;
  pthread_mutex_lock(&pool_lock);
  if (npieces >= nbuckets) grow();
  if (!nbuckets) {
    pthread_mutex_unlock(&pool_lock);
    free(n);
    errno = ENOMEM;
    return NULL;
  }
  if ((t = find(h, s, len))) {
    t->refs++;
    nrefs++;
    pthread_mutex_unlock(&pool_lock);
    free(n);
    return t;
  }
  kc_shared_text **slot = &buckets[h & (nbuckets - 1)];
  n->next = *slot;
  *slot = n;
  npieces++;
  nbytes += len;
  nrefs++;
  pthread_mutex_unlock(&pool_lock);
  return n;
}

void kc_shared_text_put(kc_shared_text *t) {
  if (!t) return;
  pthread_mutex_lock(&pool_lock);
  nrefs--;
  if (--t->refs > 0) {
    pthread_mutex_unlock(&pool_lock);
    return;
  }
  kc_shared_text **pp = &buckets[t->hash & (nbuckets - 1)];
  while (*pp != t) pp = &(*pp)->next;
  *pp = t->next;
  npieces--;
  nbytes -= t->len;
  pthread_mutex_unlock(&pool_lock);
  free(t);
}

kc_shared_text_stats kc_shared_text_stats_now(void) {
  pthread_mutex_lock(&pool_lock);
  kc_shared_text_stats st = {npieces, nbytes, nrefs};
  pthread_mutex_unlock(&pool_lock);
  return st;
}
