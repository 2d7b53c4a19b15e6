/* SPDX-License-Identifier: Apache-2.0 */
/* test_loop_stall: a big object in 1-byte chunks does not stall the loop.
 *
 * One uv loop runs, against the build's kube-apisim (apisim_child.h): a
 * decode pool of one thread (decodepool.h), a ConfigMap informer and a Pod
 * informer (informer.h), a leader elector renewing a Lease every 200 ms
 * (leader.h) and the loop-lag probe (looplag.h). The ConfigMap watch is
 * split by the simulator into 1-byte HTTP chunks (fault "chunks"). A
 * ConfigMap with a 3 MiB value (4 KiB less: the request body limit) is
 * created (512 KiB under TSan), then, while
 * its event streams, a test thread creates Pods every 50 ms.
 *
 * Checked (behaviour, not timing): every Pod reaches the Pod informer's
 * handler before the big ConfigMap reaches the ConfigMap informer's, the
 * Lease was renewed at least twice while the big event streamed, the
 * ConfigMap arrives intact (its value's length and last bytes), and the
 * probe's largest loop lag stays below a generous 1 s guard. The measured
 * lag and the Pod latencies are printed as TAP diagnostics. The ordering
 * relies on the 1-byte transport outlasting the Pod creations (about 350 ms):
 * kube-apisim sends one HTTP chunk per byte, about 0.5 MB/s here, so the
 * event takes seconds to stream (about 1 s for 512 KiB under TSan).
 *
 * KC_STALL_DECODE_THREADS=N overrides the pool size (0: decode inline on the
 * loop, to see what the pool prevents; not part of the suite) and
 * KC_STALL_VALUE_BYTES=N the value's size (at least 16).
 */
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
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "client/apiclient.h"
#include "apisim_child.h"
#include "watch/decodepool.h"
#include "cache/informer.h"
#include "lease/leader.h"
#include "base/log.h"
#include "ops/looplag.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifdef UNDER_TSAN
#define BIG_DEFAULT (512u * 1024u)
#else
/* kube-apisim takes request bodies up to 3 MiB, as the API server does. */
#define BIG_DEFAULT (3u * 1024u * 1024u - 4096u)
#endif
static size_t BIG_BYTES = BIG_DEFAULT;
#define NPODS 6
#define POD_EVERY_MS 50
#define NS "demo"

static uint64_t now_us(void) { return uv_hrtime() / 1000u; }

/* ---- what the handlers saw ------------------------------------------------ */

static struct {
  /* Written by the creator thread before its POST; read after the join. */
  uint64_t pod_created_us[NPODS];
  atomic_bool creator_done;
  bool creator_ok;
  uint64_t big_posted_us; /* before the POST of the big ConfigMap */
  /* Loop thread only. */
  uint64_t pod_seen_us[NPODS];
  unsigned pods_seen;
  uint64_t big_seen_us;
  size_t big_value_len;
  bool big_tail_ok;
  unsigned pods_seen_before_big;
  uint64_t renewals_at_big; /* successful elector attempts when the big CM arrived */
} R;

static kc_leader *LE;

static uint64_t leader_successes(void) {
  kc_leader_stats st;
  kc_leader_get_stats(LE, &st);
  return st.attempts - st.failed_attempts;
}

static int pod_index(kc_obj *o) {
  static const char pre[] = "stall-pod-";
  if (kc_obj_name(o).len <= sizeof pre - 1 || memcmp(kc_obj_name(o).ptr, pre, sizeof pre - 1) != 0)
    return -1;
  int i = atoi(kc_obj_name(o).ptr + sizeof pre - 1);
  return i >= 0 && i < NPODS ? i : -1;
}

static void pod_add(void *ud, kc_informer *inf, kc_obj *o) {
  int i = pod_index(o);
  if (i < 0 || R.pod_seen_us[i]) return;
  R.pod_seen_us[i] = now_us();
  R.pods_seen++;
  if (!R.big_seen_us) R.pods_seen_before_big++;
}

static void cm_add(void *ud, kc_informer *inf, kc_obj *o) {
  if (!kc_str_eq_c(kc_obj_name(o), "stall-big") || R.big_seen_us) return;
  R.big_seen_us = now_us();
  R.renewals_at_big = leader_successes();
  kc_json_value jv;
  if (kc_obj_get(o, "data.blob", &jv) == 0 && jv.type == KC_JSON_STRING) {
    R.big_value_len = jv.raw.len >= 2 ? jv.raw.len - 2 : 0; /* without the quotes */
    R.big_tail_ok = jv.raw.len >= 5 && memcmp(jv.raw.ptr + jv.raw.len - 4, "end\"", 4) == 0;
  }
}

/* ---- the creator thread: the big ConfigMap, then Pods ---------------------- */

