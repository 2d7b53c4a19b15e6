/* SPDX-License-Identifier: Apache-2.0 */
/* isolate: see isolate.h.
 *
 * The conversation with a child (isolate_wire.h lines; every line the
 * daemon writes is answered by exactly one line of the child):
 *   daemon: init CONTROLLER PATH HAS_SETTINGS SETTINGS_YAML SETTINGS_NAME INSECURE
 *           (INSECURE: 1 under --allow-insecure-permissions)
 *   child:  ready | fail ERRNO MESSAGE
 *   daemon: rec KEY
 *   child:  res RESULT AFTER_MS MESSAGE HAS_PRIORITY PRIORITY
 *           (HAS_PRIORITY 1: the reconcile asked for PRIORITY, plugin.h
 *           result_requeue_priority)
 * and while the child handles init or rec, any number of
 *   child:  call OP ARGS...
 *   daemon: ret RC RESULTS...
 * served by the ops table below, one entry per operation. */
#include "hooks/isolate.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/childpool.h"
#include "base/clock.h"
#include "watch/decode.h"
#include "base/fileperm.h"
#include "base/log.h"
#include "base/spawn.h"
#include "client/events.h"
#include "hooks/hook_child.h"
#include "hooks/hook_exec.h"
#include "hooks/hook_host.h"
#include "host/hostapi.h"
#include "hooks/isolate_child.h"
#include "hooks/isolate_wire.h"
#include "host/dryrun.h"
#include "host/plugin_host.h"
#include "kube/selector.h"
#include "cache/store.h"

extern char **environ;

#define STOP_GRACE_MS 5000
/* A plugin's init (and the child's start) may take at most this, or the
 * reconcileTimeout when shorter: on the loop thread at instance creation. */
#define INIT_TIMEOUT_MS 10000

typedef struct isolated {
  kc_hook_base base; /* controller, kinds (unused), nslots, attempts (unused) */
  char *path;        /* the plugin file */
  kc_buf init;       /* the init message (settings as YAML text) */
  uint64_t timeout_ms;
  kc_childpool *pool;    /* the children (kc_hook_child), one slot per worker */
  struct isolated *next; /* in g_instances (g_inst_mu) */
} isolated;

static const struct kctrld_host_api *H(void) {
  return kc_hostapi_table();
}

/* ---- process-wide: the counters, the instances ----------------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
/* One per controller name: its panics and the deaths of idle children. */
struct ctl_counts {
  struct ctl_counts *next;
  uint64_t panics;
  uint64_t idle_exits;
  char controller[];
};
static struct ctl_counts *g_counts;
/* The instances between init and fini, for kc_isolate_reap_idle. Lock
 * order: g_inst_mu, then an instance's pool (inside childpool.c), then
 * g_mu. Held across a reap pass, so that fini (which unlinks first) never
 * frees an instance the pass is looking at. */
static pthread_mutex_t g_inst_mu = PTHREAD_MUTEX_INITIALIZER;
static isolated *g_instances;

/* controller's counters, or NULL when it has none yet; call with g_mu held. */
static struct ctl_counts *find_counts(const char *controller) {
  struct ctl_counts *c = g_counts;
  while (c && strcmp(c->controller, controller) != 0)
    c = c->next;
  return c;
}

uint64_t kc_isolate_panics(const char *controller) {
  pthread_mutex_lock(&g_mu);
  const struct ctl_counts *c = find_counts(controller);
  uint64_t n = c ? c->panics : 0;
  pthread_mutex_unlock(&g_mu);
  return n;
}

uint64_t kc_isolate_idle_exits(const char *controller) {
  pthread_mutex_lock(&g_mu);
  const struct ctl_counts *c = find_counts(controller);
  uint64_t n = c ? c->idle_exits : 0;
  pthread_mutex_unlock(&g_mu);
  return n;
}

/* Counts a panic (idle false) or an idle child's death (idle true). */
static void count(const char *controller, bool idle) {
  pthread_mutex_lock(&g_mu);
  struct ctl_counts *c = find_counts(controller);
  if (!c) {
    size_t len = strlen(controller) + 1;
    if ((c = malloc(sizeof *c + len))) {
      memcpy(c->controller, controller, len);
      c->panics = 0;
      c->idle_exits = 0;
      c->next = g_counts;
      g_counts = c;
    }
  }
  if (c && idle) c->idle_exits++;
  else if (c) c->panics++;
  pthread_mutex_unlock(&g_mu);
}

