/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark for daemon/cache/store.c: label-selector list latency at 10k and 100k
 * objects (a selective selector should cost the same at both sizes), the
 * same query done as a full scan (what an informer without a label index
 * does), upsert throughput with the namespace, label and two field indexes,
 * and index memory per object. Objects are realistic Pods built from the
 * fixture pod-k8s-openapi-coredns.json with varied identity, labels,
 * owner references and nodeName (tests/unit/store_podgen.h).
 *
 * Usage: build/bench/bench_store [N ...]     (default: 10000 100000) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/store_podgen.h"
#include "kube/selector.h"
#include "cache/store.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *const APPS[] = {"web", "db", "cache", "batch"};
static const char *const TIERS[] = {"front", "back"};

/* Pod i: namespace ns-(i%20), replica set rs-(i/10) (10 pods each, like a
 * pod-template-hash), app from 4, tier from 2, node from 100. */
static kc_obj *make(podgen *pg, size_t i, unsigned gen) {
  char ns[32], name[32], uid[48], rv[24], node[32], rs[32], owner[48];
  snprintf(ns, sizeof ns, "ns-%zu", i % 20);
  snprintf(name, sizeof name, "pod-%zu", i);
  snprintf(uid, sizeof uid, "uid-%zu", i);
  snprintf(rv, sizeof rv, "%u", gen * 1000000u + (unsigned)i);
  snprintf(node, sizeof node, "node-%zu", (i * 7 + gen) % 100);
  snprintf(rs, sizeof rs, "rs-%zu", i / 10 + gen);
  snprintf(owner, sizeof owner, "owner-%zu", i / 10 + gen);
  podspec p = {.tmpl = 0, .ns = ns, .name = name, .uid = uid, .rv = rv, .node = node};
  p.lk[p.nlabels] = "app", p.lv[p.nlabels++] = APPS[i % 4];
  p.lk[p.nlabels] = "tier", p.lv[p.nlabels++] = TIERS[(i / 4) % 2];
  p.lk[p.nlabels] = "pod-template-hash", p.lv[p.nlabels++] = rs;
  p.lk[p.nlabels] = "app.kubernetes.io/managed-by", p.lv[p.nlabels++] = "kctrld-bench";
  p.owners[p.nowners++] = owner;
  return podgen_make(pg, &p);
}

static double list_us(kc_store *s, const char *ns, const char *text, int iters, int *matches) {
  kc_label_selector *sel = NULL;
  if (kc_label_selector_parse(text, strlen(text), &sel, NULL) != 0) {
    fprintf(stderr, "bad selector %s\n", text);
    exit(1);
  }
  kc_obj_vec v = {0};
  double t0 = now();
  for (int k = 0; k < iters; k++) {
    kc_obj_vec_clear(&v);
    *matches = kc_store_list(s, ns ? kc_str_c(ns) : (kc_str){0}, sel, &v);
  }
  double us = (now() - t0) / iters * 1e6;
  kc_obj_vec_release(&v);
  kc_label_selector_free(sel);
  return us;
}

/* Full scan with the same selector: the cost without a label index. */
static double scan_us(kc_store *s, const char *text, int iters, int *matches) {
  kc_label_selector *sel = NULL;
  if (kc_label_selector_parse(text, strlen(text), &sel, NULL) != 0) exit(1);
  kc_obj_vec all = {0};
  kc_store_list(s, (kc_str){0}, NULL, &all);
  double t0 = now();
  for (int k = 0; k < iters; k++) {
    int m = 0;
    for (size_t i = 0; i < all.n; i++) m += kc_label_selector_matches_obj(sel, all.v[i]);
    *matches = m;
  }
  double us = (now() - t0) / iters * 1e6;
  kc_obj_vec_release(&all);
  kc_label_selector_free(sel);
  return us;
}

