/* SPDX-License-Identifier: Apache-2.0 */
/* workqueue: see workqueue.h. */
#include "runtime/workqueue.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/memtrim.h"

enum {
  F_DIRTY = 1 << 0,    /* needs processing (client-go "dirty" set) */
  F_PROC = 1 << 1,     /* handed out, Done not yet called */
  F_ADD_TIME = 1 << 2, /* add_ns holds the first un-got add (queue duration) */
  F_IDLE = 1 << 3,     /* counted in nidle; reclaimable */
};

/* One interned key. Invariant: queued in the FIFO of `level` <=> DIRTY &&
 * !PROC; in the processing list <=> PROC. A record is in at most one of
 * these lists, so both use the same links. */
struct rec {
  struct rec *hnext;          /* hash chain */
  struct rec *prev, *next;    /* its level's FIFO, or the processing list (oldest first) */
  uint64_t ready_ns;          /* heap key while waiting */
  uint64_t add_ns;
  uint64_t start_ns;          /* processing: when Get handed it out */
  uint64_t queued_ns;         /* queued: when it entered its level's FIFO (aging) */
  uint32_t hash;
  uint32_t failures;          /* per-item backoff state (kc_backoff_when) */
  int32_t heap_idx;           /* -1 when not waiting */
  uint32_t flags;
  uint32_t keylen;
  uint8_t level;              /* queued at; else the level it was last queued at */
  uint8_t heap_level;         /* the level it is added at when its delay ends */
  char key[];
};

/* A doubly linked list of records (a level's FIFO, the processing list). */
struct list {
  struct rec *head, *tail;
};

struct kc_workqueue {
  char *name;
  kc_ratelimit rl;
  bool shutting_down;

  struct rec **buckets; /* power of two; takes every new record */
  size_t nbuckets;
  /* A growing table: the previous buckets, emptied into `buckets` a few
   * chains per new key from rehash_pos on (NULL when no growth is under
   * way), so no add relinks every record at once. */
  struct rec **old;
  size_t nold, rehash_pos; /* nold 0 without an old table */
  size_t nrec;
  size_t nidle;
  size_t rec_bytes;
  /* The sweep of idle records under way (maybe_sweep): the next bucket of
   * buckets then old, as one range. */
  bool sweeping;
  size_t sweep_pos;

  struct list fifo[KC_WQ_LEVELS];
  size_t qlen_at[KC_WQ_LEVELS];
  size_t qlen;          /* all levels */
  bool aged_turn;       /* the last Get handed out an aged head out of level order */

  struct list proc;
  size_t nproc;

  struct rec **heap;
  size_t nheap, heapcap;

  kc_wq_metrics m;

  /* The post-drain trim (workqueue.h kc_workqueue_trims). */
  size_t busy_hw;        /* high-water of qlen + nproc since the last trim */
  uint64_t last_trim_ns; /* valid when ntrims > 0 */
  uint64_t ntrims;
};

#define MIN_BUCKETS 64
#define SWEEP_MIN_IDLE 1024
/* Chains moved per new key while the table grows (and at most ten times as
 * many empty buckets stepped over). */
#define REHASH_CHAINS 4
/* Buckets swept per call while a sweep is under way: a 256th of the table,
 * at least 64, so a pass ends within 256 calls at any size. */
#define SWEEP_MIN_BUCKETS 64
#define SWEEP_SHARE 256



static const uint64_t max_wait_ns[KC_WQ_LEVELS] = {
    [KC_WQ_LOW] = KC_WQ_LOW_MAX_WAIT_NS,
    [KC_WQ_NORMAL] = KC_WQ_NORMAL_MAX_WAIT_NS,
    [KC_WQ_HIGH] = UINT64_MAX,
};

const char *kc_wq_priority_name(int level) {
  switch (level) {
  case KC_WQ_LOW: return "low";
  case KC_WQ_NORMAL: return "normal";
  case KC_WQ_HIGH: return "high";
  }
  return "?";
}

/* FNV-1a, 32 bit: keys are short ("namespace/name"). */
static uint32_t hash_key(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 16777619u;
  }
  return h;
}

uint64_t kc_wq_histogram_bound_ns(unsigned i) {
  uint64_t b = 10; /* 1e-8 s */
  for (unsigned k = 0; k < i && k < KC_WQ_HIST_BUCKETS - 1; k++) b *= 10;
  return b;
}

