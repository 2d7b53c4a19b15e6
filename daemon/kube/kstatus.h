/* SPDX-License-Identifier: Apache-2.0 */
/* kstatus: the Kubernetes Status object (kind: Status, docs/api-contract.md
 * section 6), as the daemon reads it.
 *
 * Owns kc_status, the one representation of a Status in the daemon: the
 * answer to a failed request (apiclient.h fills it from the response body,
 * or from the HTTP code when the body is no Status) and the object of a
 * watch ERROR event (the object builder, kbuild.h, fills it while it builds
 * the event's object). Owns the rules each member obeys when read (which
 * values count, how strings are cut) in kc_status_set_string /
 * kc_status_set_number, which both of those readers go through, and the one
 * parser of a whole Status body, kc_status_parse.
 *
 * Threads: any (no shared state). Errors: 0 or a negative errno.
 */
#ifndef KC_KSTATUS_H
#define KC_KSTATUS_H

#include <stdbool.h>
#include <stddef.h>

/* Longest body kc_status_parse reads. Status bodies are a few hundred
 * bytes; apiclient keeps at most this much of an error body. */
#define KC_STATUS_MAX_BYTES (64 * 1024)

/* A failure as the API server (or the transport) reported it. Strings are
 * unescaped and NUL-terminated, cut to fit (at a byte, not at a character). */
typedef struct kc_status {
  int code;                /* HTTP code 1..999; 0 = none */
  char status[16];         /* "Success" | "Failure" | "" */
  char reason[64];         /* StatusReason, e.g. "NotFound"; "" = unknown */
  char message[512];       /* human text */
  int retry_after_seconds; /* details.retryAfterSeconds (0..86399) or Retry-After; -1 = none */
  bool from_body;          /* kc_status_parse read it from a Status body */
  bool rv_too_large;       /* a details.causes[] has reason ResourceVersionTooLarge */
  /* What a failure is about (read by kc_status_parse only): details.name
   * ("" when the Status names no object, e.g. a 404 for a path the server
   * does not route), and the first details.causes[] entry that names a
   * field (a 422 Invalid: "metadata.labels", "Invalid value: ...") */
  char details_name[256];
  char cause_field[256];
  char cause_message[256];
} kc_status;

/* The members of a Status the daemon reads. */
enum kc_status_member {
  KC_STATUS_CODE,         /* "code": number */
  KC_STATUS_STATUS,       /* "status": string */
  KC_STATUS_REASON,       /* "reason": string */
  KC_STATUS_MESSAGE,      /* "message": string */
  KC_STATUS_RETRY_AFTER,  /* "details"."retryAfterSeconds": number */
  KC_STATUS_CAUSE_REASON, /* "details"."causes"[]."reason": string */
  KC_STATUS_DETAILS_NAME, /* "details"."name": string */
  KC_STATUS_CAUSE_FIELD,  /* "details"."causes"[]."field": string */
  KC_STATUS_CAUSE_MESSAGE,/* "details"."causes"[]."message" of that cause: string */
};

/* Empties st: no code, "" strings, retry_after_seconds -1, flags false. */
void kc_status_clear(kc_status *st);

/* Records member m's value as read from JSON: a string's unescaped bytes
 * s[0..n), or a number's text. A number that is not a decimal integer in
 * the member's range (code 1..999, retryAfterSeconds 0..86399) is ignored;
 * so is a string given for a number member or the other way round. A later
 * value of the same member replaces an earlier one. */
void kc_status_set_string(kc_status *st, enum kc_status_member m, const char *s, size_t n);
void kc_status_set_number(kc_status *st, enum kc_status_member m, const char *s, size_t n);

/* Reads a complete body (len bytes, need not be NUL-terminated) as a
 * Status: optional whitespace, then a JSON object whose "kind" is "Status".
 * Returns 0 with *st filled and from_body set; or -EMSGSIZE (longer than
 * KC_STATUS_MAX_BYTES), -E2BIG (nested deeper than KC_JSONTREE_MAX_DEPTH:
 * `why`, which may be NULL, says where), -EBADMSG (not JSON, not an object,
 * another kind), -ENOMEM. st is cleared first and stays so on failure;
 * `why` is "" unless the result is -E2BIG. */
int kc_status_parse(kc_status *st, const char *body, size_t len, char *why, size_t whylen);

#endif
