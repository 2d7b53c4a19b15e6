/* SPDX-License-Identifier: Apache-2.0 */
/* expectations: see expectations.h. */
#include "host/expectations.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct rec {
  struct rec *next;
  int64_t adds, dels;
  uint64_t stamp_ns;
  char key[];
};

#define NBUCKETS 256 /* records are few: only keys with creates/deletes in flight */

struct kc_expectations {
  pthread_mutex_t mu;
  uint64_t ttl_ns;
  unsigned count;
  struct rec *buckets[NBUCKETS];
};

static unsigned bucket_of(const char *key) {
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 16777619u;
  return h % NBUCKETS;
}

kc_expectations *kc_expectations_new(uint64_t ttl_ns) {
  kc_expectations *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  if (pthread_mutex_init(&e->mu, NULL) != 0) {
    free(e);
    return NULL;
  }
  e->ttl_ns = ttl_ns ? ttl_ns : KC_EXPECTATIONS_TTL_NS;
  return e;
}

void kc_expectations_free(kc_expectations *e) {
  if (!e) return;
  for (unsigned i = 0; i < NBUCKETS; i++) {
    struct rec *r = e->buckets[i];
    while (r) {
      struct rec *n = r->next;
      free(r);
      r = n;
    }
  }
  pthread_mutex_destroy(&e->mu);
  free(e);
}

/* Returns the link pointing at key's record (*link NULL when absent). */
static struct rec **find(kc_expectations *e, const char *key) {
  struct rec **pp = &e->buckets[bucket_of(key)];
  while (*pp && strcmp((*pp)->key, key) != 0) pp = &(*pp)->next;
  return pp;
}

static void unlink_free(kc_expectations *e, struct rec **pp) {
  struct rec *r = *pp;
  *pp = r->next;
  free(r);
  e->count--;
}

int kc_expectations_set(kc_expectations *e, const char *key, int64_t adds, int64_t dels,
                        uint64_t now_ns) {
  if (!key || !*key || adds < 0 || dels < 0) return -EINVAL;
  pthread_mutex_lock(&e->mu);
  struct rec **pp = find(e, key);
  if (adds == 0 && dels == 0) { /* fulfilled: same as no record */
    if (*pp) unlink_free(e, pp);
    pthread_mutex_unlock(&e->mu);
    return 0;
  }
  struct rec *r = *pp;
  if (!r) {
    size_t len = strlen(key);
    r = malloc(sizeof *r + len + 1);
    if (!r) {
      pthread_mutex_unlock(&e->mu);
      return -ENOMEM;
    }
    memcpy(r->key, key, len + 1);
    r->next = NULL;
    *pp = r;
    e->count++;
  }
  r->adds = adds;
  r->dels = dels;
  r->stamp_ns = now_ns;
  pthread_mutex_unlock(&e->mu);
  return 0;
}

void kc_expectations_observe(kc_expectations *e, const char *key, int64_t adds, int64_t dels) {
  if (!key) return;
  pthread_mutex_lock(&e->mu);
  struct rec **pp = find(e, key);
  if (*pp) {
    (*pp)->adds -= adds;
    (*pp)->dels -= dels;
    if ((*pp)->adds <= 0 && (*pp)->dels <= 0) unlink_free(e, pp);
  }
  pthread_mutex_unlock(&e->mu);
}

bool kc_expectations_satisfied(kc_expectations *e, const char *key, uint64_t now_ns) {
  if (!key) return true;
  pthread_mutex_lock(&e->mu);
  struct rec *r = *find(e, key);
  bool ok = !r || (r->adds <= 0 && r->dels <= 0) ||
            (now_ns > r->stamp_ns && now_ns - r->stamp_ns > e->ttl_ns);
  pthread_mutex_unlock(&e->mu);
  return ok;
}

void kc_expectations_forget(kc_expectations *e, const char *key) {
  if (!key) return;
  pthread_mutex_lock(&e->mu);
  struct rec **pp = find(e, key);
  if (*pp) unlink_free(e, pp);
  pthread_mutex_unlock(&e->mu);
}

unsigned kc_expectations_count(kc_expectations *e) {
  pthread_mutex_lock(&e->mu);
  unsigned n = e->count;
  pthread_mutex_unlock(&e->mu);
  return n;
}