void kc_wq_histogram_observe(kc_wq_histogram *h, uint64_t ns) {
  unsigned i = 0;
  uint64_t b = 10;
  while (i < KC_WQ_HIST_BUCKETS && ns > b) {
    i++;
    b *= 10;
  }
  h->counts[i]++;
  h->count++;
  h->sum_ns += ns;
}

kc_workqueue *kc_workqueue_new(const char *name, const kc_ratelimit_config *rl) {
  kc_ratelimit_config def;
  if (!rl) {
    kc_ratelimit_config_default(&def);
    rl = &def;
  }
  kc_workqueue *wq = calloc(1, sizeof *wq);
  if (!wq) return NULL;
  if (kc_ratelimit_init(&wq->rl, rl) < 0) {
    free(wq);
    errno = EINVAL;
    return NULL;
  }
  wq->name = strdup(name ? name : "");
  wq->buckets = calloc(MIN_BUCKETS, sizeof *wq->buckets);
  if (!wq->name || !wq->buckets) {
    free(wq->name);
    free(wq->buckets);
    free(wq);
    errno = ENOMEM;
    return NULL;
  }
  wq->nbuckets = MIN_BUCKETS;
  return wq;
}

/* Bucket i of the two tables as one range: buckets, then old. */
static struct rec **bucket_at(kc_workqueue *wq, size_t i) {
  return i < wq->nbuckets ? &wq->buckets[i] : &wq->old[i - wq->nbuckets];
}

static size_t all_buckets(const kc_workqueue *wq) { return wq->nbuckets + wq->nold; }

void kc_workqueue_free(kc_workqueue *wq) {
  if (!wq) return;
  for (size_t i = 0; i < all_buckets(wq); i++) {
    struct rec *r = *bucket_at(wq, i);
    while (r) {
      struct rec *n = r->hnext;
      free(r);
      r = n;
    }
  }
  free(wq->buckets);
  free(wq->old);
  free(wq->heap);
  free(wq->name);
  free(wq);
}


static struct rec *chain_lookup(struct rec *r, const char *key, size_t len, uint32_t h) {
  for (; r; r = r->hnext)
    if (r->hash == h && r->keylen == len && memcmp(r->key, key, len) == 0) return r;
  return NULL;
}

static struct rec *lookup(const kc_workqueue *wq, const char *key, size_t len, uint32_t h) {
  struct rec *r = chain_lookup(wq->buckets[h & (wq->nbuckets - 1)], key, len, h);
  if (!r && wq->old) r = chain_lookup(wq->old[h & (wq->nold - 1)], key, len, h);
  return r;
}

static struct rec *find(const kc_workqueue *wq, const char *key) {
  if (!key) return NULL;
  size_t len = strlen(key);
  return lookup(wq, key, len, hash_key(key, len));
}

/* Moves up to `chains` chains of the old table into the new one; frees
 * the old table once it is empty. */
static void rehash_some(kc_workqueue *wq, size_t chains) {
  size_t empties = chains > SIZE_MAX / 10 ? SIZE_MAX : chains * 10, mask = wq->nbuckets - 1;
  while (wq->rehash_pos < wq->nold && chains && empties) {
    struct rec *r = wq->old[wq->rehash_pos];
    if (!r) {
      wq->rehash_pos++;
      empties--;
      continue;
    }
    while (r) {
      struct rec *next = r->hnext;
      r->hnext = wq->buckets[r->hash & mask];
      wq->buckets[r->hash & mask] = r;
      r = next;
    }
    wq->old[wq->rehash_pos++] = NULL;
    chains--;
  }
  if (wq->rehash_pos >= wq->nold) {
    free(wq->old);
    wq->old = NULL;
    wq->nold = wq->rehash_pos = 0;
  }
}

/* Twice the buckets: new keys go to the new table at once, the old one's
 * chains follow a few per new key (rehash_some). */
static void grow(kc_workqueue *wq) {
  size_t n = wq->nbuckets * 2;
  struct rec **b = calloc(n, sizeof *b);
  if (!b) return; /* keep the longer chains; still correct */
  /* An unfinished growth is finished first. Not reached in practice: the
   * next growth takes as many new keys as the old table had buckets, and
   * each moves REHASH_CHAINS chains. */
  if (wq->old) rehash_some(wq, SIZE_MAX);
  wq->old = wq->buckets;
  wq->nold = wq->nbuckets;
  wq->rehash_pos = 0;
  wq->buckets = b;
  wq->nbuckets = n;
}

