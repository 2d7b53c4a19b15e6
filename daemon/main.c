/* SPDX-License-Identifier: Apache-2.0 */
/* main: kctrld's entry point: picks the command (cli.h has the tables,
 * the help and the flag parsing) and runs it. Main (loop) thread only.
 *
 *   kctrld --config FILE [flags]            run the daemon (daemon.h)
 *   kctrld check-config FILE                configcheck.h; alias --check-config FILE
 *   kctrld rbac --config FILE [...]         rbac.h
 *   kctrld ctl COMMAND [...]                ctl.h: ask the running daemon
 *   kctrld version                          alias --version
 *   kctrld help [COMMAND]                   alias --help, -h; also COMMAND --help
 *   kctrld --plugin-child                   hidden: a plugin child of `isolation:
 *                                           process`, started by the daemon itself
 *                                           (isolate_child.h)
 *
 * Flags override the file, as controller-runtime's do.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "configcheck.h"
#include "ctl.h"
#include "base/crashreport.h"
#include "daemon.h"
#include "base/fileperm.h"
#include "client/http.h"
#include "hooks/isolate_child.h"
#include "json/yamltree.h"
#include "base/log.h"
#include "base/memtrim.h"
#include "rbac.h"

/* --leader-elect[=BOOL], --metrics-secure[=BOOL]: *out 1 (on) or -1
 * (off), as kc_daemon_options has them. Returns 0 or -EINVAL. */
static int parse_bool_flag(const char *arg, int *out) {
  if (!arg || strcmp(arg, "true") == 0 || strcmp(arg, "1") == 0) *out = 1;
  else if (strcmp(arg, "false") == 0 || strcmp(arg, "0") == 0) *out = -1;
  else return -EINVAL;
  return 0;
}

/* `kctrld check-config [flags] FILE` (configcheck.h does the work). */
static int check_config_main(const kc_cli_command *cmd, int argc, char **argv) {
  const char *arg, *kubeconfig = NULL, *context = NULL;
  bool online = false;
  int id;
  while ((id = kc_cli_next(cmd, argc, argv, &arg)) > KC_CLI_END) {
    switch (id) {
    case KC_CLI_ONLINE: online = true; break;
    case KC_CLI_KUBECONFIG: kubeconfig = arg; break;
    case KC_CLI_CONTEXT: context = arg; break;
    case KC_CLI_INSECURE_PERMS: kc_fileperm_set_allow_insecure(true); break;
    case KC_CLI_HELP: kc_cli_help(stdout, cmd); return 0;
    default: break;
    }
  }
  if (id == KC_CLI_USAGE || kc_cli_check_args(cmd, argc, argv) < 0) return 2;
  return kc_configcheck_main(argv[optind], kubeconfig, context, online);
}

/* `kctrld version` and `kctrld help [COMMAND]`. */
static int info_main(const kc_cli_command *cmd, int argc, char **argv) {
  const char *arg;
  int id;
  while ((id = kc_cli_next(cmd, argc, argv, &arg)) > KC_CLI_END) {
    if (id == KC_CLI_HELP) {
      kc_cli_help(stdout, cmd);
      return 0;
    }
  }
  if (id == KC_CLI_USAGE || kc_cli_check_args(cmd, argc, argv) < 0) return 2;
  if (strcmp(cmd->name, "version") == 0) {
    kc_cli_version(stdout);
    return 0;
  }
  const kc_cli_command *of = &kc_cli_commands[0];
  if (optind < argc && !(of = kc_cli_command_find(argv[optind]))) {
    kc_cli_usage_error(cmd, "no command \"%s\"", argv[optind]);
    return 2;
  }
  kc_cli_help(stdout, of);
  return 0;
}

/* `kctrld --config FILE [flags]`: the flags into o. false to run the
 * daemon; true to exit with *exit_code instead (a usage error, or an alias:
 * --check-config, --version, --help). */
