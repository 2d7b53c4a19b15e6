/* SPDX-License-Identifier: Apache-2.0 */
/* cli: see cli.h. */
#include "cli.h"

#include <curl/curl.h>
#include <getopt.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <string.h>
#include <uv.h>
#include <yajl/yajl_version.h>
#include <yaml.h>

#include "hooks/hook_proto.h"
#include "json/yamltree.h"
#include "kctrld/plugin.h"

/* Set by the Makefile from `git describe --always --dirty`; a build from a
 * tree without git history has none. */
#ifndef KCTRLD_GIT_COMMIT
#define KCTRLD_GIT_COMMIT "unknown"
#endif

#define WIDTH 79
#define HELP_FLAG                                                                     \
  {"help", 'h', no_argument, "", "", "print this help and exit 0.", KC_CLI_HELP, false}

/* ---- the tables -------------------------------------------------------------- */

static const kc_cli_flag daemon_flags[] = {
    {"config", 0, required_argument, " FILE", "required",
     "the configuration file (kctrld.yaml(5), docs/config.md).", KC_CLI_CONFIG, false},
    {"kubeconfig", 0, required_argument, " FILE", "",
     "kubeconfig; before $KUBECONFIG and kubeconfig: (see \"Credentials\").", KC_CLI_KUBECONFIG,
     false},
    {"context", 0, required_argument, " NAME", "current-context",
     "the kubeconfig context to use (see \"Credentials\").", KC_CLI_CONTEXT, false},
    {"metrics-bind-address", 0, required_argument, " HOST:PORT",
     "metrics.bindAddress, 127.0.0.1:8080 (:8443 with --metrics-secure)",
     "/metrics and /debug/informers, and the probes (/livez, /readyz, /healthz) unless "
     "--health-probe-bind-address is given; \"0\" disables.",
     KC_CLI_METRICS_BIND, false},
    {"metrics-secure", 0, optional_argument, "[=true|false]", "metrics.secure, off",
     "serve /metrics and /debug/* over TLS, only to bearer tokens the API server authenticates "
     "(TokenReview) and allows to get the path (SubjectAccessReview); 401 without a valid "
     "token, 403 without the right. The probes stay open (see \"Secure metrics\").",
     KC_CLI_METRICS_SECURE, false},
    {"metrics-cert-path", 0, required_argument, " DIR", "metrics.certPath; unset: self-signed",
     "directory of the metrics certificate and key, read again when they change; without it a "
     "self-signed certificate is made at start.",
     KC_CLI_METRICS_CERT_PATH, false},
    {"metrics-cert-name", 0, required_argument, " FILE", "metrics.certName, tls.crt",
     "the PEM certificate (chain) in --metrics-cert-path.", KC_CLI_METRICS_CERT_NAME, false},
    {"metrics-cert-key", 0, required_argument, " FILE", "metrics.certKey, tls.key",
     "its PEM private key in --metrics-cert-path.", KC_CLI_METRICS_CERT_KEY, false},
    {"health-probe-bind-address", 0, required_argument, " HOST:PORT",
     "unset: probes on the metrics listener",
     "/livez, /readyz and /healthz on a listener of their own (so probes and metrics bind "
     "differently); the metrics listener then answers 404 for them; \"0\" disables the probes.",
     KC_CLI_PROBE_BIND, false},
    {"auth-failure-readiness-timeout", 0, required_argument, " DURATION",
     "authFailureReadinessTimeout, 30s",
     "how long 401/403 (or no answer) on every API request may last before /readyz fails (see "
     "\"Credentials\"); 0 never.",
     KC_CLI_AUTH_READINESS, false},
    {"leader-elect", 0, optional_argument, "[=true|false]", "leaderElection.enabled",
     "leader election on (--leader-elect, =true) or off (=false), whatever the file says; the "
     "other leaderElection: keys apply either way.",
     KC_CLI_LEADER_ELECT, false},
    {"identity", 0, required_argument, " NAME", "hostname + random suffix",
     "the Lease holder identity.", KC_CLI_IDENTITY, false},
    {"log-level", 0, required_argument, " error|warn|info|debug", "logLevel, info",
     "most verbose level logged.", KC_CLI_LOG_LEVEL, false},
    {"log-format", 0, required_argument, " text|json", "logFormat, text",
     "line format (see \"Logs\"); applies from the first line.", KC_CLI_LOG_FORMAT, false},
    {"fail-fast", 0, no_argument, "", "off",
     "exit 1 when a controller's plugin does not load or its init fails at start-up, instead "
     "of running the others and retrying it (see \"A controller that cannot start\").",
     KC_CLI_FAIL_FAST, false},
    {"dry-run", 0, no_argument, "", "off (dryRun)",
     "every controller in dry-run mode, whatever the file's dryRun keys say: writes go to the "
     "API server with dryRun=All, are logged and counted, and nothing is stored (see \"Dry "
     "run\").",
     KC_CLI_DRY_RUN, false},
    {"allow-insecure-permissions", 0, no_argument, "", "off",
     "warn instead of refusing files others can write (see \"File permissions\"); not for "
     "production.",
     KC_CLI_INSECURE_PERMS, false},
    {"state-directory", 0, required_argument, " DIR", "stateDirectory, off",
     "keep each informer's cache in DIR at a clean stop and start from it (see \"State "
     "directory\").",
     KC_CLI_STATE_DIRECTORY, false},
    {"admin-socket", 0, required_argument, " PATH|0",
     "adminSocket, $RUNTIME_DIRECTORY/admin.sock under systemd, else off",
     "the Unix socket kctrld ctl talks to, mode 0600 (see \"kctrld ctl\"); \"0\" disables.",
     KC_CLI_ADMIN_SOCKET, false},
    {"admin-socket-group", 0, required_argument, " NAME", "adminSocketGroup, none",
     "make the admin socket 0660 and give it group NAME, so that its members can run kctrld "
     "ctl; an unknown group stops the start-up.",
     KC_CLI_ADMIN_SOCKET_GROUP, false},
    {"check-config", 0, required_argument, " FILE", "", "the same as kctrld check-config FILE.",
     KC_CLI_CHECK_CONFIG, true},
    {"online", 0, no_argument, "", "off", "with --check-config: the same as kctrld check-config --online.",
     KC_CLI_ONLINE, true},
    {"version", 0, no_argument, "", "", "the same as kctrld version.", KC_CLI_VERSION, true},
    HELP_FLAG,
};

