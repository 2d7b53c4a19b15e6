/* SPDX-License-Identifier: Apache-2.0 */
/* keytrace: see keytrace.h. */
#include "runtime/keytrace.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(sizeof(kc_keytrace_entry) == 256, "a trace entry is 256 bytes (keytrace.h)");

#define ERR_BUCKETS 1024u

struct err_rec {
  struct err_rec *next;
  uint64_t hash;
  char *message;
  char key[];
};

struct kc_keytrace {
  pthread_mutex_t mu;
  kc_keytrace_entry *ring;
  size_t cap;
  uint64_t seq; /* entries recorded; the next goes to ring[seq % cap] */
  struct err_rec *errs[ERR_BUCKETS];
  size_t nerrs;
  size_t err_bytes;
};

static const char *const stage_names[KC_TRACE_NSTAGES] = {"queued", "dequeued", "result", "write",
                                                          "requeue"};

const char *kc_keytrace_stage_name(enum kc_keytrace_stage s) {
  return (unsigned)s < KC_TRACE_NSTAGES ? stage_names[s] : "unknown";
}

uint64_t kc_keytrace_hash(const char *key) {
  uint64_t h = 14695981039346656037ull; /* FNV-1a, 64 bit */
  for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
    h ^= *p;
    h *= 1099511628211ull;
  }
  return h;
}

kc_keytrace *kc_keytrace_new(size_t capacity) {
  if (capacity == 0) capacity = KC_KEYTRACE_DEFAULT;
  kc_keytrace *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->ring = calloc(capacity, sizeof *t->ring);
  if (!t->ring || pthread_mutex_init(&t->mu, NULL) != 0) {
    free(t->ring);
    free(t);
    return NULL;
  }
  t->cap = capacity;
  return t;
}

void kc_keytrace_free(kc_keytrace *t) {
  if (!t) return;
  for (size_t i = 0; i < ERR_BUCKETS; i++) {
    struct err_rec *e = t->errs[i];
    while (e) {
      struct err_rec *n = e->next;
      free(e->message);
      free(e);
      e = n;
    }
  }
  pthread_mutex_destroy(&t->mu);
  free(t->ring);
  free(t);
}

static uint64_t wall_ms(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void kc_keytrace_add(kc_keytrace *t, const char *key, enum kc_keytrace_stage stage,
                     const char *fmt, ...) {
  if (!t || !key) return;
  char detail[KC_KEYTRACE_DETAIL_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  if (n < 0) detail[0] = '\0';
  uint64_t h = kc_keytrace_hash(key), now = wall_ms();
  pthread_mutex_lock(&t->mu);
  kc_keytrace_entry *e = &t->ring[t->seq % t->cap];
  e->seq = ++t->seq;
  e->wall_ms = now;
  e->key_hash = h;
  e->stage = (uint32_t)stage;
  e->pad = 0;
  memcpy(e->detail, detail, sizeof detail);
  pthread_mutex_unlock(&t->mu);
}

size_t kc_keytrace_find(kc_keytrace *t, const char *key, kc_keytrace_entry *out, size_t max) {
  if (!t || !key) return 0;
  uint64_t h = kc_keytrace_hash(key);
  size_t found = 0;
  pthread_mutex_lock(&t->mu);
  uint64_t first = t->seq > t->cap ? t->seq - t->cap : 0;
  /* Two passes over the ring, oldest first: count, then copy the newest max. */
  for (uint64_t s = first; s < t->seq; s++)
    if (t->ring[s % t->cap].key_hash == h) found++;
  size_t skip = found > max ? found - max : 0, k = 0, seen = 0;
  for (uint64_t s = first; s < t->seq && k < max; s++) {
    const kc_keytrace_entry *e = &t->ring[s % t->cap];
    if (e->key_hash != h) continue;
    if (seen++ < skip) continue;
    out[k++] = *e;
  }
  pthread_mutex_unlock(&t->mu);
  return found;
}

static struct err_rec **err_slot(kc_keytrace *t, const char *key, uint64_t h) {
  struct err_rec **pp = &t->errs[h % ERR_BUCKETS];
  while (*pp && ((*pp)->hash != h || strcmp((*pp)->key, key) != 0)) pp = &(*pp)->next;
  return pp;
}

static size_t rec_bytes(const struct err_rec *e) {
  return sizeof *e + strlen(e->key) + 1 + strlen(e->message) + 1;
}

int kc_keytrace_set_error(kc_keytrace *t, const char *key, const char *message) {
  if (!t || !key) return 0;
  uint64_t h = kc_keytrace_hash(key);
  int rc = 0;
  pthread_mutex_lock(&t->mu);
  struct err_rec **pp = err_slot(t, key, h), *e = *pp;
  if (!message) {
    if (e) {
      *pp = e->next;
      t->nerrs--;
      t->err_bytes -= rec_bytes(e);
      free(e->message);
      free(e);
    }
    goto out;
  }
  char *m = strndup(message, KC_KEYTRACE_ERROR_MAX - 1);
  if (!m) {
    rc = -ENOMEM;
    goto out;
  }
  if (e) {
    t->err_bytes -= rec_bytes(e);
    free(e->message);
    e->message = m;
    t->err_bytes += rec_bytes(e);
    goto out;
  }
  if (t->nerrs >= KC_KEYTRACE_MAX_ERRORS) {
    free(m);
    rc = -ENOSPC;
    goto out;
  }
  size_t kl = strlen(key);
  e = malloc(sizeof *e + kl + 1);
  if (!e) {
    free(m);
    rc = -ENOMEM;
    goto out;
  }
  memcpy(e->key, key, kl + 1);
  e->hash = h;
  e->message = m;
  e->next = NULL;
  *pp = e;
  t->nerrs++;
  t->err_bytes += rec_bytes(e);
out:
  pthread_mutex_unlock(&t->mu);
  return rc;
}

bool kc_keytrace_last_error(kc_keytrace *t, const char *key, char *buf, size_t cap) {
  if (!t || !key) return false;
  pthread_mutex_lock(&t->mu);
  struct err_rec *e = *err_slot(t, key, kc_keytrace_hash(key));
  if (e && cap) snprintf(buf, cap, "%s", e->message);
  pthread_mutex_unlock(&t->mu);
  return e != NULL;
}

size_t kc_keytrace_failing(kc_keytrace *t) {
  pthread_mutex_lock(&t->mu);
  size_t n = t->nerrs;
  pthread_mutex_unlock(&t->mu);
  return n;
}

void kc_keytrace_each_error(kc_keytrace *t, void (*fn)(const char *key, const char *message, void *ud),
                            void *ud) {
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < ERR_BUCKETS; i++)
    for (const struct err_rec *e = t->errs[i]; e; e = e->next) fn(e->key, e->message, ud);
  pthread_mutex_unlock(&t->mu);
}

size_t kc_keytrace_capacity(const kc_keytrace *t) { return t->cap; }

uint64_t kc_keytrace_recorded(kc_keytrace *t) {
  pthread_mutex_lock(&t->mu);
  uint64_t n = t->seq;
  pthread_mutex_unlock(&t->mu);
  return n;
}

size_t kc_keytrace_mem_bytes(kc_keytrace *t) {
  pthread_mutex_lock(&t->mu);
  size_t n = sizeof *t + t->cap * sizeof *t->ring + t->err_bytes;
  pthread_mutex_unlock(&t->mu);
  return n;
}
