/* SPDX-License-Identifier: Apache-2.0 */
/* hook_webhook: see hook_webhook.h. */
#include "hooks/hook_webhook.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fileperm.h"
#include "hooks/hook_health.h"
#include "hooks/hook_host.h"
#include "hooks/hook_proto.h"
#include "host/hostapi.h"
#include "client/http.h"

struct slot {
  CURL *easy; /* NULL until first use */
  bool busy;
  struct curl_slist *headers;
  kc_buf body;
  size_t limit;
  bool too_big;
  char reason[64]; /* the status line's reason phrase (HTTP/1.x) */
  char errbuf[CURL_ERROR_SIZE];
};

typedef struct hook_webhook {
  kc_hook_base base; /* controller, kinds, nslots, mu (slots[].busy), attempts */
  char *url;
  char shown[512]; /* the URL for messages (no query, no credentials) */
  char *ca_file, *cert_file, *key_file;
  bool insecure;
  uint64_t timeout_ms;
  size_t max_response;
  struct slot *slots;
  kc_hook_health_entry *health; /* does the hook answer (readiness) */
} hook_webhook;

static const struct kctrld_host_api *H(void) {
  return kc_hostapi_table();
}

void kc_hook_webhook_redact(const char *url, char *out, size_t cap) {
  CURLU *u = curl_url();
  char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
    curl_url_get(u, CURLUPART_PORT, &port, 0); /* absent: the scheme's */
    curl_url_get(u, CURLUPART_PATH, &path, 0);
    snprintf(out, cap, "%s://%s%s%s%s", scheme, host, port ? ":" : "", port ? port : "",
             path && strcmp(path, "/") != 0 ? path : "");
  } else {
    snprintf(out, cap, "(bad URL)");
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_free(path);
  curl_url_cleanup(u);
}

static int check_file(const char *what, const char *path, bool secret, char *err, size_t errlen) {
  if (!path) return 0;
  int rc = secret ? kc_fileperm_check_path(what, path,
                                           "authenticate with credentials others can change", 0,
                                           err, errlen)
                  : 0;
  if (rc == 0 && !secret && access(path, R_OK) != 0) rc = -errno;
  if (rc == -ENOENT) {
    kc_errf(err, errlen, "%s %s does not exist", what, path);
  } else if (rc < 0 && !secret) {
    kc_errf(err, errlen, "%s %s: %s", what, path, strerror(-rc));
  } else if (rc == 0 && secret) {
    kc_fileperm_warn_readable(what, path, NULL);
  }
  return rc;
}

int kc_hook_webhook_check(const kc_hook_webhook_spec *wh, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  int rc = check_file("webhook caFile", wh->ca_file, false, err, errlen);
  if (rc == 0) rc = check_file("webhook clientCertFile", wh->client_cert_file, false, err, errlen);
  if (rc == 0) rc = check_file("webhook client key file", wh->client_key_file, true, err, errlen);
  return rc;
}

/* ---- lifecycle -------------------------------------------------------------- */

static void webhook_free(hook_webhook *x) {
  for (size_t i = 0; x->slots && i < x->base.nslots; i++) {
    curl_easy_cleanup(x->slots[i].easy);
    curl_slist_free_all(x->slots[i].headers);
    kc_buf_free(&x->slots[i].body);
  }
  free(x->slots);
  kc_hook_health_unregister(x->health);
  kc_hook_base_free(&x->base);
  free(x->url);
  free(x->ca_file);
  free(x->cert_file);
  free(x->key_file);
  free(x);
}

/* strdup of an optional string: true unless out of memory. */
static bool dup_opt(const char *s, char **out) {
  *out = s ? strdup(s) : NULL;
  return !s || *out;
}

static bool has_webhook(const kc_controller_spec *spec) {
  return spec->hook && spec->hook->webhook;
}

static int webhook_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **instance) {
  const kc_controller_spec *spec =
      kc_hook_init_spec(instance, "webhook hook", "hook.webhook", has_webhook);
  if (!spec) return -EINVAL;
  const kc_hook_webhook_spec *wh = spec->hook->webhook;
  char err[512];
  int rc = kc_hook_webhook_check(wh, err, sizeof err);
  if (rc < 0) {
    H()->log(KCTRLD_LOG_ERROR, "%s", err);
    return rc;
  }
  hook_webhook *x = calloc(1, sizeof *x);
  if (!x) return -ENOMEM;
  if (kc_hook_base_init(&x->base, spec) < 0) {
    free(x);
    return -ENOMEM;
  }
  x->insecure = wh->insecure_skip_tls_verify;
  x->timeout_ms = (uint64_t)wh->timeout_ms;
  x->max_response = (size_t)wh->max_response_bytes;
  x->slots = calloc(x->base.nslots, sizeof *x->slots);
  x->health = kc_hook_health_register(spec->name, x->timeout_ms);
  x->url = strdup(wh->url);
  bool ok = x->slots && x->url && dup_opt(wh->ca_file, &x->ca_file) &&
            dup_opt(wh->client_cert_file, &x->cert_file) &&
            dup_opt(wh->client_key_file, &x->key_file);
  if (!ok) {
    webhook_free(x);
    return -ENOMEM;
  }
  kc_hook_webhook_redact(x->url, x->shown, sizeof x->shown);
  H()->log(KCTRLD_LOG_INFO, "webhook hook %s timeout=%llums workers=%zu%s", x->shown,
           (unsigned long long)x->timeout_ms, x->base.nslots,
           x->insecure ? " insecureSkipTLSVerify=true" : "");
  *instance = x;
  return 0;
}

