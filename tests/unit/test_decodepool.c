/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/watch/decodepool.c: bodies decoded on pool threads come
 * back to the loop thread complete and in stream order; the byte budget
 * refuses chunks (the caller pauses) and resumes after draining; errors
 * from the decoder and from callbacks end the stream early; close at any
 * point runs no further callback and frees everything (ASan, TSan); at most
 * 1,024 results reach the loop between two polls for I/O. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "watch/decodepool.h"
#include "testutil.h"

typedef struct sink {
  pthread_t loop_thread;
  char *log; /* "name@rv;" per object or event */
  size_t len, cap;
  size_t n;
  int stop_at;  /* callback returns -ECANCELED at this count */
  int done_calls, done_rc;
  int resumes;
  bool on_loop; /* every callback ran on the loop thread */
} sink;

static void sink_add(sink *k, const kc_obj *o) {
  char line[160];
  int n = snprintf(line, sizeof line, "%.*s@%.*s;", o ? (int)kc_obj_name(o).len : 1,
                   o ? kc_obj_name(o).ptr : "-", o ? (int)kc_obj_resource_version(o).len : 0,
                   o ? kc_obj_resource_version(o).ptr : "");
  if (k->len + (size_t)n + 1 > k->cap) {
    k->cap = k->cap ? k->cap * 2 : 4096;
    while (k->cap < k->len + (size_t)n + 1) k->cap *= 2;
    k->log = realloc(k->log, k->cap);
    assert_non_null(k->log);
  }
  memcpy(k->log + k->len, line, (size_t)n + 1);
  k->len += (size_t)n;
}

static int on_item(void *ud, kc_obj *o) {
  sink *k = ud;
  if (!pthread_equal(pthread_self(), k->loop_thread)) k->on_loop = false;
  sink_add(k, o);
  k->n++;
  return k->stop_at && (int)k->n == k->stop_at ? -ECANCELED : 0;
}

static int on_event(void *ud, const kc_watch_event *ev) {
  sink *k = ud;
  if (!pthread_equal(pthread_self(), k->loop_thread)) k->on_loop = false;
  assert_int_equal(ev->index, k->n + 1);
  sink_add(k, ev->obj);
  k->n++;
  return k->stop_at && (int)k->n == k->stop_at ? -ECANCELED : 0;
}

static void on_done(void *ud, int rc) {
  sink *k = ud;
  k->done_calls++;
  k->done_rc = rc;
}

static void on_resume(void *ud) { ((sink *)ud)->resumes++; }

static int on_reject(void *ud, const kc_decode_reject *rj) {
  sink *k = ud;
  if (!pthread_equal(pthread_self(), k->loop_thread)) k->on_loop = false;
  char line[300];
  snprintf(line, sizeof line, "REJECT %.*s %s", (int)kc_obj_name(rj->obj).len,
           kc_obj_name(rj->obj).ptr, rj->reason);
  size_t n = strlen(line);
  if (k->len + n + 2 > k->cap) {
    k->cap = k->cap ? k->cap * 2 + n : 4096;
    k->log = realloc(k->log, k->cap);
    assert_non_null(k->log);
  }
  memcpy(k->log + k->len, line, n);
  k->log[k->len + n] = ';';
  k->log[k->len + n + 1] = '\0';
  k->len += n + 1;
  return 0;
}

static const kc_dstream_callbacks cbs = {.item = on_item, .event = on_event, .reject = on_reject,
                                         .resume = on_resume, .done = on_done};

static void sink_init(sink *k) {
  memset(k, 0, sizeof *k);
  k->loop_thread = pthread_self();
  k->on_loop = true;
}

/* A watch body of n events with the given extra payload per object. */
static char *watch_body(size_t n, size_t payload, size_t *len) {
  size_t cap = n * (payload + 200) + 1;
  char *b = malloc(cap);
  assert_non_null(b);
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    off += (size_t)snprintf(b + off, cap - off,
                            "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"p%zu\","
                            "\"namespace\":\"d\",\"resourceVersion\":\"%zu\"},\"data\":\"",
                            i, i + 1);
    memset(b + off, 'x', payload);
    off += payload;
    off += (size_t)snprintf(b + off, cap - off, "\"}}\n");
  }
  *len = off;
  return b;
}

