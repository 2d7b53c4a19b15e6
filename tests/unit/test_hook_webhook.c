/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for webhook hooks (daemon/hooks/hook_webhook.c with hook_host.c): the
 * built-in plugin instantiated through plugin_host like a .so, on a fake
 * host environment (an in-memory ConfigMap store, an in-memory API that
 * records writes and answers as told), against tests/unit/mini_server as
 * the webhook, over HTTP and HTTPS. Covered: the POST (method, path,
 * Content-Type, the kctrld.io/hook/v1 request), actions performed through
 * the host API, 409 -> requeue, attempts counted over failures, every
 * failure a reconcile error naming the URL without its query (non-2xx with
 * status, reason and body start; garbage; too large; timeout; connection
 * refused), TLS with a CA file, an unknown CA refused, insecureSkipTLSVerify,
 * the TLS files checked at init (missing, a key file others can write),
 * two workers at once (TSan: the slot hand-off), URL redaction. */
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
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "hooks/hook_webhook.h"
#include "host/hostapi.h"
#include "client/http.h"
#include "kube/kobj.h"
#include "mini_server.h"
#include "host/plugin_host.h"
#include "cache/store.h"
#include "testutil.h"

/* ---- the fake host environment ---- */

static struct {
  kc_store *cms;
  pthread_mutex_t mu;
  int nwrites;
  char method[16], path[256], body[1024];
  int answer_code; /* for the next write; 0: 200 */
} F = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int f_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name, kc_obj **out) {
  if (strcmp(av, "v1") || strcmp(kind, "ConfigMap")) return -ENOTSUP;
  *out = kc_store_get(F.cms, ns, name);
  return *out ? 0 : -ENOENT;
}
static int f_list(void *ud, const char *av, const char *kind, kc_str ns,
                  const kc_label_selector *sel, kc_obj_vec *out) {
  if (strcmp(av, "v1") || strcmp(kind, "ConfigMap")) return -ENOTSUP;
  return kc_store_list(F.cms, ns, sel, out);
}
static int f_resource(void *ud, const char *av, const char *kind, kc_resource_ref *out) {
  if (strcmp(av, "v1") || strcmp(kind, "ConfigMap")) return -ENOENT;
  *out = (kc_resource_ref){"/api/v1", "configmaps", true};
  return 0;
}
static int f_request(void *ud, const char *method, const char *path, const char *ct,
                     const void *body, size_t len, uint64_t timeout_ms, kc_api_response *out) {
  pthread_mutex_lock(&F.mu);
  F.nwrites++;
  snprintf(F.method, sizeof F.method, "%s", method);
  snprintf(F.path, sizeof F.path, "%s", path);
  snprintf(F.body, sizeof F.body, "%.*s", (int)len, body ? (const char *)body : "");
  memset(out, 0, sizeof *out);
  out->code = F.answer_code ? F.answer_code : 200;
  out->body = "{}";
  out->body_len = 2;
  if (out->code >= 300) {
    out->status.code = (int)out->code;
    snprintf(out->status.reason, sizeof out->status.reason, "Conflict");
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

static const kc_host_env_ops fake_ops = {
    .cache_get = f_get,
    .cache_list = f_list,
    .resource = f_resource,
    .request = f_request,
    .may_write = f_may_write,
};

/* ---- the webhook: mini_server answering what W says ---- */

static struct {
  pthread_mutex_t mu;
  char method[16], path[128], query[64], ctype[64];
  char body[4096]; /* the last request */
  atomic_int requests;
  int status;
  const char *reply;
  unsigned hang_ms; /* nonzero: answer after 3 s */
} W = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void handler(const mini_server_request *rq, mini_server_reply *reply, void *ud) {
  pthread_mutex_lock(&W.mu);
  snprintf(W.method, sizeof W.method, "%s", rq->method);
  snprintf(W.path, sizeof W.path, "%s", rq->path);
  const char *q = mini_server_query(rq, "token"), *ct = mini_server_header(rq, "Content-Type");
  snprintf(W.query, sizeof W.query, "%s", q ? q : "");
  snprintf(W.ctype, sizeof W.ctype, "%s", ct ? ct : "");
  snprintf(W.body, sizeof W.body, "%.*s", (int)rq->body_len, rq->body);
  reply->status = W.status;
  reply->body = W.reply;
  /* hanging: the answer comes after W.hang_ms (a chunk with a delay) */
  static const mini_server_chunk late = {"{\"result\":\"done\"}", 0, 3000, false};
  if (W.hang_ms) {
    reply->chunks = &late;
    reply->nchunks = 1;
  }
  pthread_mutex_unlock(&W.mu);
  atomic_fetch_add(&W.requests, 1);
}

static void answer(int status, const char *body) {
  pthread_mutex_lock(&W.mu);
  W.status = status;
  W.reply = body;
  pthread_mutex_unlock(&W.mu);
}

static void hang(unsigned ms) {
  pthread_mutex_lock(&W.mu);
  W.hang_ms = ms;
  pthread_mutex_unlock(&W.mu);
}

static char dir[64];
static kc_config *cfg;
static kc_plugin_instance *inst;
static mini_server *srv;

/* Instantiates the plugin for `hook` (the YAML of hook.webhook's keys);
 * returns init's result. */
static int start(const char *webhook) {
  char text[2048], err[1024];
  snprintf(text, sizeof text,
           "controllers:\n  - name: wh\n    for: {apiVersion: v1, kind: ConfigMap}\n"
           "    workers: 2\n    hook:\n      webhook: {%s}\n",
           webhook);
  assert_int_equal(kc_config_load_buffer("t.yaml", dir, text, strlen(text), &cfg, err, sizeof err),
                   0);
  kc_plugin *p = NULL;
  assert_int_equal(kc_plugin_builtin(kc_hook_webhook_plugin(), &p, err, sizeof err), 0);
  const kc_host_env env = {&fake_ops, NULL, NULL, false, NULL};
  int rc = kc_plugin_instance_new_arg(p, "wh", &env, (void *)&cfg->controllers[0], &inst, err,
                                      sizeof err);
  if (rc < 0) {
    inst = NULL;
    kc_config_free(cfg);
    cfg = NULL;
  }
  return rc;
}

static void start_ok(const char *webhook) {
  assert_int_equal(start(webhook), 0);
}

static void stop(void) {
  kc_plugin_instance_free(inst);
  inst = NULL;
  kc_config_free(cfg);
  cfg = NULL;
}

static kc_reconcile_result run(const char *key) {
  kc_reconcile_result res;
  kc_plugin_reconcile(inst, key, &res);
  return res;
}

static void put(const char *json) {
  char err[128];
  kc_obj *o = kc_obj_parse(json, strlen(json), NULL, err, sizeof err);
  if (!o) fail_msg("parse: %s", err);
  assert_true(kc_store_upsert(F.cms, o, NULL) >= 0);
  kc_obj_unref(o);
}

static int setup(void **state) {
  signal(SIGPIPE, SIG_IGN);
  snprintf(dir, sizeof dir, "/tmp/kctrld-webhook-XXXXXX");
  assert_non_null(mkdtemp(dir));
  F.cms = kc_store_new(NULL, 0);
  F.nwrites = 0;
  put("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"ns\","
      "\"name\":\"a\",\"uid\":\"u-a\",\"resourceVersion\":\"5\"},\"data\":{\"k\":\"v\"}}");
  atomic_store(&W.requests, 0);
  hang(0);
  answer(200, "{\"result\":\"done\"}");
  return 0;
}

static int teardown(void **state) {
  if (inst) stop();
  if (srv) mini_server_stop(srv);
  srv = NULL;
  kc_store_free(F.cms);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  kc_hostapi_thread_cleanup();
  kc_plugin_host_unload_all();
  return 0;
}

/* ---- tests ---- */

static void test_post_and_actions(void **state) {
  (void)state;
  srv = mini_server_start(handler, NULL, NULL, NULL);
  assert_non_null(srv);
  char opt[256];
  snprintf(opt, sizeof opt, "url: 'http://127.0.0.1:%d/sync?token=s3cret'",
           mini_server_port(srv));
  start_ok(opt);
  answer(200, "{\"result\":\"done\",\"actions\":[{\"action\":\"patch\",\"apiVersion\":\"v1\","
              "\"kind\":\"ConfigMap\",\"namespace\":\"ns\",\"name\":\"a\","
              "\"patch\":{\"metadata\":{\"labels\":{\"h\":\"1\"}}}}]}");
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_string_equal(W.method, "POST");
  assert_string_equal(W.path, "/sync");
  assert_string_equal(W.query, "s3cret");
  assert_string_equal(W.ctype, "application/json");
  assert_non_null(
      strstr(W.body, "{\"apiVersion\":\"kctrld.io/hook/v1\",\"controller\":\"wh\",\"key\":\"ns/a\","
                     "\"attempt\":1,\"expectationsSatisfied\":true,\"object\":{\"apiVersion\":"
                     "\"v1\",\"kind\":\"ConfigMap\""));
  assert_int_equal(F.nwrites, 1);
  assert_string_equal(F.method, "PATCH");
  assert_string_equal(F.path, "/api/v1/namespaces/ns/configmaps/a");
  assert_string_equal(F.body, "{\"metadata\":{\"labels\":{\"h\":\"1\"}}}");
  /* a deleted object: null */
  answer(200, "{\"result\":\"requeueAfter\",\"requeueAfter\":\"3s\"}");
  kc_reconcile_result res = run("ns/gone");
  assert_int_equal(res.kind, KC_RESULT_REQUEUE_AFTER);
  assert_int_equal(res.after_ms, 3000);
  assert_non_null(strstr(W.body, "\"object\":null"));
  /* 409 from the API server on an action: requeue */
  answer(200, "{\"result\":\"done\",\"actions\":[{\"action\":\"patch\",\"apiVersion\":\"v1\","
              "\"kind\":\"ConfigMap\",\"namespace\":\"ns\",\"name\":\"a\",\"patch\":{}}]}");
  F.answer_code = 409;
  assert_int_equal(run("ns/a").kind, KC_RESULT_REQUEUE);
  assert_non_null(strstr(W.body, "\"attempt\":1"));
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_non_null(strstr(W.body, "\"attempt\":2")); /* the requeue counted */
  stop();
}

static void test_failures_name_the_url(void **state) {
  (void)state;
  srv = mini_server_start(handler, NULL, NULL, NULL);
  assert_non_null(srv);
  int port = mini_server_port(srv);
  char opt[256], want[256];
  snprintf(opt, sizeof opt, "url: 'http://127.0.0.1:%d/sync?token=s3cret', timeout: 500ms, "
                            "maxResponseBytes: 100", port);
  start_ok(opt);
  /* non-2xx: status, reason, the start of the body; never the query */
  answer(500, "boom\nat line 2");
  kc_reconcile_result res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  snprintf(want, sizeof want,
           "webhook http://127.0.0.1:%d/sync: HTTP 500 Internal Server Error: boom at line 2",
           port);
  assert_string_equal(res.message, want);
  /* garbage: the parser's message */
  answer(200, "this is not json");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  snprintf(want, sizeof want, "webhook http://127.0.0.1:%d/sync: hook response: response is not JSON",
           port);
  assert_non_null(strstr(res.message, want));
  assert_non_null(strstr(W.body, "\"attempt\":2"));
  /* a wrong field */
  answer(200, "{\"result\":\"maybe\"}");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_non_null(strstr(res.message, "hook response: result"));
  /* too large */
  answer(200, "{\"result\":\"done\",\"message\":\"0123456789012345678901234567890123456789"
              "01234567890123456789012345678901234567890123456789\"}");
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_non_null(strstr(res.message, "response larger than maxResponseBytes (100)"));
  /* hangs: the timeout */
  answer(200, "{\"result\":\"done\"}");
  hang(3000);
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  snprintf(want, sizeof want, "webhook http://127.0.0.1:%d/sync: timed out after 500ms", port);
  assert_non_null(strstr(res.message, want));
  assert_null(strstr(res.message, "s3cret"));
  hang(0);
  /* still serving, and a success forgets the attempts */
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_non_null(strstr(W.body, "\"attempt\":6"));
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_non_null(strstr(W.body, "\"attempt\":1"));
  /* nobody listening */
  mini_server_stop(srv);
  srv = NULL;
  res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  snprintf(want, sizeof want, "webhook http://127.0.0.1:%d/sync: ", port);
  assert_non_null(strstr(res.message, want));
  assert_null(strstr(res.message, "s3cret"));
  stop();
}

static void test_tls(void **state) {
  (void)state;
  if (!mini_server_tls_supported()) skip();
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "(cd '%s' && "
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
           "-keyout ca.key -out ca.crt -subj /CN=kctrld-test-ca -days 2 && "
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
           "-keyout other.key -out other.crt -subj /CN=other-ca -days 2 && "
           "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
           "-keyout srv.key -out srv.csr -subj /CN=localhost && "
           "printf 'subjectAltName=DNS:localhost\\n' > ext.cnf && "
           "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
           "-out srv.crt -days 2 -extfile ext.cnf) >/dev/null 2>&1",
           dir);
  if (system(cmd) != 0) skip();
  char path[128];
  snprintf(path, sizeof path, "%s/srv.crt", dir);
  char *cert = tu_read_file(path, NULL);
  snprintf(path, sizeof path, "%s/srv.key", dir);
  char *key = tu_read_file(path, NULL);
  assert_non_null(cert);
  assert_non_null(key);
  srv = mini_server_start(handler, NULL, cert, key);
  assert_non_null(srv);
  int port = mini_server_port(srv);
  char opt[512];
  /* the right CA (relative to the config's directory) */
  snprintf(opt, sizeof opt, "url: 'https://localhost:%d/sync', caFile: ca.crt", port);
  start_ok(opt);
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_string_equal(W.method, "POST");
  stop();
  /* a wrong CA: refused, and the message says why */
  snprintf(opt, sizeof opt, "url: 'https://localhost:%d/sync', caFile: other.crt", port);
  start_ok(opt);
  int before = atomic_load(&W.requests);
  kc_reconcile_result res = run("ns/a");
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  char want[128];
  snprintf(want, sizeof want, "webhook https://localhost:%d/sync: SSL certificate problem", port);
  assert_non_null(strstr(res.message, want));
  assert_int_equal(atomic_load(&W.requests), before); /* nothing reached the handler */
  stop();
  /* not verifying, when asked to */
  snprintf(opt, sizeof opt, "url: 'https://localhost:%d/sync', insecureSkipTLSVerify: true", port);
  start_ok(opt);
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  stop();
  free(cert);
  free(key);
}

/* The TLS files are checked at init: missing ones, and a client key file
 * others can write, are refused. */
static void test_tls_files_checked(void **state) {
  (void)state;
  char path[128];
  static const char *const files[] = {"c.pem", "k.pem", "ca.pem"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    FILE *f = fopen(path, "w");
    assert_true(f && fputs("x\n", f) >= 0 && fclose(f) == 0);
    assert_int_equal(chmod(path, 0600), 0);
  }
  assert_int_equal(start("url: 'https://h.invalid/x', caFile: nope.pem"), -ENOENT);
  assert_int_equal(
      start("url: 'https://h.invalid/x', clientCertFile: c.pem, clientKeyFile: nope.key"),
      -ENOENT);
  snprintf(path, sizeof path, "%s/k.pem", dir);
  assert_int_equal(chmod(path, 0666), 0);
  assert_int_equal(start("url: 'https://h.invalid/x', clientCertFile: c.pem, clientKeyFile: k.pem"),
                   -EPERM);
  assert_int_equal(chmod(path, 0600), 0);
  start_ok("url: 'https://h.invalid/x', caFile: ca.pem, clientCertFile: c.pem, "
           "clientKeyFile: k.pem");
  stop();
}

/* Two worker threads at once: each reconcile takes a slot (and its easy
 * handle) of its own. Under TSan, the check of the slot hand-off. */
static void *conc_worker(void *arg) {
  int *done = arg;
  char key[32];
  for (int i = 0; i < 30; i++) {
    snprintf(key, sizeof key, "ns/k%d", i % 5);
    kc_reconcile_result res;
    kc_plugin_reconcile(inst, key, &res);
    if (res.kind == KC_RESULT_DONE) (*done)++;
  }
  return NULL;
}

static void test_concurrent_workers(void **state) {
  (void)state;
  srv = mini_server_start(handler, NULL, NULL, NULL);
  assert_non_null(srv);
  char opt[128];
  snprintf(opt, sizeof opt, "url: 'http://localhost:%d/'", mini_server_port(srv));
  start_ok(opt);
  int a = 0, b = 0;
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, conc_worker, &a), 0);
  assert_int_equal(pthread_create(&tb, NULL, conc_worker, &b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(a + b, 60);
  assert_int_equal(atomic_load(&W.requests), 60);
  assert_true(mini_server_connections(srv) <= 2); /* kept alive, one per slot */
  stop();
}

static void test_redact(void **state) {
  (void)state;
  char out[128];
  kc_hook_webhook_redact("https://u:p@h.example:8443/a/b?token=x#f", out, sizeof out);
  assert_string_equal(out, "https://h.example:8443/a/b");
  kc_hook_webhook_redact("http://[::1]/", out, sizeof out);
  assert_string_equal(out, "http://[::1]");
  kc_hook_webhook_redact("not a url", out, sizeof out);
  assert_string_equal(out, "(bad URL)");
  /* the status line's reason phrase, printable */
  static const char st[] = "HTTP/1.1 503 Service\x01Unavailable \r\n";
  kc_hook_webhook_status_reason(st, sizeof st - 1, out, sizeof out);
  assert_string_equal(out, "Service Unavailable");
  kc_hook_webhook_status_reason("HTTP/2 200\r\n", 12, out, sizeof out);
  assert_string_equal(out, "");
  kc_hook_webhook_status_reason("Content-Type: x\r\n", 17, out, sizeof out);
  assert_string_equal(out, "");
  kc_hook_webhook_status_reason(st, sizeof st - 1, out, 8);
  assert_string_equal(out, "Service");
  /* the body excerpt: one line, at most 200 bytes */
  kc_hook_webhook_excerpt("a\nb\t\n", 5, out, sizeof out);
  assert_string_equal(out, "a b");
  char big[300], ex[256];
  memset(big, 'x', sizeof big);
  kc_hook_webhook_excerpt(big, sizeof big, ex, sizeof ex);
  assert_int_equal(strlen(ex), 200);
}

int main(void) {
  if (kc_http_global_init() < 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_post_and_actions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failures_name_the_url, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_files_checked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_workers, setup, teardown),
      cmocka_unit_test(test_redact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
