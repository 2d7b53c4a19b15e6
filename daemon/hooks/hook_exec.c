/* SPDX-License-Identifier: Apache-2.0 */
/* hook_exec: see hook_exec.h. */
#include "hooks/hook_exec.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/childpool.h"
#include "base/clock.h"
#include "base/buf.h"
#include "base/fileperm.h"
#include "base/spawn.h"
#include "hooks/hook_health.h"
#include "base/hash.h"
#include "hooks/hook_child.h"
#include "hooks/hook_host.h"
#include "hooks/hook_proto.h"
#include "host/hostapi.h"

extern char **environ;

typedef struct hook_exec {
  kc_hook_base base; /* controller, kinds, nslots, attempts */
  char **argv;
  char **envp;
  uint64_t timeout_ms;
  enum kc_hook_exec_mode mode;
  size_t max_response;
  uint64_t grace_ms;
  kc_childpool *pool; /* persistent mode: the children (kc_hook_child), one slot per worker */
  kc_hook_health_entry *health; /* does the hook answer (readiness) */
} hook_exec;

static const struct kctrld_host_api *H(void) {
  return kc_hostapi_table();
}

/* ---- lifecycle -------------------------------------------------------------- */

static void free_strv(char **v) {
  for (size_t i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}

static void exec_free(hook_exec *x) {
  kc_hook_health_unregister(x->health);
  kc_hook_base_free(&x->base);
  free_strv(x->argv);
  free_strv(x->envp);
  kc_childpool_free(x->pool);
  free(x);
}

static bool env_overridden(const kc_hook_exec_spec *ex, const char *entry) {
  const char *eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  for (size_t i = 0; i < ex->nenv; i++)
    if (strncmp(ex->env[i], entry, n) == 0 && ex->env[i][n] == '=') return true;
  return false;
}

/* The daemon's environment with the hook's env on top (copied now). */
static char **build_env(const kc_hook_exec_spec *ex) {
  size_t n = 0;
  for (char **e = environ; e && *e; e++)
    n++;
  char **v = calloc(n + ex->nenv + 1, sizeof *v);
  if (!v) return NULL;
  size_t k = 0;
  for (char **e = environ; e && *e; e++)
    if (!env_overridden(ex, *e) && !(v[k++] = strdup(*e))) goto oom;
  for (size_t i = 0; i < ex->nenv; i++)
    if (!(v[k++] = strdup(ex->env[i]))) goto oom;
  return v;
oom:
  free_strv(v);
  return NULL;
}

int kc_hook_exec_check(const kc_hook_exec_spec *ex, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  /* A program named by path is trusted code, checked like a plugin file
   * (fileperm.h); one found in PATH is the system's. */
  if (!ex->ncommand || !strchr(ex->command[0], '/')) return 0;
  int rc = kc_fileperm_check_path("hook program", ex->command[0], "run code others can change",
                                  KC_FILEPERM_OWNER, err, errlen);
  if (rc == -ENOENT) kc_errf(err, errlen, "hook program %s does not exist", ex->command[0]);
  return rc;
}

static bool has_exec(const kc_controller_spec *spec) {
  return spec->hook && spec->hook->exec;
}

static int exec_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **instance) {
  const kc_controller_spec *spec = kc_hook_init_spec(instance, "exec hook", "hook.exec", has_exec);
  if (!spec) return -EINVAL;
  const kc_hook_exec_spec *ex = spec->hook->exec;
  char err[512];
  int rc = kc_hook_exec_check(ex, err, sizeof err);
  if (rc < 0) {
    H()->log(KCTRLD_LOG_ERROR, "%s", err);
    return rc;
  }
  hook_exec *x = calloc(1, sizeof *x);
  if (!x) return -ENOMEM;
  if (kc_hook_base_init(&x->base, spec) < 0) {
    free(x);
    return -ENOMEM;
  }
  x->timeout_ms = (uint64_t)ex->timeout_ms;
  x->mode = ex->mode;
  x->max_response = (size_t)ex->max_response_bytes;
  x->grace_ms = (uint64_t)ex->stop_grace_ms;
  x->pool = kc_childpool_new(x->base.nslots, KC_HOOK_RESTART_BASE_MS, KC_HOOK_RESTART_MAX_MS);
  x->health = kc_hook_health_register(spec->name, x->timeout_ms);
  x->argv = calloc(ex->ncommand + 1, sizeof *x->argv);
  x->envp = build_env(ex);
  bool ok = x->pool && x->argv && x->envp;
  for (size_t i = 0; ok && i < ex->ncommand; i++)
    ok = (x->argv[i] = strdup(ex->command[i])) != NULL;
  if (!ok) {
    exec_free(x);
    return -ENOMEM;
  }
  H()->log(KCTRLD_LOG_INFO, "exec hook %s mode=%s timeout=%llums workers=%zu", x->argv[0],
           x->mode == KC_HOOK_MODE_PER_CALL ? "per-call" : "persistent",
           (unsigned long long)x->timeout_ms, x->base.nslots);
  *instance = x;
  return 0;
}