/* Feeds like a paused transfer would: a refused chunk is offered again
 * after the loop has run (the resume). Returns when done() ran. */
static void pump(uv_loop_t *loop, kc_dstream *s, sink *k, const char *body, size_t len,
                 size_t chunk, bool complete, size_t *max_inflight, size_t budget) {
  size_t off = 0;
  while (off < len && !k->done_calls) {
    size_t n = len - off < chunk ? len - off : chunk;
    int rc = kc_dstream_feed(s, body + off, n);
    if (rc == KC_DSTREAM_FULL) {
      int before = k->resumes;
      while (k->resumes == before && !k->done_calls) uv_run(loop, UV_RUN_ONCE);
      continue;
    }
    assert_true(rc >= 0);
    off += n;
    size_t f = kc_dstream_inflight(s);
    if (max_inflight && f > *max_inflight) *max_inflight = f;
    /* At most one chunk past the budget, plus the one object that chunk
     * completed (its earlier bytes had left the count as input). */
    assert_true(budget == 0 || f <= budget + chunk + 8192);
    uv_run(loop, UV_RUN_NOWAIT);
  }
  kc_dstream_finish(s, complete);
  while (!k->done_calls) uv_run(loop, UV_RUN_ONCE);
}

static void open_pool(uv_loop_t *loop, kc_decode_pool **p, unsigned threads) {
  assert_int_equal(uv_loop_init(loop), 0);
  assert_int_equal(kc_decode_pool_new(loop, threads, p), 0);
  assert_int_equal(kc_decode_pool_threads(*p), threads);
}

/* Frees the pool and checks that the loop has nothing left open. */
static void close_pool(uv_loop_t *loop, kc_decode_pool *p) {
  kc_decode_pool_free(p);
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

static void test_order_and_thread(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 2);
  size_t len;
  char *body = watch_body(3000, 300, &len);
  /* Inline first: the reference. */
  sink ref;
  sink_init(&ref);
  kc_dstream *s = kc_dstream_new(NULL, KC_DECODE_WATCH, NULL, &cbs, &ref, 0);
  assert_non_null(s);
  assert_int_equal(kc_dstream_feed(s, body, len), 0);
  kc_dstream_finish(s, true);
  assert_int_equal(ref.done_calls, 1);
  assert_int_equal(ref.done_rc, 0);
  assert_int_equal(ref.n, 3000);
  kc_dstream_close(s);
  static const size_t chunks[] = {1, 7, 300, 16384, 1 << 20};
  for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
    sink k;
    sink_init(&k);
    s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 0);
    assert_non_null(s);
    pump(&loop, s, &k, body, len, chunks[c], true, NULL, 0);
    assert_int_equal(k.done_rc, 0);
    assert_int_equal(k.done_calls, 1);
    assert_true(k.on_loop);
    assert_string_equal(k.log, ref.log);
    assert_int_equal(kc_dstream_count(s), 3000);
    assert_int_equal(kc_dstream_inflight(s), 0);
    kc_dstream_close(s);
    free(k.log);
  }
  free(ref.log);
  free(body);
  close_pool(&loop, p);
}

/* The budget bounds what is in flight: a chunk is refused once it is full,
 * and the resume comes after the loop has taken the objects. */
