/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for exec hooks (daemon/hooks/hook_exec.c with hook_host.c): the built-in
 * plugin instantiated through plugin_host like a .so, on a fake host
 * environment (in-memory stores for the `for` and `owns` kinds, an
 * in-memory API that records requests and answers as told). Shell scripts
 * stand in for hooks. Covered: the request (object, owned objects matched
 * by owner uid, attempt counting, expectations, a cluster-scoped owner's
 * children in every namespace and its expectations), every action through the
 * host API (patch, create with expectations, update, delete with
 * preconditions and 404, event, apply with its expectations, strategic
 * patch), 409 -> requeue, results,
 * malformed responses naming the field, per-call exit status, persistent
 * children reused, restarted at once for the next key after a crash,
 * killed after a timeout, the program backing off as a whole (and keys
 * held meanwhile, uncharged) once keys in a row lost their child, and fini
 * stopping and reaping every child. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/childpool.h"
#include "base/clock.h"
#include "config/config.h"
#include "hooks/hook_child.h"
#include "hooks/hook_exec.h"
#include "hooks/hook_host.h"
#include "host/hostapi.h"
#include "watch/decode.h"
#include "kube/kobj.h"
#include "host/plugin_host.h"
#include "cache/store.h"
#include "testutil.h"

/* ---- the fake environment ---- */

#define MAXREQ 32
struct req {
  char method[16], path[256], ct[64], body[2048];
};

static struct {
  kc_store *cms, *pods, *nss; /* nss: Namespaces, the cluster-scoped `for` kind */
  pthread_mutex_t mu;
  struct req reqs[MAXREQ];
  int nreqs;
  int answer_code; /* for the next write; 0: 200 */
  const char *answer_reason;
  int events;
  char last_event[256];
} F = {.mu = PTHREAD_MUTEX_INITIALIZER};

static kc_store *f_store(const char *av, const char *kind) {
  if (!strcmp(av, "v1") && !strcmp(kind, "ConfigMap")) return F.cms;
  if (!strcmp(av, "v1") && !strcmp(kind, "Pod")) return F.pods;
  if (!strcmp(av, "v1") && !strcmp(kind, "Namespace")) return F.nss;
  return NULL;
}
static int f_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name, kc_obj **out) {
  kc_store *s = f_store(av, kind);
  if (!s) return -ENOTSUP;
  *out = kc_store_get(s, ns, name);
  return *out ? 0 : -ENOENT;
}
static int f_list(void *ud, const char *av, const char *kind, kc_str ns,
                  const kc_label_selector *sel, kc_obj_vec *out) {
  kc_store *s = f_store(av, kind);
  return s ? kc_store_list(s, ns, sel, out) : -ENOTSUP;
}
static int f_resource(void *ud, const char *av, const char *kind, kc_resource_ref *out) {
  if (!strcmp(av, "v1") && !strcmp(kind, "ConfigMap"))
    *out = (kc_resource_ref){"/api/v1", "configmaps", true};
  else if (!strcmp(av, "v1") && !strcmp(kind, "Pod"))
    *out = (kc_resource_ref){"/api/v1", "pods", true};
  else if (!strcmp(av, "v1") && !strcmp(kind, "Namespace"))
    *out = (kc_resource_ref){"/api/v1", "namespaces", false};
  else
    return -ENOENT;
  return 0;
}
static int f_request(void *ud, const char *method, const char *path, const char *ct,
                     const void *body, size_t len, uint64_t timeout_ms, kc_api_response *out) {
  pthread_mutex_lock(&F.mu);
  if (F.nreqs < MAXREQ) {
    struct req *r = &F.reqs[F.nreqs++];
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->path, sizeof r->path, "%s", path);
    snprintf(r->ct, sizeof r->ct, "%s", ct ? ct : "");
    snprintf(r->body, sizeof r->body, "%.*s", (int)len, body ? (const char *)body : "");
  }
  memset(out, 0, sizeof *out);
  out->code = F.answer_code ? F.answer_code : 200;
  out->body = "{}";
  out->body_len = 2;
  if (out->code >= 300) {
    out->status.code = (int)out->code;
    snprintf(out->status.reason, sizeof out->status.reason, "%s", F.answer_reason);
    snprintf(out->status.message, sizeof out->status.message, "told to answer %d", (int)out->code);
    out->status.retry_after_seconds = -1;
  }
  F.answer_code = 0;
  pthread_mutex_unlock(&F.mu);
  return 0;
}
static bool f_may_write(void *ud) {
  return true;
}
static int f_event(void *ud, const char *controller, const kc_obj *o, int type, const char *reason,
                   const char *message) {
  (void)controller;
  pthread_mutex_lock(&F.mu);
  F.events++;
  snprintf(F.last_event, sizeof F.last_event, "%.*s %d %s %s", (int)kc_obj_name(o).len,
           kc_obj_name(o).ptr, type, reason, message);
  pthread_mutex_unlock(&F.mu);
  return 0;
}

