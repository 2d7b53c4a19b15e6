/* SPDX-License-Identifier: Apache-2.0 */
/* bench_keytrace: what the per-controller key trace (runtime/keytrace.h)
 * costs, at the size controllers use (KC_KEYTRACE_DEFAULT entries of 256
 * bytes):
 *  - ns per entry recorded (kc_keytrace_add), with the details the
 *    controller writes: the long "queued" line of a list delivery and the
 *    short "dequeued" one. Floor: the same detail formatted into a stack
 *    buffer (vsnprintf) and copied into a 256-byte slot, without the hash,
 *    the clock and the mutex;
 *  - us per lookup (kc_keytrace_find into the 256-entry buffer `kctrld ctl
 *    trace` uses) of a key with 3 entries in a full ring of many keys, and
 *    of a key that fills the ring. Floor: one pass over the ring's hashes;
 *  - the loop time the trace adds to an initial list of N objects (default
 *    100,000): per object the three stages the loop records for a key that
 *    reconciles without error (queued, dequeued, result), in ms; the floor
 *    is the same count of floor records.
 * Each figure is the best of ROUNDS runs (the least disturbed by other
 * load on a shared machine).
 *
 *   build/bench/bench_keytrace [objects] [rounds]
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/keytrace.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The floor of one record: format and copy, nothing else. The sink keeps
 * the compiler from dropping the work. */
static kc_keytrace_entry floor_ring[KC_KEYTRACE_DEFAULT];
static uint64_t floor_seq;

static void floor_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void floor_add(const char *fmt, ...) {
  char detail[KC_KEYTRACE_DETAIL_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  if (n < 0) detail[0] = '\0';
  kc_keytrace_entry *e = &floor_ring[floor_seq++ % KC_KEYTRACE_DEFAULT];
  memcpy(e->detail, detail, sizeof detail);
}

static void make_key(char *buf, size_t cap, long i) {
  snprintf(buf, cap, "namespace-%03ld/object-name-%07ld", i % 100, i);
}

/* The controller's "queued" line for a list delivery (controller.c
 * trace_queued), with the key's object. */
#define QUEUED_FMT "%s (%s): %s %s %s %s rv=%ld informer=%s%s"
#define QUEUED_ARGS(key, i) \
  "own event", "low", "list", "ADDED", "ConfigMap", key, 1000 + (i), "configmaps", ""

/* Best ns per record over n records of long (queued) or short (dequeued) lines. */
static double record_ns(long n, int rounds, int long_line, int floor_only) {
  char key[64];
  make_key(key, sizeof key, 42);
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    kc_keytrace *t = kc_keytrace_new(0);
    if (!t) exit(1);
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
      if (floor_only && long_line) floor_add(QUEUED_FMT, QUEUED_ARGS(key, i));
      else if (floor_only) floor_add("attempt %u", 1u);
      else if (long_line) kc_keytrace_add(t, key, KC_TRACE_QUEUED, QUEUED_FMT, QUEUED_ARGS(key, i));
      else kc_keytrace_add(t, key, KC_TRACE_DEQUEUED, "attempt %u", 1u);
    }
    double ns = (now_s() - t0) * 1e9 / (double)n;
    if (ns < best) best = ns;
    kc_keytrace_free(t);
  }
  return best;
}

/* A full ring: the looked-up key's `own` entries spread evenly, the rest
 * "queued" lines of other keys (three entries each). */
static kc_keytrace *full_ring(const char *looked_up, size_t own) {
  kc_keytrace *t = kc_keytrace_new(0);
  if (!t) exit(1);
  char key[64];
  size_t cap = kc_keytrace_capacity(t);
  for (size_t i = 0, o = 0; i < cap; i++) {
    if (own && (i * own / cap) != ((i + 1) * own / cap) && o < own) {
      kc_keytrace_add(t, looked_up, KC_TRACE_DEQUEUED, "attempt %zu", ++o);
      continue;
    }
    make_key(key, sizeof key, (long)(i / 3));
    kc_keytrace_add(t, key, KC_TRACE_QUEUED, QUEUED_FMT, QUEUED_ARGS(key, (long)i));
  }
  return t;
}

