/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/config/config.c: schema, defaults, every validation error
 * with its exact `file:line:col: message`, lease timing rules, informer
 * deduplication and binding, and the reload diff. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "base/fileperm.h"
#include "testutil.h"

static char err[8192];

static kc_config *load(const char *text) {
  kc_config *c = NULL;
  int rc = kc_config_load_buffer("c.yaml", "/etc/kctrld", text, strlen(text), &c, err, sizeof err);
  if (rc) fprintf(stderr, "unexpected error: %s\n", err);
  assert_int_equal(rc, 0);
  return c;
}

/* Expects the load to fail with exactly `want` (all lines). */
static void fails(const char *text, const char *want) {
  kc_config *c = (kc_config *)1;
  int rc = kc_config_load_buffer("c.yaml", "/etc/kctrld", text, strlen(text), &c, err, sizeof err);
  if (rc != -EINVAL || strcmp(err, want) != 0)
    fprintf(stderr, "input:\n%s\ngot:  %s\nwant: %s\n", text, err, want);
  assert_int_equal(rc, -EINVAL);
  assert_null(c);
  assert_string_equal(err, want);
}

#define TWO "informers:\n" \
  "  - {name: web, apiVersion: v1, kind: Pod, namespaces: [web]}\n" \
  "  - {name: api, apiVersion: v1, kind: Pod, namespaces: [api]}\n" \
  "controllers:\n" \
  "  - name: a\n    plugin: /a.so\n" \
  "    for: {apiVersion: v1, kind: Pod%s}\n"
#define WATCH_BASE "informers:\n" \
  "  - apiVersion: apps/v1\n" \
  "    kind: Deployment\n" \
  "    indexes: {byConfigMap: 'spec.template.spec.volumes[].configMap.name'}\n" \
  "controllers:\n" \
  "  - name: reloader\n" \
  "    plugin: /r.so\n" \
  "    for: {apiVersion: apps/v1, kind: Deployment}\n" \
  "    watches:\n" \
  "      - {apiVersion: v1, kind: ConfigMap, mapping: %s}\n"
#define DIFF_BASE "metrics: {bindAddress: \"127.0.0.1:9090\"}\n" \
  "informers:\n" \
  "  - {apiVersion: v1, kind: Pod, labelSelector: %s, resync: %s}\n" \
  "controllers:\n" \
  "  - name: podset\n" \
  "    plugin: /p/podset.so\n" \
  "    for: {apiVersion: demo.kctrld.io/v1, kind: PodSet}\n" \
  "    owns: [{apiVersion: v1, kind: Pod}]\n" \
  "    settings: {replicasMax: %s}\n" \
  "%s"
#define CTL "controllers:\n  - name: a\n    plugin: a.so\n    for: {apiVersion: v1, kind: ConfigMap}\n"

static void test_example_file(void **state) {
  (void)state;
  kc_config *c = NULL;
  int rc = kc_config_load_file("config/kctrld.example.yaml", &c, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
  assert_string_equal(c->kubeconfig, "/etc/kctrld/kubeconfig");
  assert_true(c->leader_election.enabled);
  assert_string_equal(c->leader_election.namespace_, "kube-system");
  assert_string_equal(c->leader_election.name, "kctrld");
  assert_int_equal(c->leader_election.lease_duration_ms, 15000);
  assert_int_equal(c->leader_election.renew_deadline_ms, 10000);
  assert_int_equal(c->leader_election.retry_period_ms, 2000);
  assert_string_equal(c->metrics_bind, "127.0.0.1:8080");
  assert_int_equal(c->ninformers, 2);
  const kc_informer_spec *pod = &c->informers[0];
  assert_string_equal(pod->api_version, "v1");
  assert_string_equal(pod->group, "");
  assert_string_equal(pod->kind, "Pod");
  assert_int_equal(pod->nnamespaces, 2);
  assert_string_equal(pod->namespaces[0], "default");
  assert_string_equal(pod->namespaces[1], "web");
  assert_string_equal(pod->label_selector, "app in (api,web)"); /* canonical */
  assert_string_equal(pod->field_selector, "status.phase=Running");
  assert_int_equal(pod->ndrop, 1);
  assert_string_equal(pod->drop[0], "metadata.managedFields");
  assert_false(pod->metadata_only);
  assert_int_equal(pod->resync_ms, 600000);
  assert_int_equal(pod->nindexes, 1);
  assert_string_equal(pod->indexes[0].name, "byNode");
  assert_string_equal(pod->indexes[0].path, "spec.nodeName");
  assert_false(pod->implicit);
  assert_string_equal(pod->identity,
                      "apiVersion=v1;kind=Pod;namespaces=default,web;labelSelector=app in "
                      "(api\\,web);fieldSelector=status.phase\\=Running;drop=metadata."
                      "managedFields;metadataOnly=false");
  const kc_informer_spec *ps = &c->informers[1];
  assert_true(ps->implicit);
  assert_string_equal(ps->group, "demo.kctrld.io");
  assert_string_equal(ps->kind, "PodSet");
  assert_int_equal(ps->nnamespaces, 0);
  assert_null(ps->at);
  assert_int_equal(c->ncontrollers, 1);
  const kc_controller_spec *ct = &c->controllers[0];
  assert_string_equal(ct->name, "podset");
  assert_string_equal(ct->plugin, "/usr/lib/kctrld/plugins/podset.so");
  assert_int_equal(ct->for_.informer, 1);
  assert_int_equal(ct->nowns, 1);
  assert_int_equal(ct->owns[0].ref.informer, 0);
  assert_int_equal(ct->workers, 2);
  assert_int_equal(ct->rate_limit.base_delay_ms, 5);
  assert_int_equal(ct->rate_limit.max_delay_ms, 1000000);
  assert_true(ct->rate_limit.qps == 10.0);
  assert_int_equal(ct->rate_limit.burst, 100);
  assert_int_equal(ct->predicates, KC_PRED_GENERATION_CHANGED);
  assert_null(ct->settings); /* podset has no settings: a key would be warned about as unread */
  assert_true(c->dir[0] == '/');
  kc_config_free(c);
}

static void test_defaults(void **state) {
  (void)state;
  kc_config *c = load(CTL);
  assert_null(c->kubeconfig);
  assert_false(c->leader_election.enabled);
  assert_string_equal(c->leader_election.namespace_, "kube-system");
  assert_string_equal(c->leader_election.name, "kctrld");
  assert_null(c->leader_election.identity);
  assert_int_equal(c->leader_election.lease_duration_ms, 15000);
  assert_int_equal(c->leader_election.renew_deadline_ms, 10000);
  assert_int_equal(c->leader_election.retry_period_ms, 2000);
  assert_string_equal(c->metrics_bind, "127.0.0.1:8080");
  assert_int_equal(c->log_level, KC_LOG_INFO);
  assert_int_equal(c->shutdown_timeout_ms, 30000);
  assert_int_equal(c->ninformers, 1);
  const kc_informer_spec *inf = &c->informers[0];
  assert_true(inf->implicit);
  assert_string_equal(inf->label_selector, "");
  assert_string_equal(inf->field_selector, "");
  assert_int_equal(inf->resync_ms, 0);
  assert_int_equal(inf->consistency_check_ms, 30 * 60 * 1000);
  assert_int_equal(inf->page_size, 500);
  assert_int_equal(inf->watch_timeout_ms, 300000);
  assert_int_equal(inf->watch_inactivity_ms, 300000);
  assert_int_equal(inf->streaming_list, KC_STREAMING_AUTO);
  const kc_controller_spec *ct = &c->controllers[0];
  assert_string_equal(ct->plugin, "/etc/kctrld/a.so"); /* relative: against the config dir */
  assert_int_equal(ct->workers, 1);
  assert_int_equal(ct->reconcile_timeout_ms, 60000);
  assert_int_equal(ct->rate_limit.base_delay_ms, 5);
  assert_int_equal(ct->rate_limit.max_delay_ms, 1000000);
  assert_true(ct->rate_limit.qps == 10.0);
  assert_int_equal(ct->rate_limit.burst, 100);
  assert_int_equal(ct->predicates, 0);
  assert_null(ct->settings);
  assert_int_equal(ct->nowns, 0);
  assert_int_equal(ct->nwatches, 0);
  kc_config_free(c);

  c = load("{}");
  assert_int_equal(c->ninformers, 0);
  assert_int_equal(c->ncontrollers, 0);
  kc_config_free(c);

  c = load("kubeconfig: kube/config\nlogLevel: debug\nshutdownTimeout: 5s\n"
           "metrics: {bindAddress: \"0\"}\n");
  assert_string_equal(c->kubeconfig, "/etc/kctrld/kube/config");
  assert_int_equal(c->log_level, KC_LOG_DEBUG);
  assert_int_equal(c->log_format, KC_LOG_FORMAT_TEXT); /* default */
  assert_int_equal(c->shutdown_timeout_ms, 5000);
  assert_string_equal(c->metrics_bind, "0");
  assert_int_equal(c->decode_threads, -1); /* default: one per core beyond the loop's */
  assert_int_equal(c->auth_failure_readiness_ms, 30000);
  kc_config_free(c);
  c = load("authFailureReadinessTimeout: 2m\n");
  assert_int_equal(c->auth_failure_readiness_ms, 120000);
  kc_config_free(c);
  c = load("authFailureReadinessTimeout: 0\n");
  assert_int_equal(c->auth_failure_readiness_ms, 0);
  kc_config_free(c);
  c = load("decodeThreads: 0\n");
  assert_int_equal(c->decode_threads, 0);
  kc_config_free(c);
  c = load("logFormat: json\n");
  assert_int_equal(c->log_format, KC_LOG_FORMAT_JSON);
  assert_null(c->admin_socket); /* default: $RUNTIME_DIRECTORY/admin.sock under systemd, else none */
  kc_config_free(c);
  c = load("adminSocket: /run/kctrld/admin.sock\n");
  assert_string_equal(c->admin_socket, "/run/kctrld/admin.sock");
  kc_config_free(c);
  c = load("adminSocket: /run/kctrld/admin.sock\nadminSocketGroup: kctrl-ops\n");
  assert_string_equal(c->admin_socket_group, "kctrl-ops");
  kc_config_free(c);
  c = load("adminSocket: \"0\"\n");
  assert_string_equal(c->admin_socket, "0");
  kc_config_free(c);
}

/* The defaults as docs/config.md states them: every table row whose
 * default column starts with a `value`, and the `rateLimit` paragraph's
 * "`key` (default `value`" / "`key` (`value`)", is loaded once without the
 * key and once with the key set to the documented value; the two configs
 * must be the same. So a default changed in config.c (the only place that
 * sets them, from the KC_DEFAULT_* of config.h) without the page fails
 * here. */
static bool same_config(const kc_config *a, const kc_config *b) {
  const kc_leader_election *x = &a->leader_election, *y = &b->leader_election;
  if (!a->kubeconfig != !b->kubeconfig || x->enabled != y->enabled ||
      strcmp(x->namespace_, y->namespace_) || strcmp(x->name, y->name) ||
      !x->identity != !y->identity || x->lease_duration_ms != y->lease_duration_ms ||
      x->renew_deadline_ms != y->renew_deadline_ms || x->retry_period_ms != y->retry_period_ms ||
      strcmp(a->metrics_bind, b->metrics_bind) || a->metrics_secure != b->metrics_secure ||
      strcmp(a->metrics_cert_name, b->metrics_cert_name) || strcmp(a->metrics_cert_key, b->metrics_cert_key) ||
      !a->metrics_cert_path != !b->metrics_cert_path ||
      a->metrics_debug_queues != b->metrics_debug_queues || a->log_level != b->log_level || a->log_format != b->log_format ||
      a->shutdown_timeout_ms != b->shutdown_timeout_ms || a->decode_threads != b->decode_threads ||
      a->auth_failure_readiness_ms != b->auth_failure_readiness_ms ||
      a->snapshot_max_age_ms != b->snapshot_max_age_ms || !a->state_directory != !b->state_directory ||
      a->ninformers != b->ninformers || a->ncontrollers != b->ncontrollers ||
      a->sharding.shards != b->sharding.shards || a->sharding.key != b->sharding.key ||
      strcmp(a->sharding.lease_namespace, b->sharding.lease_namespace) ||
      !a->sharding.lease_prefix != !b->sharding.lease_prefix ||
      a->sharding.lease_duration_ms != b->sharding.lease_duration_ms ||
      a->sharding.renew_deadline_ms != b->sharding.renew_deadline_ms ||
      a->sharding.retry_period_ms != b->sharding.retry_period_ms)
    return false;
  for (size_t i = 0; i < a->ninformers; i++) {
    const kc_informer_spec *p = &a->informers[i], *q = &b->informers[i];
    if (strcmp(p->identity, q->identity) || !p->name != !q->name || p->nnamespaces != q->nnamespaces ||
        p->metadata_only != q->metadata_only || p->resync_ms != q->resync_ms ||
        p->consistency_check_ms != q->consistency_check_ms || p->nindexes != q->nindexes ||
        p->page_size != q->page_size || p->watch_timeout_ms != q->watch_timeout_ms ||
        p->watch_inactivity_ms != q->watch_inactivity_ms || p->streaming_list != q->streaming_list)
      return false;
  }
  for (size_t i = 0; i < a->ncontrollers; i++) {
    const kc_controller_spec *p = &a->controllers[i], *q = &b->controllers[i];
    if (p->nowns != q->nowns || p->nwatches != q->nwatches || p->workers != q->workers ||
        p->reconcile_timeout_ms != q->reconcile_timeout_ms ||
        p->read_your_own_writes != q->read_your_own_writes ||
        memcmp(&p->rate_limit, &q->rate_limit, sizeof p->rate_limit) ||
        p->predicates != q->predicates || !p->settings != !q->settings || !p->hook != !q->hook ||
        p->isolation != q->isolation || p->update_strategy != q->update_strategy ||
        !p->finalizer != !q->finalizer || (p->hook && q->hook && p->hook->style != q->hook->style))
      return false;
    for (size_t k = 0; k < p->nowns; k++)
      if (p->owns[k].update_strategy != q->owns[k].update_strategy) return false;
    const kc_hook_exec_spec *hx = p->hook ? p->hook->exec : NULL, *hy = q->hook ? q->hook->exec : NULL;
    if (hx && hy &&
        (hx->ncommand != hy->ncommand || hx->nenv != hy->nenv || hx->timeout_ms != hy->timeout_ms ||
         hx->mode != hy->mode || hx->max_response_bytes != hy->max_response_bytes ||
         hx->stop_grace_ms != hy->stop_grace_ms))
      return false;
    const kc_hook_webhook_spec *wx = p->hook ? p->hook->webhook : NULL,
                               *wy = q->hook ? q->hook->webhook : NULL;
    if (!wx != !wy)
      return false;
    if (wx && (strcmp(wx->url, wy->url) || !wx->ca_file != !wy->ca_file ||
               !wx->client_cert_file != !wy->client_cert_file || wx->timeout_ms != wy->timeout_ms ||
               wx->insecure_skip_tls_verify != wy->insecure_skip_tls_verify ||
               wx->allow_insecure_http != wy->allow_insecure_http ||
               wx->max_response_bytes != wy->max_response_bytes))
      return false;
  }
  return true;
}

/* Loads `base` and `base` + "KEY: VALUE" at `indent` (the section's
 * prefix), compares them. */
static void check_documented(const char *section, const char *key, const char *value) {
  static const struct {
    const char *section, *base, *prefix;
  } where[] = {
      {"Top level", "{}", ""},
      {"leaderElection", "", "leaderElection:\n  "},
      {"sharding", "", "sharding:\n  "},
      {"metrics", "", "metrics:\n  "},
      {"informers", "informers:\n  - apiVersion: v1\n    kind: ConfigMap\n", "    "},
      {"controllers", CTL, "    "},
      {"rateLimit", CTL, "    rateLimit:\n      "},
      {"hook", "controllers:\n  - name: a\n    for: {apiVersion: v1, kind: ConfigMap}\n"
               "    hook:\n      exec:\n        command: [x]\n", "        "},
      {"webhook", "controllers:\n  - name: a\n    for: {apiVersion: v1, kind: ConfigMap}\n"
                  "    hook:\n      webhook:\n        url: https://h/x\n", "        "},
      {"hook itself", "controllers:\n  - name: a\n    for: {apiVersion: v1, kind: ConfigMap}\n"
                      "    hook:\n      exec:\n        command: [x]\n", "      "},
  };
  if (!strcmp(section, "hook") && !strcmp(key, "style")) section = "hook itself"; /* hook.style */
  if (!strcmp(section, "hook") && !strncmp(key, "exec.", 5)) key += 5; /* rows say exec.KEY */
  if (!strcmp(section, "hook") && !strncmp(key, "webhook.", 8)) { /* and webhook.KEY */
    key += 8;
    section = "webhook";
  }
  for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
    if (strcmp(where[i].section, section) != 0) continue;
    char text[1024];
    snprintf(text, sizeof text, "%s%s%s: %s\n", strcmp(where[i].base, "{}") ? where[i].base : "",
             where[i].prefix, key, value);
    kc_config *plain = load(where[i].base[0] ? where[i].base : "{}");
    kc_config *given = load(text);
    if (!same_config(plain, given)) fprintf(stderr, "%s: default of %s is not `%s`\n", section, key, value);
    assert_true(same_config(plain, given));
    kc_config_free(plain);
    kc_config_free(given);
    return;
  }
  fail_msg("a default documented in section \"%s\" (%s), which this test does not know", section,
           key);
}