static const kc_host_env_ops fake_ops = {
    .cache_get = f_get,
    .cache_list = f_list,
    .resource = f_resource,
    .request = f_request,
    .may_write = f_may_write,
    .event = f_event,
};

static void put(kc_store *s, const char *json) {
  char err[128];
  kc_obj *o = kc_obj_parse(json, strlen(json), NULL, err, sizeof err);
  if (!o) fail_msg("parse: %s", err);
  assert_true(kc_store_upsert(s, o, NULL) >= 0);
  kc_obj_unref(o);
}

/* ---- hooks: shell scripts in a temp dir; the "respond" file holds the
 * response, the "req" file gets the last request ---- */

static char dir[64];
static kc_config *cfg;
static kc_plugin_instance *inst;

/* The file NAME of the hook's directory (tu_read_file; the last one read
 * is kept until the next call). */
static char *read_file(const char *name) {
  static char *last;
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  free(last);
  last = tu_read_file(path, NULL);
  return last;
}

/* The response the hook gives next (one line). */
static void respond(const char *json) {
  char path[128];
  snprintf(path, sizeof path, "%s/respond", dir);
  FILE *f = fopen(path, "w");
  assert_true(f && fputs(json, f) >= 0 && fclose(f) == 0);
}

static const char PER_CALL[] = "cat > \"$D/req\"; cat \"$D/respond\"";
/* Persistent: a line in, the respond file out; "exit" in it exits, "hang" hangs. */
static const char PERSISTENT[] =
    "echo $$ >> \"$D/pids\"; while read -r l; do printf \"%s\\n\" \"$l\" > \"$D/req\"; "
    "r=$(cat \"$D/respond\"); case \"$r\" in exit) echo dying >&2; exit 7;; hang) sleep 30;; esac; "
    "printf \"%s\\n\" \"$r\"; done";

/* The hook controller `hk` for `for_kind`, owning Pods. */
static void start_for(const char *for_kind, const char *mode, const char *script,
                      const char *timeout) {
  char text[2048];
  snprintf(
      text, sizeof text,
      "controllers:\n  - name: hk\n    for: {apiVersion: v1, kind: %s}\n"
      "    owns: [{apiVersion: v1, kind: Pod}]\n    workers: 2\n"
      "    hook:\n      exec:\n        command: [sh, -c, '%s']\n"
      "        env: {D: %s}\n        mode: %s\n        timeout: %s\n        stopGracePeriod: 1s\n",
      for_kind, script, dir, mode, timeout);
  /* single quotes of the YAML scalar: the scripts use none */
  char err[1024];
  assert_int_equal(kc_config_load_buffer("t.yaml", NULL, text, strlen(text), &cfg, err, sizeof err),
                   0);
  kc_plugin *p = NULL;
  assert_int_equal(kc_plugin_builtin(kc_hook_exec_plugin(), &p, err, sizeof err), 0);
  const kc_host_env env = {&fake_ops, NULL, NULL, false, NULL};
  assert_int_equal(kc_plugin_instance_new_arg(p, "hk", &env, (void *)&cfg->controllers[0], &inst,
                                              err, sizeof err),
                   0);
}