static void *creator(void *arg) {
  (void)arg;
  size_t cap = BIG_BYTES + 512;
  char *b = malloc(cap);
  bool ok = b != NULL;
  if (ok) {
    int n = snprintf(b, 512, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                     "\"stall-big\",\"namespace\":\"" NS "\"},\"data\":{\"blob\":\"");
    memset(b + n, 'x', BIG_BYTES - 3);
    memcpy(b + n + BIG_BYTES - 3, "end\"}}", 7);
    R.big_posted_us = now_us();
    long code = sim_call("POST", "/api/v1/namespaces/" NS "/configmaps", b, NULL, NULL);
    if (code != 201) {
      fprintf(stderr, "# POST big ConfigMap: HTTP %ld\n", code);
      ok = false;
    }
    free(b);
  }
  for (int i = 0; ok && i < NPODS; i++) {
    sim_sleep_ms(POD_EVERY_MS);
    char pod[512];
    snprintf(pod, sizeof pod,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"stall-pod-%d\","
             "\"namespace\":\"" NS "\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
             i);
    R.pod_created_us[i] = now_us();
    long code = sim_call("POST", "/api/v1/namespaces/" NS "/pods", pod, NULL, NULL);
    if (code != 201) {
      fprintf(stderr, "# POST stall-pod-%d: HTTP %ld\n", i, code);
      ok = false;
    }
  }
  R.creator_ok = ok;
  atomic_store(&R.creator_done, true);
  return NULL;
}

/* ---- loop plumbing --------------------------------------------------------- */

static struct {
  uv_loop_t loop;
  kc_api *api;
  kc_kube_creds creds;
  kc_decode_pool *pool;
  kc_looplag lag;
  kc_informer *cms, *pods;
} L;

static void run_until(bool (*done)(void), unsigned ms) {
  uint64_t end = sim_mono_ms() + ms;
  while (!done() && sim_mono_ms() < end) uv_run(&L.loop, UV_RUN_ONCE);
}

static kc_informer *informer_(const kc_informer_spec *sp, const kc_resource_ref *ref,
                              void (*on_add)(void *, kc_informer *, kc_obj *)) {
  kc_informer *inf = NULL;
  assert_int_equal(kc_informer_new(&L.loop, L.api, L.pool, sp, ref, &inf), 0);
  kc_informer_handler h = {.on_add = on_add};
  assert_true(kc_informer_add_handler(inf, &h) > 0);
  assert_int_equal(kc_informer_start(inf), 0);
  return inf;
}

static bool both_synced(void) { return kc_informer_synced(L.cms) && kc_informer_synced(L.pods); }
static bool leading(void) { return kc_leader_is_leader(LE); }
static bool all_seen(void) {
  if (!atomic_load(&R.creator_done)) return false;
  return !R.creator_ok || (R.big_seen_us && R.pods_seen == NPODS);
}
static bool creator_finished(void) { return atomic_load(&R.creator_done); }

static void ctl(const char *method, const char *what, const char *body) {
  char path[128];
  snprintf(path, sizeof path, "/_apisim/%s", what);
  long code = sim_call(method, path, body, NULL, NULL);
  if (code < 200 || code >= 300) fail_msg("control %s %s: HTTP %ld", method, what, code);
}

static unsigned decode_threads(void) {
  const char *e = getenv("KC_STALL_DECODE_THREADS");
  return e ? (unsigned)atoi(e) : 1;
}

/* ---- the test -------------------------------------------------------------- */