/* ---- settings as YAML text -------------------------------------------------- */

static void yaml_quoted(kc_buf *b, const char *s, size_t len) {
  kc_buf_putc(b, '"');
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      kc_buf_putc(b, '\\');
      kc_buf_putc(b, (char)c);
    } else if (c == '\n') {
      kc_buf_puts(b, "\\n");
    } else if (c < 0x20 || c == 0x7f) {
      kc_buf_printf(b, "\\x%02x", c);
    } else {
      kc_buf_putc(b, (char)c);
    }
  }
  kc_buf_putc(b, '"');
}

static void yaml_value(kc_buf *b, const kc_yaml_node *n, int indent) {
  switch (n->type) {
  case KC_YAML_SCALAR:
    /* A plain scalar stays plain (typed reads want it so); one that was
     * plain anywhere in the file is plain in block context too. */
    if (n->u.scalar.plain) {
      if (n->u.scalar.len) kc_buf_putc(b, ' ');
      kc_buf_add(b, n->u.scalar.text, n->u.scalar.len);
    } else {
      kc_buf_putc(b, ' ');
      yaml_quoted(b, n->u.scalar.text, n->u.scalar.len);
    }
    kc_buf_putc(b, '\n');
    break;
  case KC_YAML_MAPPING:
    if (!n->u.map.len) {
      kc_buf_puts(b, " {}\n");
      break;
    }
    kc_buf_putc(b, '\n');
    for (size_t i = 0; i < n->u.map.len; i++) {
      const kc_yaml_pair *p = &n->u.map.pairs[i];
      kc_buf_printf(b, "%*s", indent, "");
      if (p->key.u.scalar.plain && p->key.u.scalar.len)
        kc_buf_add(b, p->key.u.scalar.text, p->key.u.scalar.len);
      else
        yaml_quoted(b, p->key.u.scalar.text, p->key.u.scalar.len);
      kc_buf_putc(b, ':');
      yaml_value(b, &p->value, indent + 2);
    }
    break;
  case KC_YAML_SEQUENCE:
    if (!n->u.seq.len) {
      kc_buf_puts(b, " []\n");
      break;
    }
    kc_buf_putc(b, '\n');
    for (size_t i = 0; i < n->u.seq.len; i++) {
      kc_buf_printf(b, "%*s-", indent, "");
      yaml_value(b, &n->u.seq.items[i], indent + 2);
    }
    break;
  }
}

void kc_isolate_yaml_write(kc_buf *b, const kc_yaml_node *node) {
  kc_buf_puts(b, "v:");
  yaml_value(b, node, 2);
}

/* ---- serving the child's calls --------------------------------------------- */

/* One operation a child may call: args = the fields after "call OP". */
typedef int (*serve_fn)(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out);
#define ARG(i) (m->f[2 + (i)])
#define ENVOP(m) (ctx->env && ctx->env->ops && ctx->env->ops->m ? ctx->env->ops->m : NULL)

static void ret_begin(kc_buf *out, int64_t rc) {
  kc_iso_begin(out, "ret");
  kc_iso_puti(out, rc);
}

static void put_vec(kc_buf *out, const kc_obj_vec *v) {
  for (size_t i = 0; i < v->n; i++)
    kc_iso_put_obj(out, v->v[i]);
}

static int serve_get(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  if (!ENVOP(cache_get)) {
    ret_begin(out, -ENOSYS);
    return 0;
  }
  kc_obj *o = NULL;
  int rc = ENVOP(cache_get)(ctx->env->ud, ARG(0).ptr, ARG(1).ptr, ARG(2), ARG(3), &o);
  ret_begin(out, rc);
  if (rc == 0 && o) {
    kc_iso_put_obj(out, o);
    kc_obj_unref(o);
  }
  return 0;
}

