/* SPDX-License-Identifier: Apache-2.0 */
/* configcheck: what `kctrld --check-config` checks beyond the schema of a
 * loaded config (config.h), without a cluster and without running plugin
 * code:
 *  - every kind of a built-in Kubernetes group/version (v1, apps/v1, ...)
 *    is one that group/version serves ("kind ConfigMaps is not served by v1
 *    (did you mean ConfigMap?)", discovery.h kc_discovery_builtin_check);
 *    kinds of other groups (CRDs) only the server can answer for;
 *  - every controller's plugin file loads: it exists, passes the file
 *    rules, dlopens, exports kctrld_plugin_entry and its table has this
 *    daemon's ABI (kc_plugin_load: its entry point runs, its init does
 *    not), reported at the controller's `plugin:`.
 * Each problem is one line "file:line:col: message" at the offending key.
 *
 * Context: the loop thread of plugin_host.h (kc_plugin_load): the main
 * thread of --check-config, which calls kc_plugin_host_unload_all after.
 * Errors: 0 when everything checked out, -EINVAL with the lines in err
 * ('\n'-separated, up to KC_CONFIG_MAX_ERRORS).
 * Ownership: cfg is borrowed.
 */
#ifndef KC_CONFIGCHECK_H
#define KC_CONFIGCHECK_H

#include <stddef.h>

#include "config/config.h"

int kc_configcheck_run(const kc_config *cfg, char *err, size_t errlen);

#endif