static void start(const char *mode, const char *script, const char *timeout) {
  start_for("ConfigMap", mode, script, timeout);
}

static void stop(void) {
  kc_plugin_instance_free(inst);
  inst = NULL;
  kc_config_free(cfg);
  cfg = NULL;
  assert_int_equal(kc_hook_child_drain(10000), 0);
  assert_int_equal(kc_hook_children_unreaped(), 0);
  errno = 0;
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no zombie */
  assert_int_equal(errno, ECHILD);
}

static kc_reconcile_result run(const char *key) {
  kc_reconcile_result res;
  kc_plugin_reconcile(inst, key, &res);
  return res;
}

static int setup(void **state) {
  signal(SIGPIPE, SIG_IGN);
  snprintf(dir, sizeof dir, "/tmp/kctrld-hook-XXXXXX");
  assert_non_null(mkdtemp(dir));
  F.cms = kc_store_new(NULL, 0);
  F.pods = kc_store_new(NULL, 0);
  F.nss = kc_store_new(NULL, 0);
  F.nreqs = 0;
  F.events = 0;
  put(F.cms, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"ns\","
             "\"name\":\"a\","
             "\"uid\":\"u-a\",\"resourceVersion\":\"5\"},\"data\":{\"k\":\"v\"}}");
  put(F.pods, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\",\"name\":"
              "\"mine\","
              "\"resourceVersion\":\"6\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":"
              "\"ConfigMap\","
              "\"name\":\"a\",\"uid\":\"u-a\",\"controller\":true}]}}");
  put(F.pods, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\",\"name\":"
              "\"other\","
              "\"resourceVersion\":\"7\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":"
              "\"ConfigMap\","
              "\"name\":\"a\",\"uid\":\"u-old\",\"controller\":true}]}}");
  return 0;
}

static int teardown(void **state) {
  if (inst) stop();
  kc_store_free(F.cms);
  kc_store_free(F.pods);
  kc_store_free(F.nss);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  kc_hostapi_thread_cleanup();
  kc_plugin_host_unload_all();
  return 0;
}

/* ---- tests ---- */