/* list AV KIND HAS_NS NS SELECTOR */
static int serve_list(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  if (!ENVOP(cache_list)) {
    ret_begin(out, -ENOSYS);
    return 0;
  }
  kc_label_selector *sel = NULL;
  if (ARG(4).len) {
    kc_sel_error err;
    int rc = kc_label_selector_parse(ARG(4).ptr, ARG(4).len, &sel, &err);
    if (rc < 0) {
      ret_begin(out, rc);
      return 0;
    }
  }
  kc_obj_vec v = {0};
  kc_str ns = kc_iso_is(m, 4, "1") ? ARG(3) : (kc_str){NULL, 0};
  int rc = ENVOP(cache_list)(ctx->env->ud, ARG(0).ptr, ARG(1).ptr, ns, sel, &v);
  ret_begin(out, rc);
  if (rc >= 0) put_vec(out, &v);
  kc_obj_vec_release(&v);
  kc_label_selector_free(sel);
  return 0;
}

static int serve_index(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  if (!ENVOP(cache_by_index)) {
    ret_begin(out, -ENOSYS);
    return 0;
  }
  kc_obj_vec v = {0};
  int rc = ENVOP(cache_by_index)(ctx->env->ud, ARG(0).ptr, ARG(1).ptr, ARG(2).ptr, ARG(3), &v);
  ret_begin(out, rc);
  if (rc >= 0) put_vec(out, &v);
  kc_obj_vec_release(&v);
  return 0;
}

static int serve_resource(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  kc_resource_ref r = {0};
  int rc = ENVOP(resource) ? ENVOP(resource)(ctx->env->ud, ARG(0).ptr, ARG(1).ptr, &r) : -ENOSYS;
  ret_begin(out, rc);
  if (rc == 0) {
    kc_iso_puts(out, r.api_path);
    kc_iso_puts(out, r.resource);
    kc_iso_puti(out, r.namespaced);
  }
  return 0;
}

/* request METHOD PATH CONTENT_TYPE BODY TIMEOUT_MS: writes are fenced here
 * too (the child asked may_write first, but leadership may have gone). */
static int serve_request(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  int64_t timeout;
  if (kc_iso_int(m, 6, &timeout) < 0 || timeout < 0) return -EPROTO;
  kc_api_response r = {0};
  int rc;
  bool write = strcmp(ARG(0).ptr, "GET") != 0;
  if (!ENVOP(request)) {
    rc = -ENOSYS;
  } else if (write && (!ENVOP(may_write) || !ENVOP(may_write)(ctx->env->ud))) {
    rc = -EAGAIN;
    snprintf(r.status.message, sizeof r.status.message,
             "not the leader (or the key's shard range is not held): %s %s refused", ARG(0).ptr,
             ARG(1).ptr);
  } else if (write && ctx->env->dry_run) { /* as hostapi.c's writes (dryrun.h) */
    kc_buf dry = {0};
    rc = kc_dry_run_path(ARG(1).ptr, &dry);
    if (rc == 0)
      rc = ENVOP(request)(ctx->env->ud, ARG(0).ptr, dry.p, ARG(2).len ? ARG(2).ptr : NULL,
                          ARG(3).ptr, ARG(3).len, (uint64_t)timeout, &r);
    if (rc == 0 && r.code >= 200 && r.code < 300)
      kc_dry_run_note(ctx->controller, ARG(0).ptr, ARG(1).ptr, ARG(2).len ? ARG(2).ptr : NULL,
                      ARG(3).ptr, ARG(3).len);
    free(dry.p);
  } else {
    rc = ENVOP(request)(ctx->env->ud, ARG(0).ptr, ARG(1).ptr, ARG(2).len ? ARG(2).ptr : NULL,
                        ARG(3).ptr, ARG(3).len, (uint64_t)timeout, &r);
    if (rc == 0 && write) kc_hostapi_write_answered(ctx, ARG(0).ptr, ARG(1).ptr, &r);
  }
  ret_begin(out, rc);
  kc_iso_puti(out, r.error);
  kc_iso_puti(out, r.code);
  kc_iso_put(out, r.body, r.body ? r.body_len : 0);
  kc_iso_puti(out, r.status.code);
  kc_iso_puts(out, r.status.reason);
  kc_iso_puts(out, r.status.message);
  kc_iso_puti(out, r.status.retry_after_seconds);
  kc_iso_puti(out, r.status.from_body);
  kc_iso_puti(out, r.status.rv_too_large);
  /* what the child's host needs to tell a terminal failure (hostapi.h) */
  kc_iso_puts(out, r.status.details_name);
  kc_iso_puts(out, r.status.cause_field);
  kc_iso_puts(out, r.status.cause_message);
  return 0;
}

