/* SPDX-License-Identifier: Apache-2.0 */
/* selector: Kubernetes label and field selector strings.
 *
 * Owns parsing, validation, matching and canonical rendering of the
 * `labelSelector=` and `fieldSelector=` query strings
 * (docs/api-contract.md section 5). The grammar, the matching semantics and
 * the error texts follow k8s.io/apimachinery (labels.Parse,
 * fields.ParseSelector) as released in Kubernetes 1.2x/1.3x, so a message we
 * print for a bad config is the one kube-apiserver would answer with.
 *
 * Threads: a parsed selector is immutable; every function here may be called
 * from any thread, and one selector may be used by several threads at once.
 *
 * Errors: 0 or a negative errno. Parse errors are -EINVAL with the
 * apiserver's message and the byte offset of the offending token in a
 * kc_sel_error.
 *
 * Ownership: a parsed selector is one allocation that owns copies of every
 * string it points to; free it with the matching *_free (NULL is a no-op).
 * Functions taking objects or label arrays only borrow them for the call.
 */
#ifndef KC_SELECTOR_H
#define KC_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/kobj.h"

/* A parse error: `pos` is the byte offset in the input where the problem
 * was found, `msg` the apiserver's text (truncated to fit, NUL-terminated). */
typedef struct kc_sel_error {
  size_t pos;
  char msg[1024];
} kc_sel_error;

/* ---- label selectors ---------------------------------------------------- */

enum kc_label_op {
  KC_LABEL_EXISTS = 0, /* key           */
  KC_LABEL_NOT_EXISTS, /* !key          */
  KC_LABEL_EQ,         /* key=v, key==v */
  KC_LABEL_NEQ,        /* key!=v        */
  KC_LABEL_IN,         /* key in (a,b)  */
  KC_LABEL_NOTIN,      /* key notin (a) */
  KC_LABEL_GT,         /* key>5         */
  KC_LABEL_LT,         /* key<5         */
};

typedef struct kc_label_req {
  enum kc_label_op op;
  kc_str key;
  uint32_t nvalues;     /* 0 for EXISTS/NOT_EXISTS, 1 for EQ/NEQ/GT/LT */
  const kc_str *values; /* sorted bytewise, no duplicates; "" is a value */
  int64_t num;          /* GT/LT operand */
} kc_label_req;

/* Requirements are ANDed; an empty selector (nreqs == 0) matches all. They
 * are sorted by key, then operator, then values, with exact duplicates
 * removed, so two selectors that differ only in order or spelling ("=" vs
 * "==", "in (b,a)" vs "in (a,b)") have the same requirements. */
typedef struct kc_label_selector {
  uint32_t nreqs;
  const kc_label_req *reqs;
} kc_label_selector;

/* Parses a label selector string of `len` bytes (need not be
 * NUL-terminated). On success *out is a new selector (caller frees with
 * kc_label_selector_free). On error returns -EINVAL and fills *err when it
 * is not NULL, e.g. pos 4 "found '', expected: identifier after ','" for
 * "a=b,"; -ENOMEM when out of memory. Context: any thread. */
int kc_label_selector_parse(const char *s, size_t len, kc_label_selector **out,
                            kc_sel_error *err);
void kc_label_selector_free(kc_label_selector *sel);

/* True when every requirement holds for the object's labels. `!=` and
 * `notin` match a missing key; `>`/`<` need the key with an int64 value.
 * sel == NULL matches everything. Context: any thread. */
bool kc_label_selector_matches_obj(const kc_label_selector *sel, const kc_obj *obj);

/* Renders the canonical form: requirements in their sorted order joined by
 * ",", "=" for equality, "key in (a,b)" with sorted values, "!key" etc.
 * Parsing the result gives an equal selector. Suitable as a map key and,
 * URL-encoded, as `labelSelector=`. Returns the length (without NUL), or
 * -ENOSPC when it does not fit into cap bytes (buf then holds a truncated,
 * NUL-terminated prefix when cap > 0). Context: any thread. */
int kc_label_selector_string(const kc_label_selector *sel, char *buf, size_t cap);

/* ---- field selectors ---------------------------------------------------- */

enum kc_field_op {
  KC_FIELD_EQ = 0, /* field=v, field==v */
  KC_FIELD_NEQ,    /* field!=v          */
};

typedef struct kc_field_req {
  enum kc_field_op op;
  kc_str field; /* ptr is NUL-terminated */
  kc_str value; /* unescaped; ptr is NUL-terminated */
} kc_field_req;

/* Terms are ANDed, sorted by field, op, value, duplicates removed. */
typedef struct kc_field_selector {
  uint32_t nreqs;
  const kc_field_req *reqs;
} kc_field_selector;

/* Parses a field selector string. Errors (-EINVAL) carry the apiserver's
 * text: "invalid selector: 'S'; can't understand 'T'" for a term without
 * operator, "invalid field selector: invalid escape sequence: \\x" and
 * "invalid field selector: unescaped character in value: 61" (Go prints
 * the rune as a number) for bad values. Terms are checked in sorted order,
 * as the apiserver does, so the first reported error is the same.
 * Context: any thread. */
int kc_field_selector_parse(const char *s, size_t len, kc_field_selector **out,
                            kc_sel_error *err);
void kc_field_selector_free(kc_field_selector *sel);

/* Canonical string with values re-escaped (\\, \, and \=); same contract
 * as kc_label_selector_string. */
int kc_field_selector_string(const kc_field_selector *sel, char *buf, size_t cap);

/* --- Test seam: for tests only, not called by the daemon --- */
/* kc_label_selector_matches_obj for a label set: `labels` must be sorted
 * by key (as kc_obj labels are); nlabels may be 0. */
bool kc_label_selector_matches(const kc_label_selector *sel, const kc_label *labels,
                               size_t nlabels);

/* True when every term holds for the object. A field's value is the text
 * the apiserver compares: strings unescaped, numbers and booleans as text,
 * absent as "" (so "spec.nodeName=" selects unscheduled Pods), except that
 * an absent spec.hostNetwork or spec.unschedulable reads "false" and
 * status.podIP is status.podIPs[0].ip when present. Fields the server
 * would reject are still evaluated by path; validate them beforehand with
 * kc_field_selector_check. sel == NULL matches everything.
 * Context: any thread. */
bool kc_field_selector_matches(const kc_field_selector *sel, const kc_obj *obj);

/* Writes the text value a field has for selector purposes (see above)
 * into buf. Returns its length, -ENOSPC if it does not fit. */
int kc_field_value_text(const kc_obj *obj, const char *field, char *buf, size_t cap);

/* Whether the apiserver accepts `field` in a field selector for the
 * resource (plural name, e.g. "pods") of API group `group` ("" = core).
 * Every resource: metadata.name; namespaced ones: metadata.namespace;
 * pods: spec.nodeName, spec.restartPolicy, spec.schedulerName,
 * spec.serviceAccountName, spec.hostNetwork, status.phase, status.podIP,
 * status.nominatedNodeName; nodes: spec.unschedulable. */
bool kc_field_supported(const char *group, const char *resource, bool namespaced,
                        kc_str field);

/* Checks every term with kc_field_supported. Returns 0, or -EINVAL with the
 * apiserver's message in *err: "field label not supported: F" for pods,
 * nodes and custom resources (a group that is not built in), or
 * "\"F\" is not a known field selector: only \"metadata.name\",
 * \"metadata.namespace\"" for other built-in types. err->pos is 0. */
int kc_field_selector_check(const kc_field_selector *sel, const char *group,
                            const char *resource, bool namespaced, kc_sel_error *err);

#endif
