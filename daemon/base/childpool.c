/* SPDX-License-Identifier: Apache-2.0 */
/* childpool: see childpool.h. */
#include "base/childpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/ratelimit.h"

struct slot {
  void *child;
  bool taken;
};

struct kc_childpool {
  pthread_mutex_t mu; /* everything below */
  size_t nslots;
  struct slot *slots;
  kc_backoff backoff;
  uint32_t backoffs; /* since the last good answer: the next backoff's exponent */
  uint64_t until_ns; /* no child starts before this (0: none) */
  uint64_t lost[KC_CHILDPOOL_BREAK_KEYS]; /* hashes of the keys lost since the last good answer */
  size_t nlost;
  char last_loss[512];
};

kc_childpool *kc_childpool_new(size_t nslots, uint64_t base_ms, uint64_t max_ms) {
  if (!nslots) nslots = 1;
  kc_childpool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->slots = calloc(nslots, sizeof *p->slots);
  if (!p->slots || pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p->slots);
    free(p);
    return NULL;
  }
  p->nslots = nslots;
  p->backoff = (kc_backoff){base_ms * KC_NS_PER_MS, max_ms * KC_NS_PER_MS};
  return p;
}

void kc_childpool_free(kc_childpool *p) {
  if (!p) return;
  pthread_mutex_destroy(&p->mu);
  free(p->slots);
  free(p);
}

size_t kc_childpool_nslots(const kc_childpool *p) {
  return p->nslots;
}

void **kc_childpool_child(kc_childpool *p, size_t i) {
  return &p->slots[i].child;
}

int kc_childpool_take(kc_childpool *p, uint64_t *hold_ns, char *why, size_t whylen) {
  uint64_t now = kc_clock_now_ns();
  int got = -EBUSY;
  pthread_mutex_lock(&p->mu);
  for (size_t i = 0; i < p->nslots && got < 0; i++)
    if (!p->slots[i].taken && p->slots[i].child) got = (int)i;
  for (size_t i = 0; i < p->nslots && got == -EBUSY; i++) {
    if (p->slots[i].taken) continue;
    if (now < p->until_ns) {
      got = -EAGAIN;
      *hold_ns = p->until_ns - now;
      if (why && whylen) snprintf(why, whylen, "%s", p->last_loss);
    } else {
      got = (int)i;
    }
  }
  if (got >= 0) p->slots[got].taken = true;
  pthread_mutex_unlock(&p->mu);
  return got;
}

uint64_t kc_childpool_release(kc_childpool *p, size_t i, enum kc_childpool_outcome outcome,
                              const char *key, const char *why) {
  uint64_t delay = 0;
  pthread_mutex_lock(&p->mu);
  p->slots[i].taken = false;
  if (outcome == KC_CHILDPOOL_ANSWERED) {
    p->nlost = 0;
    kc_backoff_forget(&p->backoffs);
    p->until_ns = 0;
  } else if (outcome == KC_CHILDPOOL_LOST) {
    /* Keys told apart by hash: a collision only makes two keys count as
     * one (the program backs off one loss later). */
    uint64_t h = kc_hash_str(key ? key : "");
    bool seen = false;
    for (size_t k = 0; k < p->nlost && !seen; k++)
      seen = p->lost[k] == h;
    if (!seen && p->nlost < KC_CHILDPOOL_BREAK_KEYS) p->lost[p->nlost++] = h;
    snprintf(p->last_loss, sizeof p->last_loss, "%s", why ? why : "");
    /* A loss while the backoff runs (a child started before it) does not
     * lengthen it: one doubling per backoff that passed. */
    uint64_t now = kc_clock_now_ns();
    if (p->nlost >= KC_CHILDPOOL_BREAK_KEYS && now >= p->until_ns) {
      delay = kc_backoff_when(&p->backoff, &p->backoffs);
      p->until_ns = now + delay;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return delay;
}

void *kc_childpool_take_dead(kc_childpool *p, size_t i, bool (*dead)(const void *child)) {
  void *c = NULL;
  pthread_mutex_lock(&p->mu);
  struct slot *s = &p->slots[i];
  if (!s->taken && s->child && dead(s->child)) {
    c = s->child;
    s->child = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  return c;
}
