/* SPDX-License-Identifier: Apache-2.0 */
/* execcred: see execcred.h. */
#include "client/execcred.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/spawn.h"
#include "base/x509validity.h"
#include "client/restmetrics.h"
#include "json/jsontree.h"
#include "base/log.h"

#define COMPONENT "execcred"
#define DEFAULT_TIMEOUT_MS 30000
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
#define MIN_INTERVAL_MS 1000 /* between two runs, however they are triggered */
#define STDERR_MAX (64 * 1024)
#define LINE_MAX_LOG 1024

extern char **environ;

/* ---- credential values ---- */

static void zfree(char *p, size_t n) {
  if (!p) return;
  explicit_bzero(p, n);
  free(p);
}

void kc_exec_cred_clear(kc_exec_cred *c) {
  if (!c) return;
  if (c->token) zfree(c->token, strlen(c->token));
  zfree(c->cert, c->cert_len);
  zfree(c->key, c->key_len);
  memset(c, 0, sizeof *c);
}

static int cred_copy(const kc_exec_cred *in, kc_exec_cred *out) {
  memset(out, 0, sizeof *out);
  out->expiry = in->expiry;
  out->cert_len = in->cert_len;
  out->key_len = in->key_len;
  if ((in->token && !(out->token = strdup(in->token))) ||
      (in->cert && !(out->cert = strndup(in->cert, in->cert_len))) ||
      (in->key && !(out->key = strndup(in->key, in->key_len)))) {
    kc_exec_cred_clear(out);
    return -ENOMEM;
  }
  return 0;
}

static bool str_eq(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool cred_equal(const kc_exec_cred *a, const kc_exec_cred *b) {
  return str_eq(a->token, b->token) && str_eq(a->cert, b->cert) && str_eq(a->key, b->key);
}

/* ---- RFC 3339 ---- */

static int digits(const char *s, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -EINVAL;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

int kc_rfc3339_parse(const char *s, int64_t *out) {
  int Y, M, D, h, m, sec;
  if (strlen(s) < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' ||
      digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) ||
      s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' || digits(s + 17, 2, &sec))
    return -EINVAL;
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return -EINVAL;
  const char *p = s + 19;
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9') return -EINVAL;
    while (*p >= '0' && *p <= '9') p++;
  }
  int64_t off = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh, om;
    if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59)
      return -EINVAL;
    off = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
    p += 6;
  } else {
    return -EINVAL;
  }
  if (*p) return -EINVAL;
  *out = kc_clock_civil_to_unix(Y, (unsigned)M, (unsigned)D, (unsigned)h, (unsigned)m, (unsigned)sec) - off;
  return 0;
}

/* ---- ExecCredential ---- */

static yajl_val jget(yajl_val v, const char *a, const char *b, yajl_type t) {
  const char *path[3] = {a, b, NULL};
  return yajl_tree_get(v, path, t);
}

static const char *jstr(yajl_val v) {
  const char *s = v && YAJL_IS_STRING(v) ? v->u.string : NULL;
  return s ? s : "";
}

