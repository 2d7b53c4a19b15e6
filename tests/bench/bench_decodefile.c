/* SPDX-License-Identifier: Apache-2.0 */
/* bench_decodefile: the streaming decoder (decode.h) alone over a captured
 * body, for instruction counts next to bench_yajl on the same bytes
 * (docs/benchmarks.md "The decoder on its own lexer"):
 *
 *   build/bench/bench_decodefile list|watch|lex|lexcb|yajlcb FILE [PIECE]
 *
 * list / watch: kc_decoder over FILE in PIECE-byte feeds (default 16384),
 * objects built and dropped (no store); lex: jsonlex alone without
 * callbacks (validation only, what skipped content costs); lexcb: jsonlex
 * with empty callbacks for every token; yajlcb: yajl 2.1 with the same
 * empty callbacks (both with multiple values allowed).
 * Prints the objects decoded and the best of BENCH_REPS (default 3) wall
 * and CPU times. Under callgrind use BENCH_REPS=1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yajl/yajl_parse.h>

#include "watch/decode.h"
#ifndef BENCH_NO_JSONLEX
#include "json/jsonlex.h"
#endif

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int on_item(void *ud, kc_obj *o) {
  (void)o;
  (*(unsigned long *)ud)++;
  return 0;
}

static int on_event(void *ud, const kc_watch_event *ev) {
  (void)ev;
  (*(unsigned long *)ud)++;
  return 0;
}

/* Empty callbacks, the same for both parsers. */
static int e_null(void *u) { (void)u; return 1; }
static int e_bool(void *u, int v) { (void)u; (void)v; return 1; }
static int e_num(void *u, const char *s, size_t n) { (void)u; (void)s; (void)n; return 1; }
static int e_ystr(void *u, const unsigned char *s, size_t n) { (void)u; (void)s; (void)n; return 1; }
static int e_str(void *u, const char *s, size_t n) { (void)u; (void)s; (void)n; return 1; }
static int e_cont(void *u) { (void)u; return 1; }
static const yajl_callbacks ycb = {e_null, e_bool, NULL,   NULL,  e_num, e_ystr,
                                   e_cont, e_ystr, e_cont, e_cont, e_cont};
#ifndef BENCH_NO_JSONLEX
static const kc_jsonlex_callbacks jcb = {e_null, e_bool, e_num,  e_str, e_str,
                                         e_cont, e_cont, e_cont, e_cont};
#endif

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s list|watch|lex FILE [PIECE]\n", argv[0]);
    return 2;
  }
  const char *mode = argv[1];
  size_t piece = argc > 3 ? (size_t)strtoull(argv[3], NULL, 10) : 16384;
  if (!piece) piece = 16384;
  FILE *f = fopen(argv[2], "rb");
  if (!f) {
    perror(argv[2]);
    return 1;
  }
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  char *p = n > 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n) : NULL;
  if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "%s: cannot read\n", argv[2]);
    return 1;
  }
  fclose(f);
  int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 3;
  double best = 1e9, best_cpu = 1e9;
  unsigned long count = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    int rc = 0;
    count = 0;
    if (strcmp(mode, "yajlcb") == 0) {
      yajl_handle h = yajl_alloc(&ycb, NULL, NULL);
      if (!h) return 1;
      yajl_config(h, yajl_allow_multiple_values, 1);
      yajl_status st = yajl_status_ok;
      for (size_t off = 0; off < (size_t)n && st == yajl_status_ok; off += piece)
        st = yajl_parse(h, (const unsigned char *)p + off, (size_t)n - off < piece ? (size_t)n - off : piece);
      if (st == yajl_status_ok) st = yajl_complete_parse(h);
      rc = st == yajl_status_ok ? 0 : -1;
      yajl_free(h);
    } else if (strncmp(mode, "lex", 3) == 0) {
#ifndef BENCH_NO_JSONLEX
      kc_jsonlex *lx = kc_jsonlex_new(strcmp(mode, "lexcb") == 0 ? &jcb : NULL, NULL,
                                      KC_JSONLEX_MULTIPLE);
      if (!lx) return 1;
      for (size_t off = 0; off < (size_t)n && !rc; off += piece)
        rc = kc_jsonlex_feed(lx, p + off, (size_t)n - off < piece ? (size_t)n - off : piece);
      if (!rc) rc = kc_jsonlex_finish(lx);
      if (rc) fprintf(stderr, "lex: %s\n", kc_jsonlex_error(lx));
      kc_jsonlex_free(lx);
#else
      fprintf(stderr, "built without jsonlex\n");
      return 2;
#endif
    } else {
      bool watch = strcmp(mode, "watch") == 0;
      kc_decoder_callbacks cb = {.item = on_item, .event = on_event};
      kc_decoder *d = kc_decoder_new(watch ? KC_DECODE_WATCH : KC_DECODE_LIST, NULL, &cb, &count);
      if (!d) return 1;
      for (size_t off = 0; off < (size_t)n && !rc; off += piece)
        rc = kc_decoder_feed(d, p + off, (size_t)n - off < piece ? (size_t)n - off : piece);
      if (!rc) rc = kc_decoder_finish(d);
      if (rc) fprintf(stderr, "decode: %s\n", kc_decoder_error(d));
      kc_decoder_free(d);
    }
    if (rc) return 1;
    double t = clock_s(CLOCK_MONOTONIC) - t0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (t < best) best = t;
    if (c < best_cpu) best_cpu = c;
  }
  printf("%s %s: %ld bytes, %lu objects, %zu-byte feeds: best %.3f s wall, %.3f s CPU (%.0f MB/s)\n",
         mode, argv[2], n, count, piece, best, best_cpu, (double)n / best_cpu / 1e6);
  free(p);
  return 0;
}
