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

#include <stddef.h>

int sim_seed_path(const char *path, char **err);
/* resource: "pods", "configmaps", "deployments.apps", ...; n objects. */
int sim_generate(const char *resource, size_t n, char **err);
/* Where fixture templates are read from (set from argv[0] / --fixtures). */
void sim_set_fixture_dir(const char *dir);
int sim_write_kubeconfig(const char *path, const char *url, const char *token,
                         const char *ca_file, const char *client_cert, const char *client_key);

#endif