static void test_budget_pauses_and_resumes(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  size_t len;
  char *body = watch_body(400, 4000, &len);
  sink k;
  sink_init(&k);
  size_t budget = 32 * 1024, max_inflight = 0;
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, budget);
  assert_non_null(s);
  /* Feed without running the loop until refused: the objects pile up. */
  size_t off = 0;
  int rc = 0;
  while (off < len && (rc = kc_dstream_feed(s, body + off, 1000)) == 0) off += 1000;
  assert_int_equal(rc, KC_DSTREAM_FULL);
  assert_true(off < len);
  /* The object the decoder holds half-built is not counted: one more. */
  assert_true(off <= budget + 1000 + 8192);
  assert_int_equal(k.n, 0); /* nothing is delivered outside the loop */
  pump(&loop, s, &k, body + off, len - off, 1000, false, &max_inflight, budget);
  assert_true(k.resumes >= 1);
  assert_true(max_inflight <= budget + 1000 + 8192);
  /* pump finished with complete=false: every whole event was delivered. */
  assert_int_equal(k.done_rc, 0);
  assert_int_equal(k.n, 400);
  kc_dstream_close(s);
  free(k.log);
  free(body);
  close_pool(&loop, p);
}

/* A malformed event ends the stream before its input ends: the events
 * before it are delivered, then done() with the decoder's message. */
static void test_decode_error_early(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  size_t len;
  char *good = watch_body(5, 10, &len);
  sink k;
  sink_init(&k);
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 0);
  assert_int_equal(kc_dstream_feed(s, good, len), 0);
  const char *bad = "{\"type\":\"ADDED\",\"object\":[]}\n";
  assert_int_equal(kc_dstream_feed(s, bad, strlen(bad)), 0);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_true(k.done_rc < 0);
  assert_int_equal(k.n, 5);
  assert_non_null(strstr(kc_dstream_error(s), "event 6"));
  /* Later input and finish change nothing. */
  assert_true(kc_dstream_feed(s, good, len) < 0);
  kc_dstream_finish(s, true);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(k.done_calls, 1);
  kc_dstream_close(s);
  free(k.log);

  /* A callback's error stops delivery at once. */
  sink_init(&k);
  k.stop_at = 3;
  s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 0);
  assert_int_equal(kc_dstream_feed(s, good, len), 0);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, -ECANCELED);
  assert_int_equal(k.n, 3);
  kc_dstream_close(s);
  free(k.log);

  /* A truncated list with complete=true is an error; complete=false is
   * not (the caller knows the transfer broke). */
  const char *list = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"5\"},"
                     "\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}";
  sink_init(&k);
  s = kc_dstream_new(p, KC_DECODE_LIST, NULL, &cbs, &k, 0);
  assert_int_equal(kc_dstream_feed(s, list, strlen(list) - 3), 0);
  kc_dstream_finish(s, true);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, -EBADMSG);
  kc_dstream_close(s);
  free(k.log);
  sink_init(&k);
  s = kc_dstream_new(p, KC_DECODE_LIST, NULL, &cbs, &k, 0);
  assert_int_equal(kc_dstream_feed(s, list, strlen(list)), 0);
  kc_dstream_finish(s, true);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, 0);
  assert_int_equal(k.n, 2);
  assert_string_equal(kc_dstream_list_meta(s)->resource_version, "5");
  kc_dstream_close(s);
  free(k.log);
  free(good);
  close_pool(&loop, p);
}

/* Close while pool threads still decode: no callback afterwards, nothing
 * leaks; many streams at once on two threads. */
static void test_close_anytime_many_streams(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 2);
  size_t len;
  char *body = watch_body(500, 200, &len);
  enum { N = 8 };
  sink k[N];
  kc_dstream *s[N];
  for (int i = 0; i < N; i++) {
    sink_init(&k[i]);
    s[i] = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k[i], 0);
    assert_non_null(s[i]);
    for (size_t off = 0; off < len; off += 4096)
      assert_int_equal(kc_dstream_feed(s[i], body + off, len - off < 4096 ? len - off : 4096), 0);
    if (i % 2 == 0) kc_dstream_finish(s[i], true);
  }
  /* Half are closed at once (mid-decode), the others run to the end. */
  for (int i = 1; i < N; i += 2) {
    kc_dstream_close(s[i]);
    s[i] = NULL;
  }
  for (int i = 0; i < N; i += 2)
    while (!k[i].done_calls) uv_run(&loop, UV_RUN_ONCE);
  for (int i = 0; i < N; i++) {
    if (i % 2 == 0) {
      assert_int_equal(k[i].done_rc, 0);
      assert_int_equal(k[i].n, 500);
      kc_dstream_close(s[i]);
    } else {
      assert_int_equal(k[i].done_calls, 0);
      assert_true(k[i].n < 500 || k[i].n == 500);
    }
    free(k[i].log);
  }
  /* A stream closed with work still queued, then the pool freed at once. */
  sink last;
  sink_init(&last);
  kc_dstream *x = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &last, 0);
  assert_int_equal(kc_dstream_feed(x, body, len), 0);
  kc_dstream_close(x);
  free(body);
  close_pool(&loop, p);
  assert_int_equal(last.done_calls, 0);
}

