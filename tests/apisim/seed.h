/* SPDX-License-Identifier: Apache-2.0 */
/* seed: loading seed files (JSON object, List, multi-document YAML, or a
 * directory of them), --generate load objects shaped like the shared
 * fixtures, and the kubeconfig written by --kubeconfig-out.
 *
 * Threads: seeds and kubeconfig at startup; sim_generate also from the
 * control endpoint (any thread; the store locks itself).
 * Errors: 0 or a negative errno; *err (malloc'd) describes the problem.
 */
#ifndef APISIM_SEED_H
#define APISIM_SEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

int sim_seed_path(const char *path, char **err);
/* resource: "pods", "configmaps", "deployments.apps", ...; n objects. */
int sim_generate(const char *resource, size_t n, char **err);
/* Replaces the store with another history behind the same port (the
 * /_apisim/reseed control, docs/apisim.md), atomically for every client:
 * every watch ends first (cleanly, or with a broken connection when
 * `reset`), the event history is dropped and the counter starts over at
 * start_rv. Same cluster (new_cluster false): every object is created
 * again with its uid (an etcd restore), Namespaces first, in key order or
 * shuffled with the seed `shuffle`. New cluster: only fresh default
 * Namespaces (a new kube-system uid). Then `items` (a JSON array, borrowed;
 * may be NULL). end_rv (0: none): the counter is moved up to it; an error
 * when the store passed it. Objects that cannot be created are skipped,
 * the first error is returned. Any thread. */
struct sim_reseed {
  bool new_cluster;
  uint64_t shuffle;
  const jv *items;
  uint64_t start_rv, end_rv;
  bool reset;
};
struct sim_reseed_result {
  uint64_t rv;
  size_t objects;
  char kube_system_uid[64];
};
int sim_reseed(const struct sim_reseed *o, struct sim_reseed_result *out, char **err);
/* Where fixture templates are read from (set from argv[0] / --fixtures). */
void sim_set_fixture_dir(const char *dir);
/* Writes a kubeconfig for url: token, ca_pem (the CA certificate's PEM
 * text, or NULL) and the client certificate and key files, each when set. */
int sim_write_kubeconfig(const char *path, const char *url, const char *token,
                         const char *ca_pem, const char *client_cert, const char *client_key);

#endif