/* "`value`" at *p (after optional "default "): copies value, moves *p. */
static bool backquoted(const char **p, char *out, size_t cap) {
  if (**p != '`') return false;
  const char *end = strchr(*p + 1, '`');
  if (!end || (size_t)(end - *p - 1) >= cap) return false;
  memcpy(out, *p + 1, (size_t)(end - *p - 1));
  out[end - *p - 1] = 0;
  *p = end + 1;
  return true;
}

static void test_documented_defaults(void **state) {
  (void)state;
  char *doc = tu_read_file("docs/config.md", NULL);
  assert_non_null(doc);
  char section[64] = "", key[64], value[64];
  unsigned checked = 0;
  bool in_rate = false; /* the rateLimit paragraph */
  for (char *line = doc, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (strncmp(line, "## ", 3) == 0) snprintf(section, sizeof section, "%s", line + 3);
    if (strcmp(line, "### hook") == 0) snprintf(section, sizeof section, "hook");
    else if (strncmp(line, "### ", 4) == 0 && !strcmp(section, "hook"))
      snprintf(section, sizeof section, "controllers");
    const char *p = line;
    if (strncmp(line, "| `", 3) == 0) {
      /* | `key` | type | default | meaning | */
      p += 2;
      if (!backquoted(&p, key, sizeof key)) continue;
      for (int col = 0; col < 2 && p; col++) p = strchr(p + 1, '|');
      if (!p || p[1] != ' ') continue;
      p += 2;
      if (!backquoted(&p, value, sizeof value)) continue;
      check_documented(section, key, value);
      checked++;
      continue;
    }
    if (strncmp(line, "**rateLimit**", 13) == 0) in_rate = true;
    if (!*line) in_rate = false;
    if (in_rate) {
      for (p = strchr(line, '`'); p; p = strchr(p, '`')) {
        if (!backquoted(&p, key, sizeof key)) break;
        if (strncmp(p, " (default ", 10) == 0)
          p += 10;
        else if (strncmp(p, " (", 2) == 0)
          p += 2;
        else
          continue;
        if (!backquoted(&p, value, sizeof value)) continue;
        check_documented("rateLimit", key, value);
        checked++;
      }
    }
  }
  free(doc);
  /* Every row with a value: 8 top level, 6 leaderElection, 5 sharding,
   * 5 metrics, 7 informers, 7 controllers, 4 rateLimit, 1 hook style, 4 hook
   * exec, 4 hook webhook. */
  assert_int_equal(checked, 51);
}

static void test_top_level_errors(void **state) {
  (void)state;
  fails("", "c.yaml: empty configuration (expected a mapping with informers: and controllers:)");
  fails("- a\n", "c.yaml:1:1: config: expected a mapping, got a sequence");
  fails("kubeconfg: /x\n",
        "c.yaml:1:1: unknown key \"kubeconfg\" in config (did you mean \"kubeconfig\"?)");
  fails("colour: red\n",
        "c.yaml:1:1: unknown key \"colour\" in config (known keys: kubeconfig, leaderElection, "
        "sharding, metrics, adminSocket, adminSocketGroup, logLevel, logFormat, shutdownTimeout, decodeThreads, "
        "authFailureReadinessTimeout, dryRun, stateDirectory, snapshotMaxAge, informers, controllers)");
  fails("logLevel: loud\n", "c.yaml:1:11: logLevel: expected error, warn, info or debug, got \"loud\"");
  fails("logFormat: yaml\n", "c.yaml:1:12: logFormat: expected text or json, got \"yaml\"");
  fails("adminSocket: run/admin.sock\n",
        "c.yaml:1:14: adminSocket: expected an absolute path of at most 107 bytes or \"0\" (off), "
        "got \"run/admin.sock\"");
  fails("adminSocketGroup: \"ops:x\"\n",
        "c.yaml:1:19: adminSocketGroup: expected a group name (1-64 characters, no ':', ',', '/', "
        "space or control character), got \"ops:x\"");
  fails("kubeconfig: ''\n", "c.yaml:1:13: config.kubeconfig: empty path");
  fails("informers: {}\n", "c.yaml:1:12: informers: expected a sequence, got a mapping");
  fails("controllers: x\n", "c.yaml:1:14: controllers: expected a sequence, got a scalar");
  fails("decodeThreads: 65\n",
        "c.yaml:1:16: config.decodeThreads: must be between 0 and 64, got \"65\"");
  fails("shutdownTimeout: 2h\n",
        "c.yaml:1:18: config.shutdownTimeout: must be between 0ms and 3600000ms, got \"2h\"");
  fails("metrics: {bindAddress: 9090}\n",
        "c.yaml:1:24: metrics.bindAddress: expected HOST:PORT, :PORT or \"0\" (disabled), got "
        "\"9090\"");
  fails("metrics: {bindAddress: \"1.2.3.4:70000\"}\n",
        "c.yaml:1:24: metrics.bindAddress: expected HOST:PORT, :PORT or \"0\" (disabled), got "
        "\"1.2.3.4:70000\"");
  fails("metrics: {bindAddres: x}\n",
        "c.yaml:1:11: unknown key \"bindAddres\" in metrics (did you mean \"bindAddress\"?)");
  /* YAML errors come through unchanged. */
  fails("a: [\n", "c.yaml:2:1: did not find expected node content while parsing a flow node "
                  "(from line 2 column 1)");
}

