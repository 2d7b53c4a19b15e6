/* SPDX-License-Identifier: Apache-2.0 */
/* decodepool: see decodepool.h.
 *
 * Hand-offs (each under a mutex, which is also the memory edge):
 *   loop -> pool thread: chunks on s->in (s->mu); the stream on the pool's
 *     run queue (p->mu) while s->scheduled, so one thread decodes it at a time.
 *   pool thread -> loop: objects and events on s->out (s->mu); the stream on
 *     the pool's ready list (p->mu) and one uv_async_send.
 * References: the loop holds one until kc_dstream_close; the run queue (while
 * scheduled), the ready list (while on_ready) and a delivery in progress hold
 * one each. The last release frees the stream.
 */
#include "watch/decodepool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct chunk {
  struct chunk *next;
  size_t len, cap;
  char data[];
} chunk;

/* Small feeds (a server that writes 1-byte HTTP chunks) are gathered on the
 * loop in a staging chunk of CHUNK_MIN bytes that only the loop sees; it is
 * queued when full and at the end of a loop iteration in which a newline
 * came (a watch event may have ended: the API server ends each with one).
 * Without a newline it waits at most STAGE_WAIT_MS (the stage timer), for a
 * server that writes no newlines and for the end of a LIST. So a feed of a
 * few bytes is a memcpy: no lock, no allocation, nothing the pool thread
 * shares (a lock per byte cost the loop 30 ms per MB received in 1-byte
 * pieces), and a big object trickling in wakes a pool thread once per
 * 16 KiB or 5 ms, not once per socket read (a 3 MiB ConfigMap in 1-byte
 * HTTP chunks cost the decode thread 1.2 s of CPU that way). */
#define CHUNK_MIN 16384
#define STAGE_WAIT_MS 5
/* Results delivered to the loop per turn and stream (about 2-5 ms of store
 * and handler work for small objects). */
#define DELIVER_MAX 1024
/* Queued input without a newline (one large object arriving, or a LIST page)
 * wakes a pool thread once this much has gathered, not per chunk: a 1 MiB
 * object arriving in small pieces took 50-65 wake-ups and runs of a pool
 * thread, now 4 (docs/benchmarks.md "One wake per 256 KiB"). Nothing waits
 * for it: without a newline no watch event can have ended, and the stage
 * timer bounds the wait for a LIST item. */
#define WAKE_BYTES (256u << 10)

/* A decoded object or event on its way to the loop. */
typedef struct dout {
  struct dout *next;
  kc_obj *obj;          /* a reference; NULL for an event without object */
  uint64_t index;
  enum kc_watch_type type;
  bool iee;
  char *type_name;      /* KC_WATCH_UNKNOWN: as received (malloc) */
  kc_status *status;    /* KC_WATCH_ERROR (malloc) */
  char *reason;         /* a rejected object: why (malloc); NULL otherwise */
  uint64_t offset;      /* a rejected object: where it ended */
  char *cont;           /* LIST metadata decoded: its continue token (malloc, "" = none) */
  size_t bytes;         /* counted in inflight */
} dout;

struct kc_decode_pool {
  uv_loop_t *loop;
  uv_async_t async;
  pthread_t *threads;
  unsigned nthreads;
  pthread_mutex_t mu;
  pthread_cond_t cond;
  bool stop;
  kc_dstream *run_head, *run_tail; /* streams with input to decode */
  kc_dstream *ready;               /* streams with something for the loop */
  size_t open_streams;             /* loop: the async keeps the loop alive while > 0 */
  /* Loop: streams with a little unscheduled input. Waking a pool thread
   * costs a futex call; a server writing 1-byte chunks would pay it per
   * byte. They are scheduled once per loop iteration, before it polls. */
  uv_prepare_t prepare;
  kc_dstream *deferred;
  /* Loop: streams whose staging chunk waits for a newline, and the timer
   * that queues them anyway after STAGE_WAIT_MS. */
  uv_timer_t stage_timer;
  kc_dstream *waiting;
  int open_handles; /* async, prepare and stage_timer: freed when all closed */
};

struct kc_dstream {
  kc_decode_pool *pool; /* NULL: inline */
  enum kc_decode_mode mode;
  kc_dstream_callbacks cbs;
  void *ud;
  size_t budget;
  kc_decoder *dec; /* used by the thread that has the stream scheduled */
  atomic_uint refs;

  pthread_mutex_t mu;
  /* under mu */
  chunk *in_head, *in_tail;
  dout *out_head, *out_tail;
  size_t inflight;
  bool input_ended, complete;
  bool decoded_all; /* the decoder is finished with (or failed): it may be read */
  int dec_rc;
  bool scheduled;
  bool cancel;
  bool paused;

