/* SPDX-License-Identifier: Apache-2.0 */
/* bench_decode: LIST/WATCH decode cost against yajl alone, and memory per
 * cached object against its JSON size (targets: decode within 1.5x
 * of yajl parsing the same bytes; memory per object at most 1.5x its JSON).
 *
 * Bodies are built from the real Pod fixtures (read from KC_FIXTURES_DIR,
 * the absolute path of tests/fixtures the Makefile passes: three
 * object fixtures and the eight Pods of the sendInitialEvents watch stream,
 * all with their managedFields where the source had them), with unique
 * names, uids and a varying label per item. Every run feeds 16 KiB chunks.
 *
 *   build/bench/bench_decode [N ...]     default: 10000 100000
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "watch/decode.h"
#include "cache/store.h"

#define CHUNK 16384

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2) res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "bench_decode: cannot open %s: %s\n", path, strerror(errno));
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) exit(1);
  fclose(f);
  buf[n] = '\0';
  *len = (size_t)n;
  return buf;
}

/* ---- growable byte buffer ---- */
typedef struct buf {
  char *p;
  size_t len, cap;
} buf;

static void put(buf *b, const char *s, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 20;
    while (cap < b->len + n) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) {
      perror("realloc");
      exit(1);
    }
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

/* ---- templates ---- */
static kc_obj *tpl[32];
static size_t ntpl;

static int keep_event(void *ud, const kc_watch_event *ev) {
  (void)ud;
  if (ev->type == KC_WATCH_ADDED && ntpl < 32) tpl[ntpl++] = kc_obj_ref(ev->obj);
  return 0;
}

static void load_templates(void) {
  static const char *files[] = {"objects/pod-k8s-openapi-coredns.json",
                                "objects/pod-k9s-sidecar.json",
                                "objects/pod-insights-operator-prometheus.json"};
  char err[256];
  for (size_t i = 0; i < 3; i++) {
    char path[4096];
    snprintf(path, sizeof path, KC_FIXTURES_DIR "/%s", files[i]);
    size_t len;
    char *t = read_file(path, &len);
    tpl[ntpl] = kc_obj_parse(t, len, NULL, err, sizeof err);
    if (!tpl[ntpl]) {
      fprintf(stderr, "%s: %s\n", path, err);
      exit(1);
    }
    ntpl++;
    free(t);
  }
  size_t len;
  char *w = read_file(KC_FIXTURES_DIR "/watch/watch-pods-sendinitialevents-k8s-openapi.ndjson", &len);
  kc_decoder_callbacks cb = {.event = keep_event};
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cb, NULL);
  if (!d) exit(1);
  /* Templates are copied into bodies as text: no shared pieces (kobj.h),
   * whose place holders no parser would take. */
  kc_decoder_set_share_min(d, 0);
  if (kc_decoder_feed(d, w, len) || kc_decoder_finish(d)) exit(1);
  kc_decoder_free(d);
  free(w);
}

typedef struct splice {
  const char *at;
  size_t len;
  char with[96];
} splice;

static int splice_cmp(const void *a, const void *b) {
  const splice *x = a, *y = b;
  return x->at < y->at ? -1 : x->at > y->at;
}

/* Adds a splice removing the member `"key":"<v>",` whose value is v. */
static size_t cut_member(splice *s, const char *key, kc_str v) {
  size_t kl = strlen(key) + 4; /* "key":" */
  if (!v.ptr) return 0;
  const char *m = v.ptr - kl;
  if (memcmp(m + 1, key, kl - 4) != 0 || v.ptr[v.len] != '"' || v.ptr[v.len + 1] != ',') {
    fprintf(stderr, "bench_decode: template %s member not where expected\n", key);
    exit(1);
  }
  s->at = m;
  s->len = kl + v.len + 2;
  s->with[0] = '\0';
  return 1;
}

/* Appends template i % ntpl with a unique name and uid and a varying label.
 * list_item: without kind and apiVersion, as a LIST of a built-in type
 * sends its items (docs/api-contract.md 3.5). */
static size_t put_item(buf *b, size_t i, bool list_item) {
  const kc_obj *o = tpl[i % ntpl];
  splice s[5];
  size_t ns = 0;
  if (list_item) {
    ns += cut_member(&s[ns], "kind", kc_obj_kind(o));
    ns += cut_member(&s[ns], "apiVersion", kc_obj_api_version(o));
  }
  s[ns].at = kc_obj_name(o).ptr;
  s[ns].len = kc_obj_name(o).len;
  snprintf(s[ns++].with, sizeof s[0].with, "%.*s-%zu", (int)kc_obj_name(o).len, kc_obj_name(o).ptr,
           i);
  s[ns].at = kc_obj_uid(o).ptr;
  s[ns].len = kc_obj_uid(o).len;
  snprintf(s[ns++].with, sizeof s[0].with, "%08zx-%04zx-4000-8000-%012zx", i, i % 65536, i * 7919);
  if (o->nlabels) {
    s[ns].at = kc_obj_label_value(o, 0).ptr;
    s[ns].len = kc_obj_label_value(o, 0).len;
    snprintf(s[ns++].with, sizeof s[0].with, "v%zu", i % 97);
  }
  qsort(s, ns, sizeof s[0], splice_cmp);
  size_t start = b->len;
  const char *p = o->json;
  for (size_t k = 0; k < ns; k++) {
    put(b, p, (size_t)(s[k].at - p));
    puts_(b, s[k].with);
    p = s[k].at + s[k].len;
  }
  put(b, p, (size_t)(o->json + o->json_len - p));
  return b->len - start;
}