static bool daemon_flags(const kc_cli_command *cmd, int argc, char **argv, kc_daemon_options *o,
                        int *exit_code) {
  const char *arg, *check = NULL;
  bool online = false;
  int id;
  while ((id = kc_cli_next(cmd, argc, argv, &arg)) > KC_CLI_END) {
    switch (id) {
    case KC_CLI_CONFIG: o->config_path = arg; break;
    case KC_CLI_CHECK_CONFIG: check = arg; break;
    case KC_CLI_ONLINE: online = true; break;
    case KC_CLI_KUBECONFIG: o->kubeconfig = arg; break;
    case KC_CLI_CONTEXT: o->context = arg; break;
    case KC_CLI_METRICS_BIND: o->metrics_bind = arg; break;
    case KC_CLI_PROBE_BIND: o->probe_bind = arg; break;
    case KC_CLI_METRICS_SECURE:
      if (parse_bool_flag(arg, &o->metrics_secure) < 0) {
        kc_cli_usage_error(cmd, "--metrics-secure: expected true or false, got \"%s\"", arg);
        *exit_code = 2;
        return true;
      }
      break;
    case KC_CLI_METRICS_CERT_PATH: o->metrics_cert_path = arg; break;
    case KC_CLI_METRICS_CERT_NAME:
    case KC_CLI_METRICS_CERT_KEY:
      if (!*arg || strchr(arg, '/')) {
        kc_cli_usage_error(cmd, "--%s: expected a file name in --metrics-cert-path, got \"%s\"",
                           id == KC_CLI_METRICS_CERT_NAME ? "metrics-cert-name" : "metrics-cert-key", arg);
        *exit_code = 2;
        return true;
      }
      if (id == KC_CLI_METRICS_CERT_NAME) o->metrics_cert_name = arg;
      else o->metrics_cert_key = arg;
      break;
    case KC_CLI_ADMIN_SOCKET:
      if (strcmp(arg, "0") != 0 && (arg[0] != '/' || strlen(arg) > KC_CONFIG_SOCKET_PATH_MAX)) {
        kc_cli_usage_error(cmd, "--admin-socket: expected an absolute path of at most %d bytes or "
                                "\"0\" (off), got \"%s\"", KC_CONFIG_SOCKET_PATH_MAX, arg);
        *exit_code = 2;
        return true;
      }
      o->admin_socket = arg;
      break;
    case KC_CLI_ADMIN_SOCKET_GROUP:
      if (!kc_config_group_name_ok(arg)) {
        kc_cli_usage_error(cmd, "--admin-socket-group: expected a group name (1-%d characters, no "
                                "':', ',', '/', space or control character), got \"%s\"",
                           KC_CONFIG_GROUP_NAME_MAX, arg);
        *exit_code = 2;
        return true;
      }
      o->admin_socket_group = arg;
      break;
    case KC_CLI_AUTH_READINESS: {
      int64_t ns;
      if (kc_yaml_parse_duration(arg, &ns) < 0 || ns % 1000000 != 0 || ns / 1000000 > 86400000) {
        kc_cli_usage_error(cmd, "--auth-failure-readiness-timeout: expected a duration such as 30s "
                                "(0 turns the check off), got \"%s\"", arg);
        *exit_code = 2;
        return true;
      }
      o->auth_failure_readiness_ms = ns / 1000000;
      o->auth_failure_readiness_set = true;
      break;
    }
    case KC_CLI_IDENTITY: o->identity = arg; break;
    case KC_CLI_STATE_DIRECTORY: o->state_directory = arg; break;
    case KC_CLI_LOG_LEVEL: {
      enum kc_log_level lvl;
      if (kc_log_parse_level(arg, &lvl) < 0) {
        kc_cli_usage_error(cmd, "--log-level: unknown level \"%s\"", arg);
        *exit_code = 2;
        return true;
      }
      o->log_level = lvl;
      break;
    }
    case KC_CLI_LOG_FORMAT: {
      enum kc_log_format fmt;
      if (kc_log_parse_format(arg, &fmt) < 0) {
        kc_cli_usage_error(cmd, "--log-format: unknown format \"%s\" (want text or json)", arg);
        *exit_code = 2;
        return true;
      }
      o->log_format = fmt;
      kc_log_set_format(fmt); /* from the first line on, config errors included */
      break;
    }
    case KC_CLI_LEADER_ELECT:
      if (parse_bool_flag(arg, &o->leader_elect) < 0) {
        kc_cli_usage_error(cmd, "--leader-elect: expected true or false, got \"%s\"", arg);
        *exit_code = 2;
        return true;
      }
      break;
    case KC_CLI_FAIL_FAST: o->fail_fast = true; break;
    case KC_CLI_DRY_RUN: o->dry_run = true; break;
    case KC_CLI_INSECURE_PERMS: kc_fileperm_set_allow_insecure(true); break;
    case KC_CLI_VERSION: kc_cli_version(stdout); *exit_code = 0; return true;
    case KC_CLI_HELP: kc_cli_help(stdout, cmd); *exit_code = 0; return true;
    default: break;
    }
  }
  if (id == KC_CLI_USAGE || kc_cli_check_args(cmd, argc, argv) < 0) {
    *exit_code = 2;
    return true;
  }
  if (online && !check) {
    kc_cli_usage_error(cmd, "--online goes with --check-config FILE");
    *exit_code = 2;
    return true;
  }
  if (check) {
    *exit_code = kc_configcheck_main(check, o->kubeconfig, o->context, online);
    return true;
  }
  if (!o->config_path) {
    kc_cli_usage_error(cmd, "--config FILE is required");
    *exit_code = 2;
    return true;
  }
  return false;
}

int main(int argc, char **argv) {
  /* Whether the heap's growth is ours to set while lists decode (memtrim.h). */
  kc_mem_init(getenv("GLIBC_TUNABLES"));
  /* Hidden: a plugin child of `isolation: process` (isolate_child.h). */
  if (argc == 2 && strcmp(argv[1], KC_ISOLATE_CHILD_FLAG) == 0) return kc_isolate_child_main();
  /* A command word first: its flags follow (argv[0] becomes the command). */
  const kc_cli_command *cmd = argc > 1 ? kc_cli_command_find(argv[1]) : NULL;
  if (cmd) {
    optind = 1;
    if (strcmp(cmd->name, "rbac") == 0) return kc_rbac_main(cmd, argc - 1, argv + 1);
    if (strcmp(cmd->name, "ctl") == 0) return kc_ctl_main(argc - 1, argv + 1);
    if (strcmp(cmd->name, "check-config") == 0) return check_config_main(cmd, argc - 1, argv + 1);
    return info_main(cmd, argc - 1, argv + 1);
  }
  kc_daemon_options o = {0};
  int code = 0;
  if (daemon_flags(&kc_cli_commands[0], argc, argv, &o, &code)) return code;
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