static void test_bind_addresses(void **state) {
  (void)state;
  static const char *const ok[] = {"127.0.0.1:9090", ":9090", "[::1]:8080", "localhost:0",
                                   "0.0.0.0:1"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char text[128];
    snprintf(text, sizeof text, "metrics: {bindAddress: \"%s\"}\n", ok[i]);
    kc_config *c = load(text);
    assert_string_equal(c->metrics_bind, ok[i]);
    kc_config_free(c);
  }
  static const char *const bad[] = {"", "host", "[::1:80", "::1:80x", "a b:80", "1.2.3.4:"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[128];
    snprintf(text, sizeof text, "metrics: {bindAddress: \"%s\"}\n", bad[i]);
    kc_config *c = NULL;
    assert_int_equal(kc_config_load_buffer("c.yaml", NULL, text, strlen(text), &c, err, sizeof err),
                     -EINVAL);
  }
  /* Secure metrics: kubebuilder's :8443 unless an address is given; the
   * certificate directory resolves against the config's directory. */
  kc_config *c = load("metrics: {secure: true}\n");
  assert_true(c->metrics_secure);
  assert_false(c->metrics_bind_set);
  assert_string_equal(c->metrics_bind, ":8443");
  assert_null(c->metrics_cert_path);
  assert_string_equal(c->metrics_cert_name, "tls.crt");
  assert_string_equal(c->metrics_cert_key, "tls.key");
  kc_config_free(c);
  c = load("metrics: {secure: true, bindAddress: \"127.0.0.1:9443\", certPath: certs, certName: a.pem,"
           " certKey: a-key.pem}\n");
  assert_string_equal(c->metrics_bind, "127.0.0.1:9443");
  assert_string_equal(c->metrics_cert_path, "/etc/kctrld/certs");
  assert_string_equal(c->metrics_cert_name, "a.pem");
  assert_string_equal(c->metrics_cert_key, "a-key.pem");
  kc_config_free(c);
  fails("metrics: {certName: a/tls.crt}\n",
        "c.yaml:1:21: metrics.certName: expected a file name in certPath, got \"a/tls.crt\"");
}

static void test_leader_election(void **state) {
  (void)state;
  kc_config *c = load("leaderElection: {enabled: true, leaseDuration: 30s, renewDeadline: 20s,"
                      " retryPeriod: 5s, identity: me, namespace: ops, name: lock.example}\n");
  assert_true(c->leader_election.enabled);
  assert_int_equal(c->leader_election.lease_duration_ms, 30000);
  assert_int_equal(c->leader_election.renew_deadline_ms, 20000);
  assert_int_equal(c->leader_election.retry_period_ms, 5000);
  assert_string_equal(c->leader_election.identity, "me");
  assert_string_equal(c->leader_election.namespace_, "ops");
  assert_string_equal(c->leader_election.name, "lock.example");
  kc_config_free(c);
  /* Boundary: renewDeadline must be strictly greater than 1.2 x retryPeriod. */
  c = load("leaderElection: {renewDeadline: 2401ms, retryPeriod: 2s}\n");
  kc_config_free(c);
  fails("leaderElection: {renewDeadline: 2400ms, retryPeriod: 2s}\n",
        "c.yaml:1:54: leaderElection: renewDeadline (2s400ms) must be greater than 1.2 x "
        "retryPeriod (2s)");
  fails("leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n",
        "c.yaml:3:18: leaderElection: leaseDuration (10s) must be greater than renewDeadline "
        "(10s)");
  /* Only leaseDuration given: the default renewDeadline (10s) is too long,
   * and the position is the key the user wrote. */
  fails("leaderElection:\n  leaseDuration: 5s\n",
        "c.yaml:2:18: leaderElection: leaseDuration (5s) must be greater than renewDeadline "
        "(10s)");
  fails("leaderElection:\n  retryPeriod: 9s\n",
        "c.yaml:2:16: leaderElection: renewDeadline (10s) must be greater than 1.2 x "
        "retryPeriod (9s)");
  fails("leaderElection: {retryPeriod: 0s}\n",
        "c.yaml:1:31: leaderElection.retryPeriod: must be between 1ms and 86400000ms, got \"0s\"");
  fails("leaderElection: {leaseDuration: 15}\n",
        "c.yaml:1:33: leaderElection.leaseDuration: duration \"15\" has no unit (write e.g. "
        "\"15s\" or \"15ms\")");
  fails("leaderElection: {enabled: yes}\n",
        "c.yaml:1:27: leaderElection.enabled: expected true or false, got \"yes\"");
  fails("leaderElection: {namespace: Kube_System}\n",
        "c.yaml:1:29: leaderElection.namespace: \"Kube_System\" is not a valid namespace");
  fails("leaderElection: {name: ''}\n",
        "c.yaml:1:24: leaderElection.name: \"\" is not a valid Lease name");
  fails("leaderElection: {leaseDuraton: 1s}\n",
        "c.yaml:1:18: unknown key \"leaseDuraton\" in leaderElection (did you mean "
        "\"leaseDuration\"?)");
  fails("leaderElection: true\n",
        "c.yaml:1:17: leaderElection: expected a mapping, got a scalar");
}

static void test_informer_errors(void **state) {
  (void)state;
  fails("informers:\n  - kind: Pod\n", "c.yaml:2:5: informers[0]: missing required key \"apiVersion\"");
  fails("informers:\n  - {apiVersion: v1, kind: pod}\n",
        "c.yaml:2:28: informers[0].kind: \"pod\" is not a kind (e.g. Pod, Deployment)");
  fails("informers:\n  - {apiVersion: apps/v1/x, kind: Pod}\n",
        "c.yaml:2:18: informers[0].apiVersion: \"apps/v1/x\" is not of the form VERSION or "
        "GROUP/VERSION");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, namespace: [a]}\n",
        "c.yaml:2:33: unknown key \"namespace\" in informers[0] (did you mean \"namespaces\"?)");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, namespaces: []}\n",
        "c.yaml:2:45: informers[0].namespaces: empty list (omit the key to watch all namespaces)");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, namespaces: [a, Bad, a]}\n",
        "c.yaml:2:49: informers[0].namespaces[1]: not a valid namespace name (lowercase RFC "
        "1123 label)\n"
        "c.yaml:2:54: informers[0].namespaces[2]: \"a\" is listed twice");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, namespaces: default}\n",
        "c.yaml:2:45: informers[0].namespaces: expected a sequence, got a scalar");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, resync: 500ms}\n",
        "c.yaml:2:41: informers[0].resync: must be 0 (off) or at least 1s");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, resync: 10}\n",
        "c.yaml:2:41: informers[0].resync: duration \"10\" has no unit (write e.g. \"10s\" or "
        "\"10ms\")");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, metadataOnly: 'true'}\n",
        "c.yaml:2:47: informers[0].metadataOnly: expected true or false, got the quoted string "
        "\"true\"");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, transform: {keep: [a]}}\n",
        "c.yaml:2:45: unknown key \"keep\" in informers[0].transform (known keys: drop)");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, transform: {drop: [metadata..x]}}\n",
        "c.yaml:2:52: informers[0].transform.drop[0]: empty path segment");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, indexes: {byNode: 'spec.nodeName['}}\n",
        "c.yaml:2:51: informers[0].indexes.byNode: expected [N], [] or [\"key\"]");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, indexes: [spec.nodeName]}\n",
        "c.yaml:2:42: informers[0].indexes: expected a mapping, got a sequence");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, indexes: {'by node': spec.nodeName}}\n",
        "c.yaml:2:43: informers[0].indexes: index name must be 1-63 characters of "
        "[A-Za-z0-9._-]");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, pageSize: -1}\n",
        "c.yaml:2:43: informers[0].pageSize: must be between 0 and 100000, got \"-1\"");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, streamingList: maybe}\n",
        "c.yaml:2:48: informers[0].streamingList: expected auto, on or off, got \"maybe\"");
  /* Selector errors carry the apiserver's text and point into the string. */
  fails("informers:\n  - {apiVersion: v1, kind: Pod, labelSelector: 'app in (a,b'}\n",
        "c.yaml:2:60: informers[0].labelSelector: unable to parse requirement: found '', "
        "expected: ',' or ')'");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, labelSelector: 'a=b,'}\n",
        "c.yaml:2:53: informers[0].labelSelector: found '', expected: identifier after ','");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, fieldSelector: 'status.phase'}\n",
        "c.yaml:2:49: informers[0].fieldSelector: invalid selector: 'status.phase'; can't "
        "understand 'status.phase'");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, watchTimeout: 0s}\n",
        "c.yaml:2:47: informers[0].watchTimeout: must be between 1000ms and 3600000ms, got "
        "\"0s\"");
  fails("informers:\n  - Pod\n", "c.yaml:2:5: informers[0]: expected a mapping, got a scalar");
}

static void test_informer_options(void **state) {
  (void)state;
  kc_config *c = load("informers:\n"
                      "  - apiVersion: apps/v1\n"
                      "    kind: Deployment\n"
                      "    name: deploys\n"
                      "    namespaces: [web, api]\n"
                      "    metadataOnly: true\n"
                      "    transform: {drop: [status, metadata.managedFields, "
                      "'metadata.annotations[\"kubectl.kubernetes.io/last-applied-configuration\"]']}\n"
                      "    indexes:\n"
                      "      byConfigMap: spec.template.spec.volumes[].configMap.name\n"
                      "      byOwner: metadata.ownerReferences[].uid\n"
                      "    pageSize: 0\n"
                      "    watchTimeout: 10m\n"
                      "    watchInactivityTimeout: 0\n"
                      "    streamingList: off\n"
                      "    resync: 1h30m\n");
  const kc_informer_spec *inf = &c->informers[0];
  assert_string_equal(inf->name, "deploys");
  assert_string_equal(inf->group, "apps");
  assert_string_equal(inf->namespaces[0], "api"); /* sorted */
  assert_string_equal(inf->namespaces[1], "web");
  assert_true(inf->metadata_only);
  assert_int_equal(inf->ndrop, 3);
  assert_string_equal(inf->drop[0], "metadata.annotations[\"kubectl.kubernetes.io/"
                                    "last-applied-configuration\"]");
  assert_string_equal(inf->drop[1], "metadata.managedFields");
  assert_string_equal(inf->drop[2], "status");
  assert_int_equal(inf->nindexes, 2);
  assert_string_equal(inf->indexes[1].name, "byOwner");
  assert_int_equal(inf->page_size, 0);
  assert_int_equal(inf->watch_timeout_ms, 600000);
  assert_int_equal(inf->watch_inactivity_ms, 0);
  assert_int_equal(inf->streaming_list, KC_STREAMING_OFF);
  assert_int_equal(inf->resync_ms, 5400000);
  kc_config_free(c);
  c = load("informers:\n  - {apiVersion: v1, kind: Pod, consistencyCheck: 5m}\n"
           "  - {apiVersion: v1, kind: Node, consistencyCheck: 0}\n");
  assert_int_equal(c->informers[0].consistency_check_ms, 300000);
  assert_int_equal(c->informers[1].consistency_check_ms, 0);
  kc_config_free(c);
  c = load("informers:\n  - {apiVersion: v1, kind: Pod, streamingList: on}\n"
           "  - {apiVersion: v1, kind: Node, streamingList: auto}\n");
  assert_int_equal(c->informers[0].streaming_list, KC_STREAMING_ON);
  assert_int_equal(c->informers[1].streaming_list, KC_STREAMING_AUTO);
  kc_config_free(c);
}

