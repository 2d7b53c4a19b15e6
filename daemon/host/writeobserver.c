/* SPDX-License-Identifier: Apache-2.0 */
/* writeobserver: see writeobserver.h. */
#include "host/writeobserver.h"

#include "json/jsonpath.h"

static _Thread_local kc_write_observer_fn observer;
static _Thread_local void *observer_ud;

void kc_write_observer_set(kc_write_observer_fn fn, void *ud) {
  observer = fn;
  observer_ud = ud;
}

void kc_write_observer_report(const char *verb, const char *path, long code, const char *body,
                              size_t body_len) {
  if (!observer) return;
  char rv[64] = "";
  kc_json_value v;
  if (code >= 200 && code < 300 && body && body_len &&
      kc_json_get((kc_str){body, body_len}, "metadata.resourceVersion", &v) == 0 &&
      kc_json_string(&v, rv, sizeof rv) < 0)
    rv[0] = '\0';
  observer(observer_ud, verb, path, code, rv);
}