/* Objects the decoder rejects reach the loop in stream order with the
 * others. */
static void test_rejects_in_order(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  const char *list = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"5\"},"
                     "\"items\":[{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}},"
                     "{\"metadata\":{\"name\":\"x/y\",\"resourceVersion\":\"2\"}},"
                     "{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"3\"}}]}";
  sink k;
  sink_init(&k);
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_LIST, NULL, &cbs, &k, 0);
  assert_non_null(s);
  pump(&loop, s, &k, list, strlen(list), 5, true, NULL, 0);
  assert_int_equal(k.done_rc, 0);
  assert_true(k.on_loop);
  assert_non_null(strstr(k.log, "a@1;REJECT x/y "));
  assert_non_null(strstr(k.log, ";b@3;"));
  assert_int_equal(kc_dstream_count(s), 2);
  kc_dstream_close(s);
  free(k.log);
  close_pool(&loop, p);
}


/* ---- held streams and list metadata (pipelined LIST pages) ---- */

static int on_list_continue(void *ud, const char *cont) {
  sink *k = ud;
  if (!pthread_equal(pthread_self(), k->loop_thread)) k->on_loop = false;
  size_t n = strlen(cont) + 4;
  if (k->len + n + 1 > k->cap) {
    k->cap = k->cap ? k->cap * 2 + n : 4096;
    k->log = realloc(k->log, k->cap);
    assert_non_null(k->log);
  }
  k->len += (size_t)snprintf(k->log + k->len, k->cap - k->len, "C %s;", cont);
  return 0;
}

static const kc_dstream_callbacks list_cbs = {.item = on_item, .reject = on_reject,
                                              .resume = on_resume, .done = on_done,
                                              .list_continue = on_list_continue};

/* A LIST body of n items (payload bytes each); metadata before or after. */
static char *list_body(size_t n, size_t payload, bool meta_first, size_t *len) {
  size_t cap = n * (payload + 200) + 400;
  char *b = malloc(cap);
  assert_non_null(b);
  const char *meta = "\"metadata\":{\"resourceVersion\":\"5\",\"continue\":\"tok\"}";
  size_t off = (size_t)snprintf(b, cap, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",%s%s\"items\":[",
                                meta_first ? meta : "", meta_first ? "," : "");
  for (size_t i = 0; i < n; i++) {
    off += (size_t)snprintf(b + off, cap - off,
                            "%s{\"metadata\":{\"name\":\"p%zu\",\"namespace\":\"d\","
                            "\"resourceVersion\":\"%zu\"},\"data\":\"",
                            i ? "," : "", i, i + 1);
    memset(b + off, 'x', payload);
    off += payload;
    off += (size_t)snprintf(b + off, cap - off, "\"}");
  }
  off += (size_t)snprintf(b + off, cap - off, "]%s%s}", meta_first ? "" : ",",
                          meta_first ? "" : meta);
  *len = off;
  return b;
}

static char *expected_log(size_t n, bool meta_first) {
  size_t cap = n * 32 + 32, off = 0;
  char *e = malloc(cap);
  assert_non_null(e);
  e[0] = 0;
  if (meta_first) off += (size_t)snprintf(e + off, cap - off, "C tok;");
  for (size_t i = 0; i < n; i++) off += (size_t)snprintf(e + off, cap - off, "p%zu@%zu;", i, i + 1);
  if (!meta_first) snprintf(e + off, cap - off, "C tok;");
  return e;
}

