/* SPDX-License-Identifier: Apache-2.0 */
/* daemon: the running kctrld process: config, credentials, API client,
 * discovery, the decode pool, shared informers, controllers, the plugin host
 * environment, leader election, metrics and health (ops.h), signals and
 * SIGHUP reload.
 *
 * A controller whose plugin fails to load or to init costs only that
 * controller: see kc_daemon_options.fail_fast.
 *
 * Context: kc_daemon_run on the main thread (it runs the loop until
 * SIGTERM/SIGINT).
 * Errors: 0 or a negative errno.
 */
#ifndef KC_DAEMON_H
#define KC_DAEMON_H

#include <stdbool.h>
#include <stddef.h>

#include "client/apiclient.h"
#include "cache/informer.h"
#include "base/log.h"

typedef struct kc_daemon kc_daemon;

typedef struct kc_daemon_options {
  const char *config_path;
  const char *kubeconfig;   /* --kubeconfig, overrides the file */
  const char *context;      /* --context, overrides current-context */
  const char *metrics_bind; /* --metrics-bind-address */
  /* --metrics-secure[=true|false]: 1 on, -1 off, 0 metrics.secure of the
   * file. --metrics-cert-path/-name/-key override certPath/certName/certKey. */
  int metrics_secure;
  const char *metrics_cert_path, *metrics_cert_name, *metrics_cert_key;
  /* --health-probe-bind-address: /healthz and /readyz on a listener of
   * their own ("0": none); NULL: on the metrics listener (ops.h). */
  const char *probe_bind;
  /* --admin-socket PATH|0: the `kctrld ctl` socket; NULL: adminSocket of
   * the file, else $RUNTIME_DIRECTORY/admin.sock (systemd), else none. */
  const char *admin_socket;
  /* --admin-socket-group NAME: overrides adminSocketGroup (a 0660 socket of
   * that group); NULL: the file's. */
  const char *admin_socket_group;
  /* --leader-elect[=true|false]: 1 on, -1 off, 0 leaderElection.enabled of
   * the file (the rest of leaderElection: applies either way). */
  int leader_elect;
  const char *identity;     /* --identity */
  const char *state_directory; /* --state-directory, overrides stateDirectory */
  enum kc_log_level log_level; /* 0 = from the config file */
  enum kc_log_format log_format; /* --log-format; 0 = from the config file */
  /* --fail-fast: a controller whose plugin does not load or whose init
   * fails at start-up makes kc_daemon_run return its error at once. Without it the
   * other controllers run and that one is retried with backoff (1 s
   * doubling to 5 min, +-10 % jitter), reported in /readyz, the log and
   * kctrld_controller_{ready,init_failures_total}. After start-up (reload)
   * failures are always retried. */
  bool fail_fast;
  /* --auth-failure-readiness-timeout (ms; 0: never), when set: overrides
   * authFailureReadinessTimeout of the file. */
  int64_t auth_failure_readiness_ms;
  bool auth_failure_readiness_set;
  /* --dry-run: every controller in dry-run mode, whatever the config's
   * dryRun keys say (host/dryrun.h). */
  bool dry_run;
} kc_daemon_options;

/* Runs until a termination signal. Returns 0 after a clean stop, or the
 * negative errno of what failed (start-up: the config, the credentials, a
 * listener, a --fail-fast controller; leader election); main.c maps it to
 * the exit code 1. */
int kc_daemon_run(const kc_daemon_options *opts);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Loaded configs still allocated, in this process (any thread): the running
 * one plus those replaced by a reload whose settings a still-running plugin
 * instance was created from. Bounded by the number of controllers, never by
 * the number of reloads. */
unsigned kc_daemon_configs_alive(void);

#endif