  /* loop only: held (kc_dstream_set_held): input is queued, not scheduled */
  bool held;

  /* under the pool's mu */
  bool on_ready;
  kc_dstream *next_run, *next_ready;

  /* pool thread only, while scheduled; read by the loop once done() ran */
  uint64_t decode_ns; /* under mu: thread CPU time of its scheduled runs (decode and hand-off) */
  uint64_t run_ns;    /* thread CPU time when the current run started, or was last counted */
  uint64_t decode_feeds; /* pieces handed to the decoder */
  uint64_t decode_runs;  /* times a pool thread took it up */
  dout *batch_head, *batch_tail;
  size_t batch_bytes;
  int batch_rc;     /* out of memory while batching */
  bool bulk;        /* loop: before the first feed; off at the initial events' end */
  unsigned unwoken; /* results published since the loop was last woken */
  bool urgent;      /* a continue token is among them: wake at once */
  uint64_t wakes;   /* under mu: times it woke the loop (kc_dstream_wakes) */

  /* loop only */
  kc_dstream *next_deliver;
  kc_dstream *next_deferred;
  bool deferred;
  size_t unscheduled; /* input bytes queued since the stream was last scheduled */
  bool unscheduled_nl; /* a newline is among them */
  chunk *stage;       /* received bytes not yet queued (not in inflight) */
  size_t stage_room;  /* stage->len may grow to this: CHUNK_MIN or the budget left */
  bool stage_nl;      /* a newline is among them */
  bool waiting;       /* on the pool's waiting list */
  kc_dstream *next_waiting;
  int done_rc;
  bool closed;
  bool done_called;
  uint64_t delivered;
  char errbuf[600];
};

/* ---- threads ------------------------------------------------------------- */

unsigned kc_decode_pool_default_threads(void) {
  long n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 2 ? (unsigned)(n - 1) : 1;
}

static void stream_release(kc_dstream *s);
static void decode_scheduled(kc_dstream *s);
static void on_async(uv_async_t *a);
static void on_prepare(uv_prepare_t *h);
static void on_stage_timer(uv_timer_t *t);
static void on_pool_closed(uv_handle_t *h);
static void queue_and_schedule(kc_dstream *s, bool stage);

static void *pool_thread(void *arg) {
  kc_decode_pool *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && !p->run_head) pthread_cond_wait(&p->cond, &p->mu);
    if (p->stop) break;
    kc_dstream *s = p->run_head;
    p->run_head = s->next_run;
    if (!p->run_head) p->run_tail = NULL;
    s->next_run = NULL;
    pthread_mutex_unlock(&p->mu);
    decode_scheduled(s);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int kc_decode_pool_new(uv_loop_t *loop, unsigned threads, kc_decode_pool **out) {
  kc_decode_pool *p = calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  p->loop = loop;
  int rc = pthread_mutex_init(&p->mu, NULL);
  if (rc) {
    free(p);
    return -rc;
  }
  rc = pthread_cond_init(&p->cond, NULL);
  if (rc) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return -rc;
  }
  /* libuv: prepare and timer init cannot fail; async init can. */
  int handles = 0;
  rc = uv_prepare_init(loop, &p->prepare);
  if (rc == 0) {
    handles = 1;
    rc = uv_timer_init(loop, &p->stage_timer);
  }
  if (rc == 0) {
    handles = 2;
    rc = uv_async_init(loop, &p->async, on_async);
  }
  p->prepare.data = p;
  p->stage_timer.data = p;
  if (rc) {
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->mu);
    p->open_handles = handles;
    if (handles == 0) free(p);
    if (handles >= 1) uv_close((uv_handle_t *)&p->prepare, on_pool_closed);
    if (handles >= 2) uv_close((uv_handle_t *)&p->stage_timer, on_pool_closed);
    return rc;
  }
  p->async.data = p;
  p->open_handles = 3;
  /* The async keeps the loop alive only while a stream is open. */
  uv_unref((uv_handle_t *)&p->async);
  if (threads) {
    p->threads = calloc(threads, sizeof *p->threads);
    if (!p->threads) {
      kc_decode_pool_free(p);
      return -ENOMEM;
    }
  }
  for (unsigned i = 0; i < threads; i++) {
    rc = pthread_create(&p->threads[i], NULL, pool_thread, p);
    if (rc) {
      kc_decode_pool_free(p);
      return -rc;
    }
    p->nthreads++;
    char name[16];
    snprintf(name, sizeof name, "kctrld-dec%u", i % 100);
    pthread_setname_np(p->threads[i], name);
  }
  *out = p;
  return 0;
}

