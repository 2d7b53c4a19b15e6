/* SPDX-License-Identifier: Apache-2.0 */
/* bench_yajl: yajl alone (no callbacks, one buffer, like json_verify) over
 * a file, the floor the decoder is measured against ("decode+store within
 * 1.5x of yajl alone"). Run it under callgrind next to bench_informer for
 * repeatable instruction counts on a loaded machine:
 *
 *   BENCH_EVENTS=0 BENCH_DUMP_LIST=/tmp/list10k.json build/bench/bench_informer 10000
 *   valgrind --tool=callgrind build/bench/bench_yajl /tmp/list10k.json
 *
 * The file may hold several JSON values (yajl_allow_multiple_values), e.g. a
 * watch stream's newline-delimited events, the event floor of
 * tests/bench/compare.py. Prints the best of 3 wall times and the best of 3
 * CPU times of the parse (CLOCK_PROCESS_CPUTIME_ID: steadier on a loaded
 * machine). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <yajl/yajl_parse.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  unsigned char *p = n > 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n) : NULL;
  if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "%s: cannot read %ld bytes\n", argv[1], n);
    free(p);
    fclose(f);
    return 1;
  }
  fclose(f);
  int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 3;
  double best = 1e9, best_cpu = 1e9;
  for (int k = 0; k < reps; k++) {
    yajl_handle h = yajl_alloc(NULL, NULL, NULL);
    if (!h || !yajl_config(h, yajl_allow_multiple_values, 1)) {
      if (h) yajl_free(h);
      free(p);
      return 1;
    }
    struct timespec a, b, ca, cb;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
    if (yajl_parse(h, p, (size_t)n) != yajl_status_ok || yajl_complete_parse(h) != yajl_status_ok) {
      unsigned char *err = yajl_get_error(h, 0, p, (size_t)n);
      fprintf(stderr, "%s: %s\n", argv[1], err ? (const char *)err : "parse error");
      if (err) yajl_free_error(h, err);
      yajl_free(h);
      free(p);
      return 3;
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
    clock_gettime(CLOCK_MONOTONIC, &b);
    yajl_free(h);
    double dt = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    double dc = (double)(cb.tv_sec - ca.tv_sec) + (double)(cb.tv_nsec - ca.tv_nsec) / 1e9;
    if (dt < best) best = dt;
    if (dc < best_cpu) best_cpu = dc;
  }
  printf("yajl alone: %ld bytes, best of %d: %.3f s (CPU %.3f s)\n", n, reps, best, best_cpu);
  free(p);
  return 0;
}
