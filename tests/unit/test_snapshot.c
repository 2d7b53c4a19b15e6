/* SPDX-License-Identifier: Apache-2.0 */
/* Specification of cache snapshots: daemon/watch/snapfile.{c,h} (the file
 * format), daemon/base/crc32c.{c,h}, the reflector's warm start
 * (reflector.h "Warm start") and the informer's snapshots (informer.h), on
 * a real informer fed by tests/unit/fakeapi.h. What it pins down:
 *  - CRC-32C of the standard check string;
 *  - round trip: an informer's snapshot (mode 0600, no temporary file
 *    left) starts an informer of the same identity without listing its
 *    content: the same objects, each an add, then the WATCH from the
 *    snapshot's resourceVersion;
 *  - a header: rendered and parsed back the same; cut off, a bit flipped,
 *    another format version: refused with the reason;
 *  - a large snapshot is applied in slices, each in its own loop turn: the
 *    loop polls for I/O between them (a check handle runs);
 *  - the snapshot writer (snapwriter.h): the loop turns while a file is
 *    being written; a cancel removes the temporary file and leaves none;
 *  - a snapshot that is cut off, has a flipped bit (header or body), was
 *    written for another informer or cluster, by another format version,
 *    or is older than the bound: ignored with a log line naming the file
 *    and the reason, and the informer lists.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/crc32c.h"
#include "base/hash.h"
#include "base/log.h"
#include "cache/informer.h"
#include "cache/snapwriter.h"
#include "client/apiclient.h"
#include "fakeapi.h"
#include "testutil.h"
#include "watch/snapfile.h"

#define WAIT_MS 8000
#define CLUSTER "https://cluster.example"

static const fakeapi_resource RESOURCES[] = {{"/api/v1", "configmaps", "v1", "ConfigMap"}};
static const kc_resource_ref CONFIGMAPS = {"/api/v1", "configmaps", true};

static struct {
  uv_loop_t loop;
  uv_timer_t tick;
  fakeapi *srv;
  kc_api *api;
  kc_kube_creds creds;
  char url[64];
  kc_informer *inf;
  char dir[256];
  unsigned adds;
  uv_check_t check;
  unsigned polls, first_add_poll, last_add_poll;
  unsigned ticks; /* loop turns of F.tick (every 5 ms) */
  /* the snapshot writer's test gate (kc_snapwriter_set_gate) */
  uv_sem_t gate_release;
  atomic_bool gate_entered;
  bool written;
  kc_snapwriter_result result;
} F;

static void on_check(uv_check_t *h) { F.polls++; }

static void on_tick(uv_timer_t *t) { F.ticks++; }