int kc_execcred_parse(const char *json, size_t len, const char *api_version, kc_exec_cred *out,
                      char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  yajl_val root = NULL;
  char why[160];
  int rc = kc_jsontree_parse(json, len, &root, why, sizeof why);
  if (rc == -ENOMEM) return rc;
  if (rc < 0 || !root) {
    /* The parser's message may quote the input: say only where. */
    kc_errf(err, errlen, "plugin output is not JSON (%zu bytes)", len);
    if (root) yajl_tree_free(root);
    return -EINVAL;
  }
  rc = -EINVAL;
  if (!YAJL_IS_OBJECT(root)) {
    kc_errf(err, errlen, "plugin output is not a JSON object");
    goto out;
  }
  yajl_val kind = jget(root, "kind", NULL, yajl_t_string);
  yajl_val ver = jget(root, "apiVersion", NULL, yajl_t_string);
  if (!kind || strcmp(jstr(kind), "ExecCredential") != 0) {
    kc_errf(err, errlen, "plugin output is not an ExecCredential (kind %s)",
            kind ? "is not ExecCredential" : "missing");
    goto out;
  }
  if (!ver || strcmp(jstr(ver), api_version) != 0) {
    char v[80];
    snprintf(v, sizeof v, "%s", ver ? jstr(ver) : "(none)");
    kc_errf(err, errlen, "exec plugin is configured to use API version %s, plugin returned version %s",
            api_version, v);
    goto out;
  }
  yajl_val status = jget(root, "status", NULL, yajl_t_object);
  if (!status) {
    kc_errf(err, errlen, "exec plugin didn't return a status field");
    goto out;
  }
  yajl_val tok = jget(status, "token", NULL, yajl_t_any);
  yajl_val cert = jget(status, "clientCertificateData", NULL, yajl_t_any);
  yajl_val key = jget(status, "clientKeyData", NULL, yajl_t_any);
  yajl_val exp = jget(status, "expirationTimestamp", NULL, yajl_t_any);
  if ((tok && !YAJL_IS_STRING(tok) && !YAJL_IS_NULL(tok)) ||
      (cert && !YAJL_IS_STRING(cert) && !YAJL_IS_NULL(cert)) ||
      (key && !YAJL_IS_STRING(key) && !YAJL_IS_NULL(key)) ||
      (exp && !YAJL_IS_STRING(exp) && !YAJL_IS_NULL(exp))) {
    kc_errf(err, errlen, "exec plugin status: token, clientCertificateData, clientKeyData and "
                         "expirationTimestamp must be strings");
    goto out;
  }
  const char *t = jstr(tok);
  const char *c = jstr(cert);
  const char *k = jstr(key);
  if (!t[0] && (!c[0] || !k[0])) {
    kc_errf(err, errlen, "exec plugin didn't return a token or cert/key pair");
    goto out;
  }
  if (!c[0] != !k[0]) {
    kc_errf(err, errlen, "exec plugin returned %s without %s", c[0] ? "clientCertificateData" : "clientKeyData",
            c[0] ? "clientKeyData" : "clientCertificateData");
    goto out;
  }
  if (strpbrk(t, "\r\n")) {
    kc_errf(err, errlen, "exec plugin returned a token with a line break");
    goto out;
  }
  const char *e = jstr(exp);
  if (e[0] && kc_rfc3339_parse(e, &out->expiry) < 0) {
    char v[64];
    snprintf(v, sizeof v, "%s", e);
    kc_errf(err, errlen, "exec plugin status.expirationTimestamp \"%s\" is not an RFC 3339 time", v);
    goto out;
  }
  rc = -ENOMEM;
  if (t[0] && !(out->token = strdup(t))) goto out;
  if (c[0]) {
    out->cert_len = strlen(c);
    out->key_len = strlen(k);
    if (!(out->cert = strdup(c)) || !(out->key = strdup(k))) goto out;
  }
  rc = 0;
out:
  /* yajl copies strings out of the input; scrub them before freeing. */
  if (rc == 0 || rc == -ENOMEM) {
    yajl_val st = jget(root, "status", NULL, yajl_t_object);
    for (size_t i = 0; st && i < st->u.object.len; i++) {
      yajl_val v = st->u.object.values[i];
      if (YAJL_IS_STRING(v)) explicit_bzero(v->u.string, strlen(v->u.string));
    }
  }
  if (rc < 0) kc_exec_cred_clear(out);
  yajl_tree_free(root);
  return rc;
}

/* ---- redaction ---- */

static bool tokchar(unsigned char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
         ch == '+' || ch == '/' || ch == '=' || ch == '.' || ch == '_' || ch == '-' || ch == '~';
}

/* A piece of a word between separators that reads as a name: shorter than
 * 16 and of one case ("authentication", "k8s", "v1beta1", "KUBERNETES"), or
 * camel case without digits whose capitals each start a lowercase run
 * ("expirationTimestamp", "ExecCredential"). Random base64 soon has two
 * capitals in a row or a capital before a digit; a long run of one case
 * (hex, a lowercase token) stays a credential. */