static void test_request_and_actions(void **state) {
  (void)state;
  start("per-call", PER_CALL, "10s");
  respond(
      "{\"result\":\"done\",\"actions\":[{\"action\":\"patch\",\"apiVersion\":\"v1\",\"kind\":"
      "\"ConfigMap\","
      "\"namespace\":\"ns\",\"name\":\"a\",\"patch\":{\"metadata\":{\"labels\":{\"h\":\"1\"}}}},"
      "{\"action\":\"event\",\"type\":\"Warning\",\"reason\":\"Hashed\",\"message\":\"h=1\"}]}");
  kc_reconcile_result res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_DONE);
  const char *req = read_file("req");
  assert_non_null(req);
  assert_non_null(
      strstr(req, "{\"apiVersion\":\"kctrld.io/hook/v1\",\"controller\":\"hk\",\"key\":\"ns/a\","
                  "\"attempt\":1,\"expectationsSatisfied\":true,\"object\":{\"apiVersion\":\"v1\","
                  "\"kind\":\"ConfigMap\""));
  assert_non_null(strstr(req, "\"name\":\"mine\"")); /* owned by uid */
  assert_null(strstr(req, "\"name\":\"other\""));    /* an older incarnation's */
  assert_int_equal(F.nreqs, 1);
  assert_string_equal(F.reqs[0].method, "PATCH");
  assert_string_equal(F.reqs[0].path, "/api/v1/namespaces/ns/configmaps/a");
  assert_string_equal(F.reqs[0].body, "{\"metadata\":{\"labels\":{\"h\":\"1\"}}}");
  assert_int_equal(F.events, 1);
  assert_string_equal(F.last_event, "a 1 Hashed h=1");

  /* deleted: object null, owned by kind and name */
  respond("{\"result\":\"done\"}");
  assert_int_equal(run("ns/gone").kind, KC_RESULT_DONE);
  req = read_file("req");
  assert_non_null(strstr(req, "\"object\":null,\"owned\":[]"));

  /* create of an owned kind sets expectations; the next request says so */
  respond(
      "{\"result\":\"done\",\"actions\":[{\"action\":\"create\",\"object\":{\"apiVersion\":\"v1\","
      "\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\",\"generateName\":\"a-\"}}}]}");
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_string_equal(F.reqs[1].method, "POST");
  assert_string_equal(F.reqs[1].path, "/api/v1/namespaces/ns/pods");
  respond("{\"result\":\"requeueAfter\",\"requeueAfter\":\"2s\"}");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_REQUEUE_AFTER);
  assert_int_equal(res.after_ms, 2000);
  assert_false(res.has_priority);
  assert_non_null(strstr(read_file("req"), "\"expectationsSatisfied\":false"));
  respond("{\"result\":\"requeueAfter\",\"requeueAfter\":\"0s\",\"priority\":\"low\"}");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_REQUEUE_AFTER);
  assert_int_equal(res.after_ms, 0);
  assert_true(res.has_priority);
  assert_true(res.priority < 0);

  /* delete with preconditions; 404 counts as done */
  respond("{\"result\":\"done\",\"actions\":[{\"action\":\"delete\",\"apiVersion\":\"v1\",\"kind\":"
          "\"Pod\","
          "\"namespace\":\"ns\",\"name\":\"mine\",\"preconditions\":{\"uid\":\"u-p\"}}]}");
  F.answer_code = 404;
  F.answer_reason = "NotFound";
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_string_equal(F.reqs[2].method, "DELETE");
  assert_string_equal(F.reqs[2].path, "/api/v1/namespaces/ns/pods/mine");
  assert_non_null(strstr(F.reqs[2].body, "\"uid\":\"u-p\""));

  /* update, then a server-side apply (field manager: the controller) and a
   * strategic merge patch */
  respond(
      "{\"result\":\"done\",\"actions\":[{\"action\":\"update\",\"object\":{\"apiVersion\":\"v1\","
      "\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"ns\",\"name\":\"a\","
      "\"resourceVersion\":\"5\"}}},"
      "{\"action\":\"apply\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
      "{\"namespace\":\"ns\",\"name\":\"a\"},\"data\":{\"k\":\"w\"}}},"
      "{\"action\":\"patch\",\"patchType\":\"strategic\",\"apiVersion\":\"v1\",\"kind\":\"Pod\","
      "\"namespace\":\"ns\",\"name\":\"mine\",\"patch\":{\"spec\":{\"containers\":[{\"name\":\"c\","
      "\"$patch\":\"delete\"}]}}}]}");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_DONE);
  assert_string_equal(F.reqs[3].method, "PUT");
  assert_string_equal(F.reqs[4].method, "PATCH");
  assert_string_equal(F.reqs[4].path, "/api/v1/namespaces/ns/configmaps/a?fieldManager=hk");
  assert_string_equal(F.reqs[4].ct, "application/apply-patch+yaml");
  assert_non_null(strstr(F.reqs[4].body, "\"data\":{\"k\":\"w\"}"));
  assert_string_equal(F.reqs[5].path, "/api/v1/namespaces/ns/pods/mine");
  assert_string_equal(F.reqs[5].ct, "application/strategic-merge-patch+json");

  /* an apply of an owned object the cache lacks is an expected creation:
   * 201 leaves it to the informer, 200 (it existed) observes it at once */