static int setup(void **state) {
  memset(&F, 0, sizeof F);
  if (uv_loop_init(&F.loop) != 0 || uv_timer_init(&F.loop, &F.tick) != 0) return -1;
  uv_timer_start(&F.tick, on_tick, 5, 5);
  F.srv = fakeapi_start(RESOURCES, 1);
  if (!F.srv) return -1;
  snprintf(F.url, sizeof F.url, "%s", fakeapi_url(F.srv));
  F.creds = (kc_kube_creds){.server = F.url, .token = "t"};
  snprintf(F.dir, sizeof F.dir, "/tmp/kctrld-snap-XXXXXX");
  if (!mkdtemp(F.dir)) return -1;
  return kc_api_new(&F.loop, &F.creds, &F.api) == 0 ? 0 : -1;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[600];
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static int teardown(void **state) {
  if (uv_is_active((uv_handle_t *)&F.check)) uv_close((uv_handle_t *)&F.check, NULL);
  kc_informer_close(F.inf);
  kc_api_close(F.api);
  fakeapi_stop(F.srv);
  uv_close((uv_handle_t *)&F.tick, NULL);
  uv_run(&F.loop, UV_RUN_DEFAULT);
  remove_dir(F.dir);
  return uv_loop_close(&F.loop) == 0 ? 0 : -1;
}

static void run_until(bool (*cond)(void *), void *ud, const char *what) {
  uint64_t end = tu_mono_ms() + WAIT_MS;
  while (!cond(ud)) {
    if (tu_mono_ms() > end) fail_msg("timed out waiting for %s", what);
    uv_run(&F.loop, UV_RUN_ONCE);
  }
}

static kc_informer_spec spec_of(const char *identity) {
  return (kc_informer_spec){.api_version = "v1", .kind = "ConfigMap", .group = "",
                            .label_selector = "", .field_selector = "", .page_size = 500,
                            .watch_timeout_ms = 300000, .streaming_list = KC_STREAMING_OFF,
                            .identity = identity};
}

static void on_add(void *ud, kc_informer *inf, kc_obj *obj) {
  if (!F.adds++) F.first_add_poll = F.polls;
  F.last_add_poll = F.polls;
}

static bool is_synced(void *ud) { return kc_informer_synced(F.inf); }

/* A new informer of spec with snapshots in F.dir (cluster, max age), started
 * and synced. */
static void start_informer(const kc_informer_spec *sp, const char *cluster, uint64_t max_age_ms) {
  assert_int_equal(kc_informer_new(&F.loop, F.api, NULL, sp, &CONFIGMAPS, &F.inf), 0);
  kc_informer_snapshots s = {F.dir, cluster, max_age_ms};
  assert_int_equal(kc_informer_set_snapshots(F.inf, &s), 0);
  F.adds = 0;
  kc_informer_handler h = {on_add, NULL, NULL, NULL, NULL};
  assert_true(kc_informer_add_handler(F.inf, &h) > 0);
  assert_int_equal(kc_informer_start(F.inf), 0);
  run_until(is_synced, NULL, "the informer to sync");
}

static void close_informer(void) {
  kc_informer_close(F.inf);
  F.inf = NULL;
  for (int i = 0; i < 5; i++) uv_run(&F.loop, UV_RUN_NOWAIT);
}

static size_t cached(void) {
  kc_informer_stats st;
  kc_informer_stats_get(F.inf, &st);
  return st.objects;
}

/* The one snapshot file of F.dir. */
static void snapshot_path(char *buf, size_t cap) {
  DIR *d = opendir(F.dir);
  assert_non_null(d);
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') {
      if (e->d_name[1] && !(e->d_name[1] == '.' && !e->d_name[2]))
        fail_msg("temporary file left: %s", e->d_name);
      continue;
    }
    snprintf(buf, cap, "%s/%s", F.dir, e->d_name);
    n++;
  }
  closedir(d);
  assert_int_equal(n, 1);
}

static void on_written(void *ud, const kc_snapwriter_result *res) {
  F.result = *res;
  F.written = true;
}

static bool written(void *ud) { return F.written; }

/* Closes F.inf handing its store to a writer, which is started with
 * `gate` (may be NULL); *w is the writer, running. */
static void close_saving_start(void (*gate)(void *, size_t), kc_snapwriter **w) {
  assert_int_equal(kc_snapwriter_new(F.dir, w), 0);
  if (gate) kc_snapwriter_set_gate(*w, gate, NULL);
  assert_int_equal(kc_informer_close_saving(F.inf, *w), 1);
  F.inf = NULL;
  F.written = false;
  assert_int_equal(kc_snapwriter_start(*w, &F.loop, on_written, NULL), 0);
}

/* Closes F.inf writing its snapshot and waits for the write. */
static void close_saving(void) {
  kc_snapwriter *w;
  close_saving_start(NULL, &w);
  run_until(written, NULL, "the snapshot to be written");
  kc_snapwriter_free(w);
  assert_int_equal(F.result.written, 1);
  for (int i = 0; i < 5; i++) uv_run(&F.loop, UV_RUN_NOWAIT);
}

/* Three objects listed, a snapshot written; returns its path. */
static void make_snapshot(const char *identity, char *path, size_t cap) {
  fakeapi_put(F.srv, "configmaps", "a", "one", NULL, "\"data\":{\"k\":\"1\"}");
  fakeapi_put(F.srv, "configmaps", "a", "two", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "b", "three", "\"labels\":{\"app\":\"x\"}", NULL);
  kc_informer_spec sp = spec_of(identity);
  start_informer(&sp, CLUSTER, 0);
  close_saving();
  snapshot_path(path, cap);
}

static void flip_bit(const char *path, off_t at) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  unsigned char c;
  assert_int_equal(pread(fd, &c, 1, at), 1);
  c ^= 0x10;
  assert_int_equal(pwrite(fd, &c, 1, at), 1);
  close(fd);
}

/* Rewrites the header of path through f (a valid header, new checksum). */
static void rewrite_header(const char *path, void (*f)(kc_snapfile_header *)) {
  char block[KC_SNAPFILE_HEADER_BYTES], why[256];
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(pread(fd, block, sizeof block, 0), (ssize_t)sizeof block);
  kc_snapfile_header h;
  assert_int_equal(kc_snapfile_parse_header(block, sizeof block, &h, why, sizeof why), 0);
  f(&h);
  assert_int_equal(kc_snapfile_render_header(&h, block, why, sizeof why), 0);
  assert_int_equal(pwrite(fd, block, sizeof block, 0), (ssize_t)sizeof block);
  close(fd);
}

