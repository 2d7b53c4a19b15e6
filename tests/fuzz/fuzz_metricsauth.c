/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the secure metrics filter's readers of the API
 * server's answers (ops/metricsauth.c): a TokenReview response, whose user
 * becomes the members of the SubjectAccessReview sent next, and a
 * SubjectAccessReview response. Input = the first byte picks the reader
 * (even: TokenReview, odd: SubjectAccessReview), the rest is the body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/metricsauth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t len = size - 1;
  /* A copy, so reads past the end are caught by ASan. */
  char *body = malloc(len ? len : 1);
  if (!body) abort();
  memcpy(body, data + 1, len);
  char why[160], name[128];
  if (data[0] % 2 == 0) {
    kc_buf user = {0};
    int rc = kc_metricsauth_parse_token_review(body, len, &user, name, sizeof name, why, sizeof why);
    if (rc == 1) {
      /* The request built from it must be one JSON document the reader
       * accepts back as a user of its own. */
      if (!user.p || strnlen(name, sizeof name) == sizeof name) abort();
      kc_buf sar = {0};
      kc_metricsauth_sar_body(&sar, user.p, "get", "/metrics");
      kc_buf doc = {0};
      kc_buf_puts(&doc, "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":true,\"user\":{");
      /* user_fields names the user "user"; the reader wants "username". */
      kc_buf_puts(&doc, "\"username\":");
      kc_buf_puts(&doc, user.p + strlen("\"user\":"));
      kc_buf_puts(&doc, "}}}");
      kc_buf again = {0};
      char name2[128];
      if (!sar.err && !doc.err &&
          kc_metricsauth_parse_token_review(doc.p, doc.len, &again, name2, sizeof name2, why, sizeof why) != 1)
        abort();
      if (!again.err && again.p && strcmp(again.p, user.p) != 0) abort();
      kc_buf_free(&again);
      kc_buf_free(&doc);
      kc_buf_free(&sar);
    } else if (rc == 0 && strnlen(why, sizeof why) == sizeof why) {
      abort();
    }
    kc_buf_free(&user);
  } else {
    int rc = kc_metricsauth_parse_sar(body, len, why, sizeof why);
    if (rc >= 0 && strnlen(why, sizeof why) == sizeof why) abort();
  }
  free(body);
  return 0;
}