static void on_pool_closed(uv_handle_t *h) {
  kc_decode_pool *p = h->data;
  if (--p->open_handles == 0) free(p);
}

void kc_decode_pool_free(kc_decode_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->mu);
  for (unsigned i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  /* Closed streams still queued hold references. */
  while (p->run_head) {
    kc_dstream *s = p->run_head;
    p->run_head = s->next_run;
    stream_release(s);
  }
  while (p->ready) {
    kc_dstream *s = p->ready;
    p->ready = s->next_ready;
    stream_release(s);
  }
  while (p->deferred) {
    kc_dstream *s = p->deferred;
    p->deferred = s->next_deferred;
    stream_release(s);
  }
  while (p->waiting) {
    kc_dstream *s = p->waiting;
    p->waiting = s->next_waiting;
    stream_release(s);
  }
  uv_prepare_stop(&p->prepare);
  uv_close((uv_handle_t *)&p->prepare, on_pool_closed);
  uv_timer_stop(&p->stage_timer);
  uv_close((uv_handle_t *)&p->stage_timer, on_pool_closed);
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->mu);
  uv_close((uv_handle_t *)&p->async, on_pool_closed);
}

unsigned kc_decode_pool_threads(const kc_decode_pool *p) { return p ? p->nthreads : 0; }

/* ---- streams ------------------------------------------------------------- */

static void free_outs(dout *o) {
  while (o) {
    dout *n = o->next;
    kc_obj_unref(o->obj);
    free(o->type_name);
    free(o->status);
    free(o->reason);
    free(o->cont);
    free(o);
    o = n;
  }
}

static void free_chunks(chunk *c) {
  while (c) {
    chunk *n = c->next;
    free(c);
    c = n;
  }
}