/* Starts an informer of `identity` on the damaged snapshot: it must list,
 * log `want` with the file's path, and hold the server's objects. */
static void expect_ignored(const char *identity, const char *cluster, uint64_t max_age,
                           const char *path, const char *want) {
  unsigned lists = fakeapi_lists(F.srv, "");
  tu_stderr_begin();
  kc_informer_spec sp = spec_of(identity);
  start_informer(&sp, cluster, max_age);
  char *log = tu_stderr_end();
  if (!strstr(log, want) || !strstr(log, path))
    fail_msg("expected \"%s\" naming %s in the log:\n%s", want, path, log);
  free(log);
  assert_int_equal(fakeapi_lists(F.srv, ""), lists + 1);
  assert_int_equal(cached(), 3);
  close_informer();
}

/* ---- tests ---------------------------------------------------------------- */

static void test_crc32c(void **state) {
  assert_int_equal(kc_crc32c(0, "123456789", 9), 0xe3069283u);
  /* in pieces, at any alignment */
  char buf[64] = "x123456789";
  assert_int_equal(kc_crc32c(kc_crc32c(0, buf + 1, 4), buf + 5, 5), 0xe3069283u);
  assert_int_equal(kc_crc32c(0, "", 0), 0);
}

static bool has_four(void *ud) { return cached() == 4; }

static bool watching(void *ud) {
  kc_informer_stats st;
  kc_informer_stats_get(F.inf, &st);
  return st.watches > 0;
}

static void test_warm_start_round_trip(void **state) {
  char path[600];
  make_snapshot("ident-a", path, sizeof path);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  unsigned lists = fakeapi_lists(F.srv, "");
  kc_informer_spec sp = spec_of("ident-a");
  start_informer(&sp, CLUSTER, 3600000);
  kc_informer_stats s;
  kc_informer_stats_get(F.inf, &s);
  assert_int_equal(s.restores, 1);
  assert_int_equal(s.restored, 3);
  assert_int_equal(F.adds, 3); /* each restored object an add, as from a first list */
  kc_obj *one = kc_informer_get(F.inf, kc_str_c("a"), kc_str_c("one"));
  assert_non_null(one);
  tu_str_at(one, "data.k", "1");
  kc_obj_unref(one);
  kc_obj *three = kc_informer_get(F.inf, kc_str_c("b"), kc_str_c("three"));
  assert_non_null(three);
  tu_str_at(three, "metadata.labels.app", "x");
  kc_obj_unref(three);
  /* The watch resumes at the snapshot's resourceVersion once the history
   * check passed. */
  run_until(watching, NULL, "the resumed watch");
  fakeapi_put(F.srv, "configmaps", "a", "four", NULL, NULL);
  run_until(has_four, NULL, "the object made after the start");
  assert_int_equal(F.adds, 4);
  /* No list of the content: a cache this small (at most KC_HISTORY_LIST_MAX
   * objects) is confirmed by the history check's one metadata-only LIST at
   * the snapshot's resourceVersion (reflector.h "History check"), which
   * found it equal (no relist). Larger ones read witnesses:
   * test_warm_restart.py shows 20,000 ConfigMaps with no LIST at all. */
  assert_int_equal(fakeapi_lists(F.srv, ""), lists + 1);
  kc_informer_stats_get(F.inf, &s);
  assert_int_equal(s.relists, 0);
}

/* 5,000 objects: five slices of at most 1,024 (reflector_restore.c). */
static void test_restore_polls_between_slices(void **state) {
  enum { N = 5000 };
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "cm-%05d", i);
    fakeapi_put(F.srv, "configmaps", "a", name, NULL, NULL);
  }
  kc_informer_spec sp = spec_of("ident-big");
  start_informer(&sp, CLUSTER, 0);
  close_saving();
  assert_int_equal(uv_check_init(&F.loop, &F.check), 0);
  assert_int_equal(uv_check_start(&F.check, on_check), 0);
  start_informer(&sp, CLUSTER, 3600000);
  kc_informer_stats s;
  kc_informer_stats_get(F.inf, &s);
  assert_int_equal(s.restores, 1);
  assert_int_equal(s.restored, N);
  assert_int_equal(F.adds, N);
  /* At least one poll between consecutive slices. */
  if (F.last_add_poll - F.first_add_poll < N / 1024)
    fail_msg("%d objects applied across %u polls: slices ran without polling", N,
             F.last_add_poll - F.first_add_poll);
}