static const kc_cli_flag check_flags[] = {
    {"online", 0, no_argument, "", "off",
     "also authenticate, resolve every kind through discovery and have the server validate "
     "each selector (a dry LIST).",
     KC_CLI_ONLINE, false},
    {"kubeconfig", 0, required_argument, " FILE", "",
     "the kubeconfig the daemon would be given; its credentials are checked.", KC_CLI_KUBECONFIG,
     false},
    {"context", 0, required_argument, " NAME", "current-context", "the kubeconfig context.",
     KC_CLI_CONTEXT, false},
    {"allow-insecure-permissions", 0, no_argument, "", "off",
     "warn instead of refusing files others can write.", KC_CLI_INSECURE_PERMS, false},
    HELP_FLAG,
};

static const kc_cli_flag rbac_flags[] = {
    {"config", 0, required_argument, " FILE", "required", "the configuration file.",
     KC_CLI_CONFIG, false},
    {"namespace", 0, required_argument, " NS", "kctrld",
     "the ServiceAccount's namespace; it must exist unless --create-namespace is given.",
     KC_CLI_RBAC_NAMESPACE, false},
    {"create-namespace", 0, no_argument, "", "off",
     "also emit that Namespace, first.", KC_CLI_RBAC_CREATE_NAMESPACE, false},
    {"name", 0, required_argument, " NAME", "from the config file's name",
     "the ServiceAccount, roles and bindings (the Lease role is NAME-leader-election); by "
     "default kctrld-BASENAME of the config file (kctrld.yaml: kctrld), so that two configs do "
     "not share roles.",
     KC_CLI_RBAC_NAME, false},
    {"plugin-dir", 0, required_argument, " DIR", "the configured paths",
     "look each controller's plugin up by its file name in DIR, to generate on a machine where "
     "the config's paths do not exist.",
     KC_CLI_RBAC_PLUGIN_DIR, false},
    HELP_FLAG,
};

