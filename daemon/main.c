/* SPDX-License-Identifier: Apache-2.0 */
/* main: command line of kctrld. Main (loop) thread only.
 *
 *   kctrld --config FILE [--kubeconfig FILE] [--context NAME] [--metrics-bind-address HOST:PORT]
 *          [--identity NAME] [--log-level LEVEL] [--fail-fast]
 *   kctrld --check-config FILE
 *   kctrld rbac --config FILE [--namespace NS] [--name NAME] [--plugin-dir DIR]
 *   kctrld --version
 *
 * Flags override the file, as controller-runtime's do. --fail-fast: exit 1
 * when a controller's plugin does not load or init at start-up, instead of
 * running the others and retrying it (daemon.h).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "configcheck.h"
#include "daemon.h"
#include "fileperm.h"
#include "http.h"
#include "log.h"
#include "plugin_host.h"
#include "rbac.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: kctrld --config FILE [--kubeconfig FILE] [--context NAME]\n"
          "              [--metrics-bind-address HOST:PORT]\n"
          "              [--identity NAME] [--log-level error|warn|info|debug] [--fail-fast]\n"
          "              [--allow-insecure-permissions]\n"
          "       kctrld --check-config FILE\n"
          "       kctrld rbac --config FILE [--namespace NS] [--name NAME] [--plugin-dir DIR]\n"
          "       kctrld --version\n");
}

int main(int argc, char **argv) {
  /* `kctrld rbac ...`: a subcommand with its own flags (rbac.h). */
  if (argc > 1 && strcmp(argv[1], "rbac") == 0) return kc_rbac_main(argc - 1, argv + 1);
  enum { OPT_CONFIG = 1, OPT_CHECK, OPT_KUBECONFIG, OPT_METRICS, OPT_IDENTITY, OPT_VERSION,
         OPT_LOGLEVEL, OPT_FAIL_FAST, OPT_HELP, OPT_INSECURE_PERMS, OPT_CONTEXT };
  static const struct option opts[] = {
      {"config", required_argument, NULL, OPT_CONFIG},
      {"check-config", required_argument, NULL, OPT_CHECK},
      {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
      {"context", required_argument, NULL, OPT_CONTEXT},
      {"metrics-bind-address", required_argument, NULL, OPT_METRICS},
      {"identity", required_argument, NULL, OPT_IDENTITY},
      {"log-level", required_argument, NULL, OPT_LOGLEVEL},
      {"fail-fast", no_argument, NULL, OPT_FAIL_FAST},
      {"version", no_argument, NULL, OPT_VERSION},
      {"help", no_argument, NULL, OPT_HELP},
      {"allow-insecure-permissions", no_argument, NULL, OPT_INSECURE_PERMS},
      {NULL, 0, NULL, 0},
  };
  kc_daemon_options o = {0};
  const char *check = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case OPT_CONFIG: o.config_path = optarg; break;
    case OPT_CHECK: check = optarg; break;
    case OPT_KUBECONFIG: o.kubeconfig = optarg; break;
    case OPT_CONTEXT: o.context = optarg; break;
    case OPT_METRICS: o.metrics_bind = optarg; break;
    case OPT_IDENTITY: o.identity = optarg; break;
    case OPT_LOGLEVEL: {
      enum kc_log_level lvl;
      if (kc_log_parse_level(optarg, &lvl) < 0) {
        fprintf(stderr, "kctrld: --log-level: unknown level \"%s\"\n", optarg);
        return 2;
      }
      o.log_level = lvl;
      break;
    }
    case OPT_FAIL_FAST: o.fail_fast = true; break;
    case OPT_VERSION: printf("kctrld %s\n", KCTRLD_VERSION); return 0;
    case OPT_HELP: usage(stdout); return 0;
    case OPT_INSECURE_PERMS: kc_fileperm_set_allow_insecure(true); break;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "kctrld: unexpected argument \"%s\"\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (check) {
    char err[4096];
    kc_config *cfg = NULL;
    if (kc_config_load_file(check, &cfg, err, sizeof err) < 0) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
    /* Beyond the schema: built-in kinds and plugin files, loaded without
     * running their init (configcheck.h); only warnings are logged. */
    kc_log_set_level(KC_LOG_WARN);
    int crc = kc_configcheck_run(cfg, err, sizeof err);
    kc_plugin_host_unload_all();
    if (crc < 0) {
      fprintf(stderr, "%s\n", err);
      kc_config_free(cfg);
      return 1;
    }
    kc_rbac_check_plugins(cfg, stderr); /* warnings only: the exit code stays 0 */
    printf("%s: OK (%zu informers, %zu controllers)\n", check, cfg->ninformers, cfg->ncontrollers);
    kc_config_free(cfg);
    return 0;
  }
  if (!o.config_path) {
    usage(stderr);
    return 2;
  }
  /* A peer that resets a socket (a scraper, the API server) must cost an
   * EPIPE on that connection: libuv's writes and OpenSSL's do not pass
   * MSG_NOSIGNAL, and libcurl ignores SIGPIPE only without CURLOPT_NOSIGNAL. */
  if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
    fprintf(stderr, "kctrld: cannot ignore SIGPIPE: %s\n", strerror(errno));
    return 1;
  }
  if (kc_http_global_init() < 0) {
    fprintf(stderr, "kctrld: cannot initialise libcurl\n");
    return 1;
  }
  return kc_daemon_run(&o);
}