static void exec_fini(void *instance) {
  hook_exec *x = instance;
  if (!x) return;
  kc_hook_child *v[64];
  size_t n = 0;
  for (size_t i = 0; i < x->base.nslots; i++) {
    void **child = kc_childpool_child(x->pool, i);
    if (!*child) continue;
    v[n++] = *child;
    *child = NULL;
    if (n == sizeof v / sizeof v[0]) {
      kc_hook_child_stop(v, n, x->grace_ms);
      n = 0;
    }
  }
  kc_hook_child_stop(v, n, x->grace_ms);
  exec_free(x);
}

/* ---- one exchange -------------------------------------------------------- */

/* stderr of the child, on the reconcile's thread: the host's log adds the
 * controller and the key. */
static void stderr_line(void *ud, pid_t pid, const char *line, size_t len) {
  (void)ud;
  H()->log(KCTRLD_LOG_INFO, "hook stderr: %.*s pid=%d", (int)len, line, (int)pid);
}

/* Why an exchange failed, for the reconcile error. */
static void describe_failure(hook_exec *x, int rc, pid_t pid, int status, bool have_status,
                             char *buf, size_t cap) {
  char st[96] = "";
  if (have_status) kc_spawn_describe_status(status, st, sizeof st);
  switch (rc) {
  case -ETIMEDOUT:
    snprintf(buf, cap, "hook pid=%d timed out after %llums; killed", (int)pid,
             (unsigned long long)x->timeout_ms);
    break;
  case -EPIPE:
    snprintf(buf, cap, "hook pid=%d %s before answering", (int)pid,
             have_status ? st : "closed its pipes");
    break;
  case -E2BIG:
    snprintf(buf, cap, "hook pid=%d: response larger than maxResponseBytes (%zu); killed", (int)pid,
             x->max_response);
    break;
  case -EPROTO:
    snprintf(buf, cap,
             "hook pid=%d out of step (more than one line, or an answer before the request was "
             "read); killed",
             (int)pid);
    break;
  default: snprintf(buf, cap, "hook pid=%d: %s; killed", (int)pid, strerror(-rc)); break;
  }
}

/* An exchange that ended without any answer from the hook (readiness:
 * hook_health.h); a too large or out-of-step answer is still an answer. */
static bool no_answer(int rc) { return rc == -ETIMEDOUT || rc == -EPIPE; }

/* The child of a slot was lost reconciling a key (already killed): the key
 * pays (its error result); the slot starts a new child for the next key,
 * unless keys in a row keep losing children (base/childpool.h: backoff is
 * then the wait). Returns the error result with why and what comes next. */