static const kc_cli_flag only_help[] = {HELP_FLAG};

#define CTL_SOCKET_FLAG                                                                 \
  {"socket", 0, required_argument, " PATH", KC_CLI_CTL_DEFAULT_SOCKET,                  \
   "the daemon's admin socket (its --admin-socket).", KC_CLI_CTL_SOCKET, false}
#define CTL_OUTPUT_FLAG                                                                 \
  {"output", 'o', required_argument, " table|json", "table",                            \
   "a table for people, or the daemon's JSON document.", KC_CLI_CTL_OUTPUT, false}

static const kc_cli_flag ctl_flags[] = {CTL_SOCKET_FLAG, CTL_OUTPUT_FLAG, HELP_FLAG};
static const kc_cli_flag ctl_keys_flags[] = {
    CTL_SOCKET_FLAG,
    CTL_OUTPUT_FLAG,
    {"state", 0, required_argument, " queued|inflight|backoff|failing", "every key",
     "only the keys in that state (failing: the last reconcile returned an error).",
     KC_CLI_CTL_STATE, false},
    HELP_FLAG,
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

const kc_cli_command kc_cli_commands[] = {
    {NULL, "", 0, 0, "run the controllers FILE configures", NULL,
     "Runs the Kubernetes controllers that the configuration file describes (kctrld.yaml(5)): "
     "informers, workqueues, plugins or hooks, leader election or sharding, /metrics and the "
     "health probes. Flags override the file; a bad value exits 2 with a message naming the "
     "flag. SIGHUP reloads the file, SIGTERM and SIGINT stop gracefully (see \"Signals\").",
     "kctrld --config /etc/kctrld/kctrld.yaml --log-format json", daemon_flags, N(daemon_flags)},
    {"check-config", "FILE", 1, 1, "validate FILE (--online: against the API server too)",
     "--check-config FILE",
     "Checks FILE as the daemon would load it and reports every problem at once (each as "
     "file:line:col): its syntax and keys, the kinds of built-in group/versions, the "
     "credentials the daemon would use, and every controller's plugin (loaded without running "
     "its init) or hook program. Plugins that declare no RBAC permissions are warned about. "
     "Without --online nothing connects to a cluster. Exit status 0 when FILE is valid, 1 when "
     "it is not, 2 on a usage error.",
     "kctrld check-config /etc/kctrld/kctrld.yaml\n"
     "kctrld check-config --online --kubeconfig ~/.kube/config deploy/base/kctrld.yaml",
     check_flags, N(check_flags)},
    {"rbac", "", 0, 0, "print the least-privilege RBAC of a config as YAML", NULL,
     "Prints the RBAC that the configuration needs, as YAML documents sorted so that the output "
     "can be checked in and compared: a ServiceAccount, the roles (Roles per namespace when "
     "every informer lists its namespaces, else a ClusterRole; a Role for the leader election "
     "Lease) and one binding per role. It grants the informers' reads and what each plugin or "
     "hook declares; plugins are loaded without running their init, and one that declares "
     "nothing is named on stderr. Runs offline.",
     "kctrld rbac --config /etc/kctrld/kctrld.yaml | kubectl apply -f -", rbac_flags,
     N(rbac_flags)},
    {"version", "", 0, 0, "print the version, git commit, plugin ABI, hook protocol and libraries",
     "--version",
     "Prints the kctrld version, the git commit it was built from, the plugin ABI and build "
     "signature a plugin must match, the hook protocol, and the versions of libuv, libcurl "
     "(with its TLS library), yajl, libyaml and libmicrohttpd in use.",
     "kctrld version", only_help, N(only_help)},
    {"ctl", "COMMAND [ARGS]", 1, 3,
     "ask the running daemon: queues, keys, trace, requeue, pause, resume, informers", NULL,
     "Talks to a running kctrld over its admin socket (--admin-socket; see \"kctrld ctl\"): what "
     "its controllers' queues hold, why a key is failing and what happened to it, and "
     "requeue, pause and resume. Every command prints a table, or with -o json the daemon's "
     "JSON document. Exit status 0, 1 when the daemon answers an error (no such controller) or "
     "cannot be reached (no socket, connection refused, permission denied), 2 on a usage "
     "error.",
     "kctrld ctl queues\nkctrld ctl keys web --state failing\nkctrld ctl trace web default/frontend",
     only_help, N(only_help)},
    {"ctl queues", "", 0, 0, "per controller: queued, in flight, in backoff, failing, oldest wait",
     NULL,
     "Asks the running daemon over its admin socket (see \"kctrld ctl\") for every "
     "controller's queue: keys waiting for a worker, keys being reconciled, keys waiting out a "
     "backoff or a requeue-after, keys whose last reconcile failed, and how long the oldest "
     "queued key has waited; whether the controller runs, dispatches (leads) and is paused.",
     "kctrld ctl queues\nkctrld ctl queues -o json --socket /run/kctrld/admin.sock", ctl_flags,
     N(ctl_flags)},
    {"ctl keys", "CONTROLLER", 1, 1, "the keys of CONTROLLER with state, attempts, last error",
     NULL,
     "Lists the keys CONTROLLER's queue holds, and those whose last reconcile failed, sorted: "
     "each with its state (inflight, queued, backoff, failing), its attempts (failures since "
     "the last success), its last error and when it is retried.",
     "kctrld ctl keys web --state failing", ctl_keys_flags, N(ctl_keys_flags)},
    {"ctl trace", "CONTROLLER KEY", 2, 2, "the recent history of one key, with timestamps", NULL,
     "Prints what CONTROLLER remembers of KEY, oldest first: each watch event that queued it "
     "(type, kind, object, resourceVersion, informer) and why (its own event, an owned child, a "
     "mapping, a resync, a requeue asked for), when a worker took it, the reconcile's result and "
     "duration, the writes the reconcile made (verb, path, HTTP code, resourceVersion) and where "
     "the result left the key. The daemon keeps the last 1024 entries of all keys per "
     "controller.",
     "kctrld ctl trace web default/frontend", ctl_flags, N(ctl_flags)},
    {"ctl requeue", "CONTROLLER KEY", 2, 2, "queue KEY of CONTROLLER now", NULL,
     "Queues KEY now, as an event would (a key in backoff runs at once; its failure count "
     "stays).",
     "kctrld ctl requeue web default/frontend", ctl_flags, N(ctl_flags)},
    {"ctl pause", "CONTROLLER", 1, 1, "stop handing CONTROLLER's keys to workers", NULL,
     "Workers take no more keys of CONTROLLER (reconciles running finish); events keep queueing "
     "and deduplicating its keys, so kctrld ctl resume runs each changed key once. A pause "
     "lasts until resume or a restart.",
     "kctrld ctl pause web", ctl_flags, N(ctl_flags)},
    {"ctl resume", "CONTROLLER", 1, 1, "hand CONTROLLER's keys to workers again", NULL,
     "Ends a kctrld ctl pause: the keys queued meanwhile are reconciled.",
     "kctrld ctl resume web", ctl_flags, N(ctl_flags)},
    {"ctl informers", "", 0, 0, "every informer: synced, objects, bytes, lists, watches",
     NULL,
     "Prints every informer's state, as /debug/informers on the metrics listener has it: its "
     "kind, namespaces and selectors, whether it is synced, its objects and bytes, its "
     "resourceVersion and its lists, watches, relists, events and errors.",
     "kctrld ctl informers -o json", ctl_flags, N(ctl_flags)},
    {"help", "[COMMAND]", 0, 1, "print this help, or a command's", "--help | -h",
     "Prints the help of kctrld or of COMMAND (the same as kctrld COMMAND --help).",
     "kctrld help rbac", only_help, N(only_help)},
};
const size_t kc_cli_ncommands = N(kc_cli_commands);

const kc_cli_command *kc_cli_command_find(const char *name) {
  for (size_t i = 1; i < kc_cli_ncommands; i++)
    if (strcmp(kc_cli_commands[i].name, name) == 0) return &kc_cli_commands[i];
  return NULL;
}

const kc_cli_command *kc_cli_ctl_find(const char *word) {
  for (size_t i = 1; i < kc_cli_ncommands; i++) {
    const char *n = kc_cli_commands[i].name;
    if (strncmp(n, "ctl ", 4) == 0 && strcmp(n + 4, word) == 0) return &kc_cli_commands[i];
  }
  return NULL;
}

static void wrap(FILE *out, const char *text, int indent, int col);

/* "ctl queues" and its siblings: listed by `kctrld ctl --help`, not by
 * `kctrld --help` (which lists ctl). */
static bool ctl_sub(const kc_cli_command *c) { return c->name && strncmp(c->name, "ctl ", 4) == 0; }

void kc_cli_ctl_list(FILE *out) {
  fputs("kctrld ctl commands (each has --help with an example):\n", out);
  for (size_t i = 1; i < kc_cli_ncommands; i++) {
    const kc_cli_command *s = &kc_cli_commands[i];
    if (!ctl_sub(s)) continue;
    char head[64];
    snprintf(head, sizeof head, "  kctrld %s%s%s", s->name, s->args[0] ? " " : "", s->args);
    fprintf(out, "%-36s", head);
    wrap(out, s->summary, 36, 36);
  }
}

/* ---- printing ---------------------------------------------------------------- */

/* Writes item (a word, or a synopsis element that must not be split) at
 * column *col, breaking the line before it when it would pass WIDTH; the
 * next line starts at column indent. */
static void put_item(FILE *out, const char *item, size_t len, int indent, int *col, bool *first) {
  if (!*first && *col + 1 + (int)len > WIDTH) {
    fprintf(out, "\n%*s", indent, "");
    *col = indent;
    *first = true;
  }
  if (!*first) {
    fputc(' ', out);
    (*col)++;
  }
  fwrite(item, 1, len, out);
  *col += (int)len;
  *first = false;
}

/* text word-wrapped to WIDTH from column col (where the caller left the
 * cursor), continuation lines indented by indent; ends the line. */
static void wrap(FILE *out, const char *text, int indent, int col) {
  bool first = true;
  for (const char *p = text; *p;) {
    while (*p == ' ') p++;
    if (!*p) break;
    size_t w = strcspn(p, " ");
    put_item(out, p, w, indent, &col, &first);
    p += w;
  }
  fputc('\n', out);
}

/* lead, then "kctrld [NAME] FLAGS ARGS": required flags bare, the others
 * in brackets; continuation lines line up after "kctrld ". With alias, the
 * command's flag form instead: "kctrld --check-config FILE FLAGS". */
static void synopsis(FILE *out, const kc_cli_command *c, const char *lead, bool alias) {
  int indent = (int)strlen(lead) + 7, col = 0;
  bool first = true;
  char item[256];
  fputs(lead, out);
  col = (int)strlen(lead);
  int n = alias ? snprintf(item, sizeof item, "kctrld %s", c->alias)
                : snprintf(item, sizeof item, "kctrld%s%s", c->name ? " " : "", c->name ? c->name : "");
  if (n > 0 && (size_t)n < sizeof item) put_item(out, item, (size_t)n, indent, &col, &first);
  for (size_t i = 0; i < c->nflags; i++) {
    const kc_cli_flag *f = &c->flags[i];
    if (f->alias || f->id == KC_CLI_HELP) continue;
    bool req = strcmp(f->def, "required") == 0;
    n = snprintf(item, sizeof item, "%s--%s%s%s", req ? "" : "[", f->name, f->arg, req ? "" : "]");
    if (n > 0 && (size_t)n < sizeof item) put_item(out, item, (size_t)n, indent, &col, &first);
  }
  if (c->args[0] && !alias) put_item(out, c->args, strlen(c->args), indent, &col, &first);
  fputc('\n', out);
}

static void flag_list(FILE *out, const kc_cli_command *c) {
  for (size_t i = 0; i < c->nflags; i++) {
    const kc_cli_flag *f = &c->flags[i];
    fprintf(out, "  --%s%s", f->name, f->arg);
    if (f->short_name) fprintf(out, ", -%c", f->short_name);
    fputc('\n', out);
    fputs("      ", out);
    wrap(out, f->help, 6, 6);
    if (f->def[0]) {
      fputs("      default: ", out);
      wrap(out, f->def, 6, 15);
    }
  }
}

static void example(FILE *out, const kc_cli_command *c) {
  fputs("\nexample:\n", out);
  for (const char *p = c->example; *p;) {
    size_t w = strcspn(p, "\n");
    fprintf(out, "  %.*s\n", (int)w, p);
    p += w;
    if (*p) p++;
  }
}

void kc_cli_help(FILE *out, const kc_cli_command *c) {
  if (!c->name) {
    synopsis(out, c, "usage: ", false);
    for (size_t i = 1; i < kc_cli_ncommands; i++)
      if (!ctl_sub(&kc_cli_commands[i])) synopsis(out, &kc_cli_commands[i], "       ", false);
    for (size_t i = 1; i < kc_cli_ncommands; i++)
      if (kc_cli_commands[i].alias) synopsis(out, &kc_cli_commands[i], "       ", true);
    fputc('\n', out);
    wrap(out, c->description, 0, 0);
    fputs("\ncommands:\n", out);
    for (size_t i = 1; i < kc_cli_ncommands; i++) {
      const kc_cli_command *s = &kc_cli_commands[i];
      if (ctl_sub(s)) continue;
      char head[64];
      snprintf(head, sizeof head, "  %s%s%s", s->name, s->args[0] ? " " : "", s->args);
      fprintf(out, "%-22s", head);
      wrap(out, s->summary, 22, 22);
    }
    fputs("Each command has --help with an example (kctrld rbac --help).\n", out);
    fputs("\nflags:\n", out);
    flag_list(out, c);
    fputs("\nSections named in quotes are those of kctrld(8) and docs/operations.md.\n", out);
    example(out, c);
    return;
  }
  synopsis(out, c, "usage: ", false);
  if (c->alias) synopsis(out, c, "       ", true);
  fputc('\n', out);
  wrap(out, c->description, 0, 0);
  if (strcmp(c->name, "ctl") == 0) {
    fputc('\n', out);
    kc_cli_ctl_list(out);
  }
  fputs("\nflags:\n", out);
  flag_list(out, c);
  example(out, c);
}

int kc_cli_usage_error(const kc_cli_command *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("kctrld: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  synopsis(stderr, c, "usage: ", false);
  fprintf(stderr, "Run 'kctrld%s%s --help' for more.\n", c->name ? " " : "", c->name ? c->name : "");
  return KC_CLI_USAGE;
}

/* ---- parsing ----------------------------------------------------------------- */

#define MAX_FLAGS 32
#define LONG_BASE 1000 /* getopt's val of flag i: LONG_BASE + i, clear of the short letters */

/* The flag whose long name is closest to what was typed ("--confg=x" ->
 * "config"), NULL when none is close. */
static const char *closest_flag(const kc_cli_command *c, const char *typed) {
  const char *names[MAX_FLAGS];
  char word[64];
  while (*typed == '-') typed++;
  size_t w = strcspn(typed, "=");
  if (w == 0 || w >= sizeof word) return NULL;
  memcpy(word, typed, w);
  word[w] = '\0';
  for (size_t i = 0; i < c->nflags; i++) names[i] = c->flags[i].name;
  return kc_yaml_closest(word, names, c->nflags);
}

int kc_cli_next(const kc_cli_command *c, int argc, char **argv, const char **arg) {
  struct option opts[MAX_FLAGS + 1];
  char shorts[2 * MAX_FLAGS + 2];
  size_t ns = 0;
  shorts[ns++] = ':'; /* a missing argument returns ':' */
  if (c->nflags > MAX_FLAGS) return kc_cli_usage_error(c, "too many flags in the command table");
  for (size_t i = 0; i < c->nflags; i++) {
    const kc_cli_flag *f = &c->flags[i];
    opts[i] = (struct option){f->name, f->has_arg, NULL, LONG_BASE + (int)i};
    if (f->short_name) {
      shorts[ns++] = f->short_name;
      if (f->has_arg == required_argument) shorts[ns++] = ':';
    }
  }
  opts[c->nflags] = (struct option){NULL, 0, NULL, 0};
  shorts[ns] = '\0';
  opterr = 0; /* the messages below replace getopt's */
  int r = getopt_long(argc, argv, shorts, opts, NULL);
  *arg = optarg;
  if (r == -1) return KC_CLI_END;
  if (r >= LONG_BASE && r < LONG_BASE + (int)c->nflags) return c->flags[r - LONG_BASE].id;
  for (size_t i = 0; i < c->nflags; i++)
    if (r == c->flags[i].short_name) return c->flags[i].id;
  /* getopt has moved past the word it complains about. */
  const char *typed = argv[optind - 1];
  if (r == ':') return kc_cli_usage_error(c, "%s needs an argument", typed);
  if (typed[0] == '-' && typed[1] == '-') {
    /* getopt also says '?' for an ambiguous prefix or an argument given to
     * a flag that takes none. */
    size_t w = strcspn(typed, "=");
    for (size_t i = 0; i < c->nflags; i++)
      if (strlen(c->flags[i].name) == w - 2 && strncmp(typed + 2, c->flags[i].name, w - 2) == 0)
        return kc_cli_usage_error(c, "--%s takes no argument", c->flags[i].name);
    char also[256];
    size_t na = 0, nmatch = 0;
    also[0] = '\0';
    for (size_t i = 0; i < c->nflags; i++)
      if (w > 2 && strncmp(typed + 2, c->flags[i].name, w - 2) == 0) {
        int k = snprintf(also + na, sizeof also - na, "%s--%s", nmatch ? ", " : "", c->flags[i].name);
        if (k > 0 && (size_t)k < sizeof also - na) na += (size_t)k;
        nmatch++;
      }
    if (nmatch > 1) return kc_cli_usage_error(c, "%.*s is ambiguous (%s)", (int)w, typed, also);
    const char *best = closest_flag(c, typed);
    if (best) return kc_cli_usage_error(c, "unknown flag %.*s (did you mean --%s?)", (int)w, typed, best);
    return kc_cli_usage_error(c, "unknown flag %.*s", (int)w, typed);
  }
  return kc_cli_usage_error(c, "unknown flag -%c", optopt ? optopt : '?');
}

int kc_cli_check_args(const kc_cli_command *c, int argc, char **argv) {
  size_t n = optind < argc ? (size_t)(argc - optind) : 0;
  if (n >= c->min_args && n <= c->max_args) return 0;
  if (n < c->min_args) return kc_cli_usage_error(c, "%s is required", c->args);
  const char *extra = argv[optind + (int)c->max_args];
  if (!c->name && kc_cli_command_find(extra))
    return kc_cli_usage_error(c, "the command %s comes first: kctrld %s [flags]", extra, extra);
  if (!c->name) { /* a word where a command belongs: a misspelt one? */
    const char *names[16];
    size_t k = 0;
    for (size_t i = 1; i < kc_cli_ncommands && k < 16; i++) names[k++] = kc_cli_commands[i].name;
    const char *best = kc_yaml_closest(extra, names, k);
    if (best)
      return kc_cli_usage_error(c, "unknown command \"%s\" (did you mean kctrld %s?)", extra, best);
  }
  return kc_cli_usage_error(c, "unexpected argument \"%s\"", extra);
}

/* ---- version ----------------------------------------------------------------- */

void kc_cli_version(FILE *out) {
  const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
  int yv = yajl_version();
  fprintf(out, "kctrld %s\n", KCTRLD_VERSION);
  fprintf(out, "git commit: %s\n", KCTRLD_GIT_COMMIT);
  fprintf(out, "plugin ABI: %d.%d (build signature %s)\n", KCTRLD_ABI_MAJOR, KCTRLD_ABI_MINOR,
          KCTRLD_BUILD_SIGNATURE);
  fprintf(out, "hook protocol: %s\n", KC_HOOK_API_VERSION);
  fprintf(out, "libuv: %s\n", uv_version_string());
  fprintf(out, "libcurl: %s%s%s\n", cv->version, cv->ssl_version ? " " : "",
          cv->ssl_version ? cv->ssl_version : "");
  fprintf(out, "yajl: %d.%d.%d\n", yv / 10000, yv / 100 % 100, yv % 100);
  fprintf(out, "libyaml: %s\n", yaml_get_version_string());
  fprintf(out, "libmicrohttpd: %s\n", MHD_get_version());
}