static void stream_release(kc_dstream *s) {
  if (atomic_fetch_sub(&s->refs, 1) != 1) return;
  free(s->stage);
  free_chunks(s->in_head);
  free_outs(s->out_head);
  free_outs(s->batch_head);
  kc_decoder_free(s->dec);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Decoder callbacks. Inline: straight to the stream's callbacks. On a pool
 * thread: into the batch that the next publish hands to the loop. */
static int batch_add(kc_dstream *s, kc_obj *obj, const kc_watch_event *ev) {
  dout *o = calloc(1, sizeof *o);
  if (!o) return s->batch_rc = -ENOMEM;
  if (ev) {
    o->type = ev->type;
    o->index = ev->index;
    o->iee = ev->initial_events_end;
    if (o->iee) s->bulk = false; /* the watch goes on event by event */
    if (ev->type == KC_WATCH_UNKNOWN) o->type_name = strdup(ev->type_name ? ev->type_name : "");
    if (ev->status) {
      o->status = malloc(sizeof *o->status);
      if (o->status) *o->status = *ev->status;
    }
    if ((ev->type == KC_WATCH_UNKNOWN && !o->type_name) || (ev->status && !o->status)) {
      free_outs(o);
      return s->batch_rc = -ENOMEM;
    }
  }
  o->obj = obj ? kc_obj_ref(obj) : NULL;
  o->bytes = sizeof *o + (obj ? obj->json_len : 0);
  if (s->batch_tail) s->batch_tail->next = o;
  else s->batch_head = o;
  s->batch_tail = o;
  s->batch_bytes += o->bytes;
  s->unwoken++;
  return 0;
}

static int dec_reject(void *ud, const kc_decode_reject *rj) {
  kc_dstream *s = ud;
  if (!s->pool) return s->cbs.reject ? s->cbs.reject(s->ud, rj) : 0;
  kc_watch_event ev = {.type = rj->event_type ? kc_watch_type_parse(rj->event_type, strlen(rj->event_type))
                                              : KC_WATCH_UNKNOWN,
                       .type_name = rj->event_type ? rj->event_type : "",
                       .index = rj->index};
  int rc = batch_add(s, (kc_obj *)rj->obj, rj->event_type ? &ev : NULL);
  if (rc) return rc;
  dout *o = s->batch_tail;
  o->index = rj->index;
  o->offset = rj->offset;
  o->reason = strdup(rj->reason ? rj->reason : "");
  return o->reason ? 0 : (s->batch_rc = -ENOMEM);
}

/* The list's metadata closed: its continue token goes to the loop in order
 * with the items (a copy: the decoder goes on with its own strings). */
static int dec_list_meta(void *ud, const kc_list_meta *m) {
  kc_dstream *s = ud;
  const char *cont = m->continue_token ? m->continue_token : "";
  if (!s->pool) return s->cbs.list_continue ? s->cbs.list_continue(s->ud, cont) : 0;
  if (!s->cbs.list_continue) return 0;
  int rc = batch_add(s, NULL, NULL);
  if (rc) return rc;
  dout *o = s->batch_tail;
  o->cont = strdup(cont);
  s->urgent = true; /* the reflector may ask for the next page with it */
  return o->cont ? 0 : (s->batch_rc = -ENOMEM);
}

static int dec_item(void *ud, kc_obj *obj) {
  kc_dstream *s = ud;
  if (!s->pool) return s->cbs.item ? s->cbs.item(s->ud, obj) : 0;
  return batch_add(s, obj, NULL);
}

static int dec_event(void *ud, const kc_watch_event *ev) {
  kc_dstream *s = ud;
  if (!s->pool) return s->cbs.event ? s->cbs.event(s->ud, ev) : 0;
  return batch_add(s, ev->obj, ev);
}

kc_dstream *kc_dstream_new(kc_decode_pool *p, enum kc_decode_mode mode, const kc_transform *t,
                           const kc_dstream_callbacks *cbs, void *ud, size_t budget) {
  kc_dstream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->pool = p && p->nthreads ? p : NULL;
  s->mode = mode;
  s->cbs = *cbs;
  s->ud = ud;
  s->budget = budget ? budget : KC_DSTREAM_DEFAULT_BUDGET;
  atomic_init(&s->refs, 1);
  static const kc_decoder_callbacks dcbs = {.item = dec_item, .event = dec_event,
                                            .reject = dec_reject, .list_meta = dec_list_meta};
  s->dec = kc_decoder_new(mode, t, &dcbs, s);
  if (!s->dec) {
    int e = errno;
    free(s);
    errno = e;
    return NULL;
  }
  int rc = pthread_mutex_init(&s->mu, NULL);
  if (rc) {
    kc_decoder_free(s->dec);
    free(s);
    errno = rc;
    return NULL;
  }
  if (s->pool && s->pool->open_streams++ == 0) uv_ref((uv_handle_t *)&s->pool->async);
  return s;
}

/* A bulk stream (a list) with more received input queued behind this chunk
 * wakes the loop once per this many results rather than once per chunk: a
 * sync woke it about once per three objects, each an eventfd write, read and
 * epoll_wait (docs/benchmarks.md "Where the sync's system time goes"). Not
 * for a watch: there the loop hands each key to a worker and back, and
 * bursts of 64 made that a ping-pong per key (more CPU per drained event). */
#define WAKE_EVERY 64

/* CPU time of the calling thread. */
static uint64_t thread_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Pool thread, under s->mu: the current run's CPU time so far joins
 * decode_ns (once per run and at the final publish, not per chunk: the clock
 * is a system call). After the final publish the loop may read it. */
static void count_run(kc_dstream *s) {
  if (s->decoded_all) return;
  uint64_t now = thread_ns();
  s->decode_ns += now - s->run_ns;
  s->run_ns = now;
}

/* Puts s on the pool's ready list (once) and wakes the loop: a pool thread
 * with new results, or the loop with results it left for the next turn. */
static void put_ready(kc_dstream *s) {
  kc_decode_pool *p = s->pool;
  pthread_mutex_lock(&p->mu);
  bool added = !s->on_ready;
  if (added) {
    s->on_ready = true;
    atomic_fetch_add(&s->refs, 1);
    s->next_ready = p->ready;
    p->ready = s;
  }
  pthread_mutex_unlock(&p->mu);
  if (added) uv_async_send(&p->async);
}

/* Pool thread: hands the batch (and the consumed input bytes) to the loop;
 * `more`: another chunk of the one taken from the queue follows (chunks the
 * loop queued since count too). Whatever is held is woken for by the
 * publish of the last chunk, which this thread always reaches. */
static void publish(kc_dstream *s, size_t consumed, bool final, int rc, bool more) {
  pthread_mutex_lock(&s->mu);
  if (s->batch_head) {
    if (s->out_tail) s->out_tail->next = s->batch_head;
    else s->out_head = s->batch_head;
    s->out_tail = s->batch_tail;
    s->batch_head = s->batch_tail = NULL;
  }
  s->inflight = s->inflight - consumed + s->batch_bytes;
  s->batch_bytes = 0;
  if (final) {
    count_run(s);
    s->decoded_all = true;
    s->dec_rc = rc;
  }
  bool hold = s->bulk && (more || s->in_head) && !s->urgent && s->unwoken < WAKE_EVERY;
  bool wake = (s->out_head && !hold) || final || (s->paused && s->inflight < s->budget / 2);
  bool cancelled = s->cancel;
  if (wake) s->unwoken = 0, s->urgent = false, s->wakes++;
  pthread_mutex_unlock(&s->mu);
  if (!wake || cancelled) return;
  put_ready(s);
}

/* Pool thread: decodes what is queued until the queue is empty. */
static void decode_scheduled(kc_dstream *s) {
  s->run_ns = thread_ns();
  s->decode_runs++;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    chunk *c = s->in_head;
    s->in_head = s->in_tail = NULL;
    bool ended = s->input_ended, complete = s->complete, done = s->decoded_all;
    bool cancel = s->cancel;
    if (cancel || (!c && (!ended || done))) {
      count_run(s); /* before it is unscheduled: another thread may take it next */
      s->scheduled = false;
      pthread_mutex_unlock(&s->mu);
      free_chunks(c);
      stream_release(s); /* the run queue's reference */
      return;
    }
    pthread_mutex_unlock(&s->mu);
    int rc = 0;
    while (c) {
      chunk *n = c->next;
      size_t len = c->len;
      if (rc == 0) {
        rc = kc_decoder_feed(s->dec, c->data, len);
        s->decode_feeds++;
      }
      if (rc == 0 && s->batch_rc) rc = s->batch_rc;
      free(c);
      c = n;
      if (rc) {
        free_chunks(c);
        c = NULL;
        publish(s, len, true, rc, false);
        break;
      }
      publish(s, len, false, 0, c != NULL);
    }
    if (rc) {
      /* Failed: what else comes is dropped (cancel or finish follows). */
      pthread_mutex_lock(&s->mu);
      size_t dropped = 0;
      for (chunk *d = s->in_head; d; d = d->next) dropped += d->len;
      free_chunks(s->in_head);
      s->in_head = s->in_tail = NULL;
      s->inflight -= dropped;
      pthread_mutex_unlock(&s->mu);
      continue;
    }
    if (ended) {
      pthread_mutex_lock(&s->mu);
      bool more = s->in_head != NULL;
      pthread_mutex_unlock(&s->mu);
      if (more) continue;
      rc = complete ? kc_decoder_finish(s->dec) : 0;
      if (rc == 0 && s->batch_rc) rc = s->batch_rc;
      publish(s, 0, true, rc, false);
    }
  }
}