/* Returns the key's record, creating it (idle) when new; NULL on ENOMEM. */
static struct rec *intern(kc_workqueue *wq, const char *key, size_t len) {
  uint32_t h = hash_key(key, len);
  struct rec *r = lookup(wq, key, len, h);
  if (r) return r;
  if (len > UINT32_MAX - 1) return NULL;
  r = malloc(sizeof *r + len + 1);
  if (!r) return NULL;
  memset(r, 0, sizeof *r);
  memcpy(r->key, key, len);
  r->key[len] = '\0';
  r->keylen = (uint32_t)len;
  r->hash = h;
  r->heap_idx = -1;
  r->flags = F_IDLE;
  r->level = r->heap_level = KC_WQ_NORMAL;
  size_t b = h & (wq->nbuckets - 1);
  r->hnext = wq->buckets[b];
  wq->buckets[b] = r;
  wq->nrec++;
  wq->nidle++;
  wq->rec_bytes += sizeof *r + len + 1;
  if (wq->old) rehash_some(wq, REHASH_CHAINS);
  else if (wq->nrec > wq->nbuckets) grow(wq);
  return r;
}

/* Keeps nidle in step with the record's state after any change. */
static void settle(kc_workqueue *wq, struct rec *r) {
  bool idle = !(r->flags & (F_DIRTY | F_PROC)) && r->heap_idx < 0 && r->failures == 0;
  if (idle && !(r->flags & F_IDLE)) {
    r->flags |= F_IDLE;
    wq->nidle++;
  } else if (!idle && (r->flags & F_IDLE)) {
    r->flags &= ~(uint32_t)F_IDLE;
    wq->nidle--;
  }
}

/* Frees idle records once they outnumber live ones: amortised O(1) per
 * add, and memory stays within twice the live keys (plus a floor). A sweep
 * goes through a 256th of the buckets per call (every add, forget, done and
 * tick), so freeing 100k records is spread over 256 calls instead of
 * walking every record in one. */
static void maybe_sweep(kc_workqueue *wq) {
  if (!wq->sweeping) {
    if (wq->nidle < SWEEP_MIN_IDLE || wq->nidle <= wq->nrec - wq->nidle) return;
    wq->sweeping = true;
    wq->sweep_pos = 0;
  }
  size_t step = all_buckets(wq) / SWEEP_SHARE;
  if (step < SWEEP_MIN_BUCKETS) step = SWEEP_MIN_BUCKETS;
  for (; step && wq->sweep_pos < all_buckets(wq); step--, wq->sweep_pos++) {
    struct rec **pp = bucket_at(wq, wq->sweep_pos);
    while (*pp) {
      struct rec *r = *pp;
      if (r->flags & F_IDLE) {
        *pp = r->hnext;
        wq->rec_bytes -= sizeof *r + r->keylen + 1;
        wq->nrec--;
        wq->nidle--;
        free(r);
      } else {
        pp = &r->hnext;
      }
    }
  }
  if (wq->sweep_pos >= all_buckets(wq)) wq->sweeping = false;
}

static void list_push(struct list *l, struct rec *r) {
  r->next = NULL;
  r->prev = l->tail;
  if (l->tail)
    l->tail->next = r;
  else
    l->head = r;
  l->tail = r;
}

static void list_unlink(struct list *l, struct rec *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    l->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    l->tail = r->prev;
  r->prev = r->next = NULL;
}

/* Queues r at the tail of its level's FIFO; its wait there starts now. */
static void fifo_push(kc_workqueue *wq, struct rec *r, uint64_t now) {
  r->queued_ns = now;
  list_push(&wq->fifo[r->level], r);
  wq->qlen_at[r->level]++;
  wq->qlen++;
}

static void fifo_unlink(kc_workqueue *wq, struct rec *r) {
  list_unlink(&wq->fifo[r->level], r);
  wq->qlen_at[r->level]--;
  wq->qlen--;
}

static bool level_ok(int level) {
  return level == KC_WQ_KEEP || (level >= 0 && level < KC_WQ_LEVELS);
}

/* A dirty key asked for again at a higher level moves up: to the tail of
 * that level's FIFO when queued, to that level at Done when processing. */
static void raise_rec(kc_workqueue *wq, struct rec *r, unsigned level) {
  bool queued = !(r->flags & F_PROC);
  if (queued) fifo_unlink(wq, r);
  wq->m.depth_by_priority[r->level]--;
  wq->m.depth_by_priority[level]++;
  r->level = (uint8_t)level;
  if (queued) fifo_push(wq, r, kc_clock_now_ns());
}

