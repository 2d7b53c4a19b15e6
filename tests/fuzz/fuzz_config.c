/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/config/config.c: parse arbitrary bytes as a kctrld
 * config; when it is valid, diff it against itself (must be empty) and
 * against a fixed valid config, and render the summary. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char base_text[] =
    "informers:\n"
    "  - {apiVersion: v1, kind: Pod, labelSelector: app=web, indexes: {byNode: spec.nodeName}}\n"
    "controllers:\n"
    "  - name: podset\n"
    "    plugin: /p/podset.so\n"
    "    for: {apiVersion: demo.kctrld.io/v1, kind: PodSet}\n"
    "    owns: [{apiVersion: v1, kind: Pod}]\n"
    "    settings: {a: 1}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static kc_config *base;
  char err[4096];
  if (!base &&
      kc_config_load_buffer("base.yaml", "/", base_text, sizeof base_text - 1, &base, err,
                            sizeof err) != 0)
    abort();
  kc_config *cfg = NULL;
  int rc = kc_config_load_buffer("fuzz.yaml", "/etc/kctrld", (const char *)data, size, &cfg, err,
                                 sizeof err);
  if (rc != 0) {
    if (cfg) abort();
    if (rc == -EINVAL && err[0] == '\0') abort(); /* every rejection says why */
    return 0;
  }
  /* Every binding points into the informer list. */
  for (size_t i = 0; i < cfg->ncontrollers; i++) {
    const kc_controller_spec *c = &cfg->controllers[i];
    if (c->for_.informer >= cfg->ninformers) abort();
    for (size_t k = 0; k < c->nowns; k++)
      if (c->owns[k].ref.informer >= cfg->ninformers) abort();
    for (size_t k = 0; k < c->nwatches; k++)
      if (c->watches[k].ref.informer >= cfg->ninformers) abort();
  }
  kc_config_diff *d = NULL;
  if (kc_config_compare(cfg, cfg, &d) == 0) {
    if (!kc_config_diff_empty(d)) abort();
    kc_config_diff_free(d);
  }
  if (kc_config_compare(base, cfg, &d) == 0) {
    char sum[256];
    (void)kc_config_diff_summary(d, base, cfg, sum, sizeof sum);
    kc_config_diff_free(d);
  }
  kc_config_free(cfg);
  return 0;
}