/* Loop, after setting s->scheduled under s->mu: the stream goes on the run
 * queue, and what counted as unscheduled input starts again from nothing. */
static void schedule(kc_dstream *s) {
  kc_decode_pool *p = s->pool;
  s->unscheduled = 0;
  s->unscheduled_nl = false;
  atomic_fetch_add(&s->refs, 1);
  pthread_mutex_lock(&p->mu);
  if (p->run_tail) p->run_tail->next_run = s;
  else p->run_head = s;
  p->run_tail = s;
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->mu);
}

/* Loop: how much input without a newline wakes a pool thread: WAKE_BYTES,
 * or a quarter of a smaller budget (a stream must drain long before it is
 * full, not once per stage timer). */
static size_t wake_bytes(const kc_dstream *s) {
  size_t quarter = s->budget / 4 ? s->budget / 4 : 1;
  return quarter < WAKE_BYTES ? quarter : WAKE_BYTES;
}

static inline bool has_newline(const char *buf, size_t len) {
  if (len == 1) return buf[0] == '\n'; /* the 1-byte HTTP chunk: no call */
  return memchr(buf, '\n', len) != NULL;
}

/* Loop, under s->mu: the staging chunk joins the queue (a failed or
 * cancelled stream drops it). */
static void queue_stage(kc_dstream *s) {
  chunk *c = s->stage;
  if (!c) return;
  s->stage = NULL;
  s->unscheduled_nl |= s->stage_nl;
  s->stage_nl = false;
  if (s->decoded_all || s->cancel) {
    free(c);
    return;
  }
  c->next = NULL;
  if (s->in_tail) s->in_tail->next = c;
  else s->in_head = c;
  s->in_tail = c;
  s->inflight += c->len;
  s->unscheduled += c->len;
}

/* Loop: the stream is queued for the next on_prepare (the end of this loop
 * iteration), which queues its staging chunk and schedules what waits. */
static void defer(kc_dstream *s) {
  if (s->deferred) return;
  kc_decode_pool *p = s->pool;
  s->deferred = true;
  atomic_fetch_add(&s->refs, 1);
  s->next_deferred = p->deferred;
  p->deferred = s;
  uv_prepare_start(&p->prepare, on_prepare);
}

