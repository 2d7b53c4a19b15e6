/* SPDX-License-Identifier: Apache-2.0 */
/* dryrun: the writes of controllers in dry-run mode (`--dry-run`, the
 * top-level and per-controller `dryRun: true`, docs/config.md): what turns
 * a write request into its server-side dry run, the one info line that says
 * what it would change, and the per-controller, per-verb counts behind
 * kctrld_dry_run_writes_total.
 *
 * A dry-run write is sent as usual with `dryRun=All` added to its query: the
 * API server validates and answers it as if it were written (admission,
 * conflicts, defaulting) but stores nothing. Callers: hostapi.c (every
 * write a plugin or hook makes) and the daemon side of process isolation
 * (the writes of an isolated plugin), on the calling worker thread.
 *
 * Owns: the counters (a small table, one row per controller name and verb,
 * kept for the life of the process so that a counter survives a reload).
 * Threads: every function is safe from any thread (the table is locked).
 * Errors: 0 or a negative errno.
 */
#ifndef KC_DRYRUN_H
#define KC_DRYRUN_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* The verbs counted (the label `verb`). */
enum kc_dry_run_verb {
  KC_DRY_RUN_CREATE = 0, /* POST */
  KC_DRY_RUN_UPDATE,     /* PUT */
  KC_DRY_RUN_PATCH,      /* PATCH: merge, JSON or strategic patch */
  KC_DRY_RUN_APPLY,      /* PATCH application/apply-patch+yaml */
  KC_DRY_RUN_DELETE,     /* DELETE */
  KC_DRY_RUN_EVENT,      /* an Event: not recorded at all in dry-run mode */
  KC_DRY_RUN_NVERBS
};

const char *kc_dry_run_verb_name(enum kc_dry_run_verb v);

/* The verb of a write request (content_type may be NULL). -EINVAL for a
 * method that writes nothing. */
int kc_dry_run_verb_of(const char *method, const char *content_type);

/* path plus the query parameter dryRun=All ('?' or '&' as path needs) into
 * out (appended). 0 or -ENOMEM. */
int kc_dry_run_path(const char *path, kc_buf *out);

/* What the write would change, in one line without a newline, into
 * out[cap]: "<verb> <resource>[/<sub>] <namespace>/<name>" (name from the
 * body of a create, "(generateName X)" when only that is given), then for
 * a patch or an apply ": " and a compact summary of its fields (the leaf
 * paths of a merge, strategic or apply body, "-path" for a merge removal;
 * "op path" of each JSON patch operation), at most 8, then "+N more".
 * Never fails: a body that does not parse is summarised as "(unparsed
 * body)". Returns the length written (cut at cap - 1). */
size_t kc_dry_run_describe(const char *method, const char *path, const char *content_type,
                           const char *body, size_t len, char *out, size_t cap);

/* Logs "dry run: would <description>" at info (component "dryrun"; the
 * worker's reconcile context adds controller and key) and counts one
 * write of controller with that verb. */
void kc_dry_run_note(const char *controller, const char *method, const char *path,
                     const char *content_type, const char *body, size_t len);

/* Counts one dry-run write of controller with verb v (no log line). */
void kc_dry_run_count(const char *controller, enum kc_dry_run_verb v);

/* Calls fn for every (controller, verb) counted so far, with its count,
 * in the order they were first counted. */
void kc_dry_run_each(void (*fn)(const char *controller, const char *verb, uint64_t n, void *ud),
                     void *ud);

/* --- Test seam: for tests only, not called by the daemon --- */
/* The count of (controller, verb); 0 when never counted. */
uint64_t kc_dry_run_count_of(const char *controller, enum kc_dry_run_verb v);

#endif