/* The continue token comes to the loop in stream order: before the items
 * when the metadata comes first, after them otherwise; inline the same. */
static void test_list_continue_in_order(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 2);
  for (int mf = 0; mf < 2; mf++) {
    size_t len;
    char *body = list_body(200, 300, mf, &len);
    char *want = expected_log(200, mf);
    for (int pooled = 0; pooled < 2; pooled++) {
      sink k;
      sink_init(&k);
      kc_dstream *s = kc_dstream_new(pooled ? p : NULL, KC_DECODE_LIST, NULL, &list_cbs, &k, 0);
      assert_non_null(s);
      pump(&loop, s, &k, body, len, 777, true, NULL, 0);
      assert_int_equal(k.done_rc, 0);
      assert_true(k.on_loop);
      assert_string_equal(k.log, want);
      assert_int_equal(kc_dstream_count(s), 200);
      assert_string_equal(kc_dstream_list_meta(s)->continue_token, "tok");
      kc_dstream_close(s);
      free(k.log);
    }
    free(want);
    free(body);
  }
  close_pool(&loop, p);
}

/* A held stream takes bytes up to its budget and then refuses them, but
 * decodes and delivers nothing; its end is remembered. A larger budget
 * resumes it at once; released, it delivers everything in order. */
/* A bulk stream with more input queued wakes the loop once per 64 results,
 * another once per chunk; a lone event (the last chunk queued) is delivered
 * without waiting for more input. */
static void test_wakes_batched_while_input_queued(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  enum { N = 200 };
  size_t len;
  char *body = watch_body(N, 20000, &len); /* one event per queued chunk */
  size_t end[N], n = 0;                     /* where each event's line ends */
  for (size_t i = 0; i < len; i++)
    if (body[i] == '\n') end[n++] = i + 1;
  assert_int_equal(n, N);
  sink k;
  sink_init(&k);
  for (int bulk = 1; bulk >= 0; bulk--) {
    sink_init(&k);
    kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 64u << 20);
    assert_non_null(s);
    if (bulk) kc_dstream_set_bulk(s);
    /* queued whole before any decoding: one run of the pool thread */
    assert_int_equal(kc_dstream_set_held(s, true), 0);
    for (size_t i = 0, at = 0; i < N; at = end[i++])
      assert_int_equal(kc_dstream_feed(s, body + at, end[i] - at), 0);
    kc_dstream_finish(s, true);
    assert_int_equal(kc_dstream_set_held(s, false), 0);
    while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(k.done_rc, 0);
    assert_int_equal(k.n, N);
    assert_true(k.on_loop);
    if (bulk)
      assert_true(kc_dstream_wakes(s) <= N / 64 + 2);
    else
      assert_true(kc_dstream_wakes(s) >= N); /* one per chunk */
    kc_dstream_close(s);
    free(k.log);
  }

  /* The initial events' end ends the batching: the rest goes per chunk. */
  static const char iee[] =
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"500\","
      "\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n";
  sink_init(&k);
  kc_dstream *b = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 64u << 20);
  assert_non_null(b);
  kc_dstream_set_bulk(b);
  assert_int_equal(kc_dstream_set_held(b, true), 0);
  for (size_t i = 0, at = 0; i < N; at = end[i++]) {
    if (i == N / 2) assert_int_equal(kc_dstream_feed(b, iee, sizeof iee - 1), 0);
    assert_int_equal(kc_dstream_feed(b, body + at, end[i] - at), 0);
  }
  kc_dstream_finish(b, true);
  assert_int_equal(kc_dstream_set_held(b, false), 0);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, 0);
  assert_int_equal(k.n, N + 1);
  uint64_t w = kc_dstream_wakes(b);
  assert_true(w >= N / 2 && w <= N / 2 + N / 128 + 4);
  kc_dstream_close(b);
  free(k.log);

  /* One event at a time: each arrives without a next one coming. */
  sink_init(&k);
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 0);
  assert_non_null(s);
  kc_dstream_set_bulk(s);
  for (size_t i = 0, at = 0; i < 5; at = end[i++]) {
    assert_int_equal(kc_dstream_feed(s, body + at, end[i] - at), 0);
    for (int t = 0; k.n < i + 1 && t < 10000; t++) { /* up to 10 s */
      uv_run(&loop, UV_RUN_NOWAIT);
      if (k.n < i + 1) usleep(1000);
    }
    assert_int_equal(k.n, i + 1);
  }
  assert_int_equal(kc_dstream_wakes(s), 5);
  kc_dstream_finish(s, true);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  kc_dstream_close(s);
  free(k.log);
  free(body);
  close_pool(&loop, p);
}