static size_t items_json; /* bytes of all items' JSON in the body */

static void build_list(buf *b, size_t n) {
  b->len = 0;
  items_json = 0;
  puts_(b, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"987654\"},"
           "\"items\":[");
  for (size_t i = 0; i < n; i++) {
    if (i) puts_(b, ",");
    items_json += put_item(b, i, true);
  }
  puts_(b, "]}");
}

static void build_watch(buf *b, size_t n) {
  b->len = 0;
  for (size_t i = 0; i < n; i++) {
    puts_(b, "{\"type\":\"MODIFIED\",\"object\":");
    put_item(b, i, false);
    puts_(b, "}\n");
  }
}

/* ---- yajl alone ---- */
static int nop0(void *c) { (void)c; return 1; }
static int nopb(void *c, int v) { (void)c; (void)v; return 1; }
static int nopn(void *c, const char *s, size_t n) { (void)c; (void)s; (void)n; return 1; }
static int nops(void *c, const unsigned char *s, size_t n) { (void)c; (void)s; (void)n; return 1; }
static const yajl_callbacks nop_cbs = {nop0, nopb, NULL, NULL, nopn, nops, nop0, nops, nop0, nop0, nop0};

static double yajl_only(const buf *b, const yajl_callbacks *cbs, bool multi) {
  double t0 = now();
  yajl_handle h = yajl_alloc(cbs, NULL, NULL);
  if (multi) yajl_config(h, yajl_allow_multiple_values, 1);
  for (size_t off = 0; off < b->len; off += CHUNK) {
    size_t n = b->len - off < CHUNK ? b->len - off : CHUNK;
    if (yajl_parse(h, (const unsigned char *)b->p + off, n) != yajl_status_ok) {
      fprintf(stderr, "yajl failed\n");
      exit(1);
    }
  }
  if (yajl_complete_parse(h) != yajl_status_ok) exit(1);
  yajl_free(h);
  return now() - t0;
}

/* ---- ours ---- */
typedef struct store {
  kc_obj **objs;
  size_t n, cap;
  size_t mem;
} store;

static int keep_item(void *ud, kc_obj *o) {
  store *s = ud;
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 1024;
    s->objs = realloc(s->objs, s->cap * sizeof *s->objs);
    if (!s->objs) return -ENOMEM;
  }
  s->objs[s->n++] = kc_obj_ref(o);
  s->mem += kc_obj_mem_size(o);
  return 0;
}

static void store_clear(store *s) {
  for (size_t i = 0; i < s->n; i++) kc_obj_unref(s->objs[i]);
  free(s->objs);
  memset(s, 0, sizeof *s);
}

static double decode_list(const buf *b, const kc_transform *t, store *s) {
  kc_decoder_callbacks cb = {.item = keep_item};
  double t0 = now();
  kc_decoder *d = kc_decoder_new(KC_DECODE_LIST, t, &cb, s);
  int rc = 0;
  for (size_t off = 0; off < b->len && rc == 0; off += CHUNK)
    rc = kc_decoder_feed(d, b->p + off, b->len - off < CHUNK ? b->len - off : CHUNK);
  if (rc == 0) rc = kc_decoder_finish(d);
  if (rc) {
    fprintf(stderr, "decode failed: %s\n", kc_decoder_error(d));
    exit(1);
  }
  kc_decoder_free(d);
  return now() - t0;
}

/* What the informer does with a LIST: decode with the store's field capture,
 * then kc_store_replace into a store with the label index and a
 * spec.nodeName field index. Timed from the first byte to the last insert. */
static double decode_store(const buf *b, size_t n) {
  kc_store_index_spec idx[] = {{.name = "byNode", .path = "spec.nodeName"}};
  kc_store *st = kc_store_new(idx, 1);
  if (!st) exit(1);
  kc_transform t = {.capture = kc_store_capture(st)};
  store s = {0};
  double dt = decode_list(b, &t, &s);
  double t0 = now();
  if (kc_store_replace(st, s.objs, s.n, NULL, NULL) != 0 || kc_store_count(st) != n) {
    fprintf(stderr, "store replace failed\n");
    exit(1);
  }
  dt += now() - t0;
  store_clear(&s);
  kc_store_free(st);
  return dt;
}

static uint64_t nev;
static int count_event(void *ud, const kc_watch_event *ev) {
  (void)ud;
  (void)ev;
  nev++;
  return 0;
}