static int serve_may_write(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  (void)m;
  ret_begin(out, ENVOP(may_write) && ENVOP(may_write)(ctx->env->ud) ? 1 : 0);
  return 0;
}

/* event OBJECT_JSON TYPE REASON MESSAGE */
static int serve_event(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  int64_t type;
  if (kc_iso_int(m, 3, &type) < 0) return -EPROTO;
  if (!ENVOP(event)) {
    ret_begin(out, -ENOSYS);
    return 0;
  }
  char err[160];
  kc_obj *o = kc_obj_parse(ARG(0).ptr, ARG(0).len, NULL, err, sizeof err);
  if (!o) {
    ret_begin(out, -EINVAL);
    return 0;
  }
  int rc = 0;
  if (ctx->env->dry_run) { /* as hostapi.c's event (dryrun.h) */
    kc_dry_run_count(ctx->controller, KC_DRY_RUN_EVENT);
    kc_info("dryrun", "dry run: would record Event %s %s about %.*s %.*s: %s",
            type == KC_EVENT_TYPE_WARNING ? "Warning" : "Normal", ARG(2).ptr,
            (int)kc_obj_kind(o).len, kc_obj_kind(o).ptr, (int)kc_obj_name(o).len,
            kc_obj_name(o).ptr, ARG(3).ptr);
  } else {
    rc = ENVOP(event)(ctx->env->ud, ctx->controller ? ctx->controller : "", o, (int)type,
                      ARG(2).ptr, ARG(3).ptr);
  }
  kc_obj_unref(o);
  ret_begin(out, rc);
  return 0;
}

/* expect OP KEY N: the instance's expectations, through the host table. */
static int serve_expect(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  int64_t n;
  if (kc_iso_int(m, 4, &n) < 0) return -EPROTO;
  const struct kctrld_host_api *h = H();
  const char *op = ARG(0).ptr, *key = ARG(1).ptr;
  int rc = 0;
  if (!strcmp(op, "creations"))
    rc = h->expect_creations(ctx, key, n);
  else if (!strcmp(op, "deletions"))
    rc = h->expect_deletions(ctx, key, n);
  else if (!strcmp(op, "created"))
    h->creation_observed(ctx, key);
  else if (!strcmp(op, "deleted"))
    h->deletion_observed(ctx, key);
  else if (!strcmp(op, "satisfied"))
    rc = h->expectations_satisfied(ctx, key) ? 1 : 0;
  else if (!strcmp(op, "forget"))
    h->expectations_forget(ctx, key);
  else
    return -EPROTO;
  ret_begin(out, rc);
  return 0;
}

/* desired OP TEXT: the child's desired state (desired.h) on this
 * reconcile's ctx, which knows the controller's kinds: begin, child TEXT,
 * status TEXT, commit (answers the result and its message). */
static int serve_desired(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  const struct kctrld_host_api *h = H();
  const char *op = ARG(0).ptr;
  kc_str text = ARG(1);
  if (!strcmp(op, "begin")) {
    ret_begin(out, h->desired_begin(ctx));
  } else if (!strcmp(op, "child")) {
    ret_begin(out, h->desired_add_child(ctx, text.ptr, text.len));
  } else if (!strcmp(op, "status")) {
    ret_begin(out, h->desired_set_status(ctx, text.ptr, text.len));
  } else if (!strcmp(op, "commit")) {
    int rc = h->desired_commit(ctx);
    ret_begin(out, rc);
    kc_iso_puts(out, rc == KCTRLD_RESULT_ERROR && ctx->res ? ctx->res->message : "");
  } else {
    return -EPROTO;
  }
  return 0;
}

/* finalize OP: finalizing (is this reconcile a finalizing one), finalized
 * (the child's plugin says its cleanup is done). */
static int serve_finalize(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  const struct kctrld_host_api *h = H();
  if (kc_iso_is(m, 2, "finalizing")) {
    ret_begin(out, h->ctx_finalizing(ctx) ? 1 : 0);
  } else if (kc_iso_is(m, 2, "finalized")) {
    h->result_finalized(ctx);
    ret_begin(out, 0);
  } else {
    return -EPROTO;
  }
  return 0;
}

/* log LEVEL MESSAGE: logged here, with the controller and key. */
static int serve_log(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  (void)ctx;
  int64_t level;
  if (kc_iso_int(m, 2, &level) < 0) return -EPROTO;
  H()->log((int)level, "%s", ARG(1).ptr);
  ret_begin(out, 0);
  return 0;
}