static bool name_piece(const char *s, size_t n) {
  bool upper = false, lower = false, has_digit = false, camel = true;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    bool up = ch >= 'A' && ch <= 'Z', lo = ch >= 'a' && ch <= 'z';
    bool digit = ch >= '0' && ch <= '9';
    if (!up && !lo && !digit) return false; /* '+' or '=': base64 */
    upper |= up;
    lower |= lo;
    has_digit |= digit;
    if (up && (i + 1 == n || !(s[i + 1] >= 'a' && s[i + 1] <= 'z'))) camel = false;
  }
  if (upper && lower) return camel && !has_digit;
  return n < 16;
}

/* Whether a word of token characters is text (a group/version, a URL path,
 * an environment variable's name) rather than a credential: every piece
 * between '.', '/', '-', '_' and '~' reads as a name. */
static bool name_word(const char *s, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && !strchr("./-_~", s[i])) continue;
    if (i > start && !name_piece(s + start, i - start)) return false;
    start = i + 1;
  }
  return true;
}

void kc_execcred_redact(char *line, const char *secret) {
  static const char R[] = "[REDACTED]";
  size_t rl = sizeof R - 1;
  if (secret && strlen(secret) >= 4) {
    size_t sl = strlen(secret);
    char *p, *from = line;
    while ((p = strstr(from, secret))) { /* never searches what it wrote */
      if (sl >= rl) {
        memcpy(p, R, rl);
        memmove(p + rl, p + sl, strlen(p + sl) + 1);
        from = p + rl;
      } else {
        memset(p, '*', sl);
        from = p + sl;
      }
    }
  }
  char *w = line;
  for (char *r = line; *r;) {
    if (tokchar((unsigned char)*r)) {
      char *s = r;
      while (*r && tokchar((unsigned char)*r)) r++;
      size_t n = (size_t)(r - s);
      if (n >= 16 && !name_word(s, n)) {
        memcpy(w, R, rl); /* n >= 16 > rl: never overtakes r */
        w += rl;
      } else {
        memmove(w, s, n);
        w += n;
      }
    } else {
      *w++ = *r++;
    }
  }
  *w = '\0';
}

/* ---- the source ---- */

struct kc_execcred {
  kc_exec_config *cfg;
  char **argv;
  char **envp;
  size_t nenvp;
  uint64_t timeout_ms;
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu;
  pthread_cond_t cond; /* CLOCK_MONOTONIC */
  int wake[2];         /* written on stop: interrupts a running plugin */
  /* guarded by mu: */
  bool stop;
  bool want;    /* a run is requested (no credential, a 401, a failure) */
  bool running;
  bool by_401;  /* the requested run was caused by a 401 */
  bool have;
  kc_exec_cred cur;
  uint64_t gen;       /* bumped when cur changes; 0 = none yet */
  int64_t cert_not_before; /* of cur's client certificate (unix s); 0 = none or unreadable */
  int64_t refresh_ms; /* wall clock ms of the proactive refresh; 0 = none */
  uint64_t next_try;  /* monotonic ms; runs not before */
  uint64_t backoff_ms;
  uint64_t runs, finished;
  void (*on_new)(void *ud); /* kc_execcred_on_new */
  void *on_new_ud;
};

static int64_t real_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void timed_wait(kc_execcred *s, uint64_t until_mono) {
  struct timespec ts;
  ts.tv_sec = (time_t)(until_mono / 1000);
  ts.tv_nsec = (long)(until_mono % 1000) * 1000000;
  pthread_cond_timedwait(&s->cond, &s->mu, &ts);
}

static bool valid_locked(const kc_execcred *s) {
  return s->have && (s->cur.expiry == 0 || real_ms() < s->cur.expiry * 1000);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_put(kc_buf *b, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                 (i + 2 < n ? p[i + 2] : 0);
    char q[4] = {B64[v >> 18 & 63], B64[v >> 12 & 63], i + 1 < n ? B64[v >> 6 & 63] : '=',
                 i + 2 < n ? B64[v & 63] : '='};
    kc_buf_add(b, q, 4);
  }
}