/* `indexes: {NAME: [path, ...]}`: one index, every path kept in file
 * order, each checked at its own position. */
static void test_index_paths(void **state) {
  (void)state;
  kc_config *c = load("informers:\n"
                      "  - apiVersion: apps/v1\n"
                      "    kind: Deployment\n"
                      "    indexes:\n"
                      "      byConfigMap:\n"
                      "        - spec.template.spec.volumes[].configMap.name\n"
                      "        - spec.template.spec.containers[].envFrom[].configMapRef.name\n"
                      "        - spec.template.spec.containers[].env[].valueFrom.configMapKeyRef.name\n"
                      "      byNode: spec.template.spec.nodeName\n"
                      "      bySecret: ['spec.template.spec.volumes[].secret.secretName']\n");
  const kc_informer_spec *inf = &c->informers[0];
  assert_int_equal(inf->nindexes, 3);
  const kc_index_spec *ix = &inf->indexes[0];
  assert_string_equal(ix->name, "byConfigMap");
  assert_int_equal(ix->npaths, 3);
  assert_string_equal(ix->paths[0], "spec.template.spec.volumes[].configMap.name");
  assert_string_equal(ix->paths[1], "spec.template.spec.containers[].envFrom[].configMapRef.name");
  assert_string_equal(ix->paths[2],
                      "spec.template.spec.containers[].env[].valueFrom.configMapKeyRef.name");
  assert_ptr_equal(ix->path, ix->paths[0]);
  /* A single path is a list of one too. */
  assert_int_equal(inf->indexes[1].npaths, 1);
  assert_string_equal(inf->indexes[1].paths[0], "spec.template.spec.nodeName");
  assert_ptr_equal(inf->indexes[1].path, inf->indexes[1].paths[0]);
  assert_int_equal(inf->indexes[2].npaths, 1);
  assert_string_equal(inf->indexes[2].path, "spec.template.spec.volumes[].secret.secretName");
  kc_config_free(c);

  /* Errors at the position of the path inside the list, all reported. */
  fails("informers:\n"
        "  - apiVersion: v1\n"
        "    kind: Pod\n"
        "    indexes:\n"
        "      byRef:\n"
        "        - spec.nodeName\n"
        "        - 'spec.volumes[.x'\n"
        "        - metadata.ownerReferences[].uid\n"
        "        - spec.nodeName\n"
        "        - ''\n",
        "c.yaml:7:11: informers[0].indexes.byRef[1]: expected [N], [] or [\"key\"]\n"
        "c.yaml:9:11: informers[0].indexes.byRef[3]: \"spec.nodeName\" is listed twice\n"
        "c.yaml:10:11: informers[0].indexes.byRef[4]: empty path");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, indexes: {byRef: [spec.a, {x: 1}]}}\n",
        "c.yaml:2:59: informers[0].indexes.byRef[1]: expected a string, got a mapping");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, indexes: {byRef: []}}\n",
        "c.yaml:2:50: informers[0].indexes.byRef: an empty list: give at least one path");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, indexes: {byRef: {a: b}}}\n",
        "c.yaml:2:50: informers[0].indexes.byRef: expected a path or a list of paths, got a mapping");
  char many[2048] = "informers:\n  - {apiVersion: v1, kind: Pod, indexes: {byRef: [";
  for (int i = 0; i <= KC_CONFIG_MAX_INDEX_PATHS; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many), "%sa%02d", i ? ", " : "", i);
  strcat(many, "]}}\n");
  char want[256];
  snprintf(want, sizeof want, "c.yaml:2:%d: informers[0].indexes.byRef: more than %d paths",
           50 + 1 + 5 * KC_CONFIG_MAX_INDEX_PATHS, KC_CONFIG_MAX_INDEX_PATHS);
  fails(many, want);

  /* A watches index mapping may name a multi-path index. */
  c = load("informers:\n"
           "  - apiVersion: apps/v1\n"
           "    kind: Deployment\n"
           "    indexes: {byConfigMap: ['spec.template.spec.volumes[].configMap.name', "
           "'spec.template.spec.containers[].envFrom[].configMapRef.name']}\n"
           "controllers:\n"
           "  - name: reloader\n"
           "    plugin: /r.so\n"
           "    for: {apiVersion: apps/v1, kind: Deployment}\n"
           "    watches:\n"
           "      - {apiVersion: v1, kind: ConfigMap, mapping: {index: byConfigMap}}\n");
  assert_int_equal(c->controllers[0].nwatches, 1);
  assert_string_equal(c->controllers[0].watches[0].key, "byConfigMap");
  kc_config_free(c);

  /* Reload: the paths of an index compare as a set. */
  static const char *const fmt = "informers:\n  - {apiVersion: v1, kind: Pod, indexes: {r: %s}}\n";
  static const struct {
    const char *a, *b;
    bool changed;
  } cases[] = {
      {"[spec.a, spec.b]", "[spec.b, spec.a]", false},
      {"spec.a", "[spec.a]", false},
      {"[spec.a, spec.b]", "[spec.a]", true},
      {"[spec.a, spec.b]", "[spec.a, spec.c]", true},
      {"[spec.a]", "[spec.a, spec.b]", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char ta[256], tb[256];
    snprintf(ta, sizeof ta, fmt, cases[i].a);
    snprintf(tb, sizeof tb, fmt, cases[i].b);
    kc_config *a = load(ta), *b = load(tb);
    kc_config_diff *d = NULL;
    assert_int_equal(kc_config_compare(a, b, &d), 0);
    if (cases[i].changed) {
      assert_int_equal(d->ninformers, 1);
      assert_int_equal(d->informers[0].change, KC_CHANGE_CHANGED);
      assert_int_equal(d->informers[0].fields, KC_INF_INDEXES);
    } else {
      assert_true(kc_config_diff_empty(d));
    }
    kc_config_diff_free(d);
    kc_config_free(a);
    kc_config_free(b);
  }
}

static void test_dedup_and_binding(void **state) {
  (void)state;
  /* Two controllers use ConfigMaps (not listed): one default informer. The
   * explicitly listed Pod informer is used by both. */
  kc_config *c = load("informers:\n"
                      "  - {apiVersion: v1, kind: Pod, labelSelector: app=web}\n"
                      "controllers:\n"
                      "  - name: a\n    plugin: /p/a.so\n"
                      "    for: {apiVersion: v1, kind: ConfigMap}\n"
                      "    owns: [{apiVersion: v1, kind: Pod}]\n"
                      "  - name: b\n    plugin: /p/b.so\n"
                      "    for: {apiVersion: v1, kind: Pod}\n"
                      "    watches:\n"
                      "      - {apiVersion: v1, kind: ConfigMap, mapping: {label: app}}\n"
                      "      - {apiVersion: v1, kind: Secret, mapping: {annotation: "
                      "kctrld.io/owner}}\n");
  assert_int_equal(c->ninformers, 3);
  assert_string_equal(c->informers[1].kind, "ConfigMap");
  assert_true(c->informers[1].implicit);
  assert_string_equal(c->informers[2].kind, "Secret");
  assert_int_equal(c->controllers[0].for_.informer, 1);
  assert_int_equal(c->controllers[0].owns[0].ref.informer, 0);
  assert_int_equal(c->controllers[1].for_.informer, 0);
  assert_int_equal(c->controllers[1].watches[0].ref.informer, 1);
  assert_int_equal(c->controllers[1].watches[0].mapping, KC_MAP_LABEL);
  assert_string_equal(c->controllers[1].watches[0].key, "app");
  assert_int_equal(c->controllers[1].watches[1].ref.informer, 2);
  assert_int_equal(c->controllers[1].watches[1].mapping, KC_MAP_ANNOTATION);
  assert_int_equal(kc_config_find_informer(c, c->informers[2].identity), 2);
  assert_int_equal(kc_config_find_informer(c, "nope"), -1);
  assert_int_equal(kc_config_find_controller(c, "b"), 1);
  assert_int_equal(kc_config_find_controller(c, "z"), -1);
  kc_config_free(c);

  /* Same scope written twice (namespace order differs): rejected. */
  fails("informers:\n"
        "  - {apiVersion: v1, kind: Pod, namespaces: [a, b]}\n"
        "  - {apiVersion: v1, kind: Pod, namespaces: [b, a]}\n",
        "c.yaml:3:5: informers[1]: watches the same scope as informers[0] (line 2)");
  /* Selectors compare in canonical form: the same scope. */
  fails("informers:\n"
        "  - {apiVersion: v1, kind: Pod, labelSelector: 'app in (b,a), tier==x'}\n"
        "  - {apiVersion: v1, kind: Pod, labelSelector: 'tier=x,app in (a,b)', "
        "fieldSelector: ''}\n",
        "c.yaml:3:5: informers[1]: watches the same scope as informers[0] (line 2)");
  c = load("informers:\n  - {apiVersion: v1, kind: Pod, labelSelector: 'app in (b,a), tier==x',"
           " fieldSelector: 'spec.nodeName==n1,status.phase!=Failed'}\n");
  assert_string_equal(c->informers[0].label_selector, "app in (a,b),tier=x");
  assert_string_equal(c->informers[0].field_selector, "spec.nodeName=n1,status.phase!=Failed");
  kc_config_free(c);
  /* Two scopes of one kind: controllers must say which. */
  char text[1024];
  snprintf(text, sizeof text, TWO, "");
  fails(text, "c.yaml:7:10: controllers[0].for: 2 informers watch v1 Pod; say which one with "
              "`informer: NAME` (informers take a `name:`)");
  snprintf(text, sizeof text, TWO, ", informer: api");
  c = load(text);
  assert_int_equal(c->controllers[0].for_.informer, 1);
  assert_string_equal(c->controllers[0].for_.informer_name, "api");
  kc_config_free(c);
  snprintf(text, sizeof text, TWO, ", informer: db");
  fails(text, "c.yaml:7:48: controllers[0].for.informer: no informer named \"db\"");
  fails("informers:\n  - {name: x, apiVersion: v1, kind: Pod}\n"
        "controllers:\n  - name: a\n    plugin: /a.so\n"
        "    for: {apiVersion: v1, kind: Node, informer: x}\n",
        "c.yaml:6:49: controllers[0].for.informer: informer \"x\" watches v1 Pod, not v1 Node");
  fails("informers:\n  - {name: x, apiVersion: v1, kind: Pod}\n"
        "  - {name: x, apiVersion: v1, kind: Node}\n",
        "c.yaml:3:12: informers[1].name: \"x\" is already used by informers[0] (line 2)");
}

