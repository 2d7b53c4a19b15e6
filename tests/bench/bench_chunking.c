/* SPDX-License-Identifier: Apache-2.0 */
/* bench_chunking: decode cost per MB of one large object as a function of
 * how the bytes arrive (no chunking may change the cost). A
 * ConfigMap-like object with one long annotation (256 KiB, 1.5 MiB, 3 MiB)
 * is decoded as a WATCH event fed in pieces of 1, 7, 64 bytes, 16 KiB and
 * random 1-64 bytes, against the same decoder fed the body in one piece, and
 * against yajl alone parsing the body in one piece (the floor).
 *
 * Two ways to feed: "direct" hands each piece to the decoder (decode.h), as
 * --decode-threads 0 does; the cost per call shows at small pieces. "stream"
 * feeds the pieces through a decode stream (decodepool.h, one pool thread),
 * as the daemon does: "decode" is the pool thread's CPU time for the stream
 * (the loop gathers small pieces into 16 KiB ones first), "x one-shot" the
 * same against the stream fed the object in one piece (what the chunking
 * costs), "x direct" against decoding it in one piece directly on the
 * calling thread (the chunking and the hand-off to the other core), "loop" the loop's
 * time in kc_dstream_feed (a memcpy per piece; libcurl spends more than that
 * on each HTTP chunk it parses before it calls us).
 *
 *   build/bench/bench_chunking [REPEAT]      default REPEAT 9 (median of)
 *   build/bench/bench_chunking --one SIZE PIECE [TIMES]
 *       decodes the SIZE-byte object TIMES (default 5) times in PIECE-byte
 *       pieces and nothing else: the form to count instructions with
 *       valgrind --tool=callgrind (PIECE 0: one piece)
 *   build/bench/bench_chunking --one-stream SIZE PIECE [TIMES]
 *       the same through a decode stream (one pool thread), as the daemon
 *       feeds it: --toggle-collect=kc_decoder_feed counts the pool
 *       thread's decoding, which sees 16 KiB pieces whatever PIECE is
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_parse.h>

#include "watch/decode.h"
#include "watch/decodepool.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *make_event(size_t size, size_t *len) {
  char *o = malloc(size + 512);
  if (!o) exit(1);
  size_t n = (size_t)sprintf(o, "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":"
                                "\"ConfigMap\",\"metadata\":{\"name\":\"big\",\"namespace\":\"d\","
                                "\"resourceVersion\":\"7\",\"annotations\":{\"blob\":\"");
  for (size_t i = 0; i < size; i++) o[n++] = (char)('a' + i % 26);
  n += (size_t)sprintf(o + n, "\"}}}}\n");
  *len = n;
  return o;
}

static int on_event(void *ud, const kc_watch_event *ev) {
  (*(size_t *)ud)++;
  return 0;
}

static uint64_t rng = 88172645463325252ull;

/* The next piece: `chunk` bytes (0: random 1-64), at most `left`. */
static size_t next_piece(size_t chunk, size_t left) {
  size_t n = chunk;
  if (!n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    n = 1 + rng % 64;
  }
  return n < left ? n : left;
}

/* Seconds to decode `text` fed in `chunk`-byte pieces (0: random 1-64). */
static double decode_once(const char *text, size_t len, size_t chunk) {
  static const kc_decoder_callbacks cbs = {.event = on_event};
  size_t events = 0;
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cbs, &events);
  if (!d) exit(1);
  double t0 = now();
  for (size_t off = 0; off < len;) {
    size_t n = next_piece(chunk, len - off);
    if (kc_decoder_feed(d, text + off, n) != 0) {
      fprintf(stderr, "bench_chunking: %s\n", kc_decoder_error(d));
      exit(1);
    }
    off += n;
  }
  if (kc_decoder_finish(d) != 0 || events != 1) exit(1);
  double t = now() - t0;
  kc_decoder_free(d);
  return t;
}

static void on_done(void *ud, int rc) {
  if (rc) exit(1);
  *(int *)ud = 1;
}

static int on_stream_event(void *ud, const kc_watch_event *ev) { return 0; }
static void on_resume(void *ud) {}

/* Feeds a decode stream: the loop's seconds in kc_dstream_feed into *loop_s,
 * the pool thread's CPU seconds in the decoder into *decode_s. */
static void stream_once(uv_loop_t *loop, kc_decode_pool *p, const char *text, size_t len,
                        size_t chunk, double *loop_s, double *decode_s) {
  int done = 0;
  kc_dstream_callbacks cbs = {.event = on_stream_event, .resume = on_resume, .done = on_done};
  kc_dstream *s = kc_dstream_new(p, KC_DECODE_WATCH, NULL, &cbs, &done, 64u << 20);
  if (!s) exit(1);
  double t0 = now();
  for (size_t off = 0; off < len;) {
    size_t n = next_piece(chunk, len - off);
    int rc = kc_dstream_feed(s, text + off, n);
    if (rc == KC_DSTREAM_FULL) {
      uv_run(loop, UV_RUN_ONCE);
      continue;
    }
    if (rc) exit(1);
    off += n;
  }
  *loop_s = now() - t0;
  kc_dstream_finish(s, true);
  while (!done) uv_run(loop, UV_RUN_ONCE);
  if (kc_dstream_count(s) != 1) exit(1);
  *decode_s = kc_dstream_decode_seconds(s);
  kc_dstream_close(s);
}