/* The CA bytes for spec.cluster: the inline data, else the file's content. */
static void put_ca(kc_buf *b, const kc_kube_creds *c) {
  if (c->ca_data && c->ca_len) {
    kc_buf_puts(b, ",\"certificate-authority-data\":\"");
    b64_put(b, (const unsigned char *)c->ca_data, c->ca_len);
    kc_buf_putc(b, '"');
    return;
  }
  if (!c->ca_file) return;
  FILE *f = fopen(c->ca_file, "re");
  if (!f) {
    kc_warn(COMPONENT, "provideClusterInfo: cannot read the CA file path=%s error=\"%s\"",
            c->ca_file, strerror(errno));
    return;
  }
  kc_buf data = {0};
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && data.len < (1u << 20)) kc_buf_add(&data, chunk, n);
  fclose(f);
  if (!data.err && data.len) {
    kc_buf_puts(b, ",\"certificate-authority-data\":\"");
    b64_put(b, (const unsigned char *)data.p, data.len);
    kc_buf_putc(b, '"');
  }
  kc_buf_free(&data);
}

static char *exec_info(const kc_kube_creds *c) {
  const kc_exec_config *x = c->exec;
  kc_buf b = {0};
  kc_buf_puts(&b, "KUBERNETES_EXEC_INFO={\"kind\":\"ExecCredential\",\"apiVersion\":");
  kc_buf_json_c(&b, x->api_version);
  kc_buf_puts(&b, ",\"spec\":{");
  if (x->provide_cluster_info) {
    kc_buf_puts(&b, "\"cluster\":{\"server\":");
    kc_buf_json_c(&b, c->server);
    if (c->tls_server_name) {
      kc_buf_puts(&b, ",\"tls-server-name\":");
      kc_buf_json_c(&b, c->tls_server_name);
    }
    if (c->insecure) kc_buf_puts(&b, ",\"insecure-skip-tls-verify\":true");
    put_ca(&b, c);
    if (c->proxy_url) {
      kc_buf_puts(&b, ",\"proxy-url\":");
      kc_buf_json_c(&b, c->proxy_url);
    }
    if (x->cluster_config) {
      kc_buf_puts(&b, ",\"config\":");
      kc_buf_puts(&b, x->cluster_config);
    }
    kc_buf_puts(&b, "},");
  }
  kc_buf_puts(&b, "\"interactive\":false}}");
  return kc_buf_take(&b);
}

static bool overridden(const kc_exec_config *x, const char *var) {
  size_t n = strcspn(var, "=");
  if (n == strlen("KUBERNETES_EXEC_INFO") && strncmp(var, "KUBERNETES_EXEC_INFO", n) == 0) return true;
  for (size_t i = 0; i < x->nenv; i++)
    if (strlen(x->env[i].name) == n && strncmp(var, x->env[i].name, n) == 0) return true;
  return false;
}

static int build_env(kc_execcred *s, const kc_kube_creds *c) {
  size_t n = 0;
  for (char **e = environ; e && *e; e++) n++;
  s->envp = calloc(n + s->cfg->nenv + 2, sizeof *s->envp);
  if (!s->envp) return -ENOMEM;
  for (char **e = environ; e && *e; e++) {
    if (overridden(s->cfg, *e)) continue;
    if (!(s->envp[s->nenvp] = strdup(*e))) return -ENOMEM;
    s->nenvp++;
  }
  for (size_t i = 0; i < s->cfg->nenv; i++) {
    if (asprintf(&s->envp[s->nenvp], "%s=%s", s->cfg->env[i].name, s->cfg->env[i].value) < 0) {
      s->envp[s->nenvp] = NULL;
      return -ENOMEM;
    }
    s->nenvp++;
  }
  if (!(s->envp[s->nenvp] = exec_info(c))) return -ENOMEM;
  s->nenvp++;
  return 0;
}

