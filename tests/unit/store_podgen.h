/* SPDX-License-Identifier: Apache-2.0 */
/* Test helper (header-only, static): builds realistic Pods for store tests
 * from the Pod fixtures in KC_FIXTURES_DIR (tests/fixtures, passed by the
 * Makefile), overriding identity, labels, owner references and
 * spec.nodeName. The rest of each Pod (containers, volumes, status,
 * managedFields) is the fixture's. Used by test_store.c,
 * test_store_threads.c and bench_store.c. */
#ifndef KC_TEST_STORE_PODGEN_H
#define KC_TEST_STORE_PODGEN_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "watch/decode.h"
#include "base/hash.h"

static const char *const podgen_files[] = {
    "pod-k8s-openapi-coredns.json",
    "pod-insights-operator-prometheus.json",
    "pod-k9s-sidecar.json",
};
#define PODGEN_NTMPL 3

typedef struct podgen {
  yajl_val tmpl[PODGEN_NTMPL];
  yajl_gen g;
} podgen;

typedef struct podspec {
  int tmpl; /* which fixture */
  const char *ns, *name, *uid, *rv, *node;
  const char *lk[8], *lv[8]; /* labels */
  int nlabels;
  const char *owners[3]; /* ownerReferences[].uid */
  int nowners;
} podspec;

static inline int podgen_init(podgen *pg) {
  memset(pg, 0, sizeof *pg);
  for (int i = 0; i < PODGEN_NTMPL; i++) {
    char path[4096], err[256];
    snprintf(path, sizeof path, KC_FIXTURES_DIR "/objects/%s", podgen_files[i]);
    FILE *f = fopen(path, "rb");
    if (!f) {
      fprintf(stderr, "podgen: cannot read fixture %s: %s\n", path, strerror(errno));
      return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
      fclose(f);
      free(buf);
      return -1;
    }
    fclose(f);
    buf[n] = '\0';
    pg->tmpl[i] = yajl_tree_parse(buf, err, sizeof err);
    free(buf);
    if (!pg->tmpl[i]) return -1;
  }
  pg->g = yajl_gen_alloc(NULL);
  return pg->g ? 0 : -1;
}

static inline void podgen_free(podgen *pg) {
  for (int i = 0; i < PODGEN_NTMPL; i++) yajl_tree_free(pg->tmpl[i]);
  if (pg->g) yajl_gen_free(pg->g);
}

static inline void pg_str(yajl_gen g, const char *s) {
  yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

static inline void pg_copy(yajl_gen g, yajl_val v) {
  if (YAJL_IS_STRING(v)) {
    pg_str(g, v->u.string);
  } else if (YAJL_IS_NUMBER(v)) {
    yajl_gen_number(g, v->u.number.r, strlen(v->u.number.r));
  } else if (YAJL_IS_TRUE(v)) {
    yajl_gen_bool(g, 1);
  } else if (YAJL_IS_FALSE(v)) {
    yajl_gen_bool(g, 0);
  } else if (YAJL_IS_OBJECT(v)) {
    yajl_gen_map_open(g);
    for (size_t i = 0; i < v->u.object.len; i++) {
      pg_str(g, v->u.object.keys[i]);
      pg_copy(g, v->u.object.values[i]);
    }
    yajl_gen_map_close(g);
  } else if (YAJL_IS_ARRAY(v)) {
    yajl_gen_array_open(g);
    for (size_t i = 0; i < v->u.array.len; i++) pg_copy(g, v->u.array.values[i]);
    yajl_gen_array_close(g);
  } else {
    yajl_gen_null(g);
  }
}

static inline bool pg_is(const char *k, const char *const *list) {
  for (; *list; list++)
    if (strcmp(k, *list) == 0) return true;
  return false;
}

/* Returns a new object (refs == 1) or NULL. */
static inline kc_obj *podgen_make(podgen *pg, const podspec *p) {
  static const char *const meta_over[] = {"name", "namespace", "uid", "resourceVersion", "labels",
                                          "ownerReferences", NULL};
  static const char *const spec_over[] = {"nodeName", NULL};
  yajl_val t = pg->tmpl[p->tmpl % PODGEN_NTMPL];
  yajl_gen g = pg->g;
  yajl_gen_clear(g);
  yajl_gen_reset(g, NULL);
  yajl_gen_map_open(g);
  for (size_t i = 0; i < t->u.object.len; i++) {
    const char *k = t->u.object.keys[i];
    yajl_val v = t->u.object.values[i];
    pg_str(g, k);
    if (strcmp(k, "metadata") == 0) {
      yajl_gen_map_open(g);
      for (size_t j = 0; j < v->u.object.len; j++) {
        if (pg_is(v->u.object.keys[j], meta_over)) continue;
        pg_str(g, v->u.object.keys[j]);
        pg_copy(g, v->u.object.values[j]);
      }
      pg_str(g, "name");
      pg_str(g, p->name);
      pg_str(g, "namespace");
      pg_str(g, p->ns);
      pg_str(g, "uid");
      pg_str(g, p->uid);
      pg_str(g, "resourceVersion");
      pg_str(g, p->rv);
      if (p->nlabels) {
        pg_str(g, "labels");
        yajl_gen_map_open(g);
        for (int j = 0; j < p->nlabels; j++) {
          pg_str(g, p->lk[j]);
          pg_str(g, p->lv[j]);
        }
        yajl_gen_map_close(g);
      }
      if (p->nowners) {
        pg_str(g, "ownerReferences");
        yajl_gen_array_open(g);
        for (int j = 0; j < p->nowners; j++) {
          yajl_gen_map_open(g);
          pg_str(g, "apiVersion");
          pg_str(g, "apps/v1");
          pg_str(g, "kind");
          pg_str(g, "ReplicaSet");
          pg_str(g, "name");
          pg_str(g, "rs");
          pg_str(g, "uid");
          pg_str(g, p->owners[j]);
          pg_str(g, "controller");
          yajl_gen_bool(g, j == 0);
          yajl_gen_map_close(g);
        }
        yajl_gen_array_close(g);
      }
      yajl_gen_map_close(g);
    } else if (strcmp(k, "spec") == 0) {
      yajl_gen_map_open(g);
      for (size_t j = 0; j < v->u.object.len; j++) {
        if (pg_is(v->u.object.keys[j], spec_over)) continue;
        pg_str(g, v->u.object.keys[j]);
        pg_copy(g, v->u.object.values[j]);
      }
      if (p->node) {
        pg_str(g, "nodeName");
        pg_str(g, p->node);
      }
      yajl_gen_map_close(g);
    } else {
      pg_copy(g, v);
    }
  }
  yajl_gen_map_close(g);
  const unsigned char *buf;
  size_t len;
  if (yajl_gen_get_buf(g, &buf, &len) != yajl_gen_status_ok) return NULL;
  char err[256];
  kc_obj *o = kc_obj_parse((const char *)buf, len, NULL, err, sizeof err);
  if (!o) fprintf(stderr, "podgen: %s\n", err);
  return o;
}

/* Deterministic test randomness: the daemon's generator (hash.h). */
static inline uint64_t pg_rand(uint64_t *st) { return kc_xorshift64s(st); }

#endif