static void add_rec(kc_workqueue *wq, struct rec *r, int level) {
  unsigned lv = level == KC_WQ_KEEP ? r->level : (unsigned)level;
  if (r->flags & F_DIRTY) {
    wq->m.deduped_total++;
    if (lv > r->level) raise_rec(wq, r, lv);
    return;
  }
  uint64_t now = kc_clock_now_ns();
  r->flags |= F_DIRTY;
  r->level = (uint8_t)lv;
  wq->m.adds_total++;
  wq->m.depth++;
  wq->m.depth_by_priority[lv]++;
  if (!(r->flags & F_ADD_TIME)) {
    r->add_ns = now;
    r->flags |= F_ADD_TIME;
  }
  if (!(r->flags & F_PROC)) fifo_push(wq, r, now);
  settle(wq, r);
  if (wq->qlen + wq->nproc > wq->busy_hw) wq->busy_hw = wq->qlen + wq->nproc;
}

int kc_workqueue_add_at(kc_workqueue *wq, const char *key, int level) {
  if (!key || !*key || !level_ok(level)) return -EINVAL;
  if (wq->shutting_down) return 0;
  struct rec *r = intern(wq, key, strlen(key));
  if (!r) return -ENOMEM;
  add_rec(wq, r, level);
  return 0;
}

int kc_workqueue_add(kc_workqueue *wq, const char *key) {
  return kc_workqueue_add_at(wq, key, KC_WQ_NORMAL);
}

/* ---- delay heap (min by ready_ns) ---- */

static void heap_set(kc_workqueue *wq, size_t i, struct rec *r) {
  wq->heap[i] = r;
  r->heap_idx = (int32_t)i;
}

static void sift_up(kc_workqueue *wq, size_t i) {
  struct rec *r = wq->heap[i];
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (wq->heap[p]->ready_ns <= r->ready_ns) break;
    heap_set(wq, i, wq->heap[p]);
    i = p;
  }
  heap_set(wq, i, r);
}

static void sift_down(kc_workqueue *wq, size_t i) {
  struct rec *r = wq->heap[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= wq->nheap) break;
    if (c + 1 < wq->nheap && wq->heap[c + 1]->ready_ns < wq->heap[c]->ready_ns) c++;
    if (wq->heap[c]->ready_ns >= r->ready_ns) break;
    heap_set(wq, i, wq->heap[c]);
    i = c;
  }
  heap_set(wq, i, r);
}

static struct rec *heap_pop(kc_workqueue *wq) {
  struct rec *top = wq->heap[0];
  top->heap_idx = -1;
  if (--wq->nheap > 0) {
    wq->heap[0] = wq->heap[wq->nheap];
    sift_down(wq, 0);
  }
  return top;
}

static int add_after_rec(kc_workqueue *wq, struct rec *r, uint64_t delay_ns, int level) {
  if (delay_ns == 0) {
    add_rec(wq, r, level);
    return 0;
  }
  unsigned lv = level == KC_WQ_KEEP ? r->level : (unsigned)level;
  uint64_t now = kc_clock_now_ns();
  uint64_t ready = now + delay_ns < now ? UINT64_MAX : now + delay_ns;
  if (r->heap_idx >= 0) {
    if (lv > r->heap_level) r->heap_level = (uint8_t)lv; /* keep the higher level */
    if (ready < r->ready_ns) { /* keep the earlier time */
      r->ready_ns = ready;
      sift_up(wq, (size_t)r->heap_idx);
    }
    return 0;
  }
  if (KC_ARRAY_ROOM(wq->heap, wq->heapcap, wq->nheap, 64) < 0) return -ENOMEM;
  r->heap_level = (uint8_t)lv;
  r->ready_ns = ready;
  wq->heap[wq->nheap] = r;
  r->heap_idx = (int32_t)wq->nheap;
  wq->nheap++;
  sift_up(wq, wq->nheap - 1);
  settle(wq, r);
  return 0;
}

int kc_workqueue_add_after_at(kc_workqueue *wq, const char *key, uint64_t delay_ns, int level) {
  if (!key || !*key || !level_ok(level)) return -EINVAL;
  if (wq->shutting_down) return 0;
  wq->m.retries_total++;
  struct rec *r = intern(wq, key, strlen(key));
  if (!r) return -ENOMEM;
  int rc = add_after_rec(wq, r, delay_ns, level);
  settle(wq, r);
  maybe_sweep(wq);
  return rc;
}