/* Logs the collected stderr lines, redacted (never the stdout). */
static void log_stderr(kc_execcred *s, kc_buf *errout, const char *tok1, const char *tok2) {
  if (!errout->len) return;
  char *save = NULL;
  for (char *line = strtok_r(errout->p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    size_t n = strlen(line);
    if (n && line[n - 1] == '\r') line[--n] = '\0';
    if (n > LINE_MAX_LOG) line[LINE_MAX_LOG] = '\0';
    kc_execcred_redact(line, tok1);
    kc_execcred_redact(line, tok2);
    kc_info(COMPONENT, "exec plugin stderr: %s (%s)", line, s->cfg->where);
  }
  explicit_bzero(errout->p, errout->cap);
}

/* Runs the plugin once; off the loop thread (the refresh thread). */
static int run_plugin(kc_execcred *s, kc_exec_cred *fresh, const char *old_token, char *err,
                      size_t errlen) {
  kc_buf out = {0}, errout = {0};
  kc_buf_set_max(&out, KC_EXEC_STDOUT_MAX);
  kc_buf_set_max(&errout, STDERR_MAX);
  pid_t pid = -1;
  /* stdin /dev/null, stdout and stderr on pipes; spawn.h gives it its own
   * process group (killed whole on timeout) and nothing else of ours. */
  const int stdio[3] = {KC_SPAWN_NULL, KC_SPAWN_PIPE, KC_SPAWN_PIPE};
  int ours[3] = {-1, -1, -1};
  char spawn_err[512];
  int rc = kc_spawn((const char *const *)s->argv, (const char *const *)s->envp, stdio, ours, &pid,
                    spawn_err, sizeof spawn_err);
  if (rc != 0) {
    /* client-go: a command that cannot be found or started counts with exit
     * code 1 as not found; anything else of ours as an internal error. */
    kc_rest_metrics_exec_call(1, rc == -ENOENT || rc == -EACCES ? KC_EXEC_NOT_FOUND
                                                                : KC_EXEC_INTERNAL_ERROR);
    if (rc == -ENOENT && s->cfg->install_hint)
      kc_errf(err, errlen, "executable %s not found; %s", s->argv[0], s->cfg->install_hint);
    else if (rc == -ENOENT)
      kc_errf(err, errlen, "executable %s not found", s->argv[0]);
    else
      kc_errf(err, errlen, "%s", spawn_err);
    goto done;
  }
  const int out_fd = ours[1], err_fd = ours[2];
  uint64_t deadline = kc_clock_now_ms() + s->timeout_ms;
  bool out_open = true, err_open = true, timed_out = false, stopped = false, too_big = false;
  int status = 0;
  bool exited = false;
  while (!exited) {
    uint64_t now = kc_clock_now_ms();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    struct pollfd pf[3] = {{.fd = s->wake[0], .events = POLLIN},
                           {.fd = out_open ? out_fd : -1, .events = POLLIN},
                           {.fd = err_open ? err_fd : -1, .events = POLLIN}};
    /* With both pipes closed, wait for the exit in short steps. */
    int wait = (int)(deadline - now);
    if (!out_open && !err_open && wait > 10) wait = 10;
    int pr = poll(pf, 3, wait);
    if (pr < 0 && errno != EINTR) {
      rc = -errno;
      kc_errf(err, errlen, "poll: %s", strerror(errno));
      break;
    }
    if (pr > 0 && pf[0].revents) {
      stopped = true;
      break;
    }
    char chunk[8192];
    if (pr > 0 && pf[1].revents) {
      ssize_t n = read(out_fd, chunk, sizeof chunk);
      if (n > 0) {
        kc_buf_add(&out, chunk, (size_t)n);
        explicit_bzero(chunk, (size_t)n);
        if (out.err) {
          too_big = true;
          break;
        }
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        out_open = false;
      }
    }
    if (pr > 0 && pf[2].revents) {
      ssize_t n = read(err_fd, chunk, sizeof chunk);
      if (n > 0) kc_buf_add(&errout, chunk, (size_t)n); /* past the limit: dropped */
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) err_open = false;
    }
    if (!out_open && !err_open) {
      /* Not reaped yet: the group is killed below while its id cannot
       * have been reused. */
      int ex = kc_spawn_exited(pid);
      if (ex > 0) {
        exited = true;
      } else if (ex < 0) {
        rc = ex;
        break;
      }
    }
  }
  /* The whole group: the plugin itself when it did not finish, what it
   * left behind when it did. */
  kc_spawn_kill_group(pid, SIGKILL);
  kc_spawn_reap(pid, &status);
  if (!exited) {
    /* Killed here (timeout, too much output): Go reports a process ended
     * by a signal as exit code -1. A run stopped by shutdown is not a call's
     * outcome. */
    if (rc < 0) kc_rest_metrics_exec_call(1, KC_EXEC_INTERNAL_ERROR);
    else if (!stopped) kc_rest_metrics_exec_call(-1, KC_EXEC_EXECUTION_ERROR);
    if (rc == 0) {
      if (stopped) {
        rc = -ECANCELED;
        kc_errf(err, errlen, "stopped");
      } else if (timed_out) {
        rc = -ETIMEDOUT;
        kc_errf(err, errlen, "%s did not finish within %llu s; its process group was killed",
                s->argv[0], (unsigned long long)(s->timeout_ms / 1000));
      } else if (too_big) {
        rc = -E2BIG;
        kc_errf(err, errlen, "%s wrote more than %u bytes to stdout; killed", s->argv[0],
                KC_EXEC_STDOUT_MAX);
      }
    }
  } else {
    if (WIFEXITED(status))
      kc_rest_metrics_exec_call(WEXITSTATUS(status),
                                WEXITSTATUS(status) ? KC_EXEC_EXECUTION_ERROR : KC_EXEC_NO_ERROR);
    else
      kc_rest_metrics_exec_call(-1, KC_EXEC_EXECUTION_ERROR);
    if ((WIFEXITED(status) && WEXITSTATUS(status) != 0) || WIFSIGNALED(status)) {
      rc = -EIO;
      char how[128];
      kc_spawn_describe_status(status, how, sizeof how);
      kc_errf(err, errlen, "%s %s", s->argv[0], how);
    } else {
      char why[400];
      rc = kc_execcred_parse(out.p ? out.p : "", out.len, s->cfg->api_version, fresh, why,
                             sizeof why);
      if (rc == -EINVAL) kc_errf(err, errlen, "%s: %s", s->argv[0], why);
      if (rc == 0 && fresh->expiry && fresh->expiry * 1000 <= real_ms()) {
        kc_exec_cred_clear(fresh);
        rc = -EINVAL;
        kc_errf(err, errlen, "%s returned a credential whose expirationTimestamp has passed (check "
                "the clock)", s->argv[0]);
      }
    }
  }
  log_stderr(s, &errout, old_token, rc == 0 ? fresh->token : NULL);
done:
  for (int i = 1; i < 3; i++)
    if (ours[i] >= 0) close(ours[i]);
  if (out.p) explicit_bzero(out.p, out.cap);
  kc_buf_free(&out);
  kc_buf_free(&errout);
  return rc;
}