static int lost_result(kctrld_ctx *ctx, const char *why, uint64_t backoff) {
  if (!backoff) return H()->result_error(ctx, "%s; restarted for the next key", why);
  return H()->result_error(ctx,
                           "%s; %d keys in a row lost their hook child: the program backs off, "
                           "no new child for %.1fs",
                           why, KC_CHILDPOOL_BREAK_KEYS, (double)backoff / 1e9);
}

/* Releases slot i as lost on key and returns lost_result. */
static int lose_slot(hook_exec *x, kctrld_ctx *ctx, int i, const char *key, const char *why) {
  return lost_result(ctx, why, kc_childpool_release(x->pool, (size_t)i, KC_CHILDPOOL_LOST, key, why));
}

/* Persistent mode: the exchange on a slot's child (started if needed).
 * Returns 0 with the response in resp and the slot in *slot (released by
 * the caller), or a result already set: an error (the slot, if it lost its
 * child, already released: *slot -1), or a hold (*held: the program backs
 * off as a whole; the key was not run). */
static int run_persistent(hook_exec *x, kctrld_ctx *ctx, const char *key, kc_buf *req, kc_buf *resp,
                          int *slot, bool *held) {
  const struct kctrld_host_api *h = H();
  uint64_t start = kc_clock_now_ns(), hold_ns = 0;
  char why[512];
  int i = kc_childpool_take(x->pool, &hold_ns, why, sizeof why);
  if (i == -EAGAIN) {
    *held = true;
    return kc_hook_result_held(h, ctx, hold_ns, why);
  }
  if (i < 0) return h->result_error(ctx, "no free hook slot (more reconciles than workers)");
  *slot = i;
  void **child = kc_childpool_child(x->pool, (size_t)i);
  if (!*child) {
    char err[256];
    kc_hook_child *c = NULL;
    int rc = kc_hook_child_spawn(x->base.controller, (const char *const *)x->argv,
                                 (const char *const *)x->envp, &c, err, sizeof err);
    if (rc < 0) {
      *slot = -1;
      kc_hook_health_end(x->health, -1, false, err);
      return lose_slot(x, ctx, i, key, err);
    }
    *child = c;
    h->log(KCTRLD_LOG_INFO, "hook child started pid=%d", (int)kc_hook_child_pid(c));
  }
  kc_hook_child *c = *child;
  kc_buf_putc(req, '\n');
  if (req->err) return h->result_error(ctx, "out of memory building the hook request");
  pid_t pid = kc_hook_child_pid(c);
  int token = kc_hook_health_begin(x->health);
  int rc = kc_hook_child_exchange(c, req->p, req->len, KC_HOOK_READ_LINE,
                                  start + x->timeout_ms * 1000000ull, x->max_response, resp, NULL,
                                  stderr_line, NULL);
  if (rc == 0) {
    kc_hook_health_end(x->health, token, true, NULL);
    return 0;
  }
  int status = 0;
  kc_hook_child_kill(c, &status, stderr_line, NULL);
  *child = NULL;
  describe_failure(x, rc, pid, status, rc == -EPIPE, why, sizeof why);
  *slot = -1;
  uint64_t backoff = kc_childpool_release(x->pool, (size_t)i, KC_CHILDPOOL_LOST, key, why);
  /* A child lost on one key is that key's problem (a poison object), and
   * one bad object must not take the replica out of service: readiness
   * hears of a lost child only once the program backs off as a whole. A
   * hook that does not answer in time is not answering whatever the key. */
  if (rc == -EPIPE && !backoff)
    kc_hook_health_abandon(x->health, token);
  else
    kc_hook_health_end(x->health, token, !no_answer(rc), why);
  return lost_result(ctx, why, backoff);
}

/* The response was garbage: the child's stream cannot be trusted. */
static int kill_slot(hook_exec *x, kctrld_ctx *ctx, int *slot, const char *key, const char *why) {
  void **child = kc_childpool_child(x->pool, (size_t)*slot);
  kc_hook_child_kill(*child, NULL, stderr_line, NULL);
  *child = NULL;
  int i = *slot;
  *slot = -1;
  return lose_slot(x, ctx, i, key, why);
}