int main(int argc, char **argv) {
  size_t sizes[8] = {10000, 100000};
  int nsizes = 2;
  if (argc > 1) {
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = strtoul(argv[i], NULL, 10);
  }
  podgen pg;
  if (podgen_init(&pg) != 0) {
    fprintf(stderr, "bench_store: cannot load the Pod fixtures\n");
    return 1;
  }
  static const kc_store_index_spec specs[] = {
      {.name = "node", .path = "spec.nodeName"},
      {.name = "owner", .path = "metadata.ownerReferences[].uid"},
  };
  printf("%-8s %-44s %10s %8s\n", "objects", "measure", "value", "matches");
  for (int si = 0; si < nsizes; si++) {
    size_t n = sizes[si];
    kc_obj **objs = malloc(n * sizeof *objs);
    kc_obj **objs2 = malloc(n * sizeof *objs2);
    if (!objs || !objs2) return 1;
    size_t json = 0;
    for (size_t i = 0; i < n; i++) {
      objs[i] = make(&pg, i, 0);
      objs2[i] = make(&pg, i, 1); /* every label/field index value moves */
      if (!objs[i] || !objs2[i]) return 1;
      json += objs[i]->json_len;
    }
    /* The store's own cost, without JSON scans for field-index values. */
    kc_store *s = kc_store_new(NULL, 0);
    double t0 = now();
    for (size_t i = 0; i < n; i++)
      if (kc_store_upsert(s, objs[i], NULL) != 0) return 1;
    double t_plain = now() - t0;
    t0 = now();
    for (size_t i = 0; i < n; i++)
      if (kc_store_upsert(s, objs2[i], NULL) != 0) return 1;
    double t_plain_upd = now() - t0;
    kc_store_free(s);
    printf("%-8zu %-44s %10.0f %8s\n", n, "insert, objects/s (4 labels, no field idx)", n / t_plain, "");
    printf("%-8zu %-44s %10.0f %8s\n", n, "update moving labels, objects/s (no field idx)", n / t_plain_upd, "");
    s = kc_store_new(specs, 2);
    t0 = now();
    for (size_t i = 0; i < n; i++)
      if (kc_store_upsert(s, objs[i], NULL) != 0) return 1;
    double t_add = now() - t0;
    t0 = now();
    for (size_t i = 0; i < n; i++)
      if (kc_store_upsert(s, objs2[i], NULL) != 0) return 1;
    double t_upd = now() - t0;
    size_t ib = kc_store_index_bytes(s);
    int m = 0;
    printf("%-8zu %-44s %10.0f %8s\n", n, "insert, objects/s (4 labels, 2 field idx)", n / t_add, "");
    printf("%-8zu %-44s %10.0f %8s\n", n, "update moving all index values, objects/s", n / t_upd, "");
    printf("%-8zu %-44s %10.0f %8s\n", n, "JSON bytes per object", (double)json / n, "");
    printf("%-8zu %-44s %10.1f %8s\n", n, "index+map bytes per object", (double)ib / n, "");
    double us = list_us(s, NULL, "pod-template-hash=rs-43", 20000, &m);
    printf("%-8zu %-44s %10.2f %8d\n", n, "list us: pod-template-hash=rs-43", us, m);
    us = list_us(s, "ns-3", "app=web,pod-template-hash=rs-43", 20000, &m);
    printf("%-8zu %-44s %10.2f %8d\n", n, "list us: ns-3, app=web,pod-template-hash=...", us, m);
    us = list_us(s, NULL, "app in (web,db),pod-template-hash in (rs-43,rs-44)", 20000, &m);
    printf("%-8zu %-44s %10.2f %8d\n", n, "list us: app in (..),hash in (2 values)", us, m);
    us = list_us(s, NULL, "app=web,tier=front", 20, &m);
    printf("%-8zu %-44s %10.2f %8d\n", n, "list us: app=web,tier=front (n/8 matches)", us, m);
    us = scan_us(s, "pod-template-hash=rs-43", 50, &m);
    printf("%-8zu %-44s %10.2f %8d\n", n, "full-scan us, same selector (no index)", us, m);
    t0 = now();
    kc_obj_vec v = {0};
    for (int k = 0; k < 20000; k++) {
      kc_obj_vec_clear(&v);
      kc_store_by_index(s, "node", kc_str_c("node-42"), &v);
    }
    printf("%-8zu %-44s %10.2f %8zu\n", n, "by_index us: node=node-42", (now() - t0) / 20000 * 1e6, v.n);
    kc_obj_vec_release(&v);
    t0 = now();
    kc_obj *g = NULL;
    for (int k = 0; k < 200000; k++) {
      char name[32];
      snprintf(name, sizeof name, "pod-%zu", (size_t)k * 7919 % n);
      g = kc_store_get(s, kc_str_c("ns-0"), kc_str_c(name));
      kc_obj_unref(g);
    }
    printf("%-8zu %-44s %10.3f %8s\n", n, "get us", (now() - t0) / 200000 * 1e6, "");
    t0 = now();
    if (kc_store_replace(s, objs, n, NULL, NULL) != 0) return 1;
    printf("%-8zu %-44s %10.0f %8s\n", n, "relist replace (all modified), objects/s", n / (now() - t0), "");
    t0 = now();
    if (kc_store_replace(s, objs, n, NULL, NULL) != 0) return 1;
    printf("%-8zu %-44s %10.0f %8s\n", n, "relist replace (all unchanged), objects/s", n / (now() - t0), "");
    kc_store_free(s);
    for (size_t i = 0; i < n; i++) {
      kc_obj_unref(objs[i]);
      kc_obj_unref(objs2[i]);
    }
    free(objs);
    free(objs2);
  }
  podgen_free(&pg);
  return 0;
}