int kc_workqueue_add_after(kc_workqueue *wq, const char *key, uint64_t delay_ns) {
  return kc_workqueue_add_after_at(wq, key, delay_ns, KC_WQ_KEEP);
}

int kc_workqueue_add_rate_limited_at(kc_workqueue *wq, const char *key, int level) {
  if (!key || !*key || !level_ok(level)) return -EINVAL;
  if (wq->shutting_down) return 0;
  wq->m.retries_total++;
  struct rec *r = intern(wq, key, strlen(key));
  if (!r) return -ENOMEM;
  uint64_t d = kc_ratelimit_when(&wq->rl, &r->failures, kc_clock_now_ns());
  int rc = add_after_rec(wq, r, d, level);
  settle(wq, r);
  return rc;
}

int kc_workqueue_add_rate_limited(kc_workqueue *wq, const char *key) {
  return kc_workqueue_add_rate_limited_at(wq, key, KC_WQ_KEEP);
}

void kc_workqueue_forget(kc_workqueue *wq, const char *key) {
  struct rec *r = find(wq, key);
  if (!r) return;
  kc_backoff_forget(&r->failures);
  settle(wq, r);
  maybe_sweep(wq);
}

uint32_t kc_workqueue_num_requeues(const kc_workqueue *wq, const char *key) {
  const struct rec *r = find(wq, key);
  return r ? r->failures : 0;
}

/* The key Get hands out: the head of the highest non-empty level; but
 * while some head has aged (waited its level's max wait), the oldest aged
 * head at least every other Get. Each FIFO is in entry order, so its head
 * is its oldest: looking at KC_WQ_LEVELS heads is enough. */
static struct rec *pick(kc_workqueue *wq, uint64_t now) {
  struct rec *top = NULL, *aged = NULL;
  for (int lv = KC_WQ_LEVELS - 1; lv >= 0; lv--) {
    struct rec *h = wq->fifo[lv].head;
    if (!h) continue;
    if (!top) top = h;
    if (now - h->queued_ns >= max_wait_ns[lv] && (!aged || h->queued_ns < aged->queued_ns))
      aged = h;
  }
  if (!aged || aged == top || wq->aged_turn) {
    wq->aged_turn = false;
    return top;
  }
  wq->aged_turn = true;
  wq->m.aged_total++;
  return aged;
}

enum kc_wq_get kc_workqueue_get(kc_workqueue *wq, const char **key) {
  if (!wq->qlen) return wq->shutting_down ? KC_WQ_SHUTDOWN : KC_WQ_EMPTY;
  uint64_t now = kc_clock_now_ns();
  struct rec *r = pick(wq, now);
  fifo_unlink(wq, r);
  r->flags = (r->flags & ~(uint32_t)F_DIRTY) | F_PROC;
  wq->m.depth--;
  wq->m.depth_by_priority[r->level]--;
  if (r->flags & F_ADD_TIME) {
    kc_wq_histogram_observe(&wq->m.queue_duration, now >= r->add_ns ? now - r->add_ns : 0);
    r->flags &= ~(uint32_t)F_ADD_TIME;
  }
  r->start_ns = now;
  list_push(&wq->proc, r);
  wq->nproc++;
  *key = r->key;
  return KC_WQ_KEY;
}

int kc_workqueue_priority(const kc_workqueue *wq, const char *key) {
  const struct rec *r = find(wq, key);
  return r ? r->level : -ENOENT;
}

/* The records of a drained burst were freed (maybe_sweep) as the worker went
 * through them, after the reflector's trim at the end of the list: give
 * them back once nothing is queued or processing, if the queue held at
 * least KC_WQ_TRIM_KEYS keys since the last trim and that trim is at least
 * KC_WQ_TRIM_INTERVAL_NS old. A trim that is due too early waits for the
 * next drain (the high-water mark stays). */
static void maybe_trim(kc_workqueue *wq, uint64_t now) {
  if (wq->qlen || wq->nproc || wq->busy_hw < KC_WQ_TRIM_KEYS) return;
  if (wq->ntrims && now - wq->last_trim_ns < KC_WQ_TRIM_INTERVAL_NS) return;
  kc_mem_give_back();
  wq->ntrims++;
  wq->last_trim_ns = now;
  wq->busy_hw = 0;
}