/* The operations: adding one is one entry here and one proxy in
 * isolate_child.c. (Host functions built on these, api_* and finalizers
 * on `request`, need none.) */
static const struct {
  const char *name;
  size_t nargs;
  serve_fn fn;
} ops[] = {
    {"get", 4, serve_get},         {"list", 5, serve_list},
    {"index", 4, serve_index},     {"resource", 2, serve_resource},
    {"request", 5, serve_request}, {"may_write", 0, serve_may_write},
    {"event", 4, serve_event},     {"expect", 3, serve_expect},
    {"log", 2, serve_log},         {"desired", 2, serve_desired},
    {"finalize", 1, serve_finalize},
};

/* Answers one "call" into out (reset first). 0, or -EPROTO: unknown
 * operation or wrong arguments (the child is out of step). */
static int serve(kctrld_ctx *ctx, const kc_iso_msg *m, kc_buf *out) {
  kc_buf_reset(out);
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    if (!kc_iso_is(m, 1, ops[i].name)) continue;
    if (m->n != 2 + ops[i].nargs) return -EPROTO;
    int rc = ops[i].fn(ctx, m, out);
    if (rc < 0) return rc;
    kc_iso_end(out);
    return out->err;
  }
  return -EPROTO;
}

/* ---- one conversation -------------------------------------------------------- */

static void stderr_line(void *ud, pid_t pid, const char *line, size_t len) {
  const isolated *x = ud;
  /* The text first, the fields after it (base/log.h "Fields"). */
  H()->log(KCTRLD_LOG_INFO, "plugin child stderr: %.*s pid=%d plugin=%s", (int)len, line, (int)pid,
           x->path);
}

/* Sends out (one message) to child c and serves its calls until it
 * answers otherwise; that answer is parsed into m (fields in resp).
 * Returns 0, an exchange error of hook_child.h, or -EPROTO (a line that
 * does not parse, a call that does not fit). */
static int converse(isolated *x, kctrld_ctx *ctx, kc_hook_child *c, kc_buf *out, kc_buf *resp,
                    kc_iso_msg *m, uint64_t deadline_ns) {
  for (;;) {
    if (out->err) return out->err;
    int rc = kc_hook_child_exchange(c, out->p, out->len, KC_HOOK_READ_LINE, deadline_ns,
                                    KC_ISOLATE_MAX_MESSAGE, resp, NULL, stderr_line, x);
    if (rc < 0) return rc;
    if (!resp->p || kc_iso_parse(resp->p, resp->len, m) < 0) return -EPROTO;
    if (!kc_iso_is(m, 0, "call")) return 0;
    if ((rc = serve(ctx, m, out)) < 0) return rc;
  }
}

/* Why a conversation failed, with the child's fate, for the log. */
static void describe_failure(isolated *x, int rc, pid_t pid, int status, char *buf, size_t cap) {
  char st[128];
  kc_spawn_describe_status(status, st, sizeof st);
  switch (rc) {
  case -ETIMEDOUT:
    snprintf(buf, cap, "plugin child %d (%s) hung past reconcileTimeout (%llums); killed",
             (int)pid, x->path, (unsigned long long)x->timeout_ms);
    break;
  case -EPIPE: snprintf(buf, cap, "plugin child %d (%s) %s", (int)pid, x->path, st); break;
  case -E2BIG:
    snprintf(buf, cap, "plugin child %d (%s): a message larger than %u bytes; killed", (int)pid,
             x->path, KC_ISOLATE_MAX_MESSAGE);
    break;
  case -EPROTO:
    snprintf(buf, cap,
             "plugin child %d (%s) broke the protocol (an unparsable or unexpected "
             "line); killed",
             (int)pid, x->path);
    break;
  default:
    snprintf(buf, cap, "plugin child %d (%s): %s; killed", (int)pid, x->path, strerror(-rc));
    break;
  }
}

/* The child *child failed (rc): kill it (*child NULL) and write the
 * reason into why. */
static void kill_child(isolated *x, void **child, int rc, char *why, size_t cap) {
  kc_hook_child *c = *child;
  pid_t pid = kc_hook_child_pid(c);
  int status = 0;
  kc_hook_child_kill(c, &status, stderr_line, x);
  *child = NULL;
  describe_failure(x, rc, pid, status, why, cap);
}

