/* SPDX-License-Identifier: Apache-2.0 */
/* rbac: the least-privilege RBAC of one config, as YAML (`kctrld rbac`,
 * docs/deploy.md "RBAC"), and the --check-config warning for plugins that
 * declare no permissions.
 *
 * Owns: the offline kind -> resource mapping (a table of built-in kinds and
 * whether they are namespaced, then the lower-case plural rule for any other
 * kind: the daemon resolves resources through discovery (discovery.h), which
 * needs a server; this runs without one), the rule set built from a config,
 * and its rendering. What goes in:
 *   - every informer: get, list, watch on its resource (the reflector LISTs
 *     and WATCHes; its history check GETs single objects and the consistency
 *     check LISTs metadata, reflector.c, consistency.c);
 *   - leader election on: create on leases, get and update on the Lease by
 *     name, in a Role of the lease namespace (leader.c);
 *   - each controller's plugin declarations (kctrld_plugin.permissions,
 *     kctrld/plugin.h), KCTRLD_RESOURCE_FOR resolved to its `for:` kind;
 *   - what the daemon writes for a controller itself: patch on its `for`
 *     resource with a `finalizer:`; with `hook.style: desired`, update on
 *     its status and create, patch, delete on each `owns` resource;
 *     Events only where a plugin declares them;
 *   - metrics.secure: create on tokenreviews and subjectaccessreviews in the
 *     ClusterRole NAME-metrics-auth (ops/metricsauth.h), and the unbound
 *     ClusterRole NAME-metrics-reader (get on the non-resource URL
 *     /metrics) for the operator to bind to the scraper;
 *   - the ServiceAccount and one binding per role.
 * Discovery (/api, /apis/G/V) needs no rule: Kubernetes grants it to every
 * authenticated user (the system:discovery ClusterRole).
 * Scope: Roles per namespace when every informer lists `namespaces:` and
 * every resource involved is namespaced; otherwise one ClusterRole. The
 * output is sorted (roles by namespace, rules by group/resource/name, verbs
 * alphabetically), so it can be compared with a checked-in copy.
 *
 * Threads: any; nothing is shared (loading plugins, in kc_rbac_main and
 * kc_rbac_check_plugins, is the loop thread's job: call them from main()).
 * Errors: 0 or a negative errno; -EINVAL with a message naming the
 * controller and plugin for a bad declaration; plugin load errors as
 * kc_plugin_load.
 * Ownership: the output buffer is the caller's; permissions returned by the
 * lookup callback are borrowed for the call.
 */
#ifndef KC_RBAC_H
#define KC_RBAC_H

#include <stdbool.h>
#include <stdio.h>

#include "base/buf.h"
#include "cli.h"
#include "config/config.h"
#include "kctrld/plugin.h"

#define KC_RBAC_DEFAULT_NAMESPACE "kctrld"
#define KC_RBAC_DEFAULT_NAME "kctrld"

/* The permissions of controller c's plugin: 0 and *out (NULL = undeclared),
 * or a negative errno with a message in err. */
typedef int (*kc_rbac_perms_fn)(void *ud, const kc_controller_spec *c,
                                const kctrld_permission **out, char *err, size_t errlen);

typedef struct kc_rbac_options {
  const char *namespace_;      /* of the ServiceAccount; NULL: KC_RBAC_DEFAULT_NAMESPACE */
  const char *name;            /* ServiceAccount, roles, bindings; NULL: KC_RBAC_DEFAULT_NAME */
  bool create_namespace;       /* also a Namespace object for namespace_, first */
  kc_rbac_perms_fn perms;      /* NULL: nothing declared by anyone */
  void *perms_ud;
} kc_rbac_options;

/* Appends the YAML (documents separated by ---) to out. Undeclared plugins
 * are named in a comment at the top and, when warn is not NULL, in one line
 * each on warn. Returns 0, -EINVAL (bad name/namespace option, bad
 * declaration: message in err), -ENOMEM, or the perms callback's error. */
int kc_rbac_generate(const kc_config *cfg, const kc_rbac_options *o, kc_buf *out, FILE *warn,
                     char *err, size_t errlen);

/* kind -> resource offline: true and the plural (and whether namespaced)
 * from the built-in table, false and the lower-case plural rule's answer
 * (namespaced assumed) for other kinds. Exposed for tests. */
bool kc_rbac_resource_of(const char *group, const char *kind, char *plural, size_t cap,
                         bool *namespaced);

/* The name `kctrld rbac` gives a config's ServiceAccount, roles and
 * bindings without --name, so that two configs in one cluster do not share
 * their roles: the config file's base name without .yaml/.yml/.json, lower
 * case, every other character than a-z, 0-9 and '-' made '-', prefixed
 * "kctrld-" unless it is "kctrld" or starts with "kctrld-" (teams.yaml ->
 * kctrld-teams, kctrld.yaml -> kctrld); KC_RBAC_DEFAULT_NAME when nothing
 * is left. Writes at most cap bytes (cap >= 64) into out. */
void kc_rbac_default_name(const char *config_path, char *out, size_t cap);

/* `kctrld rbac --config FILE [--namespace NS] [--create-namespace] [--name NAME]
 * [--plugin-dir DIR]`
 * with cmd = that command's table (cli.h): argv[0] is "rbac", optind 1.
 * Prints the YAML on stdout; returns the exit code (0, 1 on errors, 2 on
 * usage errors). */
int kc_rbac_main(const kc_cli_command *cmd, int argc, char **argv);

/* --check-config: loads each controller's plugin and writes one warning
 * line on out for each plugin that declares no permissions (or cannot be
 * loaded here). Returns the number of warnings. */
int kc_rbac_check_plugins(const kc_config *cfg, FILE *out);

#endif