static void test_controller_errors(void **state) {
  (void)state;
  fails("controllers:\n  - name: a\n    for: {apiVersion: v1, kind: Pod}\n",
        "c.yaml:2:5: controllers[0]: missing required key \"plugin\" (or \"hook\")");
  fails("controllers:\n  - name: a\n    plugin: /a.so\n",
        "c.yaml:2:5: controllers[0]: missing required key \"for\"");
  fails(CTL "  - name: a\n    plugin: b.so\n    for: {apiVersion: v1, kind: Pod}\n",
        "c.yaml:5:11: controllers[1].name: \"a\" is already used by controllers[0] (line 2)");
  fails(CTL "    workers: 0\n",
        "c.yaml:5:14: controllers[0].workers: must be between 1 and 1024, got \"0\"");
  fails(CTL "    workers: two\n",
        "c.yaml:5:14: controllers[0].workers: expected an integer, got \"two\"");
  fails(CTL "    worker: 2\n",
        "c.yaml:5:5: unknown key \"worker\" in controllers[0] (did you mean \"workers\"?)");
  fails(CTL "    reconcileTimeout: forever\n",
        "c.yaml:5:23: controllers[0].reconcileTimeout: invalid duration \"forever\" (use e.g. "
        "500ms, 15s, 10m, 2h, 1h30m)");
  fails(CTL "    rateLimit: {baseDelay: 2s, maxDelay: 1s}\n",
        "c.yaml:5:28: controllers[0].rateLimit: baseDelay (2s) must not exceed maxDelay (1s)");
  fails(CTL "    rateLimit: {qps: 0}\n",
        "c.yaml:5:22: controllers[0].rateLimit.qps: must be between 0.001 and 1e+06, got \"0\"");
  fails(CTL "    rateLimit: {burst: 1.5}\n",
        "c.yaml:5:24: controllers[0].rateLimit.burst: expected an integer, got \"1.5\"");
  fails(CTL "    rateLimit: {limit: 1}\n",
        "c.yaml:5:17: unknown key \"limit\" in controllers[0].rateLimit (known keys: baseDelay, "
        "maxDelay, qps, burst)");
  fails(CTL "    predicates: [GenerationChanged, SpecChanged, GenerationChanged]\n",
        "c.yaml:5:37: controllers[0].predicates[1]: unknown predicate \"SpecChanged\" (known: "
        "GenerationChanged, LabelsChanged, AnnotationsChanged, ResourceVersionChanged, "
        "DeletionStarted, OwnerReferencesChanged, FinalizersChanged)\n"
        "c.yaml:5:50: controllers[0].predicates[2]: \"GenerationChanged\" is listed twice");
  fails(CTL "    owns: {apiVersion: v1, kind: Pod}\n",
        "c.yaml:5:11: controllers[0].owns: expected a sequence, got a mapping");
  fails(CTL "    owns: [{apiVersion: v1}]\n",
        "c.yaml:5:12: controllers[0].owns[0]: missing required key \"kind\"");
  fails(CTL "    owns: [{apiVersion: v1, kind: Pod, predicate: [LabelsChanged]}]\n",
        "c.yaml:5:40: unknown key \"predicate\" in controllers[0].owns[0] (did you mean "
        "\"predicates\"?)");
  fails("controllers:\n  - name: 'a b'\n    plugin: /a.so\n    for: {apiVersion: v1, kind: Pod}\n",
        "c.yaml:2:11: controllers[0].name: must be 1-63 characters of [A-Za-z0-9._-]");
  fails("controllers:\n  - name: a\n    plugin: /a.so\n    for: [v1, Pod]\n",
        "c.yaml:4:10: controllers[0].for: expected a mapping, got a sequence");
}

static void test_watches(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text, WATCH_BASE, "{index: byConfigMap}, predicates: [ResourceVersionChanged]");
  kc_config *c = load(text);
  const kc_watch_spec *w = &c->controllers[0].watches[0];
  assert_int_equal(w->mapping, KC_MAP_INDEX);
  assert_string_equal(w->key, "byConfigMap");
  assert_int_equal(w->predicates, KC_PRED_RESOURCE_VERSION_CHANGED);
  assert_int_equal(w->ref.informer, 1);
  kc_config_free(c);
  snprintf(text, sizeof text, WATCH_BASE, "{field: 'metadata.ownerReferences[].name'}");
  c = load(text);
  assert_int_equal(c->controllers[0].watches[0].mapping, KC_MAP_FIELD);
  kc_config_free(c);

  snprintf(text, sizeof text, WATCH_BASE, "{index: bySecret}");
  fails(text, "c.yaml:10:60: controllers[0].watches[0].mapping.index: the informer for apps/v1 "
              "Deployment has no index \"bySecret\"");
  snprintf(text, sizeof text, WATCH_BASE, "{label: app, index: byConfigMap}");
  fails(text, "c.yaml:10:52: controllers[0].watches[0].mapping: needs exactly one of label, "
              "annotation, field, index");
  snprintf(text, sizeof text, WATCH_BASE, "{}");
  fails(text, "c.yaml:10:52: controllers[0].watches[0].mapping: needs exactly one of label, "
              "annotation, field, index");
  snprintf(text, sizeof text, WATCH_BASE, "{owner: true}");
  fails(text, "c.yaml:10:53: unknown key \"owner\" in controllers[0].watches[0].mapping (known "
              "keys: label, annotation, field, index)");
  snprintf(text, sizeof text, WATCH_BASE, "{label: 'bad key!'}");
  fails(text, "c.yaml:10:60: controllers[0].watches[0].mapping.label: not a valid "
              "label/annotation key ([prefix/]name)");
  snprintf(text, sizeof text, WATCH_BASE, "{field: 'a..b'}");
  fails(text, "c.yaml:10:60: controllers[0].watches[0].mapping.field: empty path segment");
  fails(CTL "    watches: [{apiVersion: v1, kind: Secret}]\n",
        "c.yaml:5:15: controllers[0].watches[0]: missing required key \"mapping\"");
  /* Index mapping against a default informer: a hint to list it. */
  fails(CTL "    watches: [{apiVersion: v1, kind: Secret, mapping: {index: x}}]\n",
        "c.yaml:5:63: controllers[0].watches[0].mapping.index: the informer for v1 ConfigMap "
        "has no index \"x\" (list the kind under informers: with indexes:)");
}

static void test_many_errors(void **state) {
  (void)state;
  /* Every error is reported, one per line, up to the cap. */
  char text[8192];
  size_t o = (size_t)snprintf(text, sizeof text, "informers:\n");
  for (int i = 0; i < 25; i++)
    o += (size_t)snprintf(text + o, sizeof text - o, "  - {apiVersion: v1, kind: K%d, bad: 1}\n", i);
  kc_config *c = NULL;
  assert_int_equal(kc_config_load_buffer("c.yaml", NULL, text, o, &c, err, sizeof err), -EINVAL);
  int lines = 1;
  for (const char *p = err; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, KC_CONFIG_MAX_ERRORS + 1);
  assert_non_null(strstr(err, "\n... and 5 more errors"));
  assert_true(strncmp(err, "c.yaml:2:32: unknown key \"bad\" in informers[0]", 45) == 0);
  /* A small err buffer is filled, truncated, never overrun. */
  char small[40];
  assert_int_equal(kc_config_load_buffer("c.yaml", NULL, text, o, &c, small, sizeof small),
                   -EINVAL);
  assert_int_equal(strlen(small), sizeof small - 1);
}

static void test_every_unknown_key(void **state) {
  (void)state;
  /* Two unknown keys of one mapping (and two of a nested one) are all
   * reported, each at its own key. */
  const char *text = "informers:\n"
                     "  - apiVersion: v1\n"
                     "    kind: Pod\n"
                     "    bogus: 1\n"
                     "    nameSpaces: [a]\n"
                     "    transform: {drop: [metadata.managedFields], x: 1, y: 2}\n";
  kc_config *c = NULL;
  assert_int_equal(kc_config_load_buffer("c.yaml", NULL, text, strlen(text), &c, err, sizeof err),
                   -EINVAL);
  assert_string_equal(
      err,
      "c.yaml:4:5: unknown key \"bogus\" in informers[0] (known keys: name, apiVersion, kind, "
      "namespaces, labelSelector, fieldSelector, transform, metadataOnly, resync, "
      "consistencyCheck, indexes, pageSize, watchTimeout, watchInactivityTimeout, streamingList)\n"
      "c.yaml:5:5: unknown key \"nameSpaces\" in informers[0] (did you mean \"namespaces\"?)\n"
      "c.yaml:6:49: unknown key \"x\" in informers[0].transform (known keys: drop)\n"
      "c.yaml:6:55: unknown key \"y\" in informers[0].transform (known keys: drop)");
}

static void test_load_file_errors(void **state) {
  (void)state;
  kc_config *c = NULL;
  assert_int_equal(kc_config_load_file("/nonexistent/kctrld.yaml", &c, err, sizeof err), -ENOENT);
  assert_string_equal(err, "/nonexistent/kctrld.yaml: cannot open: No such file or directory");
  assert_null(c);
}

/* A config others can write is refused (fileperm.h), unless overridden. */
static void test_load_file_permissions(void **state) {
  (void)state;
  char dir[] = "/tmp/kctrld-config-perm.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/kctrld.yaml", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("informers: [ { apiVersion: v1, kind: Pod } ]\n", f);
  assert_int_equal(fclose(f), 0);
  kc_config *c = NULL;
  assert_int_equal(chmod(path, 0644), 0);
  assert_int_equal(kc_config_load_file(path, &c, err, sizeof err), 0);
  kc_config_free(c);
  c = NULL;
  assert_int_equal(chmod(path, 0666), 0);
  assert_int_equal(kc_config_load_file(path, &c, err, sizeof err), -EPERM);
  assert_null(c);
  char want[512];
  snprintf(want, sizeof want,
           "config file %s is writable by other users (mode 0666): refusing to use settings "
           "others can change (kubeconfig, plugins); run chmod go-w on it",
           path);
  assert_string_equal(err, want);
  assert_int_equal(chmod(path, 0664), 0);
  assert_int_equal(kc_config_load_file(path, &c, err, sizeof err), -EPERM);
  assert_non_null(strstr(err, "writable by its group (mode 0664)"));
  kc_fileperm_set_allow_insecure(true);
  tu_stderr_begin();
  int rc = kc_config_load_file(path, &c, err, sizeof err);
  char *log = tu_stderr_end();
  kc_fileperm_set_allow_insecure(false);
  assert_int_equal(rc, 0);
  assert_non_null(c);
  kc_config_free(c);
  if (!strstr(log, "writable by its group (mode 0664)") ||
      !strstr(log, "(accepted: --allow-insecure-permissions)"))
    fail_msg("no override warning in:\n%s", log);
  free(log);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
}