static void webhook_fini(void *instance) {
  if (instance) webhook_free(instance);
}

/* ---- one POST --------------------------------------------------------------- */

static size_t on_body(char *buf, size_t size, size_t nmemb, void *ud) {
  struct slot *s = ud;
  size_t len = size * nmemb;
  if (s->limit && s->body.len + len > s->limit) {
    s->too_big = true;
    return 0; /* CURLE_WRITE_ERROR */
  }
  kc_buf_add(&s->body, buf, len);
  return s->body.err ? 0 : len;
}

void kc_hook_webhook_status_reason(const char *line, size_t len, char *out, size_t cap) {
  if (!cap) return;
  out[0] = '\0';
  if (len <= 5 || memcmp(line, "HTTP/", 5) != 0) return;
  const char *p = memchr(line, ' ', len), *e = line + len;
  if (p) p = memchr(p + 1, ' ', (size_t)(e - p - 1));
  if (!p) return;
  p++;
  while (e > p && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
    e--;
  size_t n = 0;
  for (; p < e && n + 1 < cap; p++) /* printable only: it goes into a log line */
    out[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
  out[n] = '\0';
}

/* Keeps the reason phrase of the last status line ("HTTP/1.1 500 Internal
 * Server Error"); HTTP/2 has none. Other header lines are ignored. */
static size_t on_header(char *buf, size_t size, size_t nmemb, void *ud) {
  struct slot *s = ud;
  size_t len = size * nmemb;
  if (len > 5 && memcmp(buf, "HTTP/", 5) == 0)
    kc_hook_webhook_status_reason(buf, len, s->reason, sizeof s->reason);
  return len;
}

static int slot_setup(hook_webhook *x, struct slot *s) {
  if (s->easy) return 0;
  CURL *e = curl_easy_init();
  if (!e) return -ENOMEM;
  const kc_http_tls tls = {.ca_file = x->ca_file,
                           .cert_file = x->cert_file,
                           .key_file = x->key_file,
                           .insecure = x->insecure};
  int rc = kc_http_easy_defaults(e, x->timeout_ms);
  if (rc == 0) rc = kc_http_easy_tls(e, &tls);
  struct curl_slist *h = NULL;
  static const char *const lines[] = {"Content-Type: application/json",
                                      "Accept: application/json", "Expect:"};
  for (size_t i = 0; rc == 0 && i < sizeof lines / sizeof lines[0]; i++) {
    struct curl_slist *l = curl_slist_append(h, lines[i]);
    if (!l) rc = -ENOMEM;
    else h = l;
  }
  CURLcode c = CURLE_OK;
  c |= curl_easy_setopt(e, CURLOPT_URL, x->url);
  c |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  c |= curl_easy_setopt(e, CURLOPT_POST, 1L);
  c |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)x->timeout_ms);
  c |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  c |= curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
  c |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  c |= curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
  c |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
  c |= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  if (rc == 0 && c != CURLE_OK) rc = -EINVAL;
  if (rc < 0) {
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
    return rc;
  }
  s->easy = e;
  s->headers = h;
  s->limit = x->max_response;
  return 0;
}