#define APPLY_POD                                                                                   \
  "{\"result\":\"done\",\"actions\":[{\"action\":\"apply\",\"fieldManager\":\"me\",\"force\":true,"     \
  "\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\","               \
  "\"name\":\"%s\"}}}]}"
  char buf[512];
  kc_expectations *ex = kc_plugin_instance_expectations(inst);
  kc_expectations_forget(ex, "ns/a"); /* the create above is never observed here */
  snprintf(buf, sizeof buf, APPLY_POD, "new");
  respond(buf);
  F.answer_code = 201;
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_string_equal(F.reqs[6].path, "/api/v1/namespaces/ns/pods/new?fieldManager=me&force=true");
  respond("{\"result\":\"done\"}");
  run("ns/a");
  assert_non_null(strstr(read_file("req"), "\"expectationsSatisfied\":false"));
  kc_expectations_forget(ex, "ns/a");
  respond(buf); /* answered 200: the object existed */
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  respond("{\"result\":\"done\"}");
  run("ns/a");
  assert_non_null(strstr(read_file("req"), "\"expectationsSatisfied\":true"));
  /* an apply of an owned object the cache has expects nothing */
  snprintf(buf, sizeof buf, APPLY_POD, "mine");
  respond(buf);
  F.answer_code = 201;
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  respond("{\"result\":\"done\"}");
  run("ns/a");
  assert_non_null(strstr(read_file("req"), "\"expectationsSatisfied\":true"));
#undef APPLY_POD
  stop();
}

/* A cluster-scoped `for` kind (a Namespace owning Pods): the key is the
 * name; `owned` holds the children of every namespace that reference the
 * owner's uid; creates and deletes set the key's expectations like a
 * namespaced key's. */
static void test_cluster_scoped_owner(void **state) {
  (void)state;
#define NS_CHILD(ns, name, uid)                                                                     \
  "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name   \
  "\",\"resourceVersion\":\"9\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Namespace\","     \
  "\"name\":\"team\",\"uid\":\"" uid "\",\"controller\":true}]}}"
  put(F.nss, "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"team\","
             "\"uid\":\"u-team\",\"resourceVersion\":\"8\"}}");
  put(F.pods, NS_CHILD("team", "c1", "u-team"));
  put(F.pods, NS_CHILD("elsewhere", "c2", "u-team"));
  put(F.pods, NS_CHILD("team", "c3", "u-old")); /* an older Namespace "team"'s */
#undef NS_CHILD
  start_for("Namespace", "per-call", PER_CALL, "10s");
  respond("{\"result\":\"done\",\"actions\":[{\"action\":\"create\",\"object\":{\"apiVersion\":"
          "\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"team\",\"name\":\"c4\"}}}]}");
  assert_int_equal(run("team").kind, KC_RESULT_DONE);
  const char *req = read_file("req");
  assert_non_null(strstr(req, "\"key\":\"team\",\"attempt\":1,\"expectationsSatisfied\":true,"
                              "\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\""));
  assert_non_null(strstr(req, "\"name\":\"c1\""));
  assert_non_null(strstr(req, "\"name\":\"c2\""));
  assert_null(strstr(req, "\"name\":\"c3\""));
  assert_null(strstr(req, "\"name\":\"mine\""));
  assert_string_equal(F.reqs[0].method, "POST");
  assert_string_equal(F.reqs[0].path, "/api/v1/namespaces/team/pods");
  kc_expectations *ex = kc_plugin_instance_expectations(inst);
  assert_false(kc_expectations_satisfied(ex, "team", 0));
  respond("{\"result\":\"done\"}");
  assert_int_equal(run("team").kind, KC_RESULT_DONE);
  assert_non_null(strstr(read_file("req"), "\"expectationsSatisfied\":false"));
  /* the informer's add (controller.c maps it to "team") observes it */
  kc_expectations_observe(ex, "team", 1, 0);
  assert_int_equal(run("team").kind, KC_RESULT_DONE);
  assert_non_null(strstr(read_file("req"), "\"expectationsSatisfied\":true"));
  /* a delete of an owned object sets a deletion; one already gone observes it at once */
  respond("{\"result\":\"done\",\"actions\":[{\"action\":\"delete\",\"apiVersion\":\"v1\","
          "\"kind\":\"Pod\",\"namespace\":\"elsewhere\",\"name\":\"c2\"}]}");
  assert_int_equal(run("team").kind, KC_RESULT_DONE);
  assert_false(kc_expectations_satisfied(ex, "team", 0));
  F.answer_code = 404;
  F.answer_reason = "NotFound";
  assert_int_equal(run("team").kind, KC_RESULT_DONE);
  assert_true(kc_expectations_satisfied(ex, "team", 0));
  stop();
}