#define MAX_REPEAT 101

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts a copy). */
static double median(const double *v, int n) {
  double c[MAX_REPEAT];
  memcpy(c, v, (size_t)n * sizeof *c);
  qsort(c, (size_t)n, sizeof *c, cmp_double);
  return n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
}

static double yajl_once(const char *text, size_t len) {
  static const yajl_callbacks none = {0};
  yajl_handle h = yajl_alloc(&none, NULL, NULL);
  if (!h) exit(1);
  yajl_config(h, yajl_allow_multiple_values, 1);
  double t0 = now();
  if (yajl_parse(h, (const unsigned char *)text, len) != yajl_status_ok ||
      yajl_complete_parse(h) != yajl_status_ok)
    exit(1);
  double t = now() - t0;
  yajl_free(h);
  return t;
}

int main(int argc, char **argv) {
  bool one_stream = argc >= 4 && strcmp(argv[1], "--one-stream") == 0;
  if (argc >= 4 && (one_stream || strcmp(argv[1], "--one") == 0)) {
    size_t size = (size_t)strtoull(argv[2], NULL, 10), piece = (size_t)strtoull(argv[3], NULL, 10);
    int times = argc > 4 ? atoi(argv[4]) : 5;
    size_t len;
    char *text = make_event(size, &len);
    uv_loop_t loop;
    kc_decode_pool *pool = NULL;
    if (one_stream && (uv_loop_init(&loop) || kc_decode_pool_new(&loop, 1, &pool))) exit(1);
    for (int i = 0; i < times; i++) {
      double l, d;
      if (one_stream) stream_once(&loop, pool, text, len, piece ? piece : len, &l, &d);
      else decode_once(text, len, piece ? piece : len);
    }
    if (one_stream) {
      kc_decode_pool_free(pool);
      uv_run(&loop, UV_RUN_DEFAULT);
      uv_loop_close(&loop);
    }
    free(text);
    return 0;
  }
  int repeat = argc > 1 ? atoi(argv[1]) : 9;
  if (repeat < 1) repeat = 1;
  if (repeat > MAX_REPEAT) repeat = MAX_REPEAT;
  static const size_t sizes[] = {256u << 10, 1536u << 10, 3u << 20};
  static const size_t chunks[] = {1, 7, 64, 16384, 0};
  printf("decode cost per MB of one large watch event, by chunk size (median of %d paired runs)\n",
         repeat);
  uv_loop_t loop;
  kc_decode_pool *pool;
  if (uv_loop_init(&loop) || kc_decode_pool_new(&loop, 1, &pool)) exit(1);
  printf("%-9s %-10s %21s %44s\n", "", "", "---- direct ----",
         "----------------- stream -----------------");
  printf("%-9s %-10s %10s %10s %10s %10s %10s %10s %10s\n", "object", "chunks", "ms/MB", "x one-shot",
         "decode", "x direct", "x one-shot", "loop", "x yajl");
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t len;
    char *text = make_event(sizes[s], &len);
    double mb = (double)len / (1 << 20);
    double one[MAX_REPEAT], floor[MAX_REPEAT], sone[MAX_REPEAT], handoff[MAX_REPEAT];
    for (int r = 0; r < repeat; r++) {
      double l;
      floor[r] = yajl_once(text, len);
      stream_once(&loop, pool, text, len, len, &l, &sone[r]);
      one[r] = decode_once(text, len, len);
      handoff[r] = sone[r] / one[r];
    }
    char label[32];
    snprintf(label, sizeof label, "%.2f MiB", mb);
    double floor_ms = median(floor, repeat) * 1e3 / mb;
    printf("%-9s %-10s %10.2f %10s %10.2f %10.2f %10s   (ms/MB; floor: yajl alone %.2f ms/MB)\n",
           label, "one piece", median(one, repeat) * 1e3 / mb, "1.00",
           median(sone, repeat) * 1e3 / mb, median(handoff, repeat), "1.00", floor_ms);
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
      /* Each run decodes the object through the stream in one piece right
       * before it is fed in pieces, then directly the same way: this VM's
       * speed drifts between runs, so the ratios are taken per run, then
       * their median, and each pair is decoded back to back (a 1-byte
       * direct decode between them, 12 ms of the loop thread's caches,
       * moved the stream's ratio by up to 0.5). */
      double direct[MAX_REPEAT], dratio[MAX_REPEAT], dec[MAX_REPEAT], sratio[MAX_REPEAT],
          pratio[MAX_REPEAT], feed[MAX_REPEAT];
      for (int r = 0; r < repeat; r++) {
        double sbase, l;
        stream_once(&loop, pool, text, len, len, &l, &sbase);
        stream_once(&loop, pool, text, len, chunks[c], &feed[r], &dec[r]);
        double base = decode_once(text, len, len);
        direct[r] = decode_once(text, len, chunks[c]);
        dratio[r] = direct[r] / base;
        sratio[r] = dec[r] / base;
        pratio[r] = dec[r] / sbase;
      }
      char cl[32];
      if (chunks[c]) snprintf(cl, sizeof cl, "%zu B", chunks[c]);
      else snprintf(cl, sizeof cl, "rand 1-64");
      double dec_ms = median(dec, repeat) * 1e3 / mb;
      printf("%-9s %-10s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", "", cl,
             median(direct, repeat) * 1e3 / mb, median(dratio, repeat), dec_ms,
             median(sratio, repeat), median(pratio, repeat), median(feed, repeat) * 1e3 / mb,
             dec_ms / floor_ms);
    }
    free(text);
  }
  kc_decode_pool_free(pool);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return 0;
}