/* Slot i lost its child reconciling key (killed already; why: the reason,
 * in the key's error result): the key pays, the slot starts a new child for
 * the next key unless keys in a row keep losing children
 * (base/childpool.h). Logged at error level; panic: counted as one. */
static void lose_slot(isolated *x, size_t i, const char *key, const char *why, bool panic) {
  uint64_t backoff = kc_childpool_release(x->pool, i, KC_CHILDPOOL_LOST, key, why);
  if (panic) count(x->base.controller, false);
  if (!backoff)
    H()->log(KCTRLD_LOG_ERROR, "%s reconciling %s; restarted for the next key", why, key);
  else
    H()->log(KCTRLD_LOG_ERROR,
             "%s reconciling %s; %d keys in a row lost their plugin child: the plugin backs off, "
             "no new child for %.1fs",
             why, key, KC_CHILDPOOL_BREAK_KEYS, (double)backoff / 1e9);
}

/* The child has exited (or was killed) and is not reaped yet: looked at
 * without reaping it, so kc_hook_child_kill still reaps it. A child the
 * call cannot look at counts as alive (the exchange finds out). */
static bool child_exited(const void *c) {
  return kc_spawn_exited(kc_hook_child_pid(c)) > 0;
}

/* A child that died while idle, between reconciles (a thread of the plugin
 * crashed it, something killed it), taken off its slot: reap, count and log
 * it, not charging any key (no error result, no panic); the slot's next
 * reconcile starts a new child. how: who found it, for the log. */
static void lose_idle_child(isolated *x, kc_hook_child *c, const char *how) {
  pid_t pid = kc_hook_child_pid(c);
  int status = 0;
  kc_hook_child_kill(c, &status, stderr_line, x);
  count(x->base.controller, true);
  char st[128];
  kc_spawn_describe_status(status, st, sizeof st);
  H()->log(KCTRLD_LOG_ERROR, "plugin child %d (%s) %s while idle (between reconciles); %s",
           (int)pid, x->path, st, how);
}

/* Starts the child of a slot into *child and runs the plugin's init in it.
 * 0, or the error for the caller to log (message in err; *child NULL, a
 * child that failed its init killed). */
static int start_child(isolated *x, kctrld_ctx *ctx, void **child, char *err, size_t errlen) {
  /* This very binary: main (and a test's or bench's own main) hands the
   * flag to kc_isolate_child_main. */
  const char *argv[] = {"/proc/self/exe", KC_ISOLATE_CHILD_FLAG, NULL};
  kc_hook_child *c = NULL;
  int rc =
      kc_hook_child_spawn(x->base.controller, argv, (const char *const *)environ, &c, err, errlen);
  if (rc < 0) return rc;
  *child = c;
  kc_buf out = {0}, resp = {0};
  kc_iso_msg m = {0};
  kc_buf_add(&out, x->init.p, x->init.len);
  uint64_t t = x->timeout_ms < INIT_TIMEOUT_MS ? x->timeout_ms : INIT_TIMEOUT_MS;
  rc = converse(x, ctx, c, &out, &resp, &m, kc_clock_now_ns() + t * 1000000ull);
  if (rc == 0 && kc_iso_is(&m, 0, "fail")) {
    int64_t e = 0;
    if (kc_iso_int(&m, 1, &e) < 0 || e >= 0 || e < -4095) e = -EPROTO;
    kc_errf(err, errlen, "%s", kc_iso_str(&m, 2));
    rc = (int)e;
    kc_hook_child_kill(c, NULL, stderr_line, x);
    *child = NULL;
  } else if (rc == 0 && !kc_iso_is(&m, 0, "ready")) {
    rc = -EPROTO;
  }
  if (rc < 0 && *child) kill_child(x, child, rc, err, errlen);
  if (rc == 0)
    H()->log(KCTRLD_LOG_INFO, "plugin child started pid=%d plugin=%s", (int)kc_hook_child_pid(c),
             x->path);
  kc_iso_msg_free(&m);
  kc_buf_free(&out);
  kc_buf_free(&resp);
  return rc;
}

/* ---- lifecycle ----------------------------------------------------------------- */

static void isolated_free(isolated *x) {
  kc_hook_base_free(&x->base);
  free(x->path);
  kc_buf_free(&x->init);
  kc_childpool_free(x->pool);
  free(x);
}

