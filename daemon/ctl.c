/* SPDX-License-Identifier: Apache-2.0 */
/* ctl: see ctl.h. */
#include "ctl.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "base/buf.h"
#include "json/jsontree.h"
#include "json/yamltree.h"
#include "ops/adminreq.h"

/* ---- the connection ---------------------------------------------------------- */

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("kctrld ctl: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 1;
}

/* Says who may connect: the socket's mode and group, when they can be read
 * (the directory may hide them too). */
static int permission_denied(const char *path) {
  struct stat st;
  if (stat(path, &st) < 0)
    return fail("permission denied on %s: its directory is closed to this user; run kctrld ctl "
                "as the daemon's user or root (or see \"kctrld ctl\" in docs/operations.md "
                "for adminSocketGroup)",
                path);
  if ((st.st_mode & 0060) == 0060) {
    struct group *g = getgrgid(st.st_gid);
    char gid[32];
    snprintf(gid, sizeof gid, "%u", (unsigned)st.st_gid);
    return fail("permission denied on %s: the socket is mode %04o, group %s; run kctrld ctl as "
                "a member of %s, the daemon's user or root",
                path, (unsigned)(st.st_mode & 07777), g ? g->gr_name : gid, g ? g->gr_name : gid);
  }
  return fail("permission denied on %s: the socket is the daemon user's (mode %04o); run kctrld "
              "ctl as that user or root",
              path, (unsigned)(st.st_mode & 07777));
}

/* Sends the request line and reads the whole answer into *answer. */
static int ask(const char *path, const kc_buf *req, kc_buf *answer) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path)
    return fail("socket path too long (at most %zu bytes): %s", sizeof a.sun_path - 1, path);
  memcpy(a.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail("cannot create a socket: %s", strerror(errno));
  struct timeval tv = {KC_CTL_TIMEOUT_MS / 1000, 0};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
    int e = errno;
    close(fd);
    return fail("cannot set the socket timeout: %s", strerror(e));
  }
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    int e = errno;
    close(fd);
    switch (e) {
    case ENOENT:
      return fail("no admin socket at %s: is kctrld running with --admin-socket (or "
                  "adminSocket:)? --socket PATH names another",
                  path);
    case ECONNREFUSED:
      return fail("connection refused on %s: no kctrld serves it (a socket left by a daemon "
                  "that stopped)",
                  path);
    case EACCES:
    case EPERM: return permission_denied(path);
    case ENOTSOCK:
      return fail("%s is not a socket", path);
    default: return fail("cannot connect to %s: %s", path, strerror(e));
    }
  }
  size_t off = 0;
  while (off < req->len) {
    ssize_t n = send(fd, req->p + off, req->len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return fail("cannot send the request to %s: %s", path, strerror(e));
    }
    off += (size_t)n;
  }
  kc_buf_set_max(answer, KC_CTL_ANSWER_MAX);
  for (;;) {
    if (kc_buf_reserve(answer, 65536) < 0) {
      close(fd);
      return fail("the answer is larger than %u bytes", KC_CTL_ANSWER_MAX);
    }
    ssize_t n = recv(fd, answer->p + answer->len, answer->cap - answer->len - 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      if (e == EAGAIN || e == EWOULDBLOCK)
        return fail("no answer from %s in %d s: is the daemon's loop stuck?", path,
                    KC_CTL_TIMEOUT_MS / 1000);
      return fail("cannot read the answer from %s: %s", path, strerror(e));
    }
    if (n == 0) break;
    answer->len += (size_t)n;
    answer->p[answer->len] = '\0';
  }
  close(fd);
  if (!answer->len) return fail("%s closed the connection without an answer", path);
  return 0;
}

/* ---- tables ------------------------------------------------------------------ */

#define MAX_COLS 12

typedef struct table {
  size_t ncols;
  char **cells; /* row-major; the first row is the header */
  size_t n, cap;
  bool oom;
} table;

static void cell(table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cell(table *t, const char *fmt, ...) {
  if (t->oom) return;
  char *s = NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0 || KC_ARRAY_RESERVE(t->cells, t->cap, t->n + 1, 64) < 0) {
    if (n >= 0) free(s);
    t->oom = true;
    return;
  }
  t->cells[t->n++] = s;
}