static void test_held_stream(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 2);
  size_t len;
  char *body = list_body(300, 400, true, &len);
  char *want = expected_log(300, true);
  sink k;
  sink_init(&k);
  size_t budget = 16 * 1024;
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_LIST, NULL, &list_cbs, &k, budget);
  assert_non_null(s);
  assert_int_equal(kc_dstream_set_held(s, true), 0);
  size_t off = 0;
  int rc = 0;
  while (off < len && (rc = kc_dstream_feed(s, body + off, 1000)) == 0) {
    off += 1000;
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  assert_int_equal(rc, KC_DSTREAM_FULL);
  assert_true(kc_dstream_inflight(s) >= budget);
  assert_true(kc_dstream_inflight(s) < budget + 1000);
  /* Nothing decodes: the input stays queued whatever the loop does. */
  for (int i = 0; i < 20; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
  assert_int_equal(k.n, 0);
  assert_int_equal(k.len, 0);
  assert_int_equal(kc_dstream_inflight(s), off);
  /* Twice the budget: below half of it, so resumed inside the call. */
  kc_dstream_set_budget(s, 2 * budget + 2 * off);
  assert_int_equal(k.resumes, 1);
  while (off < len && (rc = kc_dstream_feed(s, body + off, len - off < 1000 ? len - off : 1000)) == 0)
    off += len - off < 1000 ? len - off : 1000;
  if (off == len) kc_dstream_finish(s, true); /* remembered while held */
  kc_dstream_set_budget(s, budget);
  for (int i = 0; i < 20; i++) uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(k.n, 0);
  assert_int_equal(k.done_calls, 0);
  assert_int_equal(kc_dstream_set_held(s, false), 0);
  if (off < len) pump(&loop, s, &k, body + off, len - off, 1000, true, NULL, 0);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, 0);
  assert_int_equal(k.done_calls, 1);
  assert_true(k.on_loop);
  assert_string_equal(k.log, want);
  kc_dstream_close(s);
  /* An inline stream cannot be held. */
  kc_dstream *in = kc_dstream_new(NULL, KC_DECODE_LIST, NULL, &list_cbs, &k, 0);
  assert_non_null(in);
  assert_int_equal(kc_dstream_set_held(in, true), -EINVAL);
  kc_dstream_close(in);
  /* A held stream closed before its release: nothing runs, nothing leaks. */
  kc_dstream *h = kc_dstream_new(p, KC_DECODE_LIST, NULL, &list_cbs, &k, 0);
  assert_non_null(h);
  assert_int_equal(kc_dstream_set_held(h, true), 0);
  assert_int_equal(kc_dstream_feed(h, body, 5000), 0);
  kc_dstream_finish(h, true);
  kc_dstream_close(h);
  free(k.log);
  free(want);
  free(body);
  close_pool(&loop, p);
}

/* A big event trickling in (a 1-byte HTTP chunk per loop iteration, as
 * libcurl delivers a server's 1-byte chunks) reaches the decoder in a few
 * large pieces, not one per iteration; the event is complete and comes
 * once its newline is in. */