static void stop_children(isolated *x) {
  kc_hook_child *v[64];
  size_t n = 0;
  for (size_t i = 0; i < x->base.nslots; i++) {
    void **child = kc_childpool_child(x->pool, i);
    if (!*child) continue;
    v[n++] = *child;
    *child = NULL;
    if (n == sizeof v / sizeof v[0]) {
      kc_hook_child_stop(v, n, STOP_GRACE_MS);
      n = 0;
    }
  }
  kc_hook_child_stop(v, n, STOP_GRACE_MS);
}

static int isolated_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **instance) {
  (void)settings;
  const kc_controller_spec *spec = kc_hook_init_spec(instance, "isolated plugin", "plugin", NULL);
  if (!spec || !spec->plugin || !*spec->plugin) return -EINVAL;
  isolated *x = calloc(1, sizeof *x);
  if (!x) return -ENOMEM;
  if (kc_hook_base_init(&x->base, spec) < 0) {
    free(x);
    return -ENOMEM;
  }
  x->timeout_ms = (uint64_t)spec->reconcile_timeout_ms;
  x->path = strdup(spec->plugin);
  x->pool = kc_childpool_new(x->base.nslots, KC_HOOK_RESTART_BASE_MS, KC_HOOK_RESTART_MAX_MS);
  kc_iso_begin(&x->init, "init");
  kc_iso_puts(&x->init, spec->name);
  kc_iso_puts(&x->init, spec->plugin);
  kc_iso_puti(&x->init, spec->settings != NULL);
  kc_buf yaml = {0};
  char name[512] = "";
  if (spec->settings) {
    kc_isolate_yaml_write(&yaml, spec->settings);
    snprintf(name, sizeof name, "%s:%u:%u (settings of controller %s)", spec->settings->file,
             (unsigned)spec->settings->line, (unsigned)spec->settings->column, spec->name);
  }
  kc_iso_put(&x->init, yaml.p, yaml.len);
  kc_iso_puts(&x->init, name);
  kc_iso_puti(&x->init, kc_fileperm_allow_insecure());
  kc_iso_end(&x->init);
  int yerr = yaml.err;
  kc_buf_free(&yaml);
  if (!x->path || !x->pool || x->init.err || yerr) {
    isolated_free(x);
    return -ENOMEM;
  }
  /* The file as it is before the first child loads it: a SIGHUP after a
   * rebuild re-instantiates this controller (plugin_host.h). A file that
   * cannot be stat'ed is the child's to report. */
  int rc = kc_plugin_file_used(x->path);
  if (rc == -ENOMEM)
    H()->log(KCTRLD_LOG_WARN, "plugin %s: out of memory recording its file; a rebuild at this "
                              "path is not noticed on SIGHUP", x->path);
  char err[512];
  rc = start_child(x, ctx, kc_childpool_child(x->pool, 0), err, sizeof err);
  if (rc < 0) {
    H()->log(KCTRLD_LOG_ERROR, "plugin %s in a child process: %s", x->path, err);
    stop_children(x);
    isolated_free(x);
    return rc;
  }
  H()->log(KCTRLD_LOG_INFO, "plugin %s isolation=process workers=%zu timeout=%llums", x->path,
           x->base.nslots, (unsigned long long)x->timeout_ms);
  pthread_mutex_lock(&g_inst_mu);
  x->next = g_instances;
  g_instances = x;
  pthread_mutex_unlock(&g_inst_mu);
  *instance = x;
  return 0;
}

static void isolated_fini(void *instance) {
  isolated *x = instance;
  if (!x) return;
  pthread_mutex_lock(&g_inst_mu); /* waits for a reap pass looking at x */
  for (isolated **pp = &g_instances; *pp; pp = &(*pp)->next)
    if (*pp == x) {
      *pp = x->next;
      break;
    }
  pthread_mutex_unlock(&g_inst_mu);
  stop_children(x);
  isolated_free(x);
}

/* ---- reconcile ------------------------------------------------------------------ */

/* The idle slots' children that died, taken off their slots under the lock
 * the workers pick slots with (kc_childpool_take_dead): a busy slot's child
 * is its worker's. One non-blocking look (kc_spawn_exited, on that child's
 * own pid) per idle child; the lock is held only for it, and the slot is
 * not marked busy, so a worker asking meanwhile finds it free and starts a
 * new child. */