static void test_header_round_trip_and_refusals(void **state) {
  kc_snapfile_header h = {.format = KC_SNAPFILE_FORMAT, .identity_hash = 0x0123456789abcdefULL,
                          .written_unix_ms = 1796000000000, .objects = 7, .body_bytes = 99,
                          .body_crc32c = 0xdeadbeef};
  snprintf(h.kctrld_version, sizeof h.kctrld_version, "1.2.3");
  snprintf(h.cluster, sizeof h.cluster, CLUSTER);
  snprintf(h.identity, sizeof h.identity, "apiVersion=v1;kind=ConfigMap;part=");
  snprintf(h.resource_version, sizeof h.resource_version, "42");
  char block[KC_SNAPFILE_HEADER_BYTES], why[256];
  assert_int_equal(kc_snapfile_render_header(&h, block, why, sizeof why), 0);
  kc_snapfile_header back;
  assert_int_equal(kc_snapfile_parse_header(block, sizeof block, &back, why, sizeof why), 0);
  assert_memory_equal(&h, &back, sizeof h);
  /* cut off */
  assert_int_equal(kc_snapfile_parse_header(block, 100, &back, why, sizeof why), -EINVAL);
  assert_non_null(strstr(why, "cut off"));
  /* one bit of a value */
  char bad[KC_SNAPFILE_HEADER_BYTES];
  memcpy(bad, block, sizeof bad);
  bad[strstr(bad, "cluster: ") - bad + 12] ^= 0x01;
  assert_int_equal(kc_snapfile_parse_header(bad, sizeof bad, &back, why, sizeof why), -EINVAL);
  assert_string_equal(why, "header checksum mismatch");
  /* another format version */
  h.format = 2;
  assert_int_equal(kc_snapfile_render_header(&h, block, why, sizeof why), 0);
  assert_int_equal(kc_snapfile_parse_header(block, sizeof block, &back, why, sizeof why),
                   -EPROTONOSUPPORT);
  assert_string_equal(why, "format version 2, this kctrld reads version 1");
  /* not a snapshot; a value with a newline cannot be written */
  assert_int_equal(kc_snapfile_parse_header("{}", 2, &back, why, sizeof why), -EINVAL);
  h.format = 1;
  snprintf(h.cluster, sizeof h.cluster, "a\nb");
  assert_int_equal(kc_snapfile_render_header(&h, block, why, sizeof why), -EINVAL);
}

static void test_truncated_ignored(void **state) {
  char path[600];
  make_snapshot("ident-a", path, sizeof path);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(truncate(path, st.st_size - 1), 0);
  expect_ignored("ident-a", CLUSTER, 0, path, "where its header says");
}

/* The offset of `what` in the file at path. */
static off_t offset_of(const char *path, const char *what) {
  size_t len;
  char *text = tu_read_file(path, &len);
  assert_non_null(text);
  char *at = memmem(text, len, what, strlen(what));
  assert_non_null(at);
  off_t off = at - text;
  free(text);
  return off;
}

static void test_body_bit_flip_ignored(void **state) {
  char path[600];
  make_snapshot("ident-a", path, sizeof path);
  /* "1" -> "!": still JSON, so only the checksum can tell */
  flip_bit(path, offset_of(path, "{\"k\":\"1\"}") + 6);
  expect_ignored("ident-a", CLUSTER, 0, path, "ignored: body checksum mismatch");
}

static void test_body_not_json_ignored(void **state) {
  char path[600];
  make_snapshot("ident-a", path, sizeof path);
  flip_bit(path, offset_of(path, "{\"k\":\"1\"}")); /* '{' -> 'k' */
  expect_ignored("ident-a", CLUSTER, 0, path, "ignored: its body does not decode");
}

static void test_header_bit_flip_ignored(void **state) {
  char path[600];
  make_snapshot("ident-a", path, sizeof path);
  flip_bit(path, 52); /* in the cluster: value ("kctrld-snapshot 1\n" "kctrld-version: ..." first) */
  expect_ignored("ident-a", CLUSTER, 0, path, "header checksum mismatch");
}

static void test_other_identity_ignored(void **state) {
  char path[600], other[700];
  make_snapshot("ident-a", path, sizeof path);
  /* The file an informer of identity ident-b reads (informer.h: named by
   * the hash of the identity and the part's namespace). */
  snprintf(other, sizeof other, "%s/%016llx.snapshot", F.dir,
           (unsigned long long)kc_hash_str("ident-b;part="));
  assert_int_equal(rename(path, other), 0);
  expect_ignored("ident-b", CLUSTER, 0, other, "written for another informer (ident-a;part=)");
}

