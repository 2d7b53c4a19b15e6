/* SPDX-License-Identifier: Apache-2.0 */
/* configcheck: what `kctrld --check-config` checks beyond the schema of a
 * loaded config (config.h), without a cluster and without running plugin
 * code:
 *  - every kind of a built-in Kubernetes group/version (v1, apps/v1, ...)
 *    is one that group/version serves ("kind ConfigMaps is not served by v1
 *    (did you mean ConfigMap?)", discovery.h kc_discovery_builtin_check);
 *    kinds of other groups (CRDs) only the server can answer for.
 * Each problem is one line "file:line:col: message" at the offending key.
 *
 * Context: any thread (the plugin checks load code: the main thread of
 * --check-config). Errors: 0 when everything checked out, -EINVAL with the
 * lines in err ('\n'-separated, up to KC_CONFIG_MAX_ERRORS), -ENOMEM.
 * Ownership: cfg is borrowed.
 */
#ifndef KC_CONFIGCHECK_H
#define KC_CONFIGCHECK_H

#include <stddef.h>

#include "config.h"

int kc_configcheck_run(const kc_config *cfg, char *err, size_t errlen);

#endif