int kc_dstream_feed(kc_dstream *s, const char *buf, size_t len) {
  if (s->done_called) return s->done_rc ? s->done_rc : -ECANCELED;
  if (!s->pool) return kc_decoder_feed(s->dec, buf, len);
  if (len == 0) return 0;
  chunk *st = s->stage;
  if (st && len <= s->stage_room - st->len) { /* the common small feed */
    memcpy(st->data + st->len, buf, len);
    st->len += len;
    if (!s->stage_nl) s->stage_nl = has_newline(buf, len);
    return 0;
  }
  /* A small feed starts a new staging chunk; a large one is queued as is.
   * Allocated before the lock: the pool thread may be waiting for it. */
  size_t cap = len < CHUNK_MIN ? CHUNK_MIN : len;
  chunk *c = malloc(sizeof *c + cap);
  if (!c) return -ENOMEM;
  c->next = NULL;
  c->cap = cap;
  pthread_mutex_lock(&s->mu);
  if (s->inflight + (st ? st->len : 0) >= s->budget) {
    s->paused = true;
    pthread_mutex_unlock(&s->mu);
    free(c);
    queue_and_schedule(s, false); /* full: what is queued must drain, newline or not */
    return KC_DSTREAM_FULL; /* the staging chunk stays: on_prepare queues it */
  }
  if (s->decoded_all) { /* failed: the rest is dropped */
    queue_stage(s);
    pthread_mutex_unlock(&s->mu);
    free(c);
    return 0;
  }
  queue_stage(s);
  memcpy(c->data, buf, len);
  c->len = len;
  if (len < CHUNK_MIN) {
    /* Staged: counted once queued. It may grow to CHUNK_MIN while the
     * budget has room, so the loop passes it by at most one feed. */
    s->stage = c;
    s->stage_nl = has_newline(buf, len);
    size_t left = s->inflight < s->budget ? s->budget - s->inflight : 0;
    s->stage_room = left < CHUNK_MIN ? (left > len ? left : len) : CHUNK_MIN;
  } else {
    if (s->in_tail) s->in_tail->next = c;
    else s->in_head = c;
    s->in_tail = c;
    s->inflight += len;
    s->unscheduled += len;
    /* from the end: in a watch stream the last newline is near it */
    s->unscheduled_nl |= memrchr(buf, '\n', len) != NULL;
  }
  /* A full chunk that may end an event is worth waking a thread for, and so
   * is WAKE_BYTES of one object; a few bytes wait for the iteration's end (a
   * futex call per 1-byte HTTP chunk would cost more). */
  bool need = !s->held && !s->scheduled &&
              (s->unscheduled >= wake_bytes(s) || (s->unscheduled_nl && s->unscheduled >= CHUNK_MIN / 2));
  if (need) s->scheduled = true;
  bool later = s->stage || (!s->held && !s->scheduled && s->in_head);
  pthread_mutex_unlock(&s->mu);
  if (need) schedule(s);
  if (later) defer(s);
  return 0;
}

/* Loop: the first error decides the message. */
static void set_error(kc_dstream *s, int rc, const char *what) {
  if (s->errbuf[0]) return;
  if (what) snprintf(s->errbuf, sizeof s->errbuf, "%s", what);
  else snprintf(s->errbuf, sizeof s->errbuf, "%s", strerror(-rc));
}

static void call_done(kc_dstream *s, int rc) {
  if (s->done_called || s->closed) return;
  s->done_called = true;
  s->done_rc = rc;
  if (s->cbs.done) s->cbs.done(s->ud, rc);
}

void kc_dstream_finish(kc_dstream *s, bool complete) {
  if (s->done_called || s->closed) return;
  if (!s->pool) {
    /* The decoder's first error is final: finish returns it again. */
    int rc = complete ? kc_decoder_finish(s->dec) : kc_decoder_result(s->dec);
    if (rc) set_error(s, rc, kc_decoder_error(s->dec)[0] ? kc_decoder_error(s->dec) : NULL);
    call_done(s, rc);
    return;
  }
  pthread_mutex_lock(&s->mu);
  queue_stage(s);
  s->input_ended = true;
  s->complete = complete;
  bool need = !s->held && !s->scheduled;
  if (need) s->scheduled = true;
  pthread_mutex_unlock(&s->mu);
  if (need) schedule(s);
}