static void test_other_cluster_ignored(void **state) {
  char path[600];
  make_snapshot("ident-a", path, sizeof path);
  expect_ignored("ident-a", "https://other.example", 0, path,
                 "of another cluster (" CLUSTER ", now https://other.example)");
}

static void set_format_2(kc_snapfile_header *h) { h->format = 2; }

static void test_other_format_ignored(void **state) {
  char path[600];
  make_snapshot("ident-a", path, sizeof path);
  rewrite_header(path, set_format_2);
  expect_ignored("ident-a", CLUSTER, 0, path, "format version 2, this kctrld reads version 1");
}

static void two_hours_old(kc_snapfile_header *h) { h->written_unix_ms -= 2 * 3600 * 1000; }

static void test_too_old_not_used(void **state) {
  char path[600];
  make_snapshot("ident-a", path, sizeof path);
  rewrite_header(path, two_hours_old);
  expect_ignored("ident-a", CLUSTER, 3600 * 1000, path, "past snapshotMaxAge (3600 s)");
}

/* Pool thread: holds the writer inside the file until the loop lets it go. */
static void hold_gate(void *ud, size_t file) {
  atomic_store(&F.gate_entered, true);
  uv_sem_wait(&F.gate_release);
}

static unsigned dir_entries(const char *prefix) {
  DIR *d = opendir(F.dir);
  assert_non_null(d);
  struct dirent *e;
  unsigned n = 0;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strcmp(e->d_name, ".") != 0 &&
        strcmp(e->d_name, "..") != 0)
      n++;
  closedir(d);
  return n;
}

static bool gate_entered(void *ud) { return atomic_load(&F.gate_entered); }
static bool ticks_reached(void *ud) { return F.ticks >= *(unsigned *)ud; }

/* The write runs off the loop: while the writer is held inside the file
 * (its temporary file exists), the loop keeps turning (its timer fires
 * again and again); let go, the file is completed and renamed. */
static void test_written_off_the_loop(void **state) {
  assert_int_equal(uv_sem_init(&F.gate_release, 0), 0);
  fakeapi_put(F.srv, "configmaps", "a", "one", NULL, NULL);
  kc_informer_spec sp = spec_of("ident-a");
  start_informer(&sp, CLUSTER, 0);
  kc_snapwriter *w;
  close_saving_start(hold_gate, &w);
  run_until(gate_entered, NULL, "the writer to be inside the file");
  unsigned want = F.ticks + 3;
  run_until(ticks_reached, &want, "the loop to turn while the snapshot is written");
  assert_false(F.written);
  assert_int_equal(dir_entries("."), 1); /* the temporary file, nothing else */
  assert_int_equal(dir_entries(""), 1);
  uv_sem_post(&F.gate_release);
  run_until(written, NULL, "the snapshot to be written");
  kc_snapwriter_free(w);
  assert_int_equal(F.result.written, 1);
  assert_false(F.result.cancelled);
  char path[600];
  snapshot_path(path, sizeof path); /* one final file, no temporary one */
  uv_sem_destroy(&F.gate_release);
}

/* Cancelled half-way (a second SIGTERM): the temporary file goes, no file
 * is left, and done still runs. */
static void test_cancel_removes_temporary(void **state) {
  assert_int_equal(uv_sem_init(&F.gate_release, 0), 0);
  fakeapi_put(F.srv, "configmaps", "a", "one", NULL, NULL);
  kc_informer_spec sp = spec_of("ident-a");
  start_informer(&sp, CLUSTER, 0);
  kc_snapwriter *w;
  close_saving_start(hold_gate, &w);
  run_until(gate_entered, NULL, "the writer to be inside the file");
  assert_int_equal(dir_entries("."), 1);
  kc_snapwriter_cancel(w);
  uv_sem_post(&F.gate_release);
  run_until(written, NULL, "the cancelled write to end");
  kc_snapwriter_free(w);
  assert_true(F.result.cancelled);
  assert_int_equal(F.result.written, 0);
  assert_int_equal(F.result.failed, 1);
  assert_int_equal(dir_entries(""), 0);
  uv_sem_destroy(&F.gate_release);
}

int main(void) {
  kc_log_set_level(KC_LOG_INFO);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32c),
      cmocka_unit_test(test_header_round_trip_and_refusals),
      cmocka_unit_test_setup_teardown(test_warm_start_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncated_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_body_bit_flip_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_body_not_json_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_header_bit_flip_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_identity_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_cluster_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_format_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_too_old_not_used, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restore_polls_between_slices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_written_off_the_loop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_removes_temporary, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