static void test_conflicts_errors_attempts(void **state) {
  (void)state;
  start("per-call", PER_CALL, "10s");
  respond("{\"result\":\"done\",\"actions\":[{\"action\":\"patch\",\"apiVersion\":\"v1\",\"kind\":"
          "\"ConfigMap\","
          "\"namespace\":\"ns\",\"name\":\"a\",\"patch\":{}}]}");
  F.answer_code = 409;
  F.answer_reason = "Conflict";
  assert_int_equal(run("ns/a").kind, KC_RESULT_REQUEUE); /* 409 -> requeue */
  F.answer_code = 422;
  F.answer_reason = "Invalid";
  kc_reconcile_result res = run("ns/a");
  /* a 422 no retry can fix: terminal (plugin.h "Terminal errors") */
  assert_int_equal(res.kind, KC_RESULT_TERMINAL);
  assert_string_equal(res.message, "actions[0] patch v1 ConfigMap ns/a: Invalid argument: PATCH "
                                   "configmaps refused (HTTP 422 Invalid): told to answer 422");
  assert_non_null(strstr(read_file("req"), "\"attempt\":2"));
  /* a malformed response is an error naming the field */
  respond("{\"result\":\"done\",\"actions\":[{\"action\":\"event\",\"reason\":\"R\"},{\"action\":"
          "\"patch\","
          "\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"patch\":7}]}");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_string_equal(res.message,
                      "hook response: actions[1].patch: expected an object, got a number");
  assert_non_null(strstr(read_file("req"), "\"attempt\":3"));
  respond("{\"result\":\"error\",\"message\":\"not today\"}");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_string_equal(res.message, "hook: not today");
  respond("{\"result\":\"terminal\",\"message\":\"spec.size is not a number\"}");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_TERMINAL);
  assert_string_equal(res.message, "hook: spec.size is not a number");
  /* success forgets the attempts */
  respond("{\"result\":\"done\"}");
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_non_null(strstr(read_file("req"), "\"attempt\":6"));
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_non_null(strstr(read_file("req"), "\"attempt\":1"));
  stop();
  /* a per-call hook that fails */
  start("per-call", "echo broken >&2; exit 4", "10s");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_non_null(strstr(res.message, "exited with status 4"));
  stop();
}

static int count_lines(const char *name) {
  const char *t = read_file(name);
  int n = 0;
  for (; t && *t; t++)
    n += *t == '\n';
  return n;
}