void kc_dstream_close(kc_dstream *s) {
  if (!s || s->closed) return;
  s->closed = true;
  if (s->pool) {
    pthread_mutex_lock(&s->mu);
    s->cancel = true;
    chunk *c = s->in_head;
    s->in_head = s->in_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    free_chunks(c);
    free(s->stage);
    s->stage = NULL;
    if (--s->pool->open_streams == 0) uv_unref((uv_handle_t *)&s->pool->async);
  }
  stream_release(s);
}

/* Loop: delivers what the pool thread published, in order. */
static void deliver(kc_dstream *s) {
  if (s->closed || s->done_called) return;
  /* At most DELIVER_MAX results per loop turn; the rest wait for the next
   * (after a poll), so a full budget of small objects does not hold the
   * loop for tens of milliseconds. */
  pthread_mutex_lock(&s->mu);
  dout *list = s->out_head, *last = list;
  for (unsigned n = 1; last && last->next && n < DELIVER_MAX; n++) last = last->next;
  bool more = last && last->next;
  if (more) {
    s->out_head = last->next;
    last->next = NULL;
  } else {
    s->out_head = s->out_tail = NULL;
  }
  pthread_mutex_unlock(&s->mu);
  if (more) put_ready(s);
  size_t bytes = 0;
  dout *o = list;
  for (; o && !s->closed && !s->done_called; o = o->next) {
    bytes += o->bytes;
    int rc = 0;
    /* What kc_dstream_count counts, as kc_decoder_count: items, or events
     * (a rejected one included); not a list's metadata. */
    bool counted = true;
    if (o->cont) {
      if (s->cbs.list_continue) rc = s->cbs.list_continue(s->ud, o->cont);
      counted = false;
    } else if (o->reason) {
      kc_decode_reject rj = {.obj = o->obj, .reason = o->reason, .index = o->index,
                             .offset = o->offset,
                             .event_type = s->mode == KC_DECODE_WATCH ? kc_watch_type_name(o->type) : NULL};
      if (s->cbs.reject) rc = s->cbs.reject(s->ud, &rj);
      counted = s->mode == KC_DECODE_WATCH;
    } else if (s->mode == KC_DECODE_LIST) {
      if (s->cbs.item) rc = s->cbs.item(s->ud, o->obj);
    } else if (s->cbs.event) {
      kc_watch_event ev = {
          .type = o->type,
          .type_name = o->type_name ? o->type_name : kc_watch_type_name(o->type),
          .index = o->index,
          .obj = o->obj,
          .status = o->status,
          .initial_events_end = o->iee,
      };
      rc = s->cbs.event(s->ud, &ev);
    }
    if (counted) s->delivered++;
    if (rc < 0) {
      char msg[64];
      snprintf(msg, sizeof msg, "%s callback failed (%d)",
               o->cont ? "list_continue" : s->mode == KC_DECODE_LIST ? "item" : "event", rc);
      set_error(s, rc, msg);
      call_done(s, rc);
    }
  }
  for (dout *r = o; r; r = r->next) bytes += r->bytes;
  free_outs(list);
  if (s->closed || s->done_called) {
    pthread_mutex_lock(&s->mu);
    s->inflight -= bytes;
    pthread_mutex_unlock(&s->mu);
    return;
  }
  pthread_mutex_lock(&s->mu);
  s->inflight -= bytes;
  bool resume = s->paused && s->inflight < s->budget / 2;
  if (resume) s->paused = false;
  bool finished = s->decoded_all && !s->out_head && (s->input_ended || s->dec_rc);
  int rc = s->dec_rc;
  pthread_mutex_unlock(&s->mu);
  if (finished) {
    /* The pool thread is done with the decoder: its error text may be read. */
    if (rc) set_error(s, rc, kc_decoder_error(s->dec)[0] ? kc_decoder_error(s->dec) : NULL);
    call_done(s, rc);
    return;
  }
  if (resume && s->cbs.resume) s->cbs.resume(s->ud);
}

/* Loop: schedules what is queued (with the staging chunk, if `stage`). */
static void queue_and_schedule(kc_dstream *s, bool stage) {
  pthread_mutex_lock(&s->mu);
  if (stage) queue_stage(s);
  bool need = !s->cancel && !s->held && !s->scheduled && s->in_head;
  if (need) s->scheduled = true;
  pthread_mutex_unlock(&s->mu);
  if (need) schedule(s);
}

static void on_stage_timer(uv_timer_t *t) {
  kc_decode_pool *p = t->data;
  kc_dstream *list = p->waiting;
  p->waiting = NULL;
  while (list) {
    kc_dstream *s = list;
    list = s->next_waiting;
    s->waiting = false;
    if (!s->closed) queue_and_schedule(s, true);
    stream_release(s); /* the waiting list's reference */
  }
}

