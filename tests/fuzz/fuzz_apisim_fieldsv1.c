/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for kube-apisim's server-side apply code
 * (tests/apisim/fieldset.c, tests/apisim/fieldmgr.c). The input is one JSON
 * document used three ways: as a fieldsV1 set (decoded, re-encoded and
 * decoded again: the member count must survive), and as {"live":...,
 * "intent":...} (or the same document for both) for an apply, a forced
 * apply and an Update; every result must serialize to JSON that parses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../apisim/fieldmgr.h"
#include "../apisim/fieldset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_json(const jv *v)
{
  size_t n;
  char *json = jv_dump(v, &n);
  char perr[128];
  jv *back = jv_parse(json, n, perr, sizeof perr);
  if (!back) abort();
  jv_free(back);
  free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char perr[128];
  jv *doc = jv_parse((const char *)data, size, perr, sizeof perr);
  if (!doc) return 0;
  struct sim_fset *s = NULL;
  char *err = NULL;
  if (sim_fset_from_v1(doc, &s, &err) == 0) {
    if (!s || err) abort();
    jv *enc = sim_fset_to_v1(s);
    struct sim_fset *s2 = NULL;
    if (sim_fset_from_v1(enc, &s2, &err) != 0) abort();
    if (sim_fset_count(s) != sim_fset_count(s2) || !sim_fset_equal(s, s2)) abort();
    sim_fset_free(s2);
    jv_free(enc);
    sim_fset_free(s);
  } else {
    if (s || !err) abort();
    free(err);
  }
  if (doc->t == J_OBJ) {
    const jv *live = jv_get(doc, "live"), *intent = jv_get(doc, "intent");
    if (!live || live->t != J_OBJ) live = doc;
    if (!intent || intent->t != J_OBJ) intent = doc;
    static const struct sim_fm_opts o = {.api_version = "v1", .builtin = true, .ignore_status = true};
    for (int force = 0; force < 2; force++) {
      jv *out = NULL;
      char *status = NULL;
      int code;
      int rc = sim_fm_apply(&o, force ? NULL : live, intent, "fuzz", force, &out, &status, &code, &err);
      if (rc == 0) {
        if (!out) abort();
        check_json(out);
        jv_free(out);
      } else if (out) {
        abort();
      }
      if (status) {
        jv *st = jv_parse(status, strlen(status), perr, sizeof perr);
        if (!st) abort();
        jv_free(st);
      }
      free(status);
      free(err);
      err = NULL;
    }
    jv *nd = jv_copy(intent);
    sim_fm_update(&o, live, nd, "fuzz-update");
    check_json(nd);
    jv_free(nd);
  }
  jv_free(doc);
  return 0;
}
