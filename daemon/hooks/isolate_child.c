/* SPDX-License-Identifier: Apache-2.0 */
/* isolate_child: see isolate_child.h; the messages are listed in isolate.c. */
#include "hooks/isolate_child.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/crashreport.h"
#include "watch/decode.h"
#include "base/fileperm.h"
#include "host/hostapi.h"
#include "hooks/isolate_wire.h"
#include "base/log.h"
#include "host/plugin_host.h"
#include "kube/selector.h"
#include "cache/store.h"
#include "json/yamltree.h"

#define READ_CHUNK 65536

/* The conversation; everything under mu. */
static struct {
  pthread_mutex_t mu;
  bool in_conversation; /* an init or reconcile of the daemon's is being handled */
  kc_buf in;            /* read from stdin, not consumed yet */
  kc_buf line;          /* the last line read (the fields of msg point into it) */
  kc_iso_msg msg;
  kc_buf out;
  bool broken; /* stdin or stdout failed: stop */
  int in_fd, out_fd; /* the channel (take_channel) */
} C = {.mu = PTHREAD_MUTEX_INITIALIZER, .in_fd = 0, .out_fd = 1};

/* ---- lines ------------------------------------------------------------------ */

static int write_all(const char *p, size_t len) {
  while (len) {
    ssize_t n = write(C.out_fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -EPIPE;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reads the next line into C.line and parses it into C.msg. 0, -EPIPE at
 * the end of stdin, -EPROTO, -ENOMEM. */
static int read_msg(void) {
  for (;;) {
    char *nl = C.in.len ? memchr(C.in.p, '\n', C.in.len) : NULL;
    if (nl) {
      size_t n = (size_t)(nl - C.in.p);
      kc_buf_reset(&C.line);
      kc_buf_add(&C.line, C.in.p, n);
      memmove(C.in.p, nl + 1, C.in.len - n - 1);
      C.in.len -= n + 1;
      C.in.p[C.in.len] = '\0';
      if (C.line.err) return C.line.err;
      return kc_iso_parse(C.line.p, C.line.len, &C.msg);
    }
    if (kc_buf_reserve(&C.in, READ_CHUNK) < 0) return -ENOMEM;
    ssize_t n = read(C.in_fd, C.in.p + C.in.len, READ_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -EPIPE;
    C.in.len += (size_t)n;
    C.in.p[C.in.len] = '\0';
  }
}

/* Sends C.out (a complete "call") and reads the "ret". Returns its rc, or
 * -EIO when the conversation broke. Under C.mu. */
static int64_t call_locked(void) {
  if (C.out.err || write_all(C.out.p, C.out.len) < 0 || read_msg() < 0 ||
      !kc_iso_is(&C.msg, 0, "ret")) {
    C.broken = true;
    return -EIO;
  }
  int64_t rc;
  return kc_iso_int(&C.msg, 1, &rc) == 0 ? rc : -EIO;
}

/* Starts a call of op: locks and checks the conversation. false (unlocked
 * again) when no init or reconcile runs. */
static bool call_begin(const char *op) {
  pthread_mutex_lock(&C.mu);
  if (!C.in_conversation || C.broken) {
    pthread_mutex_unlock(&C.mu);
    return false;
  }
  kc_buf_reset(&C.out);
  kc_iso_begin(&C.out, "call");
  kc_iso_puts(&C.out, op);
  return true;
}

static int64_t call_end(void) {
  kc_iso_end(&C.out);
  return call_locked();
}

static void call_done(void) {
  pthread_mutex_unlock(&C.mu);
}

/* ---- the proxy environment ----------------------------------------------------- */

static kc_obj *parse_obj(const kc_str *f) {
  char err[160];
  return kc_obj_parse(f->ptr, f->len, NULL, err, sizeof err);
}

static int p_cache_get(void *ud, const char *api_version, const char *kind, kc_str ns, kc_str name,
                       kc_obj **out) {
  (void)ud;
  *out = NULL;
  if (!call_begin("get")) return -EAGAIN;
  kc_iso_puts(&C.out, api_version);
  kc_iso_puts(&C.out, kind);
  kc_iso_put(&C.out, ns.ptr, ns.len);
  kc_iso_put(&C.out, name.ptr, name.len);
  int rc = (int)call_end();
  if (rc == 0 && C.msg.n == 3 && !(*out = parse_obj(&C.msg.f[2])))
    rc = -EIO;
  else if (rc == 0 && C.msg.n != 3)
    rc = -EIO;
  call_done();
  return rc;
}

/* The objects of a "ret" (fields 2..) appended to out. */
static int ret_objects(int rc, kc_obj_vec *out) {
  if (rc < 0) return rc;
  size_t n = C.msg.n - 2;
  if (out->n + n > out->cap) {
    size_t cap = out->n + n;
    kc_obj **v = realloc(out->v, cap * sizeof *v);
    if (!v) return -ENOMEM;
    out->v = v;
    out->cap = cap;
  }
  for (size_t i = 0; i < n; i++) {
    kc_obj *o = parse_obj(&C.msg.f[2 + i]);
    if (!o) return -EIO;
    out->v[out->n++] = o;
  }
  return rc;
}

static int p_cache_list(void *ud, const char *api_version, const char *kind, kc_str ns,
                        const kc_label_selector *sel, kc_obj_vec *out) {
  (void)ud;
  char text[8192] = "";
  if (sel && kc_label_selector_string(sel, text, sizeof text) < 0) return -ENOMEM;
  if (!call_begin("list")) return -EAGAIN;
  kc_iso_puts(&C.out, api_version);
  kc_iso_puts(&C.out, kind);
  kc_iso_puti(&C.out, ns.ptr != NULL);
  kc_iso_put(&C.out, ns.ptr, ns.len);
  kc_iso_puts(&C.out, text);
  int rc = ret_objects((int)call_end(), out);
  call_done();
  return rc;
}

static int p_cache_by_index(void *ud, const char *api_version, const char *kind, const char *index,
                            kc_str value, kc_obj_vec *out) {
  (void)ud;
  if (!call_begin("index")) return -EAGAIN;
  kc_iso_puts(&C.out, api_version);
  kc_iso_puts(&C.out, kind);
  kc_iso_puts(&C.out, index);
  kc_iso_put(&C.out, value.ptr, value.len);
  int rc = ret_objects((int)call_end(), out);
  call_done();
  return rc;
}

/* Answers of `resource`, kept for the life of the child (the strings are
 * borrowed by the caller). */
struct resource {
  struct resource *next;
  char *api_version, *kind, *api_path, *plural;
  bool namespaced;
};
static struct resource *resources; /* C.mu */

static int p_resource(void *ud, const char *api_version, const char *kind, kc_resource_ref *out) {
  (void)ud;
  pthread_mutex_lock(&C.mu);
  for (struct resource *r = resources; r; r = r->next) {
    if (strcmp(r->api_version, api_version) == 0 && strcmp(r->kind, kind) == 0) {
      *out = (kc_resource_ref){r->api_path, r->plural, r->namespaced};
      pthread_mutex_unlock(&C.mu);
      return 0;
    }
  }
  pthread_mutex_unlock(&C.mu);
  if (!call_begin("resource")) return -EAGAIN;
  kc_iso_puts(&C.out, api_version);
  kc_iso_puts(&C.out, kind);
  int rc = (int)call_end();
  if (rc == 0 && C.msg.n != 5) rc = -EIO;
  if (rc == 0) {
    struct resource *r = calloc(1, sizeof *r);
    if (!r || !(r->api_version = strdup(api_version)) || !(r->kind = strdup(kind)) ||
        !(r->api_path = strdup(kc_iso_str(&C.msg, 2))) ||
        !(r->plural = strdup(kc_iso_str(&C.msg, 3)))) {
      if (r) {
        free(r->api_version);
        free(r->kind);
        free(r->api_path);
      }
      free(r);
      rc = -ENOMEM;
    } else {
      r->namespaced = kc_iso_is(&C.msg, 4, "1");
      r->next = resources;
      resources = r;
      *out = (kc_resource_ref){r->api_path, r->plural, r->namespaced};
    }
  }
  call_done();
  return rc;
}

/* The body of the calling thread's last request (request's contract). */
static _Thread_local kc_buf t_body;

static int p_request(void *ud, const char *method, const char *path, const char *content_type,
                     const void *body, size_t len, uint64_t timeout_ms, kc_api_response *out) {
  (void)ud;
  *out = (kc_api_response){0};
  out->status.retry_after_seconds = -1;
  if (!call_begin("request")) return -EAGAIN;
  kc_iso_puts(&C.out, method);
  kc_iso_puts(&C.out, path);
  kc_iso_puts(&C.out, content_type);
  kc_iso_put(&C.out, body, len);
  kc_iso_puti(&C.out, (int64_t)timeout_ms);
  int rc = (int)call_end();
  int64_t error, code, scode, retry, from_body, rv;
  if (rc != -EIO &&
      (C.msg.n != 14 || kc_iso_int(&C.msg, 2, &error) < 0 || kc_iso_int(&C.msg, 3, &code) < 0 ||
       kc_iso_int(&C.msg, 5, &scode) < 0 || kc_iso_int(&C.msg, 8, &retry) < 0 ||
       kc_iso_int(&C.msg, 9, &from_body) < 0 || kc_iso_int(&C.msg, 10, &rv) < 0)) {
    C.broken = true;
    rc = -EIO;
  }
  if (rc != -EIO) {
    kc_buf_reset(&t_body);
    kc_buf_add(&t_body, C.msg.f[4].ptr, C.msg.f[4].len);
    if (kc_buf_reserve(&t_body, 1) < 0) {
      rc = -ENOMEM;
    } else {
      out->error = (int)error;
      out->code = (long)code;
      out->body = t_body.p;
      out->body_len = t_body.len;
      out->status.code = (int)scode;
      snprintf(out->status.reason, sizeof out->status.reason, "%s", kc_iso_str(&C.msg, 6));
      snprintf(out->status.message, sizeof out->status.message, "%s", kc_iso_str(&C.msg, 7));
      out->status.retry_after_seconds = (int)retry;
      out->status.from_body = from_body != 0;
      out->status.rv_too_large = rv != 0;
      snprintf(out->status.details_name, sizeof out->status.details_name, "%s", kc_iso_str(&C.msg, 11));
      snprintf(out->status.cause_field, sizeof out->status.cause_field, "%s", kc_iso_str(&C.msg, 12));
      snprintf(out->status.cause_message, sizeof out->status.cause_message, "%s",
               kc_iso_str(&C.msg, 13));
    }
  }
  call_done();
  return rc;
}

static bool p_may_write(void *ud) {
  (void)ud;
  if (!call_begin("may_write")) return false;
  bool ok = call_end() == 1;
  call_done();
  return ok;
}

/* The parent knows the child's controller: it names the reporter. */
static int p_event(void *ud, const char *controller, const kc_obj *o, int type, const char *reason,
                   const char *message) {
  (void)ud;
  (void)controller;
  if (!call_begin("event")) return 0; /* best effort, as the recorder's */
  kc_iso_put_obj(&C.out, o);
  kc_iso_puti(&C.out, type);
  kc_iso_puts(&C.out, reason);
  kc_iso_puts(&C.out, message);
  int rc = (int)call_end();
  call_done();
  return rc == -EIO ? 0 : rc;
}

static const kc_host_env_ops proxy_ops = {
    .cache_get = p_cache_get,
    .cache_list = p_cache_list,
    .cache_by_index = p_cache_by_index,
    .resource = p_resource,
    .request = p_request,
    .may_write = p_may_write,
    .event = p_event,
};

/* ---- the proxy host functions (state the daemon keeps) --------------------------- */

static int64_t expect_call(const char *op, const char *key, int64_t n, int64_t otherwise) {
  if (!key || !call_begin("expect")) return otherwise;
  kc_iso_puts(&C.out, op);
  kc_iso_puts(&C.out, key);
  kc_iso_puti(&C.out, n);
  int64_t rc = call_end();
  call_done();
  return rc == -EIO ? otherwise : rc;
}

static int h_expect_creations(kctrld_ctx *ctx, const char *key, int64_t n) {
  (void)ctx;
  return (int)expect_call("creations", key, n, -EAGAIN);
}
static int h_expect_deletions(kctrld_ctx *ctx, const char *key, int64_t n) {
  (void)ctx;
  return (int)expect_call("deletions", key, n, -EAGAIN);
}
static void h_creation_observed(kctrld_ctx *ctx, const char *key) {
  (void)ctx;
  expect_call("created", key, 0, 0);
}
static void h_deletion_observed(kctrld_ctx *ctx, const char *key) {
  (void)ctx;
  expect_call("deleted", key, 0, 0);
}
static bool h_expectations_satisfied(kctrld_ctx *ctx, const char *key) {
  (void)ctx;
  return expect_call("satisfied", key, 0, 1) == 1;
}
static void h_expectations_forget(kctrld_ctx *ctx, const char *key) {
  (void)ctx;
  expect_call("forget", key, 0, 0);
}

/* Finalizing and the desired state live in the daemon's reconcile (its
 * ctx knows the controller's finalizer and kinds): asked and handed over
 * call by call. */
static bool h_ctx_finalizing(const kctrld_ctx *ctx) {
  (void)ctx;
  if (!call_begin("finalize")) return false;
  kc_iso_puts(&C.out, "finalizing");
  bool yes = call_end() == 1;
  call_done();
  return yes;
}
static void h_result_finalized(kctrld_ctx *ctx) {
  (void)ctx;
  if (!call_begin("finalize")) return;
  kc_iso_puts(&C.out, "finalized");
  call_end();
  call_done();
}

static int desired_call(const char *op, const char *text, size_t len) {
  if (!call_begin("desired")) return -ENOTSUP;
  kc_iso_puts(&C.out, op);
  kc_iso_put(&C.out, text ? text : "", text ? len : 0);
  int rc = (int)call_end();
  call_done();
  return rc == -EIO ? -EAGAIN : rc;
}
static int h_desired_begin(kctrld_ctx *ctx) {
  (void)ctx;
  return desired_call("begin", NULL, 0);
}
static int h_desired_add_child(kctrld_ctx *ctx, const char *json, size_t len) {
  (void)ctx;
  return json && len ? desired_call("child", json, len) : -EINVAL;
}
static int h_desired_set_status(kctrld_ctx *ctx, const char *json, size_t len) {
  (void)ctx;
  return json && len ? desired_call("status", json, len) : -EINVAL;
}
/* The daemon's result, and its error message as this reconcile's. */
static int h_desired_commit(kctrld_ctx *ctx) {
  const struct kctrld_host_api *h = kc_hostapi_table();
  if (!call_begin("desired")) return h->result_error(ctx, "desired_commit outside a reconcile");
  kc_iso_puts(&C.out, "commit");
  kc_iso_put(&C.out, "", 0);
  int64_t rc = call_end();
  if (rc == KCTRLD_RESULT_ERROR && C.msg.n == 3)
    h->result_error(ctx, "%s", kc_iso_str(&C.msg, 2));
  call_done();
  if (rc == -EIO) return h->result_error(ctx, "desired_commit: the daemon did not answer");
  return (int)rc;
}

__attribute__((format(printf, 2, 3))) static void h_log(int level, const char *fmt, ...) {
  char msg[3072];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (call_begin("log")) {
    kc_iso_puti(&C.out, level);
    kc_iso_puts(&C.out, msg);
    int64_t rc = call_end();
    call_done();
    if (rc != -EIO) return;
  }
  fprintf(stderr, "%s\n", msg); /* the daemon logs the child's stderr */
}

static struct kctrld_host_api proxy_table;

static void proxy_table_init(void) {
  proxy_table = *kc_hostapi_table();
  proxy_table.log = h_log;
  proxy_table.expect_creations = h_expect_creations;
  proxy_table.expect_deletions = h_expect_deletions;
  proxy_table.creation_observed = h_creation_observed;
  proxy_table.deletion_observed = h_deletion_observed;
  proxy_table.expectations_satisfied = h_expectations_satisfied;
  proxy_table.expectations_forget = h_expectations_forget;
  proxy_table.ctx_finalizing = h_ctx_finalizing;
  proxy_table.result_finalized = h_result_finalized;
  proxy_table.desired_begin = h_desired_begin;
  proxy_table.desired_add_child = h_desired_add_child;
  proxy_table.desired_set_status = h_desired_set_status;
  proxy_table.desired_commit = h_desired_commit;
}

/* ---- the conversation --------------------------------------------------------------- */

/* Moves the channel (stdin, stdout as started) onto private close-on-exec
 * descriptors and points fd 0 at /dev/null and fd 1 at stderr, before any
 * plugin code runs: a plugin's printf or puts (debugging, a common slip in
 * C) then goes to the daemon's log (line-buffered, so a crash right after
 * loses no line), and a read of stdin cannot eat a message. 0 or -errno. */
static int take_channel(void) {
  int in = fcntl(0, F_DUPFD_CLOEXEC, 3);
  if (in < 0) return -errno;
  int out = fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (out < 0) {
    int e = -errno;
    close(in);
    return e;
  }
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int rc = null < 0 || dup2(null, 0) < 0 || dup2(2, 1) < 0 ? -errno : 0;
  if (null >= 0) close(null);
  if (rc < 0) {
    close(in);
    close(out);
    return rc;
  }
  C.in_fd = in;
  C.out_fd = out;
  if (setvbuf(stdout, NULL, _IOLBF, 0) != 0) fprintf(stderr, "stdout: cannot line-buffer\n");
  return 0;
}

static int reply_fail(int rc, const char *msg) {
  kc_buf_reset(&C.out);
  kc_iso_begin(&C.out, "fail");
  kc_iso_puti(&C.out, rc < 0 ? rc : -EINVAL);
  kc_iso_puts(&C.out, msg);
  kc_iso_end(&C.out);
  return C.out.err ? C.out.err : write_all(C.out.p, C.out.len);
}

static kc_yaml_doc *settings_doc;
static kc_plugin_instance *instance;
static char *child_controller, *child_path; /* for the crash report (crashreport.h) */

/* init CONTROLLER PATH HAS_SETTINGS YAML NAME INSECURE */
static int handle_init(void) {
  char err[1024] = "";
  if (instance || C.msg.n != 7) return reply_fail(-EINVAL, "init: bad message");
  kc_fileperm_set_allow_insecure(kc_iso_is(&C.msg, 6, "1"));
  char *controller = strdup(kc_iso_str(&C.msg, 1)), *path = strdup(kc_iso_str(&C.msg, 2));
  char *yaml = strdup(kc_iso_str(&C.msg, 4)), *name = strdup(kc_iso_str(&C.msg, 5));
  bool has_settings = kc_iso_is(&C.msg, 3, "1");
  int rc = controller && path && yaml && name ? 0 : -ENOMEM;
  const kc_yaml_node *settings = NULL;
  if (rc == 0 && has_settings) {
    rc = kc_yaml_load_buffer(name, yaml, strlen(yaml), &settings_doc, err, sizeof err);
    if (rc == 0) settings = kc_yaml_map_get(kc_yaml_root(settings_doc), "v");
  }
  kc_plugin *p = NULL;
  if (rc == 0) rc = kc_plugin_load(path, &p, err, sizeof err);
  if (rc == 0) {
    const kc_host_env env = {&proxy_ops, NULL, settings, false, NULL};
    pthread_mutex_lock(&C.mu);
    C.in_conversation = true;
    pthread_mutex_unlock(&C.mu);
    rc = kc_plugin_instance_new(p, controller, &env, &instance, err, sizeof err);
    pthread_mutex_lock(&C.mu);
    C.in_conversation = false;
    pthread_mutex_unlock(&C.mu);
  }
  if (rc == 0) {
    child_controller = controller;
    child_path = path;
  } else {
    free(controller);
    free(path);
  }
  free(yaml);
  free(name);
  if (C.broken) return -EPIPE;
  if (rc < 0) {
    if (!*err) snprintf(err, sizeof err, "%s", strerror(-rc));
    return reply_fail(rc, err);
  }
  kc_buf_reset(&C.out);
  kc_iso_begin(&C.out, "ready");
  kc_iso_end(&C.out);
  return C.out.err ? C.out.err : write_all(C.out.p, C.out.len);
}

/* rec KEY */
static int handle_rec(void) {
  if (!instance || C.msg.n != 2) return reply_fail(-EINVAL, "rec: bad message or no init");
  char *key = strdup(kc_iso_str(&C.msg, 1));
  if (!key) return -ENOMEM;
  kc_reconcile_result res;
  pthread_mutex_lock(&C.mu);
  C.in_conversation = true;
  pthread_mutex_unlock(&C.mu);
  kc_crash_busy(child_controller, child_path, key); /* a crash names them on stderr */
  kc_plugin_reconcile(instance, key, &res);
  kc_crash_idle();
  pthread_mutex_lock(&C.mu);
  C.in_conversation = false;
  pthread_mutex_unlock(&C.mu);
  free(key);
  if (C.broken) return -EPIPE;
  kc_buf_reset(&C.out);
  kc_iso_begin(&C.out, "res");
  kc_iso_puti(&C.out, (int64_t)res.kind);
  kc_iso_puti(&C.out, (int64_t)res.after_ms);
  kc_iso_puts(&C.out, res.message);
  kc_iso_puti(&C.out, res.has_priority);
  kc_iso_puti(&C.out, res.priority);
  kc_iso_end(&C.out);
  return C.out.err ? C.out.err : write_all(C.out.p, C.out.len);
}

int kc_isolate_child_main(void) {
  signal(SIGPIPE, SIG_IGN); /* a daemon gone is EPIPE on the channel: exit */
  int trc = take_channel();
  if (trc < 0) {
    fprintf(stderr, "kctrld %s: cannot move the channel off stdin/stdout: %s\n",
            KC_ISOLATE_CHILD_FLAG, strerror(-trc));
    return 1;
  }
  /* A crash reports signal, controller, plugin, key and a backtrace on
   * stderr (which the daemon logs), then the child dies by the signal. */
  if (kc_crash_install() == 0) (void)kc_crash_thread_enter(); /* a slot for kc_crash_busy */
  /* Only the daemon reads this stderr, and relays each line inside one of
   * its own: a JSON object holds no " name=" that would read as the relay
   * line's fields, as a logfmt line would. */
  kc_log_set_format(KC_LOG_FORMAT_JSON);
  proxy_table_init();
  kc_plugin_host_set_table(&proxy_table);
  int rc = 0;
  while (rc == 0) {
    rc = read_msg();
    if (rc < 0) break;
    if (kc_iso_is(&C.msg, 0, "init"))
      rc = handle_init();
    else if (kc_iso_is(&C.msg, 0, "rec"))
      rc = handle_rec();
    else
      rc = reply_fail(-EPROTO, "unknown message");
  }
  int status = rc == -EPIPE && !C.broken ? 0 : 1; /* stdin ended: a stop */
  kc_plugin_instance_free(instance);              /* runs fini; its host calls answer -EAGAIN */
  instance = NULL;
  kc_plugin_host_unload_all();
  kc_yaml_free(settings_doc);
  free(child_controller);
  free(child_path);
  for (struct resource *r = resources; r;) {
    struct resource *next = r->next;
    free(r->api_version);
    free(r->kind);
    free(r->api_path);
    free(r->plural);
    free(r);
    r = next;
  }
  kc_iso_msg_free(&C.msg);
  kc_buf_free(&C.in);
  kc_buf_free(&C.line);
  kc_buf_free(&C.out);
  kc_buf_free(&t_body);
  kc_hostapi_thread_cleanup();
  if (kc_crash_installed()) kc_crash_thread_leave();
  return status;
}
