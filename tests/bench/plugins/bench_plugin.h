/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the benchmark plugins in tests/bench/plugins/, which
 * tests/bench/bench_controller.py builds like out-of-tree plugins:
 *   cc -shared -fPIC -fvisibility=hidden -Iinclude -o X.so X.c
 * Header-only (each plugin is a single translation unit); every function is
 * static. Threads: both helpers are pure and may run on any thread.
 */
#ifndef KCTRLD_BENCH_PLUGIN_H
#define KCTRLD_BENCH_PLUGIN_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kctrld/plugin.h"

/* Splits "namespace/name" into a kctrld_ref for a core v1 object of `kind`
 * (a static string such as "ConfigMap" or "Pod"). ns and name are caller
 * buffers of 254 bytes; returns 0, or -1 when the key does not fit. */
static inline int bench_core_ref(const char *key, const char *kind, char ns[254], char name[254],
                                 kctrld_ref *ref) {
  const char *slash = strchr(key, '/');
  size_t nslen = slash ? (size_t)(slash - key) : 0;
  const char *nm = slash ? slash + 1 : key;
  if (nslen >= 254 || strlen(nm) >= 254) return -1;
  memcpy(ns, key, nslen);
  ns[nslen] = '\0';
  strcpy(name, nm);
  ref->api_version = "v1";
  ref->kind = kind;
  ref->namespace_ = ns;
  ref->name = name;
  return 0;
}

/* settings.kind of a benchmark plugin: "Pod" or "ConfigMap" (the default).
 * Returns the static kind string, or NULL for any other value. */
static inline const char *bench_kind(const struct kctrld_host_api *h, const kctrld_settings *s) {
  const char *kind = NULL;
  if (h->settings_string(s, "kind", &kind) != 0) return "ConfigMap";
  if (strcmp(kind, "Pod") == 0) return "Pod";
  if (strcmp(kind, "ConfigMap") == 0) return "ConfigMap";
  return NULL;
}

/* Nanoseconds on the given clock. */
static inline int64_t bench_now_ns(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