static void on_prepare(uv_prepare_t *h) {
  kc_decode_pool *p = h->data;
  kc_dstream *list = p->deferred;
  p->deferred = NULL;
  uv_prepare_stop(&p->prepare);
  while (list) {
    kc_dstream *s = list;
    list = s->next_deferred;
    s->deferred = false;
    /* Mid-object (no newline received since the stream was last scheduled,
     * less than wake_bytes, not full): the input waits for more, a newline
     * or the timer. */
    size_t pending = s->unscheduled + (s->stage ? s->stage->len : 0);
    bool wait = !s->closed && !s->paused && !s->stage_nl && !s->unscheduled_nl && pending &&
                pending < wake_bytes(s);
    if (wait && !s->waiting) {
      s->waiting = true;
      atomic_fetch_add(&s->refs, 1);
      s->next_waiting = p->waiting;
      p->waiting = s;
      if (!uv_is_active((uv_handle_t *)&p->stage_timer))
        uv_timer_start(&p->stage_timer, on_stage_timer, STAGE_WAIT_MS, 0);
    }
    if (!wait) queue_and_schedule(s, true);
    stream_release(s); /* the deferred list's reference */
  }
}

static void on_async(uv_async_t *a) {
  kc_decode_pool *p = a->data;
  pthread_mutex_lock(&p->mu);
  kc_dstream *list = p->ready;
  p->ready = NULL;
  /* next_ready belongs to the pool's lock (a pool thread may put the stream
   * on the ready list again at once): walk a copy. */
  for (kc_dstream *s = list; s; s = s->next_ready) {
    s->on_ready = false;
    s->next_deliver = s->next_ready;
  }
  pthread_mutex_unlock(&p->mu);
  /* Oldest first is not needed: each stream's own order is kept. */
  while (list) {
    kc_dstream *s = list;
    list = s->next_deliver;
    deliver(s);
    stream_release(s); /* the ready list's reference */
  }
}

int kc_dstream_set_held(kc_dstream *s, bool held) {
  if (!s->pool) return -EINVAL;
  if (s->held == held) return 0;
  s->held = held;
  if (held) return 0;
  /* Released: what was queued (and the end, if it came) is decoded now. */
  pthread_mutex_lock(&s->mu);
  bool need = !s->cancel && !s->scheduled && (s->in_head || s->input_ended);
  if (need) s->scheduled = true;
  pthread_mutex_unlock(&s->mu);
  if (need) schedule(s);
  return 0;
}

void kc_dstream_set_budget(kc_dstream *s, size_t budget) {
  if (!budget) budget = KC_DSTREAM_DEFAULT_BUDGET;
  if (!s->pool) {
    s->budget = budget;
    return;
  }
  pthread_mutex_lock(&s->mu);
  s->budget = budget;
  bool resume = s->paused && s->inflight < budget / 2;
  if (resume) s->paused = false;
  pthread_mutex_unlock(&s->mu);
  if (resume && !s->closed && !s->done_called && s->cbs.resume) s->cbs.resume(s->ud);
}

const char *kc_dstream_error(const kc_dstream *s) { return s->errbuf; }

const kc_list_meta *kc_dstream_list_meta(const kc_dstream *s) {
  /* Read only once decoding is over (done() ran): the decoder is idle. */
  return kc_decoder_list_meta(s->dec);
}

uint64_t kc_dstream_count(const kc_dstream *s) {
  return s->pool ? s->delivered : kc_decoder_count(s->dec);
}

size_t kc_dstream_inflight(const kc_dstream *s) {
  kc_dstream *m = (kc_dstream *)s;
  pthread_mutex_lock(&m->mu);
  size_t n = m->inflight;
  pthread_mutex_unlock(&m->mu);
  return n + (m->stage ? m->stage->len : 0);
}

void kc_dstream_set_bulk(kc_dstream *s) { s->bulk = s->pool != NULL; }

uint64_t kc_dstream_wakes(kc_dstream *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->wakes;
  pthread_mutex_unlock(&s->mu);
  return n;
}

double kc_dstream_decode_seconds(const kc_dstream *s) {
  if (!s->pool) return 0;
  kc_dstream *m = (kc_dstream *)s;
  pthread_mutex_lock(&m->mu);
  uint64_t ns = m->decode_ns;
  pthread_mutex_unlock(&m->mu);
  return (double)ns / 1e9;
}

uint64_t kc_dstream_decode_feeds(const kc_dstream *s) { return s->pool ? s->decode_feeds : 0; }

uint64_t kc_dstream_decode_runs(const kc_dstream *s) { return s->pool ? s->decode_runs : 0; }