/* Per-call mode: one run of the command. */
static int run_per_call(hook_exec *x, kctrld_ctx *ctx, const kc_buf *req, kc_buf *resp) {
  const struct kctrld_host_api *h = H();
  char err[256];
  kc_hook_child *c = NULL;
  int rc = kc_hook_child_spawn(x->base.controller, (const char *const *)x->argv,
                               (const char *const *)x->envp, &c, err, sizeof err);
  if (rc < 0) {
    kc_hook_health_end(x->health, -1, false, err);
    return h->result_error(ctx, "%s", err);
  }
  pid_t pid = kc_hook_child_pid(c);
  int status = 0;
  int token = kc_hook_health_begin(x->health);
  rc = kc_hook_child_exchange(c, req->p, req->len, KC_HOOK_READ_EOF,
                              kc_clock_now_ns() + x->timeout_ms * 1000000ull, x->max_response, resp,
                              &status, stderr_line, NULL);
  kc_hook_child_kill(c, rc ? &status : NULL, stderr_line, NULL);
  if (rc < 0) {
    char why[256];
    describe_failure(x, rc, pid, status, false, why, sizeof why);
    kc_hook_health_end(x->health, token, !no_answer(rc), why);
    return h->result_error(ctx, "%s", why);
  }
  kc_hook_health_end(x->health, token, true, NULL);
  if (status != 0) {
    char st[96];
    kc_spawn_describe_status(status, st, sizeof st);
    return h->result_error(ctx, "hook pid=%d %s", (int)pid, st);
  }
  return 0;
}

static int exec_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  hook_exec *x = instance;
  const struct kctrld_host_api *h = H();
  kc_buf req = {0}, resp = {0};
  kc_hook_input in = {0};
  kc_hook_response r = {0};
  int slot = -1;
  bool good = false, held = false;
  char err[256];
  int res;
  int rc =
      kc_hook_request_build(h, ctx, &x->base.kinds, key, kc_hook_attempt_of(&x->base.attempts, key),
                            &req, &in, err, sizeof err);
  if (rc < 0) {
    res = h->result_error(ctx, "hook request: %s", err);
    goto out;
  }
  if (rc > 0) { /* nothing to ask (kc_hook_request_build) */
    res = KCTRLD_RESULT_DONE;
    goto out;
  }
  res = x->mode == KC_HOOK_MODE_PER_CALL ? run_per_call(x, ctx, &req, &resp)
                                         : run_persistent(x, ctx, key, &req, &resp, &slot, &held);
  if (res != 0) goto out;
  rc = kc_hook_response_parse(resp.p ? resp.p : "", resp.len, x->max_response, &r, err, sizeof err);
  if (rc < 0) {
    char why[320];
    snprintf(why, sizeof why, "hook response: %s", err);
    res = x->mode == KC_HOOK_MODE_PERSISTENT ? kill_slot(x, ctx, &slot, key, why)
                                             : h->result_error(ctx, "%s", why);
    goto out;
  }
  good = true;
  res = kc_hook_perform(h, ctx, &x->base.kinds, key, &in, &r);
out:
  if (slot >= 0)
    kc_childpool_release(x->pool, (size_t)slot, good ? KC_CHILDPOOL_ANSWERED : KC_CHILDPOOL_UNUSED,
                         key, NULL);
  if (!held) /* a held key was not run: nothing to count */
    kc_hook_attempt_settle(&x->base.attempts, key,
                           res == KCTRLD_RESULT_DONE || res == KCTRLD_RESULT_REQUEUE_AFTER);
  kc_hook_response_free(&r);
  kc_hook_input_release(h, &in);
  kc_buf_free(&req);
  kc_buf_free(&resp);
  return res;
}

KC_BUILTIN_PLUGIN(kc_hook_exec_plugin, "exec-hook", exec_init, exec_reconcile, exec_fini)
