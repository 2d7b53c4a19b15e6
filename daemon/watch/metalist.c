/* SPDX-License-Identifier: Apache-2.0 */
/* metalist: see metalist.h. */
#include "watch/metalist.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

static const char *const TRIM[] = {"metadata.managedFields", "metadata.annotations",
                                   "metadata.labels", "metadata.ownerReferences",
                                   "metadata.finalizers"};

static bool is_2xx(const kc_status *st) { return st->code >= 200 && st->code < 300; }

/* Ends the list with res: the list is idle before done runs (done may start
 * it again); the page's stream, whose error text res borrows, is closed
 * after. */
static void finish(kc_metalist *ml, kc_metalist_result *res) {
  kc_dstream *s = ml->stream;
  ml->stream = NULL;
  ml->http_done = false;
  res->resource_version = ml->list_rv;
  if (!res->decode_error) res->decode_error = "";
  ml->o.done(ml->o.ud, res);
  kc_dstream_close(s);
}

static void send_page(kc_metalist *ml);

static void page_finished(kc_metalist *ml, const kc_api_result *api, int rc) {
  kc_metalist_result res = {.end = KC_METALIST_FAILED, .api = *api, .decode_rc = rc};
  if (api->error || !is_2xx(&api->status) || !ml->stream || rc != 0) {
    res.decoded = ml->stream != NULL;
    res.decode_error = ml->stream ? kc_dstream_error(ml->stream) : "";
    finish(ml, &res);
    return;
  }
  const kc_list_meta *m = kc_dstream_list_meta(ml->stream);
  if (!ml->list_rv[0])
    snprintf(ml->list_rv, sizeof ml->list_rv, "%s", m->resource_version ? m->resource_version : "");
  const char *cont = m->continue_token ? m->continue_token : "";
  if (strlen(cont) >= sizeof ml->cont) {
    finish(ml, &(kc_metalist_result){.end = KC_METALIST_CONTINUE_TOO_LONG});
    return;
  }
  memcpy(ml->cont, cont, strlen(cont) + 1);
  kc_dstream_close(ml->stream);
  ml->stream = NULL;
  ml->http_done = false;
  if (ml->cont[0]) {
    send_page(ml);
    return;
  }
  finish(ml, &(kc_metalist_result){.end = KC_METALIST_COMPLETE});
}

static int on_item(void *ud, kc_obj *obj) {
  kc_metalist *ml = ud;
  return ml->o.item(ml->o.ud, obj);
}

/* The stream delivered everything (or failed). */
static void on_stream_done(void *ud, int rc) {
  kc_metalist *ml = ud;
  if (!ml->http_done) { /* decoding stopped while the response runs */
    kc_api_cancel(ml->req);
    ml->req = NULL;
    memset(&ml->result, 0, sizeof ml->result);
    ml->result.error = -ECANCELED;
    ml->http_done = true;
  }
  kc_api_result res = ml->result;
  page_finished(ml, &res, rc);
}

static void on_stream_resume(void *ud) {
  kc_metalist *ml = ud;
  kc_api_call_resume(ml->req);
}

static int on_response(kc_api_call *call, long status, void *ud) {
  kc_metalist *ml = ud;
  static const kc_dstream_callbacks cbs = {.item = on_item, .resume = on_stream_resume,
                                           .done = on_stream_done};
  static const kc_transform t = {.drop = TRIM, .ndrop = sizeof TRIM / sizeof TRIM[0],
                                 .metadata_only = true};
  ml->stream = kc_dstream_new(ml->o.pool, KC_DECODE_LIST, &t, &cbs, ml, ml->o.budget);
  ml->http_done = false;
  return ml->stream ? KC_HTTP_CONTINUE : KC_HTTP_ABORT;
}

static int on_data(kc_api_call *call, const char *buf, size_t len, void *ud) {
  kc_metalist *ml = ud;
  if (!ml->stream) return KC_HTTP_ABORT;
  int rc = kc_dstream_feed(ml->stream, buf, len);
  if (rc == KC_DSTREAM_FULL) return KC_HTTP_PAUSE;
  return rc < 0 ? KC_HTTP_ABORT : KC_HTTP_CONTINUE;
}

static void on_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  kc_metalist *ml = ud;
  ml->req = NULL;
  ml->result = *res;
  ml->http_done = true;
  if (ml->stream) {
    kc_dstream_finish(ml->stream, res->error == 0 && is_2xx(&res->status));
    return; /* on_stream_done follows */
  }
  page_finished(ml, res, -EIO);
}

static void send_page(kc_metalist *ml) {
  char url[4096];
  const char *cont = ml->cont[0] ? ml->cont : NULL;
  if (kc_reflector_list_url(ml->o.scope, ml->rv, ml->o.match, cont, ml->o.with_limit, url,
                            sizeof url) < 0) {
    finish(ml, &(kc_metalist_result){.end = KC_METALIST_URL_TOO_LONG});
    return;
  }
  kc_api_request_opts o = {
      .method = "GET",
      .path = url,
      .accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                "application/json;q=0.9",
      .idle_timeout_ms = 60000,
      .on_response = on_response,
      .on_data = on_data,
      .on_done = on_done,
      .ud = ml,
  };
  const char *scope = kc_reflector_describe(ml->o.scope);
  if (ml->o.what)
    kc_debug(ml->o.log_tag, "%s: %s: GET %s", scope, ml->o.what, url);
  else
    kc_debug(ml->o.log_tag, "%s: GET %s", scope, url);
  int rc = kc_api_request(ml->o.api, &o, &ml->req);
  if (rc < 0) {
    ml->req = NULL;
    finish(ml, &(kc_metalist_result){.end = KC_METALIST_NOT_SENT, .send_rc = rc});
  }
}

void kc_metalist_start(kc_metalist *ml, const kc_metalist_opts *o) {
  kc_metalist_cancel(ml);
  ml->o = *o;
  snprintf(ml->rv, sizeof ml->rv, "%s", o->rv ? o->rv : "");
  ml->o.rv = ml->rv;
  ml->cont[0] = 0;
  ml->list_rv[0] = 0;
  send_page(ml);
}

void kc_metalist_cancel(kc_metalist *ml) {
  kc_api_cancel(ml->req);
  ml->req = NULL;
  kc_dstream_close(ml->stream);
  ml->stream = NULL;
  ml->http_done = false;
}