static void *refresh_main(void *arg) {
  kc_execcred *s = arg;
  kc_log_set_context("exec-credential");
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    uint64_t now = kc_clock_now_ms();
    bool due = s->want || (s->have && s->refresh_ms && real_ms() >= s->refresh_ms);
    if (!due) {
      if (s->have && s->refresh_ms) {
        int64_t d = s->refresh_ms - real_ms();
        timed_wait(s, now + (uint64_t)(d > 0 ? d : 0));
      } else {
        pthread_cond_wait(&s->cond, &s->mu);
      }
      continue;
    }
    if (now < s->next_try) {
      timed_wait(s, s->next_try);
      continue;
    }
    bool by_401 = s->by_401;
    s->running = true;
    s->runs++;
    char *old = s->cur.token ? strdup(s->cur.token) : NULL;
    pthread_mutex_unlock(&s->mu);

    kc_exec_cred fresh = {0};
    char err[1024] = "";
    uint64_t t0 = kc_clock_now_ms();
    int rc = run_plugin(s, &fresh, old, err, sizeof err);
    uint64_t took = kc_clock_now_ms() - t0;
    /* The certificate's validity, for the TTL and rotation-age metrics (a
     * certificate whose dates cannot be read counts as none there). */
    int64_t not_before = 0, not_after = 0;
    if (rc == 0 && fresh.cert &&
        kc_x509_pem_validity(fresh.cert, fresh.cert_len, &not_before, &not_after) < 0)
      not_before = not_after = 0;

    pthread_mutex_lock(&s->mu);
    s->running = false;
    s->finished++;
    bool same = rc == 0 && s->have && cred_equal(&fresh, &s->cur);
    if (rc == 0 && !(same && by_401)) {
      /* client-go observes the age of a certificate replaced by another
       * (or dropped), from its notBefore. */
      bool rotated = s->have && s->cur.cert && !str_eq(s->cur.cert, fresh.cert);
      int64_t rotated_not_before = rotated ? s->cert_not_before : 0;
      s->cert_not_before = not_before;
      kc_exec_cred_clear(&s->cur);
      s->cur = fresh;
      s->have = true;
      s->gen++;
      s->want = s->by_401 = false;
      s->backoff_ms = 0;
      s->next_try = kc_clock_now_ms() + MIN_INTERVAL_MS;
      s->refresh_ms = 0;
      if (s->cur.expiry) {
        int64_t life = s->cur.expiry * 1000 - real_ms();
        int64_t margin = life / 10 < 30000 ? life / 10 : 30000;
        s->refresh_ms = s->cur.expiry * 1000 - (margin > 0 ? margin : 0);
      }
      int64_t left = s->cur.expiry ? s->cur.expiry - real_ms() / 1000 : 0;
      bool tok = s->cur.token != NULL, cert = s->cur.cert != NULL;
      void (*on_new)(void *) = same ? NULL : s->on_new;
      void *on_new_ud = s->on_new_ud;
      /* Before waiters wake: whoever sees the new credential sees its
       * certificate's figures too. */
      kc_rest_metrics_exec_cert(not_after, rotated_not_before, real_ms() / 1000);
      pthread_cond_broadcast(&s->cond);
      pthread_mutex_unlock(&s->mu);
      if (on_new) on_new(on_new_ud);
      if (left)
        kc_info(COMPONENT, "exec plugin gave a %s expiring in %llds (%s, %llu ms)",
                tok && cert ? "token and client certificate" : tok ? "token" : "client certificate",
                (long long)left, s->cfg->where, (unsigned long long)took);
      else
        kc_info(COMPONENT, "exec plugin gave a %s without expiry (%s, %llu ms)",
                tok && cert ? "token and client certificate" : tok ? "token" : "client certificate",
                s->cfg->where, (unsigned long long)took);
    } else {
      if (same) kc_exec_cred_clear(&fresh);
      s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : BACKOFF_MIN_MS;
      if (s->backoff_ms > BACKOFF_MAX_MS) s->backoff_ms = BACKOFF_MAX_MS;
      s->next_try = kc_clock_now_ms() + s->backoff_ms;
      s->want = true; /* keep trying */
      uint64_t backoff = s->backoff_ms;
      bool stop = s->stop;
      pthread_cond_broadcast(&s->cond);
      pthread_mutex_unlock(&s->mu);
      if (same)
        kc_warn(COMPONENT, "exec plugin returned the credential the API server rejected (401); "
                "retrying in %llus (%s)", (unsigned long long)(backoff / 1000), s->cfg->where);
      else if (!stop)
        kc_error(COMPONENT, "exec plugin failed: %s; retrying in %llus (%s)", err,
                 (unsigned long long)(backoff / 1000), s->cfg->where);
    }
    if (old) zfree(old, strlen(old));
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static uint64_t timeout_from_env(void) {
  const char *v = getenv("KCTRLD_EXEC_TIMEOUT_SECONDS");
  if (!v || !*v) return DEFAULT_TIMEOUT_MS;
  char *end;
  long n = strtol(v, &end, 10);
  if (*end || n < 1 || n > 3600) {
    kc_warn(COMPONENT, "KCTRLD_EXEC_TIMEOUT_SECONDS=\"%s\" is not 1..3600; using %d s", v,
            DEFAULT_TIMEOUT_MS / 1000);
    return DEFAULT_TIMEOUT_MS;
  }
  return (uint64_t)n * 1000;
}

int kc_execcred_new(const kc_kube_creds *creds, kc_execcred **out) {
  if (!creds || !creds->exec) return -EINVAL;
  kc_execcred *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  s->wake[0] = s->wake[1] = -1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cond, &ca);
  pthread_condattr_destroy(&ca);
  s->timeout_ms = timeout_from_env();
  int rc = kc_exec_config_dup(creds->exec, &s->cfg);
  if (rc == 0 && !(s->argv = calloc(s->cfg->nargs + 2, sizeof *s->argv))) rc = -ENOMEM;
  if (rc == 0) {
    s->argv[0] = s->cfg->command;
    for (size_t i = 0; i < s->cfg->nargs; i++) s->argv[i + 1] = s->cfg->args[i];
    rc = build_env(s, creds);
  }
  if (rc == 0 && pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    s->wake[0] = s->wake[1] = -1;
    rc = -errno;
  }
  s->want = true;
  if (rc == 0) kc_rest_metrics_exec_configured();
  if (rc == 0) {
    int e = pthread_create(&s->thread, NULL, refresh_main, s);
    if (e) rc = -e;
    else s->thread_started = true;
  }
  if (rc < 0) {
    kc_execcred_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void kc_execcred_on_new(kc_execcred *s, void (*fn)(void *ud), void *ud) {
  pthread_mutex_lock(&s->mu);
  s->on_new = fn;
  s->on_new_ud = ud;
  pthread_mutex_unlock(&s->mu);
}

void kc_execcred_free(kc_execcred *s) {
  if (!s) return;
  if (s->thread_started) {
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    char b = 1;
    if (write(s->wake[1], &b, 1) < 0) {
      /* full pipe: a wake-up is pending anyway */
    }
    pthread_join(s->thread, NULL);
  }
  for (int i = 0; i < 2; i++)
    if (s->wake[i] >= 0) close(s->wake[i]);
  for (size_t i = 0; s->envp && i < s->nenvp; i++) zfree(s->envp[i], strlen(s->envp[i]));
  free(s->envp);
  free(s->argv);
  kc_exec_config_free(s->cfg);
  kc_exec_cred_clear(&s->cur);
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

int kc_execcred_current(kc_execcred *s, uint64_t wait_ms, uint64_t stale_gen, kc_exec_cred *out,
                        uint64_t *gen) {
  memset(out, 0, sizeof *out);
  *gen = 0;
  pthread_mutex_lock(&s->mu);
  if (!valid_locked(s) && !s->want) {
    s->want = true;
    pthread_cond_broadcast(&s->cond);
  }
  if (wait_ms) {
    /* Until the next run ends (or the one in progress). */
    uint64_t until = kc_clock_now_ms() + wait_ms, seen = s->finished;
    while (!s->stop && (!valid_locked(s) || (stale_gen && s->gen == stale_gen)) &&
           (s->running || s->want) && s->finished == seen && kc_clock_now_ms() < until)
      timed_wait(s, until);
  }
  int rc = -EAGAIN;
  if (valid_locked(s)) {
    rc = cred_copy(&s->cur, out);
    *gen = s->gen;
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

void kc_execcred_rejected(kc_execcred *s, uint64_t gen) {
  pthread_mutex_lock(&s->mu);
  if (gen == s->gen && !s->want && !s->running) {
    s->want = s->by_401 = true;
    pthread_cond_broadcast(&s->cond);
  }
  pthread_mutex_unlock(&s->mu);
}

uint64_t kc_execcred_runs(kc_execcred *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->runs;
  pthread_mutex_unlock(&s->mu);
  return n;
}
