/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/host/ownwrites.c: the input's first line is a
 * method and a request path (as an isolated plugin child may send them), the
 * rest the server's answer; the write is recorded for a key, matched against
 * the sources, and the key checked and parked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/ownwrites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum kc_ownwrite_state observe(void *ud, const kc_ownwrite *w) {
  (void)ud;
  return w->rv % 2 ? KC_OWNWRITE_PENDING : KC_OWNWRITE_OBSERVED;
}

static void ready(void *ud, const char *key) { (void)ud, (void)key; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const kc_ownwrites_source src[] = {
      {"/api/v1", "configmaps", true},
      {"/api/v1", "namespaces", false},
      {"/apis/apps/v1", "deployments", true},
  };
  const char *nl = memchr(data, '\n', size);
  size_t head = nl ? (size_t)(nl - (const char *)data) : size;
  char *line = malloc(head + 1);
  kc_ownwrites *w = kc_ownwrites_new(src, 3, 4, 0);
  if (line && w) {
    memcpy(line, data, head);
    line[head] = '\0';
    char *path = strchr(line, ' ');
    if (path) *path++ = '\0';
    const char *body = nl ? nl + 1 : NULL;
    size_t len = nl ? size - head - 1 : 0;
    unsigned slot;
    char ns[64], name[64];
    (void)kc_ownwrites_match(w, path ? path : line, &slot, ns, sizeof ns, name, sizeof name);
    kc_ownwrites_record(w, "ns/a", line, path ? path : line, body, len);
    kc_ownwrites_record(w, "ns/b", "DELETE", path ? path : line, body, len);
    if (!kc_ownwrites_ready(w, "ns/a", observe, NULL)) (void)kc_ownwrites_park(w, "ns/a");
    kc_ownwrites_recheck(w, observe, NULL, ready, NULL);
  }
  kc_ownwrites_unref(w);
  free(line);
  return 0;
}