void kc_hook_webhook_excerpt(const char *body, size_t len, char *out, size_t cap) {
  if (!cap) return;
  size_t n = 0;
  for (size_t i = 0; body && i < len && n + 1 < cap && i < 200; i++) {
    unsigned char ch = (unsigned char)body[i];
    out[n++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
  }
  while (n && out[n - 1] == ' ')
    n--;
  out[n] = '\0';
}

/* POSTs req; 0 with the body in s->body, or an error result already set. */
static int post(hook_webhook *x, kctrld_ctx *ctx, struct slot *s, const kc_buf *req) {
  const struct kctrld_host_api *h = H();
  int rc = slot_setup(x, s);
  if (rc < 0) return h->result_error(ctx, "webhook %s: %s", x->shown, strerror(-rc));
  kc_buf_reset(&s->body);
  s->too_big = false;
  s->reason[0] = '\0';
  s->errbuf[0] = '\0';
  CURLcode c = curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->len);
  c |= curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, req->p ? req->p : "");
  if (c != CURLE_OK) return h->result_error(ctx, "webhook %s: setting up the POST failed", x->shown);
  int token = kc_hook_health_begin(x->health);
  CURLcode res = curl_easy_perform(s->easy);
  curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, NULL);
  long code = 0;
  curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
  /* No HTTP status at all: the hook did not answer (readiness). */
  kc_hook_health_end(x->health, token, code != 0,
                     s->errbuf[0] ? s->errbuf : curl_easy_strerror(res));
  if (s->too_big)
    return h->result_error(ctx, "webhook %s: HTTP %ld: response larger than maxResponseBytes (%zu)",
                           x->shown, code, x->max_response);
  if (res == CURLE_OPERATION_TIMEDOUT)
    return h->result_error(ctx, "webhook %s: timed out after %llums (%s)", x->shown,
                           (unsigned long long)x->timeout_ms,
                           s->errbuf[0] ? s->errbuf : curl_easy_strerror(res));
  if (res != CURLE_OK)
    return h->result_error(ctx, "webhook %s: %s", x->shown,
                           s->errbuf[0] ? s->errbuf : curl_easy_strerror(res));
  if (code < 200 || code > 299) {
    char ex[208];
    kc_hook_webhook_excerpt(s->body.p, s->body.len, ex, sizeof ex);
    return h->result_error(ctx, "webhook %s: HTTP %ld%s%s%s%s", x->shown, code,
                           s->reason[0] ? " " : "", s->reason, ex[0] ? ": " : "", ex);
  }
  if (s->body.err) return h->result_error(ctx, "webhook %s: out of memory reading the response", x->shown);
  return 0;
}

static struct slot *take_slot(hook_webhook *x) {
  struct slot *s = NULL;
  pthread_mutex_lock(&x->base.mu);
  /* A slot with a handle (and maybe a kept-alive connection) first. */
  for (size_t i = 0; i < x->base.nslots && !s; i++)
    if (!x->slots[i].busy && x->slots[i].easy) s = &x->slots[i];
  for (size_t i = 0; i < x->base.nslots && !s; i++)
    if (!x->slots[i].busy) s = &x->slots[i];
  if (s) s->busy = true;
  pthread_mutex_unlock(&x->base.mu);
  return s;
}

static void release_slot(hook_webhook *x, struct slot *s) {
  if (!s) return;
  pthread_mutex_lock(&x->base.mu);
  s->busy = false;
  pthread_mutex_unlock(&x->base.mu);
}

static int webhook_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  hook_webhook *x = instance;
  const struct kctrld_host_api *h = H();
  kc_buf req = {0};
  kc_hook_input in = {0};
  kc_hook_response r = {0};
  struct slot *s = NULL;
  char err[256];
  int res;
  int rc =
      kc_hook_request_build(h, ctx, &x->base.kinds, key, kc_hook_attempt_of(&x->base.attempts, key),
                            &req, &in, err, sizeof err);
  if (rc < 0) {
    res = h->result_error(ctx, "hook request: %s", err);
    goto out;
  }
  if (rc > 0) { /* nothing to ask (kc_hook_request_build) */
    res = KCTRLD_RESULT_DONE;
    goto out;
  }
  if (req.err) {
    res = h->result_error(ctx, "out of memory building the hook request");
    goto out;
  }
  if (!(s = take_slot(x))) {
    res = h->result_error(ctx, "no free webhook slot (more reconciles than workers)");
    goto out;
  }
  res = post(x, ctx, s, &req);
  if (res != 0) goto out;
  /* The response borrows the body: parse and perform while the slot is ours. */
  rc = kc_hook_response_parse(s->body.p ? s->body.p : "", s->body.len, x->max_response, &r, err,
                              sizeof err);
  if (rc < 0) {
    res = h->result_error(ctx, "webhook %s: hook response: %s", x->shown, err);
    goto out;
  }
  res = kc_hook_perform(h, ctx, &x->base.kinds, key, &in, &r);
out:
  kc_hook_response_free(&r);
  release_slot(x, s);
  kc_hook_attempt_settle(&x->base.attempts, key,
                         res == KCTRLD_RESULT_DONE || res == KCTRLD_RESULT_REQUEUE_AFTER);
  kc_hook_input_release(h, &in);
  kc_buf_free(&req);
  return res;
}

KC_BUILTIN_PLUGIN(kc_hook_webhook_plugin, "webhook-hook", webhook_init, webhook_reconcile, webhook_fini)