static void test_persistent_children(void **state) {
  (void)state;
  start("persistent", PERSISTENT, "2s");
  respond("{\"result\":\"done\"}");
  for (int i = 0; i < 5; i++)
    assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_int_equal(count_lines("pids"), 1); /* one child served them all */
  /* a healthy child crashes on a key: that key fails, the next gets a new child at once */
  respond("exit");
  kc_reconcile_result res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_non_null(
      strstr(res.message, "exited with status 7 before answering; restarted for the next key"));
  assert_int_equal(kc_hook_children_unreaped(), 0); /* reaped at once */
  respond("{\"result\":\"done\"}");
  assert_int_equal(run("ns/b").kind, KC_RESULT_DONE);
  assert_int_equal(count_lines("pids"), 2);
  /* it hangs: killed at the timeout, restarted for the next key too */
  respond("hang");
  res = run("ns/b");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_non_null(
      strstr(res.message, "timed out after 2000ms; killed; restarted for the next key"));
  assert_int_equal(kc_hook_children_unreaped(), 0);
  /* garbage from fresh children: still only the key pays, the next key
   * gets a new child at once */
  respond("this is not json");
  for (int i = 0; i < 2; i++) {
    res = run("ns/a");
    assert_int_equal(res.kind, KC_RESULT_ERROR);
    assert_non_null(strstr(res.message, "hook response: response is not JSON"));
    assert_non_null(strstr(res.message, "; restarted for the next key"));
  }
  assert_int_equal(count_lines("pids"), 4);
  assert_int_equal(kc_hook_children_unreaped(), 0);
  respond("{\"result\":\"done\"}");
  assert_int_equal(run("ns/b").kind, KC_RESULT_DONE);
  assert_int_equal(count_lines("pids"), 5);
  /* A program failing for every key: once KC_CHILDPOOL_BREAK_KEYS distinct
   * keys in a row lost their child, it backs off as a whole (the manual
   * clock stands still meanwhile: the backoff is exact). */
  kc_clock_set_manual(kc_clock_now_ns());
  respond("this is not json");
  char key[32];
  for (int k = 0; k < KC_CHILDPOOL_BREAK_KEYS; k++) {
    snprintf(key, sizeof key, "ns/k%d", k);
    res = run(key);
    assert_int_equal(res.kind, KC_RESULT_ERROR);
    if (k < KC_CHILDPOOL_BREAK_KEYS - 1)
      assert_non_null(strstr(res.message, "; restarted for the next key"));
    else if (!strstr(res.message, "keys in a row lost their hook child: the program backs off, "
                                  "no new child for"))
      fail_msg("%s", res.message);
  }
  int pids = count_lines("pids");
  /* a key meanwhile is held: not run, no child started, no attempt charged */
  respond("{\"result\":\"done\"}");
  res = run("ns/fresh");
  assert_int_equal(res.kind, KC_RESULT_REQUEUE_AFTER);
  assert_true(res.held);
  assert_int_equal(res.after_ms, 250);
  assert_int_equal(count_lines("pids"), pids);
  kc_clock_advance(100 * 1000000ull);
  res = run("ns/fresh");
  assert_true(res.held);
  assert_int_equal(res.after_ms, 150);
  /* once it passed, it serves again; the held key is on its first attempt */
  kc_clock_advance(150 * 1000000ull);
  assert_int_equal(run("ns/fresh").kind, KC_RESULT_DONE);
  assert_non_null(strstr(read_file("req"), "\"key\":\"ns/fresh\",\"attempt\":1,"));
  assert_int_equal(count_lines("pids"), pids + 1);
  kc_clock_set_real();
  assert_int_equal(kc_hook_children_unreaped(), 1);
  stop(); /* fini: SIGTERM (stdin closed), reaped */
}

/* Two worker threads at once (workers: 2): each reconcile gets a slot of
 * its own; some children crash meanwhile. Under TSan this is the check of
 * the slot hand-off. */
struct conc {
  int done, errors;
};

static void *conc_worker(void *arg) {
  struct conc *c = arg;
  char key[32];
  for (int i = 0; i < 40; i++) {
    snprintf(key, sizeof key, "ns/k%d", i % 7);
    kc_reconcile_result res;
    kc_plugin_reconcile(inst, key, &res);
    if (res.kind == KC_RESULT_DONE)
      c->done++;
    else
      c->errors++;
  }
  return NULL;
}