static double decode_watch(const buf *b, const kc_transform *t) {
  kc_decoder_callbacks cb = {.event = count_event};
  double t0 = now();
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, t, &cb, NULL);
  int rc = 0;
  for (size_t off = 0; off < b->len && rc == 0; off += CHUNK)
    rc = kc_decoder_feed(d, b->p + off, b->len - off < CHUNK ? b->len - off : CHUNK);
  if (rc == 0) rc = kc_decoder_finish(d);
  if (rc) {
    fprintf(stderr, "watch decode failed: %s\n", kc_decoder_error(d));
    exit(1);
  }
  kc_decoder_free(d);
  return now() - t0;
}

static double min2(double a, double b) { return a < b ? a : b; }

int main(int argc, char **argv) {
  size_t sizes[8] = {10000, 100000};
  int nsizes = 2;
  if (argc > 1) {
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = strtoul(argv[i], NULL, 10);
  }
  load_templates();
  const char *drop[] = {"metadata.managedFields"};
  kc_transform no_mf = {.drop = drop, .ndrop = 1, .metadata_only = false};

  printf("# bench_decode: %zu Pod templates from tests/fixtures, 16 KiB feeds, best of 3\n", ntpl);
  printf("%-8s %9s %8s | %9s %9s %9s %9s | %7s %7s %7s | %8s %8s %6s %8s %6s %8s\n", "pods",
         "body_MB", "json/obj", "yajl_null", "yajl_nop", "decode", "dec+store", "x_null", "x_nop",
         "xs_null", "mem/obj", "mem/json", "", "no_mf", "", "rss/obj");
  for (int si = 0; si < nsizes; si++) {
    size_t n = sizes[si];
    buf b = {0};
    build_list(&b, n);
    double ty0 = 1e9, ty1 = 1e9, td = 1e9, tds = 1e9;
    size_t mem = 0, mem_nomf = 0;
    long rss_per = 0;
    int reps = n > 50000 ? 2 : 3;
    for (int r = 0; r < reps; r++) {
      ty0 = min2(ty0, yajl_only(&b, NULL, false));
      ty1 = min2(ty1, yajl_only(&b, &nop_cbs, false));
      store s = {0};
      long rss0 = rss_kb();
      td = min2(td, decode_list(&b, NULL, &s));
      long rss1 = rss_kb();
      if (s.n != n) {
        fprintf(stderr, "got %zu items\n", s.n);
        return 1;
      }
      /* Items get their kind from the list's (kobj.h "Object type"). */
      if (!kc_str_eq_c(kc_obj_kind(s.objs[n - 1]), "Pod") ||
          !kc_str_eq_c(kc_obj_api_version(s.objs[n - 1]), "v1")) {
        fprintf(stderr, "list items lack kind/apiVersion\n");
        return 1;
      }
      mem = s.mem;
      if (r == 0) rss_per = (rss1 - rss0) * 1024 / (long)n;
      store_clear(&s);
      tds = min2(tds, decode_store(&b, n));
    }
    store s = {0};
    decode_list(&b, &no_mf, &s);
    mem_nomf = s.mem;
    store_clear(&s);
    double jo = (double)items_json / (double)n;
    printf("%-8zu %9.1f %8.0f | %8.3fs %8.3fs %8.3fs %8.3fs | %7.2f %7.2f %7.2f | %8.0f %8.3f %6s %8.0f "
           "%6.3f %8ld\n",
           n, (double)b.len / 1e6, jo, ty0, ty1, td, tds, td / ty0, td / ty1, tds / ty0, (double)mem / (double)n,
           (double)mem / (double)items_json, "", (double)mem_nomf / (double)n,
           (double)mem_nomf / (double)items_json, rss_per);
    free(b.p);
  }
  printf("# x_null = decode / yajl with no callbacks (json_verify); x_nop = decode / yajl with\n"
         "# empty callbacks; dec+store = decode with the store's field capture + kc_store_replace\n"
         "# (label index + spec.nodeName index), xs_null = that / yajl_null (the target);\n"
         "# mem/obj = kc_obj_mem_size (malloc usable size + header);\n"
         "# no_mf = same with transform drop metadata.managedFields, ratio still vs the full\n"
         "# JSON; rss/obj = RSS growth while decoding and keeping all objects (first run, bytes).\n");

  /* Watch throughput. */
  size_t nw = 20000;
  buf w = {0};
  build_watch(&w, nw);
  double tw = 1e9, twy = 1e9, twm = 1e9;
  for (int r = 0; r < 3; r++) {
    nev = 0;
    tw = min2(tw, decode_watch(&w, NULL));
    if (nev != nw) return 1;
    twy = min2(twy, yajl_only(&w, &nop_cbs, true));
    twm = min2(twm, decode_watch(&w, &no_mf));
  }
  printf("\nwatch: %zu MODIFIED events, %.1f MB: decode %.0f events/s (%.0f MB/s), "
         "with managedFields dropped %.0f events/s, yajl alone %.0f events/s (x%.2f)\n",
         nw, (double)w.len / 1e6, (double)nw / tw, (double)w.len / tw / 1e6, (double)nw / twm,
         (double)nw / twy, tw / twy);
  free(w.p);
  for (size_t i = 0; i < ntpl; i++) kc_obj_unref(tpl[i]);
  return 0;
}