/* Prints the table, columns padded to their widest cell (the last unpadded). */
static int table_print(table *t) {
  int rc = 0;
  if (t->oom) {
    rc = fail("out of memory");
    goto out;
  }
  size_t w[MAX_COLS] = {0};
  for (size_t i = 0; i < t->n; i++) {
    size_t l = strlen(t->cells[i]);
    if (l > w[i % t->ncols]) w[i % t->ncols] = l;
  }
  for (size_t i = 0; i < t->n; i++) {
    size_t c = i % t->ncols;
    if (c + 1 == t->ncols)
      printf("%s\n", t->cells[i]);
    else
      printf("%-*s  ", (int)w[c], t->cells[i]);
  }
out:
  for (size_t i = 0; i < t->n; i++) free(t->cells[i]);
  free(t->cells);
  return rc;
}

static yajl_val get(yajl_val obj, const char *name) {
  const char *path[] = {name, NULL};
  return yajl_tree_get(obj, path, yajl_t_any);
}

static const char *str(yajl_val obj, const char *name, const char *none) {
  yajl_val v = get(obj, name);
  return YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : none;
}

static double num(yajl_val obj, const char *name) {
  yajl_val v = get(obj, name);
  return YAJL_IS_NUMBER(v) ? YAJL_GET_DOUBLE(v) : 0;
}

static bool yes(yajl_val obj, const char *name) { return YAJL_IS_TRUE(get(obj, name)); }

static size_t items(yajl_val obj, const char *name, yajl_val **out) {
  yajl_val v = get(obj, name);
  if (!YAJL_IS_ARRAY(v)) return 0;
  *out = v->u.array.values;
  return v->u.array.len;
}

