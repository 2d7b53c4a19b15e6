/* SPDX-License-Identifier: Apache-2.0 */
/* main: command line of kctrld. Main (loop) thread only.
 *
 *   kctrld --config FILE [--kubeconfig FILE] [--context NAME] [--metrics-bind-address HOST:PORT]
 *          [--health-probe-bind-address HOST:PORT] [--leader-elect[=true|false]]
 *          [--identity NAME] [--log-level LEVEL] [--log-format text|json] [--fail-fast]
 *   kctrld --check-config FILE [--online] [--kubeconfig FILE] [--context NAME]
 *   kctrld rbac --config FILE [--namespace NS] [--name NAME] [--plugin-dir DIR]
 *   kctrld --version
 *   kctrld --plugin-child   (hidden: a plugin child of `isolation: process`,
 *                            started by the daemon itself; isolate_child.h)
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

#include "config/config.h"
#include "configcheck.h"
#include "base/crashreport.h"
#include "daemon.h"
#include "base/fileperm.h"
#include "client/http.h"
#include "hooks/isolate_child.h"
#include "json/yamltree.h"
#include "base/log.h"
#include "base/memtrim.h"
#include "host/plugin_host.h"
#include "rbac.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: kctrld --config FILE [flags]\n"
          "       kctrld --check-config FILE [--online] [--kubeconfig FILE] [--context NAME]\n"
          "       kctrld rbac --config FILE [--namespace NS] [--name NAME] [--plugin-dir DIR]\n"
          "       kctrld --version | --help\n"
          "\n"
          "flags (they override the config file):\n"
          "  --config FILE                      the configuration (docs/config.md)\n"
          "  --check-config FILE                validate FILE and exit (0 valid, 1 not)\n"
          "  --online                           with --check-config: also ask the API server\n"
          "                                     (credentials, kinds, selectors)\n"
          "  --kubeconfig FILE                  kubeconfig; overrides kubeconfig: and $KUBECONFIG\n"
          "  --context NAME                     kubeconfig context instead of current-context\n"
          "  --metrics-bind-address HOST:PORT   /metrics (and the probes, see below);\n"
          "                                     default 127.0.0.1:8080, \"0\" disables\n"
          "  --health-probe-bind-address HOST:PORT\n"
          "                                     /livez, /readyz and /healthz on their own listener\n"
          "                                     (\"0\" disables); default: on the metrics one\n"
          "  --auth-failure-readiness-timeout DURATION\n"
          "                                     /readyz fails once every API request got\n"
          "                                     401/403 this long (default 30s, 0: never);\n"
          "                                     overrides authFailureReadinessTimeout\n"
          "  --leader-elect[=true|false]        leader election on or off; overrides\n"
          "                                     leaderElection.enabled\n"
          "  --identity NAME                    leader election holder identity\n"
          "  --log-level error|warn|info|debug  most verbose level logged (default info)\n"
          "  --log-format text|json             log line format (default text)\n"
          "  --fail-fast                        exit 1 when a plugin fails to load or init\n"
          "                                     at start-up instead of retrying it\n"
          "  --allow-insecure-permissions       warn instead of refusing writable files\n"
          "  --version                          print the version and exit\n"
          "  --help                             print this help and exit\n");
}

/* --leader-elect[=BOOL]: *out 1 (on) or -1 (off), as kc_daemon_options
 * has it. Returns 0 or -EINVAL. */
static int parse_leader_elect(const char *arg, int *out) {
  if (!arg || strcmp(arg, "true") == 0 || strcmp(arg, "1") == 0) *out = 1;
  else if (strcmp(arg, "false") == 0 || strcmp(arg, "0") == 0) *out = -1;
  else return -EINVAL;
  return 0;
}

int main(int argc, char **argv) {
  /* Whether the heap's growth is ours to set while lists decode (memtrim.h). */
  kc_mem_init(getenv("GLIBC_TUNABLES"));
  /* Hidden: a plugin child of `isolation: process` (isolate_child.h). */
  if (argc == 2 && strcmp(argv[1], KC_ISOLATE_CHILD_FLAG) == 0) return kc_isolate_child_main();
  /* `kctrld rbac ...`: a subcommand with its own flags (rbac.h). */
  if (argc > 1 && strcmp(argv[1], "rbac") == 0) return kc_rbac_main(argc - 1, argv + 1);
  enum { OPT_CONFIG = 1, OPT_CHECK, OPT_KUBECONFIG, OPT_METRICS, OPT_IDENTITY, OPT_VERSION,
         OPT_LOGLEVEL, OPT_FAIL_FAST, OPT_HELP, OPT_INSECURE_PERMS,
         /* logging and operator flags */
         OPT_LOGFORMAT, OPT_LEADER_ELECT, OPT_PROBE_BIND, OPT_CONTEXT, OPT_ONLINE,
         OPT_AUTH_READINESS };
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
      /* logging and operator flags */
      {"log-format", required_argument, NULL, OPT_LOGFORMAT},
      {"leader-elect", optional_argument, NULL, OPT_LEADER_ELECT},
      {"health-probe-bind-address", required_argument, NULL, OPT_PROBE_BIND},
      {"online", no_argument, NULL, OPT_ONLINE},
      {"auth-failure-readiness-timeout", required_argument, NULL, OPT_AUTH_READINESS},
      {NULL, 0, NULL, 0},
  };
  kc_daemon_options o = {0};
  const char *check = NULL;
  bool online = false;
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
    /* logging and operator flags */
    case OPT_LOGFORMAT: {
      enum kc_log_format fmt;
      if (kc_log_parse_format(optarg, &fmt) < 0) {
        fprintf(stderr, "kctrld: --log-format: unknown format \"%s\" (want text or json)\n", optarg);
        return 2;
      }
      o.log_format = fmt;
      kc_log_set_format(fmt); /* from the first line on, config errors included */
      break;
    }
    case OPT_LEADER_ELECT:
      if (parse_leader_elect(optarg, &o.leader_elect) < 0) {
        fprintf(stderr, "kctrld: --leader-elect: expected true or false, got \"%s\"\n", optarg);
        return 2;
      }
      break;
    case OPT_PROBE_BIND: o.probe_bind = optarg; break;
    case OPT_ONLINE: online = true; break;
    case OPT_AUTH_READINESS: {
      int64_t ns;
      if (kc_yaml_parse_duration(optarg, &ns) < 0 || ns % 1000000 != 0 || ns / 1000000 > 86400000) {
        fprintf(stderr, "kctrld: --auth-failure-readiness-timeout: expected a duration such as 30s "
                        "(0 turns the check off), got \"%s\"\n", optarg);
        return 2;
      }
      o.auth_failure_readiness_ms = ns / 1000000;
      o.auth_failure_readiness_set = true;
      break;
    }
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "kctrld: unexpected argument \"%s\"\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (online && !check) {
    fprintf(stderr, "kctrld: --online goes with --check-config FILE\n");
    return 2;
  }
  if (check) return kc_configcheck_main(check, o.kubeconfig, o.context, online);
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
  /* A plugin that crashes a reconcile is named on stderr (crashreport.h). */
  int crash = kc_crash_install();
  if (crash == -ENOTSUP)
    kc_info("crashreport", "fatal-signal report off: this is an ASan build, whose own handler reports crashes");
  else if (crash < 0)
    kc_warn("crashreport", "cannot install the fatal-signal report: %s", strerror(-crash));
  if (kc_http_global_init() < 0) {
    fprintf(stderr, "kctrld: cannot initialise libcurl\n");
    return 1;
  }
  return kc_daemon_run(&o) < 0 ? 1 : 0;
}