static void test_trickle_gathered(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  size_t len;
  char *body = watch_body(1, 64 * 1024, &len);
  sink k;
  sink_init(&k);
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 0);
  assert_non_null(s);
  for (size_t off = 0; off < len; off++) {
    assert_int_equal(kc_dstream_feed(s, body + off, 1), 0);
    uv_run(&loop, UV_RUN_NOWAIT); /* one iteration per byte */
  }
  /* Delivered without the end of the body: the newline was enough. */
  while (k.n < 1) uv_run(&loop, UV_RUN_ONCE);
  kc_dstream_finish(s, true);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, 0);
  assert_string_equal(k.log, "p0@1;");
  /* 65 KiB in 1-byte feeds, an iteration each: 5 pieces of 16 KiB plus
   * one per 5 ms the trickle took (one per iteration would be 65,600). */
  uint64_t feeds = kc_dstream_decode_feeds(s);
  print_message("# %zu bytes in 1-byte feeds: %llu decoder feeds\n", len, (unsigned long long)feeds);
  assert_true(feeds >= 5);
  assert_true(feeds <= len / 64);
  kc_dstream_close(s);
  free(k.log);
  free(body);
  close_pool(&loop, p);
}

/* One large object without a newline before its end (a 1 MiB ConfigMap
 * arriving in 1-byte pieces faster than the loop iterates, as libcurl hands
 * over a burst of small HTTP chunks) wakes a pool thread once per 256 KiB
 * gathered, not once per 16 KiB piece: each wake of an idle core costs more
 * than the decoding of a piece (docs/benchmarks.md "Decode cost by chunk
 * size"). The decoder still sees every byte once, in 16 KiB pieces. */
static void test_large_object_wakes_per_256k(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  size_t len;
  char *body = watch_body(1, 1 << 20, &len);
  sink k;
  sink_init(&k);
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 4u << 20);
  assert_non_null(s);
  for (size_t off = 0; off < len; off++) assert_int_equal(kc_dstream_feed(s, body + off, 1), 0);
  kc_dstream_finish(s, true);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, 0);
  assert_string_equal(k.log, "p0@1;");
  uint64_t runs = kc_dstream_decode_runs(s), feeds = kc_dstream_decode_feeds(s);
  print_message("# %zu bytes in 1-byte feeds: %llu runs, %llu decoder feeds\n", len,
                (unsigned long long)runs, (unsigned long long)feeds);
  assert_true(runs >= 1);
  assert_true(runs <= len / (256 << 10) + 2); /* one per 16 KiB piece would be 65 */
  assert_true(feeds >= len / 16384 && feeds <= len / 16384 + 2);
  kc_dstream_close(s);
  free(k.log);
  free(body);
  close_pool(&loop, p);
}

/* A stream with a small budget that fills with input without a newline (a
 * LIST page) is decoded at once, not after the stage timer: it must drain
 * long before it is full, or a small decodeBudget would cap the transfer at
 * one budget per 5 ms. Nothing here runs the loop, so only a pool thread
 * scheduled by the feeds themselves can publish. */
static void test_small_budget_drains_without_newline(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  size_t len;
  char *body = list_body(400, 600, true, &len);
  assert_null(memchr(body, '\n', len));
  sink k;
  sink_init(&k);
  size_t budget = 64 * 1024;
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_LIST, NULL, &list_cbs, &k, budget);
  assert_non_null(s);
  size_t off = 0;
  int rc = 0;
  while (off < len && (rc = kc_dstream_feed(s, body + off, 16384)) == 0) off += 16384;
  assert_int_equal(rc, KC_DSTREAM_FULL);
  /* A pool thread publishes (and wakes the loop) without the loop's help. */
  for (int i = 0; i < 10000 && kc_dstream_wakes(s) == 0; i++) usleep(1000);
  assert_true(kc_dstream_wakes(s) >= 1);
  assert_int_equal(k.n, 0); /* delivered only by the loop */
  pump(&loop, s, &k, body + off, len - off, 16384, true, NULL, budget);
  assert_int_equal(k.done_rc, 0);
  assert_int_equal(k.n, 400);
  kc_dstream_close(s);
  free(k.log);
  free(body);
  close_pool(&loop, p);
}