/* "1.5s", "3m20s", "2h5m": a wait or a delay. */
static void duration(char *buf, size_t cap, double s) {
  if (s < 60) snprintf(buf, cap, "%.3gs", s);
  else if (s < 3600) snprintf(buf, cap, "%dm%02ds", (int)s / 60, (int)s % 60);
  else snprintf(buf, cap, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static int print_queues(yajl_val doc) {
  table t = {.ncols = 8};
  cell(&t, "CONTROLLER");
  cell(&t, "STATE");
  cell(&t, "QUEUED");
  cell(&t, "HIGH/NORMAL/LOW");
  cell(&t, "INFLIGHT");
  cell(&t, "BACKOFF");
  cell(&t, "FAILING");
  cell(&t, "OLDEST-WAIT");
  yajl_val *v;
  size_t n = items(doc, "controllers", &v);
  for (size_t i = 0; i < n; i++) {
    char wait[32];
    duration(wait, sizeof wait, num(v[i], "oldestWaitSeconds"));
    cell(&t, "%s", str(v[i], "name", "?"));
    cell(&t, "%s", !yes(v[i], "running") ? (yes(v[i], "paused") ? "not running, paused"
                                                                : "not running")
                   : yes(v[i], "paused") ? "paused"
                   : yes(v[i], "active") ? "running"
                                         : "standby");
    cell(&t, "%.0f", num(v[i], "depth"));
    yajl_val by = get(v[i], "depthByPriority");
    cell(&t, "%.0f/%.0f/%.0f", num(by, "high"), num(by, "normal"), num(by, "low"));
    cell(&t, "%.0f", num(v[i], "inflight"));
    cell(&t, "%.0f", num(v[i], "backoff"));
    cell(&t, "%.0f", num(v[i], "failing"));
    cell(&t, "%s", num(v[i], "depth") > 0 ? wait : "-");
  }
  return table_print(&t);
}

static int print_keys(yajl_val doc) {
  table t = {.ncols = 6};
  cell(&t, "KEY");
  cell(&t, "STATE");
  cell(&t, "PRIORITY");
  cell(&t, "ATTEMPTS");
  cell(&t, "NEXT-RETRY");
  cell(&t, "LAST-ERROR");
  yajl_val *v;
  size_t n = items(doc, "keys", &v);
  for (size_t i = 0; i < n; i++) {
    char next[32] = "-";
    if (YAJL_IS_NUMBER(get(v[i], "nextRetrySeconds")))
      duration(next, sizeof next, num(v[i], "nextRetrySeconds"));
    cell(&t, "%s", str(v[i], "key", "?"));
    cell(&t, "%s", str(v[i], "state", "?"));
    cell(&t, "%s", str(v[i], "priority", "?"));
    cell(&t, "%.0f", num(v[i], "attempts"));
    cell(&t, "%s", next);
    cell(&t, "%s", str(v[i], "lastError", "-"));
  }
  return table_print(&t);
}

static int print_trace(yajl_val doc) {
  yajl_val *v;
  size_t n = items(doc, "entries", &v);
  double matched = num(doc, "matched");
  printf("%s %s: %zu entries", str(doc, "controller", "?"), str(doc, "key", "?"), n);
  if (matched > (double)n) printf(" (the newest of %.0f)", matched);
  printf("; the controller keeps its last %.0f (%.0f KiB)\n", num(doc, "ringEntries"),
         num(doc, "ringBytes") / 1024);
  if (!n) return 0;
  table t = {.ncols = 3};
  cell(&t, "TIME");
  cell(&t, "STAGE");
  cell(&t, "DETAIL");
  for (size_t i = 0; i < n; i++) {
    cell(&t, "%s", str(v[i], "time", "?"));
    cell(&t, "%s", str(v[i], "stage", "?"));
    cell(&t, "%s", str(v[i], "detail", ""));
  }
  return table_print(&t);
}

static int print_informers(yajl_val doc) {
  table t = {.ncols = 9};
  const char *head[] = {"INFORMER", "KIND", "NAMESPACES", "SYNCED", "OBJECTS",
                        "LISTS",    "WATCHES", "ERRORS",  "RESOURCEVERSION"};
  for (size_t i = 0; i < 9; i++) cell(&t, "%s", head[i]);
  yajl_val *v;
  size_t n = items(doc, "informers", &v);
  for (size_t i = 0; i < n; i++) {
    yajl_val *ns;
    size_t nns = items(v[i], "namespaces", &ns);
    kc_buf b = {0};
    for (size_t k = 0; k < nns; k++)
      kc_buf_printf(&b, "%s%s", k ? "," : "", YAJL_IS_STRING(ns[k]) ? YAJL_GET_STRING(ns[k]) : "?");
    cell(&t, "%s", str(v[i], "name", str(v[i], "resource", "?")));
    cell(&t, "%s %s", str(v[i], "apiVersion", "?"), str(v[i], "kind", "?"));
    cell(&t, "%s", b.p && b.len ? b.p : "(all)");
    cell(&t, "%s", yes(v[i], "synced") ? "yes" : yes(v[i], "started") ? "no" : "not started");
    cell(&t, "%.0f", num(v[i], "objects"));
    cell(&t, "%.0f", num(v[i], "lists"));
    cell(&t, "%.0f", num(v[i], "watches"));
    cell(&t, "%.0f", num(v[i], "errors"));
    cell(&t, "%s", str(v[i], "resourceVersion", "-"));
    kc_buf_free(&b);
  }
  return table_print(&t);
}

/* ---- the command ------------------------------------------------------------- */

static int usage_unknown(const kc_cli_command *ctl, const char *word) {
  const char *names[16];
  size_t k = 0;
  for (size_t i = 1; i < kc_cli_ncommands && k < 16; i++)
    if (strncmp(kc_cli_commands[i].name, "ctl ", 4) == 0) names[k++] = kc_cli_commands[i].name + 4;
  const char *best = kc_yaml_closest(word, names, k);
  if (best) kc_cli_usage_error(ctl, "unknown command \"%s\" (did you mean kctrld ctl %s?)", word, best);
  else kc_cli_usage_error(ctl, "unknown command \"%s\"", word);
  return 2;
}

int kc_ctl_main(int argc, char **argv) {
  const kc_cli_command *ctl = kc_cli_command_find("ctl");
  if (argc < 2 || argv[1][0] == '-') { /* `kctrld ctl`, `kctrld ctl --help` */
    const char *arg;
    int id;
    optind = 1;
    while ((id = kc_cli_next(ctl, argc, argv, &arg)) > KC_CLI_END)
      if (id == KC_CLI_HELP) {
        kc_cli_help(stdout, ctl);
        return 0;
      }
    if (id == KC_CLI_USAGE) return 2;
    kc_cli_usage_error(ctl, "COMMAND is required");
    kc_cli_ctl_list(stderr);
    return 2;
  }
  const kc_cli_command *cmd = kc_cli_ctl_find(argv[1]);
  if (!cmd) return usage_unknown(ctl, argv[1]);
  argc--;
  argv++;
  optind = 1;
  const char *arg, *path = KC_CLI_CTL_DEFAULT_SOCKET;
  bool json = false;
  kc_admin_request r = {0};
  if (kc_admin_command_parse(cmd->name + 4, &r.command) < 0) return usage_unknown(ctl, argv[0]);
  int id;
  while ((id = kc_cli_next(cmd, argc, argv, &arg)) > KC_CLI_END) {
    switch (id) {
    case KC_CLI_HELP: kc_cli_help(stdout, cmd); return 0;
    case KC_CLI_CTL_SOCKET: path = arg; break;
    case KC_CLI_CTL_OUTPUT:
      if (strcmp(arg, "json") == 0) json = true;
      else if (strcmp(arg, "table") == 0) json = false;
      else {
        kc_cli_usage_error(cmd, "-o: expected table or json, got \"%s\"", arg);
        return 2;
      }
      break;
    case KC_CLI_CTL_STATE:
      if (kc_admin_state_parse(arg, &r.state) < 0) {
        kc_cli_usage_error(cmd, "--state: expected queued, inflight, backoff or failing, got \"%s\"",
                           arg);
        return 2;
      }
      break;
    default: break;
    }
  }
  if (id == KC_CLI_USAGE || kc_cli_check_args(cmd, argc, argv) < 0) return 2;
  if (cmd->min_args >= 1) {
    if (strlen(argv[optind]) >= sizeof r.controller) {
      kc_cli_usage_error(cmd, "CONTROLLER is longer than %zu bytes", sizeof r.controller - 1);
      return 2;
    }
    snprintf(r.controller, sizeof r.controller, "%s", argv[optind]);
  }
  if (cmd->min_args >= 2) {
    if (strlen(argv[optind + 1]) >= sizeof r.key) {
      kc_cli_usage_error(cmd, "KEY is longer than %zu bytes", sizeof r.key - 1);
      return 2;
    }
    snprintf(r.key, sizeof r.key, "%s", argv[optind + 1]);
  }
  kc_buf req = {0}, answer = {0};
  kc_admin_request_format(&r, &req);
  if (req.err) {
    kc_buf_free(&req);
    return fail("out of memory");
  }
  int rc = ask(path, &req, &answer);
  kc_buf_free(&req);
  if (rc) {
    kc_buf_free(&answer);
    return rc;
  }
  yajl_val doc = NULL;
  char err[160];
  if (kc_jsontree_parse(answer.p, answer.len, &doc, err, sizeof err) < 0 || !YAJL_IS_OBJECT(doc)) {
    rc = fail("the daemon's answer is not a JSON object: %s", doc ? "another value" : err);
    goto out;
  }
  const char *error = str(doc, "error", NULL);
  if (error) {
    rc = fail("%s", error);
    goto out;
  }
  if (json) {
    fwrite(answer.p, 1, answer.len, stdout);
    goto out;
  }
  switch (r.command) {
  case KC_ADMIN_QUEUES: rc = print_queues(doc); break;
  case KC_ADMIN_KEYS: rc = print_keys(doc); break;
  case KC_ADMIN_TRACE: rc = print_trace(doc); break;
  case KC_ADMIN_REQUEUE: printf("%s: %s queued\n", r.controller, r.key); break;
  case KC_ADMIN_PAUSE:
  case KC_ADMIN_RESUME:
    if (get(doc, "running") && !yes(doc, "running")) /* configured, not started (yet) */
      printf("%s: %s (not running: it starts so)\n", r.controller,
             yes(doc, "paused") ? "paused" : "not paused");
    else
      printf("%s: %s\n", r.controller, yes(doc, "paused") ? "paused" : "running");
    if (str(doc, "warning", NULL)) fprintf(stderr, "kctrld ctl: warning: %s\n", str(doc, "warning", ""));
    break;
  case KC_ADMIN_INFORMERS: rc = print_informers(doc); break;
  default: break;
  }
out:
  yajl_tree_free(doc);
  kc_buf_free(&answer);
  if (fflush(stdout) != 0) rc = fail("cannot write the output: %s", strerror(errno));
  return rc;
}