int kc_workqueue_done(kc_workqueue *wq, const char *key) {
  struct rec *r = find(wq, key);
  if (!r || !(r->flags & F_PROC)) return -ENOENT;
  r->flags &= ~(uint32_t)F_PROC;
  list_unlink(&wq->proc, r);
  wq->nproc--;
  uint64_t now = kc_clock_now_ns();
  kc_wq_histogram_observe(&wq->m.work_duration, now >= r->start_ns ? now - r->start_ns : 0);
  if (r->flags & F_DIRTY) fifo_push(wq, r, now);
  settle(wq, r);
  maybe_sweep(wq);
  maybe_trim(wq, now);
  return 0;
}

size_t kc_workqueue_tick(kc_workqueue *wq) {
  if (wq->nheap == 0) return 0;
  uint64_t now = kc_clock_now_ns();
  size_t moved = 0;
  while (wq->nheap > 0 && wq->heap[0]->ready_ns <= now) {
    struct rec *r = heap_pop(wq);
    add_rec(wq, r, r->heap_level);
    settle(wq, r);
    moved++;
  }
  maybe_sweep(wq);
  return moved;
}

uint64_t kc_workqueue_trims(const kc_workqueue *wq) { return wq->ntrims; }

bool kc_workqueue_next_ready(const kc_workqueue *wq, uint64_t *when_ns) {
  if (wq->nheap == 0) return false;
  *when_ns = wq->heap[0]->ready_ns;
  return true;
}

void kc_workqueue_shutdown(kc_workqueue *wq) {
  wq->shutting_down = true;
  while (wq->nheap > 0) settle(wq, heap_pop(wq));
}

bool kc_workqueue_shutting_down(const kc_workqueue *wq) { return wq->shutting_down; }
size_t kc_workqueue_len(const kc_workqueue *wq) { return wq->qlen; }
size_t kc_workqueue_len_at(const kc_workqueue *wq, int level) {
  return level >= 0 && level < KC_WQ_LEVELS ? wq->qlen_at[level] : 0;
}
size_t kc_workqueue_processing(const kc_workqueue *wq) { return wq->nproc; }
size_t kc_workqueue_waiting(const kc_workqueue *wq) { return wq->nheap; }
size_t kc_workqueue_keys(const kc_workqueue *wq) { return wq->nrec; }

size_t kc_workqueue_mem_bytes(const kc_workqueue *wq) {
  return sizeof *wq + wq->rec_bytes + all_buckets(wq) * sizeof *wq->buckets +
         wq->heapcap * sizeof *wq->heap;
}

const kc_wq_metrics *kc_workqueue_metrics(const kc_workqueue *wq) { return &wq->m; }

uint64_t kc_workqueue_unfinished_work_ns(const kc_workqueue *wq) {
  if (!wq->proc.head) return 0;
  uint64_t now = kc_clock_now_ns(), sum = 0;
  for (const struct rec *r = wq->proc.head; r; r = r->next)
    sum += now >= r->start_ns ? now - r->start_ns : 0;
  return sum;
}

uint64_t kc_workqueue_longest_running_ns(const kc_workqueue *wq) {
  if (!wq->proc.head) return 0;
  uint64_t now = kc_clock_now_ns();
  return now >= wq->proc.head->start_ns ? now - wq->proc.head->start_ns : 0;
}

static void state_of(const struct rec *r, kc_wq_key_state *st) {
  *st = (kc_wq_key_state){
      .key = r->key,
      .queued = (r->flags & F_DIRTY) && !(r->flags & F_PROC),
      .processing = (r->flags & F_PROC) != 0,
      .waiting = r->heap_idx >= 0,
      .failures = r->failures,
      .level = r->level,
      .ready_ns = r->heap_idx >= 0 ? r->ready_ns : 0,
      .added_ns = (r->flags & F_ADD_TIME) ? r->add_ns : 0,
      .started_ns = (r->flags & F_PROC) ? r->start_ns : 0,
  };
}

void kc_workqueue_each(const kc_workqueue *wq, void (*fn)(const kc_wq_key_state *st, void *ud),
                       void *ud) {
  for (size_t i = 0; i < all_buckets(wq); i++) {
    const struct rec *r = i < wq->nbuckets ? wq->buckets[i] : wq->old[i - wq->nbuckets];
    for (; r; r = r->hnext) {
      if (r->flags & F_IDLE) continue;
      kc_wq_key_state st;
      state_of(r, &st);
      fn(&st, ud);
    }
  }
}

bool kc_workqueue_key_state(const kc_workqueue *wq, const char *key, kc_wq_key_state *out) {
  const struct rec *r = find(wq, key);
  if (!r || (r->flags & F_IDLE)) return false;
  state_of(r, out);
  return true;
}
