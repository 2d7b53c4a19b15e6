/* SPDX-License-Identifier: Apache-2.0 */
/* cli: kctrld's command line as data, and what is derived from it.
 *
 * Owns the tables of every command (running the daemon, check-config, rbac,
 * version, help: synopsis, description, example) and of every flag (name,
 * argument, default, meaning); the help texts rendered from them (`kctrld
 * --help`, `kctrld COMMAND --help`); flag parsing over them (getopt_long,
 * with a "did you mean" for a misspelt flag or command, the suggestion of
 * yamltree.h kc_yaml_closest); and the version report (`kctrld version`).
 * docs/operations.md's flag table and kctrld(8) are held equal to `kctrld
 * --help` by tests/integration/test_flags.py: a flag is added here, once,
 * then to that table.
 *
 * Subcommands are the primary style (`kctrld check-config FILE`, `kctrld
 * version`, `kctrld rbac ...`), with `--check-config FILE`, `--version` and
 * `--help`/`-h` kept as flags of the daemon's command line that mean the
 * same.
 *
 * Threads: the main thread only (getopt keeps global state).
 */
#ifndef KC_CLI_H
#define KC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* What kc_cli_next returns for each flag. */
enum kc_cli_flag_id {
  KC_CLI_HELP = 1,
  /* running the daemon */
  KC_CLI_CONFIG,
  KC_CLI_KUBECONFIG,
  KC_CLI_CONTEXT,
  KC_CLI_METRICS_BIND,
  KC_CLI_PROBE_BIND,
  KC_CLI_AUTH_READINESS,
  KC_CLI_METRICS_SECURE,
  KC_CLI_METRICS_CERT_PATH,
  KC_CLI_METRICS_CERT_NAME,
  KC_CLI_METRICS_CERT_KEY,
  KC_CLI_LEADER_ELECT,
  KC_CLI_IDENTITY,
  KC_CLI_LOG_LEVEL,
  KC_CLI_LOG_FORMAT,
  KC_CLI_FAIL_FAST,
  KC_CLI_DRY_RUN,
  KC_CLI_INSECURE_PERMS,
  KC_CLI_STATE_DIRECTORY,
  KC_CLI_CHECK_CONFIG, /* alias of `kctrld check-config FILE` */
  KC_CLI_ONLINE,       /* check-config: ask the API server too */
  KC_CLI_VERSION,      /* alias of `kctrld version` */
  /* kctrld rbac */
  KC_CLI_RBAC_NAMESPACE,
  KC_CLI_RBAC_CREATE_NAMESPACE,
  KC_CLI_RBAC_NAME,
  KC_CLI_RBAC_PLUGIN_DIR,
  /* running the daemon, and kctrld ctl */
  KC_CLI_ADMIN_SOCKET,
  KC_CLI_ADMIN_SOCKET_GROUP,
  KC_CLI_CTL_SOCKET,
  KC_CLI_CTL_OUTPUT,
  KC_CLI_CTL_STATE,
};

/* kc_cli_next's answers besides a flag id. */
#define KC_CLI_END 0    /* no more flags: positional arguments start at optind */
#define KC_CLI_USAGE -1 /* a usage error, already printed on stderr: exit 2 */

typedef struct kc_cli_flag {
  const char *name;  /* long name without the dashes */
  char short_name;   /* one-letter alias or 0 */
  int has_arg;       /* getopt's no_argument, required_argument, optional_argument */
  const char *arg;   /* the argument as shown after the name (" FILE", "[=true|false]"), "" none */
  const char *def;   /* the default as shown, "" none */
  const char *help;  /* the meaning: plain text; "..." names a section of kctrld(8) */
  int id;            /* enum kc_cli_flag_id */
  bool alias;        /* belongs to a command's flag form: not in the daemon's synopsis line */
} kc_cli_flag;

typedef struct kc_cli_command {
  const char *name;        /* "check-config"; NULL: running the daemon */
  const char *args;        /* positional arguments as shown ("FILE"), "" none */
  size_t min_args, max_args;
  const char *summary;     /* one line, in `kctrld --help`'s list of commands */
  const char *alias;       /* the flag form ("--check-config FILE"; its flags follow), NULL none */
  const char *description; /* paragraphs, plain text, wrapped when printed */
  const char *example;     /* command lines, '\n'-separated */
  const kc_cli_flag *flags;
  size_t nflags;
} kc_cli_command;

/* Every command, the daemon's first; and lookup by name (NULL: none).
 * The `kctrld ctl` commands are named "ctl queues", "ctl keys", ...:
 * kc_cli_ctl_find takes the word after ctl. */
extern const kc_cli_command kc_cli_commands[];
extern const size_t kc_cli_ncommands;
const kc_cli_command *kc_cli_command_find(const char *name);
const kc_cli_command *kc_cli_ctl_find(const char *word);
/* `kctrld ctl` without a known command: the list of them on out. */
void kc_cli_ctl_list(FILE *out);

/* Where `kctrld ctl` looks for the socket without --socket. */
#define KC_CLI_CTL_DEFAULT_SOCKET "/run/kctrld/admin.sock"

/* The next flag of argv for cmd (argv[0] is the program or the command
 * name; call with a fresh argv sets optind to 1 first): its id with
 * *arg = its argument (NULL without one), KC_CLI_END, or KC_CLI_USAGE after
 * printing "kctrld: unknown flag --confg (did you mean --config?)" (or a
 * missing argument) and the command's usage on stderr. */
int kc_cli_next(const kc_cli_command *cmd, int argc, char **argv, const char **arg);

/* The positional arguments argv[optind..argc) against cmd's count: 0, or
 * KC_CLI_USAGE after printing the error (an unknown command word gets a
 * "did you mean") and the usage on stderr. */
int kc_cli_check_args(const kc_cli_command *cmd, int argc, char **argv);

/* A usage error of cmd: "kctrld: MESSAGE", its usage lines and where the
 * help is, on stderr. Returns KC_CLI_USAGE. */
int kc_cli_usage_error(const kc_cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* `kctrld --help` (cmd = the daemon: synopsis, commands, every flag) or
 * `kctrld COMMAND --help` (synopsis, description, flags, example). */
void kc_cli_help(FILE *out, const kc_cli_command *cmd);

/* `kctrld version`: version, git commit, plugin ABI and build signature,
 * hook protocol, and the versions of the libraries loaded (their runtime
 * version functions, not the headers built against). Context: after
 * kc_http_global_init or before any other libcurl use (curl_version_info). */
void kc_cli_version(FILE *out);

#endif