unsigned kc_isolate_reap_idle(void) {
  unsigned n = 0;
  pthread_mutex_lock(&g_inst_mu);
  for (isolated *x = g_instances; x; x = x->next) {
    for (size_t i = 0; i < x->base.nslots; i++) {
      kc_hook_child *dead = kc_childpool_take_dead(x->pool, i, child_exited);
      if (!dead) continue;
      lose_idle_child(x, dead, "reaped; its worker's next reconcile starts a new one");
      n++;
    }
  }
  pthread_mutex_unlock(&g_inst_mu);
  return n;
}

/* The child's "res RESULT AFTER_MS MESSAGE HAS_PRIORITY PRIORITY" as this
 * reconcile's result. */
static int map_result(kctrld_ctx *ctx, const kc_iso_msg *m, bool *ok) {
  const struct kctrld_host_api *h = H();
  int64_t kind, after, has_prio, prio;
  *ok = m->n == 6 && kc_iso_int(m, 1, &kind) == 0 && kc_iso_int(m, 2, &after) == 0 &&
        kc_iso_int(m, 4, &has_prio) == 0 && kc_iso_int(m, 5, &prio) == 0;
  if (!*ok) return KCTRLD_RESULT_ERROR;
  switch (kind) {
  case KCTRLD_RESULT_DONE: return KCTRLD_RESULT_DONE;
  case KCTRLD_RESULT_REQUEUE: return KCTRLD_RESULT_REQUEUE;
  case KCTRLD_RESULT_REQUEUE_AFTER:
    if (after < 0) return KCTRLD_RESULT_REQUEUE;
    if (has_prio) /* the sign is what counts (plugin.h enum kctrld_priority) */
      return h->result_requeue_priority(ctx, (uint64_t)after, prio < 0 ? -1 : prio > 0 ? 1 : 0);
    return h->result_requeue_after(ctx, (uint64_t)after);
  case KCTRLD_RESULT_TERMINAL: return h->result_terminal(ctx, "%s", kc_iso_str(m, 3));
  default: return h->result_error(ctx, "%s", kc_iso_str(m, 3));
  }
}

static int isolated_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  isolated *x = instance;
  const struct kctrld_host_api *h = H();
  uint64_t now = kc_clock_now_ns(), hold_ns = 0;
  char why[768];
  int i = kc_childpool_take(x->pool, &hold_ns, why, sizeof why);
  if (i == -EAGAIN) return kc_hook_result_held(h, ctx, hold_ns, why);
  if (i < 0) return h->result_error(ctx, "no free plugin child (more reconciles than workers)");
  void **child = kc_childpool_child(x->pool, (size_t)i);
  if (*child && child_exited(*child)) {
    kc_hook_child *dead = *child;
    *child = NULL;
    lose_idle_child(x, dead, "starting a new one");
  }
  if (!*child) {
    int rc = start_child(x, ctx, child, why, sizeof why);
    if (rc < 0) {
      int res = h->result_error(ctx, "plugin child: %s", why);
      lose_slot(x, (size_t)i, key, why, false);
      return res;
    }
  }
  int res = KCTRLD_RESULT_ERROR;
  bool good = false;
  kc_buf out = {0}, resp = {0};
  kc_iso_msg m = {0};
  kc_iso_begin(&out, "rec");
  kc_iso_puts(&out, key);
  kc_iso_end(&out);
  int rc = converse(x, ctx, *child, &out, &resp, &m, now + x->timeout_ms * 1000000ull);
  if (rc == 0 && !kc_iso_is(&m, 0, "res")) rc = -EPROTO;
  if (rc == 0) {
    res = map_result(ctx, &m, &good);
    if (!good) rc = -EPROTO;
  }
  if (rc < 0) {
    kill_child(x, child, rc, why, sizeof why);
    res = h->result_error(ctx, "%s", why);
    lose_slot(x, (size_t)i, key, why, true);
  } else {
    kc_childpool_release(x->pool, (size_t)i, KC_CHILDPOOL_ANSWERED, key, NULL);
  }
  kc_iso_msg_free(&m);
  kc_buf_free(&out);
  kc_buf_free(&resp);
  return res;
}

KC_BUILTIN_PLUGIN(kc_isolate_plugin, "isolated", isolated_init, isolated_reconcile, isolated_fini)