static void test_big_object_in_1_byte_chunks(void **state) {
  (void)state;
  memset(&R, 0, sizeof R);
  const char *vb = getenv("KC_STALL_VALUE_BYTES");
  if (vb && atol(vb) >= 16) BIG_BYTES = (size_t)atol(vb);
  assert_int_equal(uv_loop_init(&L.loop), 0);
  L.creds = (kc_kube_creds){.server = sim_url, .token = "t"};
  assert_int_equal(kc_api_new(&L.loop, &L.creds, &L.api), 0);
  assert_int_equal(kc_decode_pool_new(&L.loop, decode_threads(), &L.pool), 0);
  assert_int_equal(kc_looplag_start(&L.loop, &L.lag, 0), 0);

  /* Every ConfigMap watch comes in 1-byte chunks (LISTs do not). */
  ctl("POST", "faults",
      "{\"action\":\"chunks\",\"chunkBytes\":1,\"pathPrefix\":\"/api/v1/configmaps\","
      "\"watch\":true,\"count\":-1}");

  kc_leader_election le = {.enabled = true, .namespace_ = NS, .name = "stall-test",
                           .lease_duration_ms = 2000, .renew_deadline_ms = 1500,
                           .retry_period_ms = 200};
  kc_leader_callbacks lcb = {0};
  assert_int_equal(kc_leader_new(&L.loop, L.api, &le, "stall-test", &lcb, NULL, &LE), 0);
  assert_int_equal(kc_leader_start(LE), 0);

  kc_informer_spec cs = {.api_version = "v1", .kind = "ConfigMap", .group = "",
                         .label_selector = "", .field_selector = "", .page_size = 500,
                         .watch_timeout_ms = 300000, .watch_inactivity_ms = 300000,
                         .streaming_list = KC_STREAMING_OFF, .identity = "stall-cm"};
  kc_informer_spec ps = cs;
  ps.kind = "Pod";
  ps.identity = "stall-pods";
  static const kc_resource_ref CMS = {"/api/v1", "configmaps", true};
  static const kc_resource_ref PODS = {"/api/v1", "pods", true};
  L.cms = informer_(&cs, &CMS, cm_add);
  L.pods = informer_(&ps, &PODS, pod_add);
  run_until(both_synced, 30000);
  assert_true(both_synced());
  run_until(leading, 10000);
  assert_true(leading());
  /* Let both watches open (the ConfigMap one with the fault). */
  uint64_t settle = sim_mono_ms() + 300;
  while (sim_mono_ms() < settle) uv_run(&L.loop, UV_RUN_ONCE);
  double lag_before = L.lag.max_seconds;

  uint64_t renewals_before = leader_successes();
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, creator, NULL), 0);
  run_until(all_seen, 120000);
  run_until(creator_finished, 30000);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_true(R.creator_ok);

  double big_s = (double)(R.big_seen_us - R.big_posted_us) / 1e6;
  fprintf(stderr, "# decode threads %u, value %zu bytes: big ConfigMap delivered %.3f s after its "
          "POST; loop lag max %.1f ms (%.1f ms before the stream), %llu samples\n",
          kc_decode_pool_threads(L.pool), BIG_BYTES, big_s, L.lag.max_seconds * 1e3,
          lag_before * 1e3, (unsigned long long)L.lag.samples);
  for (int i = 0; i < NPODS; i++)
    fprintf(stderr, "# stall-pod-%d: created +%.0f ms, event after %.1f ms%s\n", i,
            (double)(R.pod_created_us[i] - R.big_posted_us) / 1e3,
            R.pod_seen_us[i] ? (double)(R.pod_seen_us[i] - R.pod_created_us[i]) / 1e3 : -1.0,
            R.pod_seen_us[i] && R.pod_seen_us[i] > R.big_seen_us ? " (after the big ConfigMap)" : "");
  fprintf(stderr, "# lease renewals while the big event streamed: %llu\n",
          (unsigned long long)(R.renewals_at_big - renewals_before));

  assert_true(R.big_seen_us != 0);
  assert_int_equal(R.pods_seen, NPODS);
  /* Intact: the value's length and its last bytes. */
  assert_int_equal(R.big_value_len, BIG_BYTES);
  assert_true(R.big_tail_ok);
  /* The other watch kept working: all Pods first. */
  assert_int_equal(R.pods_seen_before_big, NPODS);
  /* The Lease kept being renewed while the big event streamed. */
  assert_true(R.renewals_at_big >= renewals_before + 2);
  assert_true(kc_leader_is_leader(LE));
  /* Guard only (the target is 20 ms, see docs/benchmarks.md). */
  assert_true(L.lag.max_seconds < 1.0);
  kc_informer_stats st;
  kc_informer_stats_get(L.cms, &st);
  fprintf(stderr, "# ConfigMap informer: %llu watches, %llu decode pauses, %llu errors\n",
          (unsigned long long)st.watches, (unsigned long long)st.decode_pauses,
          (unsigned long long)st.errors);
}

static int setup(void **state) {
  (void)state;
  if (sim_start() != 0) {
    sim_stop();
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (L.cms) kc_informer_close(L.cms);
  if (L.pods) kc_informer_close(L.pods);
  L.cms = L.pods = NULL;
  kc_leader_close(LE);
  LE = NULL;
  if (L.lag.loop) kc_looplag_close(&L.lag, NULL);
  kc_api_close(L.api);
  uv_run(&L.loop, UV_RUN_DEFAULT);
  kc_decode_pool_free(L.pool);
  uv_run(&L.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&L.loop) == 0 ? 0 : -1;
  sim_stop();
  return rc;
}

int main(void) {
  if (sim_paths_init() != 0) return 1;
  char bin[PATH_MAX + 16];
  snprintf(bin, sizeof bin, "%s/kube-apisim", sim_build_dir);
  if (access(bin, X_OK) != 0) {
    printf("1..1\nok 1 - test_loop_stall # SKIP %s missing\n", bin);
    sim_paths_free();
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  kc_log_set_level(KC_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_big_object_in_1_byte_chunks, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  sim_paths_free();
  return rc;
}
