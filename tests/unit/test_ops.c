/* SPDX-License-Identifier: Apache-2.0 */
/* ops (daemon/ops/ops.c) without a daemon: readiness, the systemd start-up
 * condition, the STATUS= summary and the controller start-up metrics from
 * hand-built views:
 *  - a controller whose plugin fails to load or init makes /readyz fail
 *    with every failing controller and its error named, but not READY=1
 *    to systemd (kc_ops_started);
 *  - kctrld_controller_ready and kctrld_controller_init_failures_total get
 *    one series per configured controller.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/ops.h"

static const kc_ops_controller_state failing[] = {
    {.name = "healthy", .running = true},
    {.name = "flaky",
     .init_error =
         "plugin faulty (/p/faulty.so) init failed for controller flaky: Connection refused "
         "(init returned -111)",
     .failed_attempts = 3,
     .retry_delay_ms = 4100,
     .init_failures = 3},
    {.name = "late",
     .init_error = "plugin /p/late.so does not exist",
     .failed_attempts = 1,
     .retry_delay_ms = 1000,
     .init_failures = 1},
};

static void test_failing_controller_not_ready(void **state) {
  kc_ops_view v = {.controller_states = failing, .ncontroller_states = 3};
  char why[1024];
  assert_false(kc_ops_ready(&v, why, sizeof why));
  assert_string_equal(
      why, "controller flaky: plugin faulty (/p/faulty.so) init failed for controller flaky: "
           "Connection refused (init returned -111) (failed attempts: 3; the next one 4.1 s after "
           "the last); controller late: plugin /p/late.so does not exist (failed attempts: 1; "
           "the next one 1.0 s after the last)");
  /* systemd's READY=1 does not wait for them. */
  assert_true(kc_ops_started(&v, why, sizeof why));
  assert_string_equal(why, "ok");
  /* A short buffer is cut, never overrun. */
  char small[24];
  assert_false(kc_ops_ready(&v, small, sizeof small));
  assert_int_equal(strlen(small), sizeof small - 1);
}

static void test_recovered_controllers_ready(void **state) {
  kc_ops_controller_state ok[] = {{.name = "healthy", .running = true},
                                  {.name = "flaky", .running = true, .init_failures = 3}};
  kc_ops_view v = {.controller_states = ok, .ncontroller_states = 2};
  char why[256];
  assert_true(kc_ops_ready(&v, why, sizeof why));
  assert_string_equal(why, "ok");
  /* Stopping wins over everything. */
  v.controller_states = failing;
  v.ncontroller_states = 3;
  v.stopping = true;
  assert_false(kc_ops_ready(&v, why, sizeof why));
  assert_string_equal(why, "stopping");
}

static void test_summary_counts_failing(void **state) {
  kc_ops_view v = {.controller_states = failing, .ncontroller_states = 3};
  char buf[256];
  kc_ops_summary(&v, buf, sizeof buf);
  assert_string_equal(
      buf, "active (leader election off); informers 0/0 synced; controllers 0 (2 failing init)");
}

/* systemd's READY=1 does not wait for a kind the server does not serve (a
 * CRD installed later); /readyz does, and STATUS= names the kind. */
static void test_not_served_kind_started(void **state) {
  const kc_informer_spec spec = {.api_version = "demo.io/v1", .kind = "Foo"};
  const kc_informer_spec *specs[] = {&spec};
  kc_informer *const informers[] = {NULL};
  kc_ops_informer_wait waits[] = {{NULL, false}};
  kc_ops_view v = {.specs = specs, .informers = informers, .ninformers = 1};
  char why[256], line[1024];
  /* No answer from discovery yet: not started. */
  assert_false(kc_ops_started(&v, why, sizeof why));
  assert_string_equal(why, "waiting for kind demo.io/v1 Foo (discovering)");
  v.informer_waits = waits;
  waits[0].reason = "kind Foo of demo.io/v1: discovery failed: HTTP 503 Service Unavailable";
  assert_false(kc_ops_started(&v, why, sizeof why)); /* the API is not answering */
  assert_string_equal(why, "waiting for kind demo.io/v1 Foo (discovery failing, see the log)");
  /* The server answered: not served. READY=1, but not ready. */
  waits[0] = (kc_ops_informer_wait){"kind Foo is not served: ...", true};
  assert_true(kc_ops_started(&v, why, sizeof why));
  assert_string_equal(why, "ok");
  assert_false(kc_ops_ready(&v, why, sizeof why));
  assert_string_equal(why, "waiting for kind demo.io/v1 Foo (not served)");
  kc_ops_status_line(&v, line, sizeof line);
  assert_string_equal(line, "syncing: active (leader election off); informers 0/1 synced; controllers 0; "
                            "waiting for kind demo.io/v1 Foo (not served)");
  /* The line logged with READY=1 says "ready:" once, and what /readyz
   * still waits for. */
  kc_ops_ready_message(&v, line, sizeof line);
  assert_string_equal(line, "ready: active (leader election off); informers 0/1 synced; controllers 0; "
                            "still waiting for kind demo.io/v1 Foo (not served)");
  v.ninformers = 0;
  kc_ops_status_line(&v, line, sizeof line);
  assert_string_equal(line, "ready: active (leader election off); informers 0/0 synced; controllers 0");
  kc_ops_ready_message(&v, line, sizeof line);
  assert_string_equal(line, "ready: active (leader election off); informers 0/0 synced; controllers 0");
  v.stopping = true;
  kc_ops_status_line(&v, line, sizeof line);
  assert_string_equal(line, "stopping; informers 0/0 synced; controllers 0");
}

static void test_controller_metrics(void **state) {
  kc_metrics *reg = kc_metrics_new();
  assert_non_null(reg);
  kc_ops_families *fam = NULL;
  assert_int_equal(kc_ops_families_new(reg, &fam), 0);
  kc_ops_view v = {.controller_states = failing, .ncontroller_states = 3};
  assert_int_equal(kc_ops_fill_metrics(fam, &v), 0);
  kc_buf out = {0};
  assert_int_equal(kc_metrics_render(reg, &out), 0);
  assert_non_null(out.p);
  assert_non_null(strstr(out.p, "# TYPE kctrld_controller_ready gauge\n"
                                   "kctrld_controller_ready{controller=\"healthy\"} 1\n"
                                   "kctrld_controller_ready{controller=\"flaky\"} 0\n"
                                   "kctrld_controller_ready{controller=\"late\"} 0\n"));
  assert_non_null(strstr(out.p,
                         "# TYPE kctrld_controller_init_failures_total counter\n"
                         "kctrld_controller_init_failures_total{controller=\"healthy\"} 0\n"
                         "kctrld_controller_init_failures_total{controller=\"flaky\"} 3\n"
                         "kctrld_controller_init_failures_total{controller=\"late\"} 1\n"));
  kc_buf_free(&out);
  kc_ops_families_free(fam);
  kc_metrics_free(reg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failing_controller_not_ready),
      cmocka_unit_test(test_recovered_controllers_ready),
      cmocka_unit_test(test_summary_counts_failing),
      cmocka_unit_test(test_not_served_kind_started),
      cmocka_unit_test(test_controller_metrics),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