/* dryRun: the top-level key is every controller's default, a controller's
 * own key wins; a change of the effective value is a controller change
 * named dryRun. */
static void test_dry_run(void **state) {
  (void)state;
  static const char *const base =
      "%s"
      "controllers:\n"
      "  - {name: a, plugin: /p.so, for: {apiVersion: v1, kind: ConfigMap}%s}\n"
      "  - {name: b, plugin: /p.so, for: {apiVersion: v1, kind: ConfigMap}}\n";
  char text[512];
  snprintf(text, sizeof text, base, "", "");
  kc_config *off = load(text);
  assert_false(off->dry_run);
  assert_false(off->controllers[0].dry_run);
  assert_false(off->controllers[1].dry_run);
  snprintf(text, sizeof text, base, "", ", dryRun: true");
  kc_config *one = load(text);
  assert_true(one->controllers[0].dry_run);
  assert_false(one->controllers[1].dry_run);
  snprintf(text, sizeof text, base, "dryRun: true\n", ", dryRun: false");
  kc_config *all_but_a = load(text);
  assert_true(all_but_a->dry_run);
  assert_false(all_but_a->controllers[0].dry_run);
  assert_true(all_but_a->controllers[1].dry_run);
  kc_config_diff *d = NULL;
  char sum[256];
  assert_int_equal(kc_config_compare(off, one, &d), 0);
  kc_config_diff_summary(d, off, one, sum, sizeof sum);
  assert_string_equal(sum, "informers: +0 -0 ~0; controllers: +0 -0 ~1 ~a(dryRun)");
  kc_config_diff_free(d);
  assert_int_equal(kc_config_compare(one, all_but_a, &d), 0);
  kc_config_diff_summary(d, one, all_but_a, sum, sizeof sum);
  assert_string_equal(sum, "informers: +0 -0 ~0; controllers: +0 -0 ~2 ~a(dryRun) ~b(dryRun)");
  kc_config_diff_free(d);
  fails("dryRun: maybe\n", "c.yaml:1:9: config.dryRun: expected true or false, got \"maybe\"");
  kc_config_free(off);
  kc_config_free(one);
  kc_config_free(all_but_a);
}

/* ---- diff ------------------------------------------------------------------ */


static kc_config *diff_cfg(const char *sel, const char *resync, const char *setting,
                           const char *extra) {
  char text[2048];
  snprintf(text, sizeof text, DIFF_BASE, sel, resync, setting, extra);
  return load(text);
}

static void test_diff(void **state) {
  (void)state;
  kc_config *a = diff_cfg("app=web", "10m", "5", "");
  kc_config *same = diff_cfg("app=web", "10m", "5", "");
  kc_config_diff *d = NULL;
  char sum[512];

  assert_int_equal(kc_config_compare(a, same, &d), 0);
  assert_true(kc_config_diff_empty(d));
  int n = kc_config_diff_summary(d, a, same, sum, sizeof sum);
  assert_int_equal(n, (int)strlen(sum));
  assert_string_equal(sum, "informers: +0 -0 ~0; controllers: +0 -0 ~0");
  kc_config_diff_free(d);

  /* Settings only: the controller changes, informers keep their caches. */
  kc_config *b = diff_cfg("app=web", "10m", "6", "");
  assert_int_equal(kc_config_compare(a, b, &d), 0);
  assert_int_equal(d->ninformers, 0);
  assert_int_equal(d->ncontrollers, 1);
  assert_int_equal(d->controllers[0].change, KC_CHANGE_CHANGED);
  assert_int_equal(d->controllers[0].fields, KC_CTL_SETTINGS);
  kc_config_diff_summary(d, a, b, sum, sizeof sum);
  assert_string_equal(sum, "informers: +0 -0 ~0; controllers: +0 -0 ~1 ~podset(settings)");
  kc_config_diff_free(d);
  kc_config_free(b);

  /* Resync only: same scope, informer changed in place. */
  b = diff_cfg("app=web", "5m", "5", "");
  assert_int_equal(kc_config_compare(a, b, &d), 0);
  assert_int_equal(d->ninformers, 1);
  assert_int_equal(d->informers[0].change, KC_CHANGE_CHANGED);
  assert_int_equal(d->informers[0].fields, KC_INF_RESYNC);
  assert_int_equal(d->informers[0].old_index, 0);
  assert_int_equal(d->informers[0].new_index, 0);
  assert_int_equal(d->ncontrollers, 0);
  kc_config_diff_free(d);
  kc_config_free(b);

  /* Selector change: a new scope; the old one goes; the controller that owns
   * Pods is rebound. */
  b = diff_cfg("app=api", "10m", "5", "");
  assert_int_equal(kc_config_compare(a, b, &d), 0);
  assert_int_equal(d->ninformers, 2);
  assert_int_equal(d->informers[0].change, KC_CHANGE_REMOVED);
  assert_int_equal(d->informers[0].old_index, 0);
  assert_int_equal(d->informers[0].new_index, -1);
  assert_int_equal(d->informers[1].change, KC_CHANGE_ADDED);
  assert_int_equal(d->informers[1].new_index, 0);
  assert_int_equal(d->ncontrollers, 1);
  assert_int_equal(d->controllers[0].fields, KC_CTL_INFORMERS);
  kc_config_diff_free(d);
  kc_config_free(b);

  /* Controller added and a global change. */
  b = diff_cfg("app=web", "10m", "5",
               "  - name: ttl\n    plugin: /p/ttl.so\n    for: {apiVersion: v1, kind: ConfigMap}\n"
               "logLevel: debug\nlogFormat: json\n");
  assert_int_equal(kc_config_compare(a, b, &d), 0);
  assert_int_equal(d->ninformers, 1);
  assert_int_equal(d->informers[0].change, KC_CHANGE_ADDED);
  assert_string_equal(b->informers[d->informers[0].new_index].kind, "ConfigMap");
  assert_int_equal(d->ncontrollers, 1);
  assert_int_equal(d->controllers[0].change, KC_CHANGE_ADDED);
  assert_int_equal(d->global, KC_GLOBAL_LOG_LEVEL | KC_GLOBAL_LOG_FORMAT);
  kc_config_diff_summary(d, a, b, sum, sizeof sum);
  assert_string_equal(sum, "informers: +1 -0 ~0; controllers: +1 -0 ~0 +ttl; global: logLevel logFormat");
  /* And the reverse: removed. */
  kc_config_diff_free(d);
  assert_int_equal(kc_config_compare(b, a, &d), 0);
  assert_int_equal(d->informers[0].change, KC_CHANGE_REMOVED);
  assert_int_equal(d->controllers[0].change, KC_CHANGE_REMOVED);
  assert_int_equal(d->controllers[0].old_index, 1);
  assert_int_equal(kc_config_diff_summary(d, b, a, sum, 10), -ENOSPC);
  assert_string_equal(sum, "informers");
  kc_config_diff_free(d);
  kc_config_free(b);

  kc_config_free(a);
  kc_config_free(same);
}

static void test_diff_controller_fields(void **state) {
  (void)state;
  kc_config *a = load(CTL "    workers: 1\n");
  kc_config *b = load("controllers:\n  - name: a\n    plugin: b.so\n"
                      "    for: {apiVersion: v1, kind: ConfigMap}\n    workers: 3\n"
                      "    rateLimit: {qps: 5}\n    predicates: [LabelsChanged]\n"
                      "    owns: [{apiVersion: v1, kind: Pod}]\n"
                      "leaderElection: {enabled: true}\nmetrics: {bindAddress: ':9'}\n");
  kc_config_diff *d = NULL;
  assert_int_equal(kc_config_compare(a, b, &d), 0);
  assert_int_equal(d->ncontrollers, 1);
  assert_int_equal(d->controllers[0].fields, KC_CTL_PLUGIN | KC_CTL_WORKERS | KC_CTL_RATE_LIMIT |
                                                 KC_CTL_PREDICATES | KC_CTL_OWNS);
  assert_int_equal(d->global, KC_GLOBAL_LEADER_ELECTION | KC_GLOBAL_METRICS);
  char sum[256];
  kc_config_diff_summary(d, a, b, sum, sizeof sum);
  assert_string_equal(sum, "informers: +1 -0 ~0; controllers: +0 -0 ~1 "
                           "~a(plugin,owns,workers,rateLimit,predicates); global: leaderElection "
                           "metrics");
  kc_config_diff_free(d);
  kc_config_free(a);
  kc_config_free(b);
}

/* One path grammar (jsonpath.h) and one set of name rules (kname.h): the
 * config accepts exactly the paths the lookups follow and the names the
 * API server accepts. */
static void test_shared_rules(void **state) {
  (void)state;
  /* Paths the lookups follow: a leading bracket, an empty or spaced key. */
  kc_config *c = load("informers:\n"
                      "  - apiVersion: v1\n"
                      "    kind: Pod\n"
                      "    indexes: {byA: '[\"spec\"].nodeName', byB: 'metadata.annotations[\"\"]',"
                      " byC: 'spec.a b'}\n");
  assert_int_equal(c->informers[0].nindexes, 3);
  assert_string_equal(c->informers[0].indexes[0].path, "[\"spec\"].nodeName");
  kc_config_free(c);
  /* ... and not the ones they reject. */
  fails("informers:\n  - {apiVersion: v1, kind: Pod, indexes: {byX: 'spec.[0]'}}\n",
        "c.yaml:2:48: informers[0].indexes.byX: empty path segment");
  /* Drop paths the builder can cut (kbuild.h kc_transform_drop_problem). */
  fails("informers:\n  - {apiVersion: v1, kind: Pod, transform: {drop: ['spec.containers[0]']}}\n",
        "c.yaml:2:52: informers[0].transform.drop[0]: [N] (one element) cannot be dropped: use []");
  fails("informers:\n  - {apiVersion: v1, kind: Pod, transform: {drop: ['spec.containers[]']}}\n",
        "c.yaml:2:52: informers[0].transform.drop[0]: a drop path cannot end with []");
  /* DNS-1123 subdomains: every dot-separated label is a DNS label. */
  fails("leaderElection: {name: 'a..b'}\n",
        "c.yaml:1:24: leaderElection.name: \"a..b\" is not a valid Lease name");
  fails("leaderElection: {name: 'a.-b'}\n",
        "c.yaml:1:24: leaderElection.name: \"a.-b\" is not a valid Lease name");
}

/* ---- hook: (docs/hooks.md): defaults, messages, exactly one of plugin/hook, diff ---- */

#define HOOK(x) "controllers:\n  - name: a\n    for: {apiVersion: v1, kind: ConfigMap}\n    hook: " x "\n"