/* Best us per lookup of a key with `own` entries in a full ring. */
static double lookup_us(size_t own, int rounds, size_t *matched) {
  const char *k = "default/looked-up";
  kc_keytrace *t = full_ring(k, own);
  kc_keytrace_entry *out = calloc(256, sizeof *out); /* admin.c's TRACE_MAX */
  if (!out) exit(1);
  const int n = 2000;
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    double t0 = now_s();
    for (int i = 0; i < n; i++) *matched = kc_keytrace_find(t, k, out, 256);
    double us = (now_s() - t0) * 1e6 / n;
    if (us < best) best = us;
  }
  free(out);
  kc_keytrace_free(t);
  return best;
}

/* Floor of a lookup: one pass over a ring's hashes. */
static double scan_us(int rounds) {
  static volatile uint64_t sink;
  uint64_t h = kc_keytrace_hash("default/looked-up");
  const int n = 2000;
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
      uint64_t found = 0;
      for (size_t s = 0; s < KC_KEYTRACE_DEFAULT; s++) found += floor_ring[s].key_hash == h;
      sink += found;
    }
    double us = (now_s() - t0) * 1e6 / n;
    if (us < best) best = us;
  }
  return best;
}

/* The loop's records for an initial list of n objects: queued, dequeued,
 * result per key, in ms. */
static double initial_list_ms(long n, int rounds, int floor_only) {
  char (*keys)[64] = malloc((size_t)n * sizeof *keys);
  if (!keys) exit(1);
  for (long i = 0; i < n; i++) make_key(keys[i], sizeof keys[i], i);
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    kc_keytrace *t = kc_keytrace_new(0);
    if (!t) exit(1);
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
      if (floor_only) {
        floor_add(QUEUED_FMT, QUEUED_ARGS(keys[i], i));
        floor_add("attempt %u", 1u);
        floor_add("%s after %.3f ms", "success", 0.334);
      } else {
        kc_keytrace_add(t, keys[i], KC_TRACE_QUEUED, QUEUED_FMT, QUEUED_ARGS(keys[i], i));
        kc_keytrace_add(t, keys[i], KC_TRACE_DEQUEUED, "attempt %u", 1u);
        kc_keytrace_add(t, keys[i], KC_TRACE_RESULT, "%s after %.3f ms", "success", 0.334);
      }
    }
    double ms = (now_s() - t0) * 1e3;
    if (ms < best) best = ms;
    kc_keytrace_free(t);
  }
  free(keys);
  return best;
}

int main(int argc, char **argv) {
  long objects = argc > 1 ? atol(argv[1]) : 100000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  if (objects <= 0 || rounds <= 0) return 2;
  kc_keytrace *probe = kc_keytrace_new(0);
  if (!probe) return 1;
  printf("ring: %zu entries x %zu bytes = %zu KiB per controller; best of %d runs\n\n",
         kc_keytrace_capacity(probe), sizeof(kc_keytrace_entry),
         kc_keytrace_mem_bytes(probe) / 1024, rounds);
  kc_keytrace_free(probe);

  const long n = 1000000;
  printf("%-44s %10s %10s %9s\n", "record (kc_keytrace_add)", "ns/entry", "floor ns", "x floor");
  for (int long_line = 1; long_line >= 0; long_line--) {
    double ns = record_ns(n, rounds, long_line, 0), fl = record_ns(n, rounds, long_line, 1);
    printf("%-44s %10.0f %10.0f %9.2f\n",
           long_line ? "queued: list ADDED ConfigMap ... informer=" : "dequeued: attempt 1", ns, fl,
           ns / fl);
  }

  printf("\n%-44s %10s %10s %9s\n", "lookup (kc_keytrace_find, 256 out)", "us/lookup", "floor us",
         "x floor");
  double fl = scan_us(rounds);
  size_t sizes[] = {3, 1024};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t matched = 0;
    double us = lookup_us(sizes[i], rounds, &matched);
    char label[64];
    snprintf(label, sizeof label, "key with %zu of 1024 entries", matched);
    printf("%-44s %10.2f %10.2f %9.2f\n", label, us, fl, us / fl);
  }

  printf("\n%-44s %10s %10s %9s\n", "initial list (queued, dequeued, result)", "loop ms",
         "floor ms", "x floor");
  double ms = initial_list_ms(objects, rounds, 0), fms = initial_list_ms(objects, rounds, 1);
  char label[64];
  snprintf(label, sizeof label, "%ld objects, %ld entries", objects, 3 * objects);
  printf("%-44s %10.1f %10.1f %9.2f\n", label, ms, fms, ms / fms);
  return 0;
}