static void test_concurrent_workers(void **state) {
  (void)state;
  /* every 10th request of a child makes it exit */
  start("persistent",
        "n=0; while read -r l; do n=$((n+1)); [ $n -ge 10 ] && exit 1; echo "
        "\"{\\\"result\\\":\\\"done\\\"}\"; done",
        "5s");
  struct conc a = {0}, b = {0};
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, conc_worker, &a), 0);
  assert_int_equal(pthread_create(&tb, NULL, conc_worker, &b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(a.done + a.errors + b.done + b.errors, 80);
  /* each crash costs only the key that met it: one error per 10 requests */
  assert_true(a.done + b.done >= 60);
  assert_true(a.errors + b.errors >= 1);
  assert_true(kc_hook_children_unreaped() <= 2); /* at most one per slot */
  stop();
}

/* A hook program named by path is checked like a plugin file: one others
 * can write is refused at init, a missing one too; a safe one runs. */
static void test_program_permissions(void **state) {
  (void)state;
  char prog[128], text[1024], err[1024];
  snprintf(prog, sizeof prog, "%s/hook.sh", dir);
  FILE *f = fopen(prog, "w");
  assert_true(f && fputs("#!/bin/sh\ncat >/dev/null\necho '{\"result\":\"done\"}'\n", f) >= 0 &&
              fclose(f) == 0);
  kc_plugin *p = NULL;
  assert_int_equal(kc_plugin_builtin(kc_hook_exec_plugin(), &p, err, sizeof err), 0);
  const kc_host_env env = {&fake_ops, NULL, NULL, false, NULL};
  static const struct {
    mode_t mode;
    const char *name;
    int want;
  } cases[] = {{0777, "hook.sh", -EPERM}, {0755, "missing.sh", -ENOENT}, {0755, "hook.sh", 0}};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(chmod(prog, cases[i].mode), 0);
    snprintf(text, sizeof text,
             "controllers:\n  - name: hk\n    for: {apiVersion: v1, kind: ConfigMap}\n"
             "    hook: {exec: {command: [%s/%s], mode: per-call}}\n",
             dir, cases[i].name);
    assert_int_equal(
        kc_config_load_buffer("t.yaml", NULL, text, strlen(text), &cfg, err, sizeof err), 0);
    int rc = kc_plugin_instance_new_arg(p, "hk", &env, (void *)&cfg->controllers[0], &inst, err,
                                        sizeof err);
    assert_int_equal(rc, cases[i].want);
    if (rc == 0) {
      assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
      stop();
    } else {
      assert_non_null(strstr(err, "init failed for controller hk"));
      inst = NULL;
      kc_config_free(cfg);
      cfg = NULL;
    }
  }
}

/* The base every built-in transport shares (hook_host.h): the one default
 * of the slot count, the copies init makes, the spec check. */
static bool always_false(const kc_controller_spec *spec) {
  (void)spec;
  return false;
}
static void test_hook_base(void **state) {
  (void)state;
  const char *text = "controllers:\n  - name: hb\n    for: {apiVersion: v1, kind: ConfigMap}\n"
                     "    owns: [{apiVersion: v1, kind: Pod}]\n    workers: 3\n"
                     "    hook: {exec: {command: [/bin/true]}}\n"
                     "  - name: one\n    for: {apiVersion: v1, kind: ConfigMap}\n"
                     "    hook: {exec: {command: [/bin/true]}}\n";
  kc_config *c = NULL;
  char err[512];
  assert_int_equal(kc_config_load_buffer("b.yaml", NULL, text, strlen(text), &c, err, sizeof err),
                   0);
  kc_controller_spec one = c->controllers[1];
  one.workers = 0;
  assert_int_equal(kc_hook_nslots(&c->controllers[0]), 3);
  assert_int_equal(kc_hook_nslots(&one), 1);
  kc_hook_base b;
  assert_int_equal(kc_hook_base_init(&b, &c->controllers[0]), 0);
  assert_string_equal(b.controller, "hb");
  assert_int_equal(b.nslots, 3);
  assert_string_equal(b.kinds.for_.kind, "ConfigMap");
  assert_int_equal(b.kinds.nowns, 1);
  assert_string_equal(b.kinds.owns[0].kind, "Pod");
  assert_int_equal(kc_hook_attempt_of(&b.attempts, "ns/x"), 1);
  kc_hook_base_free(&b);
  kc_hook_base_free(&b); /* freed: a no-op */
  void *arg = (void *)&c->controllers[0];
  assert_ptr_equal(kc_hook_init_spec(&arg, "t", "x", NULL), &c->controllers[0]);
  assert_null(arg);
  arg = (void *)&c->controllers[0];
  assert_null(kc_hook_init_spec(&arg, "t", "x", always_false));
  arg = NULL;
  assert_null(kc_hook_init_spec(&arg, "t", "x", NULL));
  kc_config_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hook_base),
      cmocka_unit_test_setup_teardown(test_request_and_actions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cluster_scoped_owner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_conflicts_errors_attempts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_persistent_children, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_workers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_program_permissions, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