static void test_hook_defaults(void **state) {
  (void)state;
  kc_config *c = load(HOOK("{exec: {command: [python3, hooks/h.py]}}"));
  const kc_controller_spec *s = &c->controllers[0];
  assert_string_equal(s->plugin, "");
  assert_non_null(s->hook);
  const kc_hook_exec_spec *ex = s->hook->exec;
  assert_non_null(ex);
  assert_int_equal(ex->ncommand, 2);
  assert_string_equal(ex->command[0], "python3"); /* no '/': looked up in PATH */
  assert_string_equal(ex->command[1], "hooks/h.py"); /* arguments as written */
  assert_null(ex->command[2]);
  assert_int_equal(ex->nenv, 0);
  assert_int_equal(ex->timeout_ms, 30000);
  assert_int_equal(ex->mode, KC_HOOK_MODE_PERSISTENT);
  assert_int_equal(ex->max_response_bytes, 4 << 20);
  assert_int_equal(ex->stop_grace_ms, 5000);
  kc_config_free(c);

  c = load(HOOK("\n      exec:\n        command: [./h.sh, -x]\n        env: {A: '1', B_2: two}\n"
                "        timeout: 2s\n        mode: per-call\n        maxResponseBytes: 1024\n"
                "        stopGracePeriod: 0s"));
  ex = c->controllers[0].hook->exec;
  assert_string_equal(ex->command[0], "/etc/kctrld/./h.sh"); /* relative to the config */
  assert_int_equal(ex->nenv, 2);
  assert_string_equal(ex->env[0], "A=1");
  assert_string_equal(ex->env[1], "B_2=two");
  assert_int_equal(ex->timeout_ms, 2000);
  assert_int_equal(ex->mode, KC_HOOK_MODE_PER_CALL);
  assert_int_equal(ex->max_response_bytes, 1024);
  assert_int_equal(ex->stop_grace_ms, 0);
  kc_config_free(c);
}