static void on_guard(uv_timer_t *t) { *(bool *)t->data = true; }

/* An event without a newline after it (a server that writes none) is still
 * delivered while the body goes on: the staged bytes are queued at the
 * latest by the stage timer, without more input or the body's end. */
static void test_event_without_newline_delivered(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  size_t len;
  char *body = watch_body(2, 10, &len);
  assert_true(body[len - 1] == '\n');
  sink k;
  sink_init(&k);
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &k, 0);
  assert_non_null(s);
  assert_int_equal(kc_dstream_feed(s, body, len - 1), 0); /* both, the last newline left out */
  bool expired = false;
  uv_timer_t guard;
  assert_int_equal(uv_timer_init(&loop, &guard), 0);
  guard.data = &expired;
  assert_int_equal(uv_timer_start(&guard, on_guard, 10000, 0), 0);
  while (k.n < 2 && !expired) uv_run(&loop, UV_RUN_ONCE);
  assert_false(expired);
  assert_string_equal(k.log, "p0@1;p1@2;");
  assert_int_equal(k.done_calls, 0);
  uv_close((uv_handle_t *)&guard, NULL);
  kc_dstream_finish(s, true);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, 0);
  kc_dstream_close(s);
  free(k.log);
  free(body);
  close_pool(&loop, p);
}

/* A body of 5,000 small events decoded at once reaches the loop in turns of
 * at most 1,024 (DELIVER_MAX), a poll between each, in order. */
static unsigned polls, events_this_poll, max_per_poll, poll_seen;
static void count_poll(uv_check_t *h) { polls++; }
static int on_event_per_poll(void *ud, const kc_watch_event *ev) {
  if (poll_seen != polls) poll_seen = polls, events_this_poll = 0;
  if (++events_this_poll > max_per_poll) max_per_poll = events_this_poll;
  return on_event(ud, ev);
}

static void test_delivery_yields_between_turns(void **state) {
  (void)state;
  uv_loop_t loop;
  kc_decode_pool *p;
  open_pool(&loop, &p, 1);
  uv_check_t check;
  assert_int_equal(uv_check_init(&loop, &check), 0);
  assert_int_equal(uv_check_start(&check, count_poll), 0);
  uv_unref((uv_handle_t *)&check);
  polls = events_this_poll = max_per_poll = poll_seen = 0;
  size_t len;
  char *body = watch_body(5000, 10, &len);
  kc_dstream_callbacks per_poll = cbs;
  per_poll.event = on_event_per_poll;
  sink k;
  sink_init(&k);
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &per_poll, &k, 64u << 20);
  assert_non_null(s);
  assert_int_equal(kc_dstream_feed(s, body, len), 0); /* all of it queued at once */
  kc_dstream_finish(s, true);
  while (!k.done_calls) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(k.done_rc, 0);
  assert_int_equal(k.n, 5000); /* in order: on_event checks each index */
  print_message("# 5000 events: at most %u between two polls\n", max_per_poll);
  assert_true(max_per_poll <= 1024);
  kc_dstream_close(s);
  free(k.log);
  free(body);
  uv_close((uv_handle_t *)&check, NULL);
  close_pool(&loop, p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_and_thread),
      cmocka_unit_test(test_budget_pauses_and_resumes),
      cmocka_unit_test(test_decode_error_early),
      cmocka_unit_test(test_close_anytime_many_streams),
      cmocka_unit_test(test_rejects_in_order),
      cmocka_unit_test(test_list_continue_in_order),
      cmocka_unit_test(test_wakes_batched_while_input_queued),
      cmocka_unit_test(test_held_stream),
      cmocka_unit_test(test_trickle_gathered),
      cmocka_unit_test(test_large_object_wakes_per_256k),
      cmocka_unit_test(test_delivery_yields_between_turns),
      cmocka_unit_test(test_small_budget_drains_without_newline),
      cmocka_unit_test(test_event_without_newline_delivered),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
