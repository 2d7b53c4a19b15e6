/* SPDX-License-Identifier: Apache-2.0 */
/* kstatus: see kstatus.h. */
#include "kube/kstatus.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "json/jsonpath.h"
#include "json/jsontree.h"

void kc_status_clear(kc_status *st) {
  memset(st, 0, sizeof *st);
  st->retry_after_seconds = -1;
}

static void copy_cut(char *dst, size_t cap, const char *s, size_t n) {
  if (n >= cap) n = cap - 1;
  if (n) memcpy(dst, s, n);
  dst[n] = '\0';
}

void kc_status_set_string(kc_status *st, enum kc_status_member m, const char *s, size_t n) {
  switch (m) {
  case KC_STATUS_STATUS: copy_cut(st->status, sizeof st->status, s, n); break;
  case KC_STATUS_REASON: copy_cut(st->reason, sizeof st->reason, s, n); break;
  case KC_STATUS_MESSAGE: copy_cut(st->message, sizeof st->message, s, n); break;
  case KC_STATUS_DETAILS_NAME: copy_cut(st->details_name, sizeof st->details_name, s, n); break;
  case KC_STATUS_CAUSE_FIELD: copy_cut(st->cause_field, sizeof st->cause_field, s, n); break;
  case KC_STATUS_CAUSE_MESSAGE: copy_cut(st->cause_message, sizeof st->cause_message, s, n); break;
  case KC_STATUS_CAUSE_REASON:
    if (n == sizeof "ResourceVersionTooLarge" - 1 && memcmp(s, "ResourceVersionTooLarge", n) == 0)
      st->rv_too_large = true;
    break;
  case KC_STATUS_CODE:
  case KC_STATUS_RETRY_AFTER: break;
  }
}

void kc_status_set_number(kc_status *st, enum kc_status_member m, const char *s, size_t n) {
  int64_t v;
  if (!kc_json_parse_i64(s, n, &v)) return;
  if (m == KC_STATUS_CODE && v > 0 && v < 1000) st->code = (int)v;
  else if (m == KC_STATUS_RETRY_AFTER && v >= 0 && v < 86400) st->retry_after_seconds = (int)v;
}

static yajl_val member(yajl_val obj, const char *a, const char *b, yajl_type t) {
  const char *path[3] = {a, b, NULL};
  return obj ? yajl_tree_get(obj, path, t) : NULL;
}

static void take_string(kc_status *st, enum kc_status_member m, yajl_val v) {
  if (v && v->u.string) kc_status_set_string(st, m, v->u.string, strlen(v->u.string));
}

static void take_number(kc_status *st, enum kc_status_member m, yajl_val v) {
  if (v && v->u.number.r) kc_status_set_number(st, m, v->u.number.r, strlen(v->u.number.r));
}

int kc_status_parse(kc_status *st, const char *body, size_t len, char *why, size_t whylen) {
  kc_status_clear(st);
  if (why && whylen) why[0] = '\0';
  if (len > KC_STATUS_MAX_BYTES) return -EMSGSIZE;
  size_t i = 0;
  while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t')) i++;
  if (i == len || body[i] != '{') return -EBADMSG;
  yajl_val root;
  int rc = kc_jsontree_parse(body, len, &root, why, whylen);
  if (rc < 0) {
    if (rc != -E2BIG && why && whylen) why[0] = '\0';
    return rc;
  }
  yajl_val kind = member(root, "kind", NULL, yajl_t_string);
  if (!kind || !kind->u.string || strcmp(kind->u.string, "Status") != 0) {
    yajl_tree_free(root);
    return -EBADMSG;
  }
  take_number(st, KC_STATUS_CODE, member(root, "code", NULL, yajl_t_number));
  take_string(st, KC_STATUS_STATUS, member(root, "status", NULL, yajl_t_string));
  take_string(st, KC_STATUS_REASON, member(root, "reason", NULL, yajl_t_string));
  take_string(st, KC_STATUS_MESSAGE, member(root, "message", NULL, yajl_t_string));
  take_number(st, KC_STATUS_RETRY_AFTER,
              member(root, "details", "retryAfterSeconds", yajl_t_number));
  take_string(st, KC_STATUS_DETAILS_NAME, member(root, "details", "name", yajl_t_string));
  yajl_val causes = member(root, "details", "causes", yajl_t_array);
  for (size_t k = 0; causes && k < YAJL_GET_ARRAY(causes)->len; k++) {
    yajl_val cause = YAJL_GET_ARRAY(causes)->values[k];
    take_string(st, KC_STATUS_CAUSE_REASON, member(cause, "reason", NULL, yajl_t_string));
    yajl_val field = member(cause, "field", NULL, yajl_t_string);
    if (!st->cause_field[0] && field && field->u.string && field->u.string[0]) {
      take_string(st, KC_STATUS_CAUSE_FIELD, field);
      take_string(st, KC_STATUS_CAUSE_MESSAGE, member(cause, "message", NULL, yajl_t_string));
    }
  }
  yajl_tree_free(root);
  st->from_body = true;
  return 0;
}