static void test_hook_errors(void **state) {
  (void)state;
  fails("controllers:\n  - name: a\n    plugin: /a.so\n    for: {apiVersion: v1, kind: Pod}\n"
        "    hook: {exec: {command: [x]}}\n",
        "c.yaml:5:11: controllers[0]: give either \"plugin\" or \"hook\", not both");
  fails(HOOK("{}"), "c.yaml:4:11: controllers[0].hook: missing a hook kind: give \"exec\" or \"webhook\"");
  fails(HOOK("[exec]"), "c.yaml:4:11: controllers[0].hook: expected a mapping, got a sequence");
  fails(HOOK("{exec: {}}"), "c.yaml:4:18: controllers[0].hook.exec: missing required key \"command\"");
  fails(HOOK("{exec: {command: []}}"),
        "c.yaml:4:28: controllers[0].hook.exec.command: must name a program (a non-empty list)");
  fails(HOOK("{exec: {command: ['']}}"), "c.yaml:4:29: controllers[0].hook.exec.command[0]: empty program name");
  fails(HOOK("{exec: {command: x}}"),
        "c.yaml:4:28: controllers[0].hook.exec.command: expected a sequence, got a scalar");
  fails(HOOK("{exec: {command: [x], mode: sometimes}}"),
        "c.yaml:4:39: controllers[0].hook.exec.mode: must be persistent or per-call, not \"sometimes\"");
  fails(HOOK("{exec: {command: [x], timeout: 0s}}"),
        "c.yaml:4:42: controllers[0].hook.exec.timeout: must be between 1ms and 86400000ms, got \"0s\"");
  fails(HOOK("{exec: {command: [x], env: {1A: b}}}"),
        "c.yaml:4:43: controllers[0].hook.exec.env.1A: not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
  fails(HOOK("{exec: {command: [x], env: [a]}}"),
        "c.yaml:4:38: controllers[0].hook.exec.env: expected a mapping, got a sequence");
  fails(HOOK("{exec: {command: [x], maxResponseBytes: 1}}"),
        "c.yaml:4:51: controllers[0].hook.exec.maxResponseBytes: must be between 64 and 1073741824, got \"1\"");
  fails(HOOK("{exec: {command: [x]}, permissions: [{resource: pods, verbs: [patch, rollout]}]}"),
        "c.yaml:4:80: controllers[0].hook.permissions[0].verbs[1]: unknown verb \"rollout\" (get, list, "
        "watch, create, update, patch, delete, deletecollection)");
  fails(HOOK("{exec: {command: [x]}, permissions: [{verbs: [get]}]}"),
        "c.yaml:4:48: controllers[0].hook.permissions[0]: missing required key \"resource\" (the URL plural, "
        "e.g. configmaps)");
  fails(HOOK("{exec: {command: [x]}, permissions: [{resource: pods, verb: [get]}]}"),
        "c.yaml:4:65: controllers[0].hook.permissions[0]: unknown key \"verb\" (group, resource, verbs)\n"
        "c.yaml:4:48: controllers[0].hook.permissions[0]: missing required key \"verbs\"");
  fails(HOOK("{exec: {command: [x], comand: [y]}}"),
        "c.yaml:4:33: unknown key \"comand\" in controllers[0].hook.exec (did you mean \"command\"?)");
}

static void test_hook_webhook(void **state) {
  (void)state;
  kc_config *c = load(HOOK("{webhook: {url: 'https://hooks.example.com:8443/sync?token=s'}}"));
  const kc_hook_spec *h = c->controllers[0].hook;
  assert_null(h->exec);
  const kc_hook_webhook_spec *wh = h->webhook;
  assert_non_null(wh);
  assert_string_equal(wh->url, "https://hooks.example.com:8443/sync?token=s");
  assert_null(wh->ca_file);
  assert_null(wh->client_cert_file);
  assert_null(wh->client_key_file);
  assert_int_equal(wh->timeout_ms, 10000);
  assert_false(wh->insecure_skip_tls_verify);
  assert_false(wh->allow_insecure_http);
  assert_int_equal(wh->max_response_bytes, 4 << 20);
  kc_config_free(c);
  c = load(HOOK("\n      webhook:\n        url: https://h/x\n        caFile: pki/ca.pem\n"
                "        clientCertFile: /pki/c.pem\n        clientKeyFile: pki/c.key\n"
                "        timeout: 2s\n        maxResponseBytes: 1024"));
  wh = c->controllers[0].hook->webhook;
  assert_string_equal(wh->ca_file, "/etc/kctrld/pki/ca.pem"); /* relative to the config */
  assert_string_equal(wh->client_cert_file, "/pki/c.pem");
  assert_string_equal(wh->client_key_file, "/etc/kctrld/pki/c.key");
  assert_int_equal(wh->timeout_ms, 2000);
  assert_int_equal(wh->max_response_bytes, 1024);
  kc_config_free(c);
  /* plain HTTP: loopback, or explicitly allowed */
  kc_config_free(load(HOOK("{webhook: {url: 'http://127.0.0.2:1/x'}}")));
  kc_config_free(load(HOOK("{webhook: {url: 'http://[::1]:1/x'}}")));
  kc_config_free(load(HOOK("{webhook: {url: 'http://localhost/x'}}")));
  c = load(HOOK("{webhook: {url: 'http://h.example/x', allowInsecureHTTP: true}}"));
  assert_true(c->controllers[0].hook->webhook->allow_insecure_http);
  kc_config_free(c);
  c = load(HOOK("{webhook: {url: 'https://h/x', insecureSkipTLSVerify: true}}"));
  assert_true(c->controllers[0].hook->webhook->insecure_skip_tls_verify);
  kc_config_free(c);

  fails(HOOK("{exec: {command: [x]}, webhook: {url: 'https://h/'}}"),
        "c.yaml:4:43: controllers[0].hook: give either \"exec\" or \"webhook\", not both");
  fails(HOOK("{webhook: {}}"), "c.yaml:4:21: controllers[0].hook.webhook: missing required key \"url\"");
  fails(HOOK("{webhook: {url: ''}}"), "c.yaml:4:27: controllers[0].hook.webhook.url: empty URL");
  fails(HOOK("{webhook: {url: x}}"),
        "c.yaml:4:27: controllers[0].hook.webhook.url: not an absolute http:// or https:// URL with a host");
  fails(HOOK("{webhook: {url: 'ftp://h/x'}}"),
        "c.yaml:4:27: controllers[0].hook.webhook.url: scheme must be https (or http), not \"ftp\"");
  fails(HOOK("{webhook: {url: 'https://u:p@h/x'}}"),
        "c.yaml:4:27: controllers[0].hook.webhook.url: must not contain credentials (user@host): use "
        "clientCertFile/clientKeyFile");
  fails(HOOK("{webhook: {url: 'https://h/x#f'}}"),
        "c.yaml:4:27: controllers[0].hook.webhook.url: must not contain a fragment (#...)");
  fails(HOOK("{webhook: {url: 'http://hooks.example.com/x'}}"),
        "c.yaml:4:27: controllers[0].hook.webhook.url: plain http:// to a host other than loopback "
        "sends every object unencrypted: use https://, or set allowInsecureHTTP: true");
  fails(HOOK("{webhook: {url: 'http://localhost:8080/x', caFile: ca.pem}}"),
        "c.yaml:4:27: controllers[0].hook.webhook.url: TLS settings (caFile, clientCertFile, "
        "insecureSkipTLSVerify) need https://");
  fails(HOOK("{webhook: {url: 'https://h/x', clientCertFile: c.pem}}"),
        "c.yaml:4:58: controllers[0].hook.webhook.clientCertFile: needs clientKeyFile too");
  fails(HOOK("{webhook: {url: 'https://h/x', clientKeyFile: k.pem}}"),
        "c.yaml:4:57: controllers[0].hook.webhook.clientKeyFile: needs clientCertFile too");
  fails(HOOK("{webhook: {url: 'https://h/x', caFile: ca.pem, insecureSkipTLSVerify: true}}"),
        "c.yaml:4:81: controllers[0].hook.webhook.insecureSkipTLSVerify: cannot be combined with "
        "caFile (verify with the CA, or do not verify)");
  fails(HOOK("{webhook: {url: 'https://h/x', timeout: 0s}}"),
        "c.yaml:4:51: controllers[0].hook.webhook.timeout: must be between 1ms and 86400000ms, got \"0s\"");
  fails(HOOK("{webhook: {url: 'https://h/x', urll: y}}"),
        "c.yaml:4:42: unknown key \"urll\" in controllers[0].hook.webhook (did you mean \"url\"?)");
}

static void test_hook_diff(void **state) {
  (void)state;
  kc_config *a = load(HOOK("{exec: {command: [x]}}"));
  kc_config *b = load(HOOK("{exec: {command: [x], mode: per-call}}"));
  kc_config *a2 = load(HOOK("{exec: {command: [x]}}"));
  kc_config_diff *d = NULL;
  assert_int_equal(kc_config_compare(a, b, &d), 0);
  assert_int_equal(d->ncontrollers, 1);
  assert_int_equal(d->controllers[0].fields, KC_CTL_HOOK);
  char sum[256];
  kc_config_diff_summary(d, a, b, sum, sizeof sum);
  assert_string_equal(sum, "informers: +0 -0 ~0; controllers: +0 -0 ~1 ~a(hook)");
  kc_config_diff_free(d);
  assert_int_equal(kc_config_compare(a, a2, &d), 0);
  assert_true(kc_config_diff_empty(d));
  kc_config_diff_free(d);
  kc_config_free(a);
  kc_config_free(a2);
  kc_config_free(b);
}

/* sharding: a global default controllers inherit key by key, the default
 * prefix per controller, the timing rule on the effective values (blamed
 * where the value was written), one prefix per controller, the diff. */
static void test_sharding(void **state) {
  (void)state;
  kc_config *c = load("leaderElection: {namespace: ops}\n"
                      "sharding: {shards: 4, leaseDuration: 30s, renewDeadline: 20s}\n"
                      "controllers:\n"
                      "  - name: My_Ctl\n    plugin: a.so\n    for: {apiVersion: v1, kind: ConfigMap}\n"
                      "  - name: b\n    plugin: a.so\n    for: {apiVersion: v1, kind: Secret}\n"
                      "    sharding: {shards: 8, key: metadata.namespace, leasePrefix: bee,"
                      " leaseNamespace: shards, retryPeriod: 1s}\n"
                      "  - name: c\n    plugin: a.so\n    for: {apiVersion: v1, kind: Pod}\n"
                      "    sharding: {shards: 0}\n");
  assert_int_equal(c->sharding.shards, 4);
  assert_string_equal(c->sharding.lease_namespace, "ops");
  assert_null(c->sharding.lease_prefix);
  const kc_sharding_spec *a = &c->controllers[0].sharding, *b = &c->controllers[1].sharding;
  assert_int_equal(a->shards, 4);
  assert_int_equal(a->key, KC_SHARD_KEY_UID);
  assert_string_equal(a->lease_namespace, "ops");
  assert_string_equal(a->lease_prefix, "kctrld-my-ctl");
  assert_int_equal(a->lease_duration_ms, 30000);
  assert_int_equal(a->renew_deadline_ms, 20000);
  assert_int_equal(a->retry_period_ms, 2000);
  assert_int_equal(b->shards, 8);
  assert_int_equal(b->key, KC_SHARD_KEY_NAMESPACE);
  assert_string_equal(b->lease_namespace, "shards");
  assert_string_equal(b->lease_prefix, "bee");
  assert_int_equal(b->lease_duration_ms, 30000); /* inherited */
  assert_int_equal(b->retry_period_ms, 1000);
  assert_int_equal(c->controllers[2].sharding.shards, 0);
  kc_config_free(c);

  fails(CTL "    sharding: {shards: 2, key: metadata.name}\n",
        "c.yaml:5:32: controllers[0].sharding.key: expected metadata.uid or metadata.namespace, "
        "got \"metadata.name\"");
  fails(CTL "    sharding: {shards: 1025}\n",
        "c.yaml:5:24: controllers[0].sharding.shards: must be between 0 and 1024, got \"1025\"");
  fails(CTL "    sharding: {shards: 2, leasePrefix: Bad_Prefix}\n",
        "c.yaml:5:40: controllers[0].sharding.leasePrefix: \"Bad_Prefix\" is not a valid Lease "
        "name prefix (a DNS subdomain of at most 229 characters)");
  /* the global value is blamed when the controller inherits it */
  fails("sharding: {renewDeadline: 20s}\n" CTL "    sharding: {shards: 2}\n",
        "c.yaml:1:27: controllers[0].sharding: leaseDuration (15s) must be greater than "
        "renewDeadline (20s)");
  fails(CTL "    sharding: {shards: 2, retryPeriod: 9s}\n",
        "c.yaml:5:40: controllers[0].sharding: renewDeadline (10s) must be greater than 1.2 x "
        "retryPeriod (9s)");
  fails("sharding: {shards: 2, leasePrefix: same}\n" CTL
        "  - name: b\n    plugin: a.so\n    for: {apiVersion: v1, kind: Secret}\n",
        "c.yaml:1:36: controllers[1].sharding.leasePrefix: \"same\" is already used by "
        "controllers[0] (line 3); give each sharded controller its own");
  fails("sharding: {shards: 2, colour: red}\n",
        "c.yaml:1:23: unknown key \"colour\" in sharding (known keys: shards, key, "
        "leaseNamespace, leasePrefix, leaseDuration, renewDeadline, retryPeriod)");

  kc_config *x = load(CTL), *y = load(CTL "    sharding: {shards: 3}\n"),
            *z = load("sharding: {shards: 3}\n" CTL);
  kc_config_diff *d = NULL;
  assert_int_equal(kc_config_compare(x, y, &d), 0);
  assert_int_equal(d->ncontrollers, 1);
  assert_int_equal(d->controllers[0].fields, KC_CTL_SHARDING);
  char sum[256];
  kc_config_diff_summary(d, x, y, sum, sizeof sum);
  assert_string_equal(sum, "informers: +0 -0 ~0; controllers: +0 -0 ~1 ~a(sharding)");
  kc_config_diff_free(d);
  /* the same effective settings, written globally: no change */
  assert_int_equal(kc_config_compare(y, z, &d), 0);
  assert_true(kc_config_diff_empty(d));
  kc_config_diff_free(d);
  kc_config_free(x), kc_config_free(y), kc_config_free(z);
}

/* `isolation:` (docs/config.md): in-process by default, process for a
 * plugin only; a change re-instantiates the controller (KC_CTL_PLUGIN). */
static void test_isolation(void **state) {
  (void)state;
  kc_config *a = load(CTL);
  kc_config *b = load(CTL "    isolation: process\n");
  kc_config *c = load(CTL "    isolation: in-process\n");
  assert_int_equal(a->controllers[0].isolation, KC_ISOLATION_IN_PROCESS);
  assert_int_equal(b->controllers[0].isolation, KC_ISOLATION_PROCESS);
  assert_int_equal(c->controllers[0].isolation, KC_ISOLATION_IN_PROCESS);
  kc_config_diff *d = NULL;
  assert_int_equal(kc_config_compare(a, b, &d), 0);
  assert_int_equal(d->ncontrollers, 1);
  assert_int_equal(d->controllers[0].fields, KC_CTL_PLUGIN);
  kc_config_diff_free(d);
  assert_int_equal(kc_config_compare(a, c, &d), 0);
  assert_true(kc_config_diff_empty(d));
  kc_config_diff_free(d);
  kc_config_free(a);
  kc_config_free(b);
  kc_config_free(c);
  fails(CTL "    isolation: thread\n",
        "c.yaml:5:16: controllers[0].isolation: must be in-process or process, not \"thread\"");
  fails(HOOK("{exec: {command: [x]}}") "    isolation: process\n",
        "c.yaml:5:16: controllers[0].isolation: only a plugin runs in a process of its own (a hook "
        "is one already)");
}

/* Desired state and finalizing: hook.style, finalizer, updateStrategy
 * (the controller's, inherited by owns items that set none), the reload
 * field, and what is refused. */
static void test_children_settings(void **state) {
  (void)state;
  kc_config *a = load(HOOK("{exec: {command: [x]}}"));
  assert_int_equal(a->controllers[0].hook->style, KC_HOOK_STYLE_ACTIONS);
  assert_null(a->controllers[0].finalizer);
  kc_config *b = load("controllers:\n  - name: a\n    for: {apiVersion: v1, kind: ConfigMap}\n"
                      "    hook: {style: desired, exec: {command: [x]}}\n"
                      "    finalizer: example.com/cleanup\n    updateStrategy: Recreate\n"
                      "    owns:\n      - {apiVersion: v1, kind: Pod}\n"
                      "      - {apiVersion: v1, kind: Secret, updateStrategy: InPlace}\n");
  const kc_controller_spec *ct = &b->controllers[0];
  assert_int_equal(ct->hook->style, KC_HOOK_STYLE_DESIRED);
  assert_string_equal(ct->finalizer, "example.com/cleanup");
  assert_int_equal(ct->update_strategy, KC_UPDATE_RECREATE);
  assert_int_equal(ct->owns[0].update_strategy, KC_UPDATE_RECREATE);
  assert_int_equal(ct->owns[1].update_strategy, KC_UPDATE_IN_PLACE);
  kc_config *c = load("controllers:\n  - name: a\n    for: {apiVersion: v1, kind: ConfigMap}\n"
                      "    hook: {style: desired, exec: {command: [x]}}\n"
                      "    finalizer: example.com/other\n    updateStrategy: Recreate\n"
                      "    owns:\n      - {apiVersion: v1, kind: Pod}\n"
                      "      - {apiVersion: v1, kind: Secret, updateStrategy: InPlace}\n");
  kc_config_diff *d = NULL;
  assert_int_equal(kc_config_compare(b, c, &d), 0);
  assert_int_equal(d->ncontrollers, 1);
  assert_int_equal(d->controllers[0].fields, KC_CTL_CHILDREN);
  char sum[256];
  assert_true(kc_config_diff_summary(d, b, c, sum, sizeof sum) > 0);
  assert_non_null(strstr(sum, "a(children)"));
  kc_config_diff_free(d);
  kc_config_free(a);
  kc_config_free(b);
  kc_config_free(c);
  fails(HOOK("{style: imperative, exec: {command: [x]}}"),
        "c.yaml:4:19: controllers[0].hook.style: must be actions or desired, not \"imperative\"");
  fails(CTL "    finalizer: cleanup\n",
        "c.yaml:5:16: controllers[0].finalizer: \"cleanup\" is not a domain-qualified finalizer name "
        "(e.g. example.com/cleanup)");
  fails(CTL "    updateStrategy: Rolling\n",
        "c.yaml:5:21: controllers[0].updateStrategy: must be InPlace or Recreate, not \"Rolling\"");
  fails(CTL "    owns: [{apiVersion: v1, kind: Pod, updateStrategy: x}]\n",
        "c.yaml:5:56: controllers[0].owns[0].updateStrategy: must be InPlace or Recreate, not \"x\"");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_isolation),
      cmocka_unit_test(test_children_settings),
      cmocka_unit_test(test_example_file),      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_documented_defaults),
      cmocka_unit_test(test_top_level_errors),  cmocka_unit_test(test_bind_addresses),
      cmocka_unit_test(test_shared_rules),      cmocka_unit_test(test_leader_election),   cmocka_unit_test(test_informer_errors),
      cmocka_unit_test(test_informer_options),
      cmocka_unit_test(test_index_paths),  cmocka_unit_test(test_dedup_and_binding),
      cmocka_unit_test(test_controller_errors), cmocka_unit_test(test_watches),
      cmocka_unit_test(test_many_errors),
      cmocka_unit_test(test_every_unknown_key),       cmocka_unit_test(test_load_file_errors),
      cmocka_unit_test(test_load_file_permissions),
      cmocka_unit_test(test_dry_run),
      cmocka_unit_test(test_diff),              cmocka_unit_test(test_diff_controller_fields),
      cmocka_unit_test(test_hook_defaults),
      cmocka_unit_test(test_hook_errors),
      cmocka_unit_test(test_hook_webhook),
      cmocka_unit_test(test_hook_diff),
      cmocka_unit_test(test_sharding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
