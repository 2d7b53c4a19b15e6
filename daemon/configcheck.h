/* SPDX-License-Identifier: Apache-2.0 */
/* configcheck: what `kctrld --check-config` checks beyond the schema of a
 * loaded config (config.h), without a cluster and without running plugin
 * code:
 *  - every kind of a built-in Kubernetes group/version (v1, apps/v1, ...)
 *    is one that group/version serves ("kind ConfigMaps is not served by v1
 *    (did you mean ConfigMap?)", discovery.h kc_discovery_builtin_check);
 *    kinds of other groups (CRDs) only the server can answer for;
 *  - the field selector of a v1 Pod or Node informer names only fields the
 *    API server selects on (selector.h kc_field_selector_check); other
 *    kinds' selectable fields are the server's to say (--online);
 *  - every controller's plugin file loads: it exists, passes the file
 *    rules, dlopens, exports kctrld_plugin_entry and its table has this
 *    daemon's ABI (kc_plugin_load: its entry point runs, its init does
 *    not), reported at the controller's `plugin:`.
 * Each problem is one line "file:line:col: message" at the offending key.
 *
 * kc_configcheck_credentials: the credentials the daemon would use resolve
 * (kubeconfig.h's order: --kubeconfig, KUBECONFIG, the config's
 * `kubeconfig:`, in-cluster, $HOME/.kube/config): the file exists and
 * parses, the context (--context or current-context) exists with its
 * cluster and user, the user has a token, token file, client certificate or
 * exec plugin (unless the server is plain http://: a local proxy such as
 * `kubectl proxy` or a simulator, which needs none), the files they name
 * can be read and the exec program is there. When nothing names a kubeconfig and none of the others exists here,
 * the credentials are those of the place the daemon will run (a pod's
 * service account): not an error unless `required` (--online).
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

#include <stdbool.h>

#include "client/kubeconfig.h"
#include "config/config.h"

int kc_configcheck_run(const kc_config *cfg, char *err, size_t errlen);

/* Returns 0 with *out the resolved credentials (the caller frees them with
 * kc_kube_creds_free), or NULL when none are found here and !required;
 * -EINVAL with one line per problem in err (one at the config's
 * `kubeconfig:` when that file is the one at fault); -ENOMEM.
 * flag_kubeconfig, context: --kubeconfig and --context (NULL: none).
 * Context: any thread (reads the environment and files). */
int kc_configcheck_credentials(const kc_config *cfg, const char *flag_kubeconfig,
                               const char *context, bool required, kc_kube_creds **out,
                               char *err, size_t errlen);

/* `kctrld --check-config FILE [--online]`: loads FILE, runs every check
 * above (and configonline.h's with online), prints every problem on
 * stderr and, when there is none, the credentials and "FILE: OK (...)" on
 * stdout. Returns the exit code: 0 or 1. flag_kubeconfig, context:
 * --kubeconfig and --context (NULL: none). Context: the main thread, before
 * anything else runs (it sets the log level and unloads the plugins it
 * loaded). */
int kc_configcheck_main(const char *path, const char *flag_kubeconfig, const char *context,
                        bool online);

#endif
