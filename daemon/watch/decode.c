/* SPDX-License-Identifier: Apache-2.0 */
/* decode: see decode.h. The jsonlex callbacks below handle the envelope
 * (the list object, the watch event object); everything inside one
 * Kubernetes object goes straight to the kobj builder. kc_obj_parse (one
 * complete text, not streamed) runs the same lexer in one feed, its events
 * going to a builder in event mode. */
#include "watch/decode.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "json/jsonlex.h"

/* Where the envelope is. */
enum ctx {
  C_TOP = 0, /* between values */
  C_EVENT,   /* inside a watch event object */
  C_LIST,    /* inside the list object */
  C_LMETA,   /* inside the list's metadata */
  C_SHARDINFO, /* inside the list's metadata.shardInfo */
  C_ITEMS,   /* inside the items array */
  C_DONE,    /* LIST: the list object closed */
};

/* What the value after the last key means. */
enum expect {
  X_NONE = 0,
  X_SKIP,
  X_TYPE,
  X_OBJECT,
  X_KIND,
  X_APIVERSION,
  X_LMETA,
  X_ITEMS,
  X_RV,
  X_CONTINUE,
  X_REMAINING,
  X_SHARDINFO,
  X_SHARDSEL,
};

struct kc_decoder {
  enum kc_decode_mode mode;
  kc_jsonlex *lx;
  kc_obj_builder *b;
  kc_decoder_callbacks cbs;
  void *ud;
  size_t max_bytes;
  bool typed; /* the transform gave the object type: nothing to derive */

  enum ctx ctx;
  enum expect expect;
  unsigned skip;  /* open containers inside a skipped envelope value */
  bool building;  /* the builder is receiving events */
  unsigned bdepth; /* containers open in the builder: 0 again = object done */

  /* WATCH: the event being read */
  char type[64];
  bool has_type;
  kc_obj *obj;
  kc_status status;
  bool iee;
  uint64_t nevents;

  /* LIST */
  char *kind, *api_version, *rv, *cont, *shardsel;
  kc_list_meta meta;

  /* input accounting: the current unit (event or list item) */
  uint64_t fed; /* bytes fed (and lexed: every byte goes to the lexer once) */
  uint64_t unit_seq;
  bool unit_active;
  uint64_t unit_bytes;

  /* Rejected objects (decode.h): LIST items skipped, and the reason of the
   * current event's object while the event is being read. */
  uint64_t nrejected;
  char reject_why[200];

  bool any_input; /* a non-whitespace byte was fed */
  int err;
  bool failing; /* a callback set err: the lexer's own message is secondary */
  char errbuf[512];
};

static const char *const type_names[] = {"", "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

enum kc_watch_type kc_watch_type_parse(const char *s, size_t len) {
  for (int t = KC_WATCH_ADDED; t <= KC_WATCH_ERROR; t++)
    if (strlen(type_names[t]) == len && memcmp(type_names[t], s, len) == 0)
      return (enum kc_watch_type)t;
  return KC_WATCH_UNKNOWN;
}

const char *kc_watch_type_name(enum kc_watch_type t) {
  return (t >= KC_WATCH_ADDED && t <= KC_WATCH_ERROR) ? type_names[t] : "UNKNOWN";
}

/* The number of the event or item being read, for messages. */
static uint64_t unit_no(const kc_decoder *d) {
  return (d->mode == KC_DECODE_WATCH ? d->nevents : d->meta.nitems + d->nrejected) + 1;
}

static const char *unit_word(const kc_decoder *d) {
  return d->mode == KC_DECODE_WATCH ? "event" : "item";
}

/* Records the first error (with the event/item number) and makes the lexer
 * stop (KC_JSONLEX_STOP). */
static int failf(kc_decoder *d, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(kc_decoder *d, int err, const char *fmt, ...) {
  if (d->failing) return 0;
  d->failing = true;
  d->err = err;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The byte offset is added by feed, once the lexer says where it stopped. */
  snprintf(d->errbuf, sizeof d->errbuf, "%s %llu: %s", unit_word(d),
           (unsigned long long)unit_no(d), msg);
  return 0;
}

/* Converts a builder result into a lexer callback result. */
static int fwd(kc_decoder *d, int rc) {
  if (rc == 0) return 1;
  return failf(d, rc, "%s", kc_obj_builder_error(d->b));
}

static int item_done(kc_decoder *d);
static int event_done(kc_decoder *d);

/* Reports an object of a shape the API server never sends (kbuild.h
 * kc_obj_builder_shape_error) instead of delivering it. Runs inside a lexer
 * callback, where the lexer's position says where the object ended. */
static int report_reject(kc_decoder *d, const kc_obj *o, const char *why, const char *type) {
  d->nrejected++;
  if (!d->cbs.reject) return 1;
  kc_decode_reject rj = {
      .obj = o,
      .reason = why,
      .index = unit_no(d) - (d->mode == KC_DECODE_LIST ? 1 : 0),
      .offset = d->fed + kc_jsonlex_pos(d->lx),
      .event_type = type,
  };
  int r = d->cbs.reject(d->ud, &rj);
  if (r < 0) return failf(d, r, "reject callback failed (%d)", r);
  return 1;
}

/* After an end_map/end_array went to the builder: has the object closed? */
static int after_close(kc_decoder *d, int rc) {
  if (rc) return fwd(d, rc);
  if (!kc_obj_builder_done(d->b)) return 1;
  d->building = false;
  kc_obj *o = kc_obj_builder_finish(d->b);
  if (!o) return failf(d, -ENOMEM, "out of memory");
  const char *why = kc_obj_builder_shape_error(d->b);
  if (d->mode == KC_DECODE_LIST) {
    d->unit_active = false;
    if (why) {
      int rr = report_reject(d, o, why, NULL);
      kc_obj_unref(o);
      return rr;
    }
    int r = 0;
    if (d->cbs.item) r = d->cbs.item(d->ud, o);
    kc_obj_unref(o);
    d->meta.nitems++;
    if (r < 0) {
      d->meta.nitems--;
      return failf(d, r, "item callback failed (%d)", r);
    }
    return 1;
  }
  if (d->obj) {
    kc_obj_unref(o);
    return failf(d, -EBADMSG, "two \"object\" members");
  }
  d->obj = o;
  snprintf(d->reject_why, sizeof d->reject_why, "%s", why ? why : "");
  d->status = *kc_obj_builder_status(d->b);
  d->iee = kc_obj_builder_initial_events_end(d->b);
  return 1;
}

static int start_object(kc_decoder *d) {
  kc_obj_builder_reset(d->b);
  d->building = true;
  d->bdepth = 1;
  return fwd(d, kc_obj_builder_start_map(d->b));
}

static int dup_str(kc_decoder *d, char **dst, const char *s, size_t len) {
  char *p = malloc(len + 1);
  if (!p) return failf(d, -ENOMEM, "out of memory");
  memcpy(p, s, len);
  p[len] = '\0';
  free(*dst);
  *dst = p;
  d->meta.kind = d->kind ? d->kind : "";
  d->meta.api_version = d->api_version ? d->api_version : "";
  d->meta.resource_version = d->rv ? d->rv : "";
  d->meta.continue_token = d->cont ? d->cont : "";
  d->meta.shard_selector = d->shardsel ? d->shardsel : "";
  return 1;
}

/* A scalar in the envelope (builder not involved). `s` is set for strings. */
static int env_scalar(kc_decoder *d, const char *s, size_t len, bool is_number,
                      const char *what) {
  if (d->skip) return 1;
  enum expect x = d->expect;
  d->expect = X_NONE;
  switch (d->ctx) {
  case C_TOP:
    if (d->mode == KC_DECODE_WATCH) return failf(d, -EBADMSG, "event is %s, not an object", what);
    return failf(d, -EBADMSG, "list body is %s, not an object", what);
  case C_ITEMS: return failf(d, -EBADMSG, "list item is %s, not an object", what);
  default: break;
  }
  switch (x) {
  case X_TYPE:
    if (!s || is_number) return failf(d, -EBADMSG, "\"type\" is %s, not a string", what);
    {
      size_t n = len < sizeof d->type - 1 ? len : sizeof d->type - 1;
      memcpy(d->type, s, n);
      d->type[n] = '\0';
      d->has_type = true;
    }
    return 1;
  case X_OBJECT:
    if (!s && !is_number && strcmp(what, "null") == 0) return 1; /* as if absent */
    return failf(d, -EBADMSG, "\"object\" is %s, not an object", what);
  case X_ITEMS:
    if (strcmp(what, "null") == 0) return 1; /* clients should accept null */
    return failf(d, -EBADMSG, "\"items\" is %s, not an array", what);
  case X_KIND: return s ? dup_str(d, &d->kind, s, len) : 1;
  case X_APIVERSION: return s ? dup_str(d, &d->api_version, s, len) : 1;
  case X_RV: return s ? dup_str(d, &d->rv, s, len) : 1;
  case X_CONTINUE: return s ? dup_str(d, &d->cont, s, len) : 1;
  case X_SHARDSEL: return s ? dup_str(d, &d->shardsel, s, len) : 1;
  case X_REMAINING:
    if (is_number) {
      char buf[32];
      if (len < sizeof buf) {
        memcpy(buf, s, len);
        buf[len] = '\0';
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (!*end && !errno) {
          d->meta.remaining_item_count = v;
          d->meta.has_remaining = true;
        }
      }
    }
    return 1;
  default: return 1;
  }
}

static int d_null(void *c) {
  kc_decoder *d = c;
  if (d->building) return fwd(d, kc_obj_builder_null(d->b));
  return env_scalar(d, NULL, 0, false, "null");
}

static int d_bool(void *c, int v) {
  kc_decoder *d = c;
  if (d->building) return fwd(d, kc_obj_builder_bool(d->b, v != 0));
  return env_scalar(d, NULL, 0, false, "a boolean");
}

static int d_number(void *c, const char *s, size_t len) {
  kc_decoder *d = c;
  if (d->building) return fwd(d, kc_obj_builder_number(d->b, s, len));
  return env_scalar(d, s, len, true, "a number");
}

static int d_string(void *c, const char *s, size_t len) {
  kc_decoder *d = c;
  if (d->building) return fwd(d, kc_obj_builder_string(d->b, s, len));
  return env_scalar(d, s, len, false, "a string");
}

static bool is_key(const char *s, size_t len, const char *lit) {
  size_t n = strlen(lit);
  return len == n && memcmp(s, lit, n) == 0;
}

static int d_key(void *c, const char *s, size_t len) {
  kc_decoder *d = c;
  if (d->building) {
    int rc = kc_obj_builder_key(d->b, s, len);
    if (rc) return fwd(d, rc);
    /* a member nobody looks at: the lexer validates its value, silently */
    return kc_obj_builder_skip_value(d->b) ? KC_JSONLEX_SKIP : KC_JSONLEX_GO;
  }
  if (d->skip) return 1;
  enum expect x = X_SKIP;
  switch (d->ctx) {
  case C_EVENT:
    if (is_key(s, len, "type")) x = X_TYPE;
    else if (is_key(s, len, "object")) x = X_OBJECT;
    break;
  case C_LIST:
    if (is_key(s, len, "items")) x = X_ITEMS;
    else if (is_key(s, len, "metadata")) x = X_LMETA;
    else if (is_key(s, len, "kind")) x = X_KIND;
    else if (is_key(s, len, "apiVersion")) x = X_APIVERSION;
    break;
  case C_LMETA:
    if (is_key(s, len, "resourceVersion")) x = X_RV;
    else if (is_key(s, len, "continue")) x = X_CONTINUE;
    else if (is_key(s, len, "remainingItemCount")) x = X_REMAINING;
    else if (is_key(s, len, "shardInfo")) x = X_SHARDINFO;
    break;
  case C_SHARDINFO:
    if (is_key(s, len, "selector")) x = X_SHARDSEL;
    break;
  default: break;
  }
  d->expect = x;
  /* A member nobody reads: the lexer only validates its value. */
  return x == X_SKIP ? KC_JSONLEX_SKIP : KC_JSONLEX_GO;
}

static void event_reset(kc_decoder *d) {
  d->has_type = false;
  d->type[0] = '\0';
  kc_obj_unref(d->obj);
  d->obj = NULL;
  d->iee = false;
  d->reject_why[0] = '\0';
}

static int d_start_map(void *c) {
  kc_decoder *d = c;
  if (d->building) {
    d->bdepth++;
    int rc = kc_obj_builder_start_map(d->b);
    if (rc) return fwd(d, rc);
    /* nothing inside can matter: the lexer validates it, the end comes */
    return kc_obj_builder_skip_inside(d->b) ? KC_JSONLEX_SKIP : KC_JSONLEX_GO;
  }
  if (d->skip) {
    d->skip++;
    return 1;
  }
  enum expect x = d->expect;
  d->expect = X_NONE;
  switch (d->ctx) {
  case C_TOP:
    if (d->mode == KC_DECODE_WATCH) {
      event_reset(d);
      d->ctx = C_EVENT;
      d->unit_active = true;
      d->unit_seq++;
      d->unit_bytes = 0;
    } else {
      d->ctx = C_LIST;
    }
    return 1;
  case C_ITEMS:
    d->unit_active = true;
    d->unit_seq++;
    d->unit_bytes = 0;
    return start_object(d);
  case C_DONE: return failf(d, -EBADMSG, "data after the list");
  default: break;
  }
  if (x == X_OBJECT) return start_object(d);
  if (x == X_LMETA) {
    d->ctx = C_LMETA;
    return 1;
  }
  if (x == X_SHARDINFO) {
    d->ctx = C_SHARDINFO;
    d->meta.has_shard_info = true;
    return 1;
  }
  if (x == X_ITEMS) return failf(d, -EBADMSG, "\"items\" is an object, not an array");
  if (x == X_TYPE) return failf(d, -EBADMSG, "\"type\" is an object, not a string");
  d->skip = 1; /* its end_map still comes */
  return KC_JSONLEX_SKIP;
}

/* LIST without a given type: items are of the list's kind minus "List",
 * when the list's kind and apiVersion came before the items (the API
 * server's order; the reflector passes the type up front anyway). */
static int derive_type(kc_decoder *d) {
  if (d->typed || !d->kind || !d->api_version) return 1;
  size_t n = strlen(d->kind);
  if (n <= 4 || memcmp(d->kind + n - 4, "List", 4) != 0) return 1;
  int rc = kc_obj_builder_set_type(d->b, (kc_str){d->kind, n - 4}, kc_str_c(d->api_version));
  if (rc == -ENOMEM) return failf(d, rc, "out of memory");
  return 1; /* a kind that cannot be stamped (-EINVAL): items stay as sent */
}

static int d_start_array(void *c) {
  kc_decoder *d = c;
  if (d->building) {
    d->bdepth++;
    int rc = kc_obj_builder_start_array(d->b);
    if (rc) return fwd(d, rc);
    /* nothing inside can matter: the lexer validates it, the end comes */
    return kc_obj_builder_skip_inside(d->b) ? KC_JSONLEX_SKIP : KC_JSONLEX_GO;
  }
  if (d->skip) {
    d->skip++;
    return 1;
  }
  enum expect x = d->expect;
  d->expect = X_NONE;
  switch (d->ctx) {
  case C_TOP:
    return failf(d, -EBADMSG, "%s is an array, not an object",
                 d->mode == KC_DECODE_WATCH ? "event" : "list body");
  case C_ITEMS: return failf(d, -EBADMSG, "list item is an array, not an object");
  default: break;
  }
  if (x == X_ITEMS) {
    d->ctx = C_ITEMS;
    return derive_type(d);
  }
  if (x == X_OBJECT) return failf(d, -EBADMSG, "\"object\" is an array, not an object");
  if (x == X_TYPE) return failf(d, -EBADMSG, "\"type\" is an array, not a string");
  d->skip = 1; /* its end_array still comes */
  return KC_JSONLEX_SKIP;
}

static int d_end_map(void *c) {
  kc_decoder *d = c;
  if (d->building) {
    int rc = kc_obj_builder_end_map(d->b);
    /* Inner containers: no need to ask the builder whether it is done. */
    if (rc == 0 && --d->bdepth > 0) return 1;
    return after_close(d, rc);
  }
  if (d->skip) {
    d->skip--;
    return 1;
  }
  switch (d->ctx) {
  case C_EVENT: return event_done(d);
  case C_LMETA:
    d->ctx = C_LIST;
    if (d->cbs.list_meta) {
      int r = d->cbs.list_meta(d->ud, &d->meta);
      if (r < 0) return failf(d, r, "list_meta callback failed (%d)", r);
    }
    return 1;
  case C_SHARDINFO: d->ctx = C_LMETA; return 1;
  case C_LIST: return item_done(d);
  default: return failf(d, -EBADMSG, "unbalanced object");
  }
}

static int d_end_array(void *c) {
  kc_decoder *d = c;
  if (d->building) {
    int rc = kc_obj_builder_end_array(d->b);
    if (rc == 0 && --d->bdepth > 0) return 1;
    return after_close(d, rc);
  }
  if (d->skip) {
    d->skip--;
    return 1;
  }
  if (d->ctx == C_ITEMS) {
    d->ctx = C_LIST;
    return 1;
  }
  return failf(d, -EBADMSG, "unbalanced array");
}

/* The list object closed (named item_done for symmetry with event_done). */
static int item_done(kc_decoder *d) {
  d->ctx = C_DONE;
  if (d->cbs.list_end) {
    int r = d->cbs.list_end(d->ud, &d->meta);
    if (r < 0) return failf(d, r, "list_end callback failed (%d)", r);
  }
  return 1;
}

static int event_done(kc_decoder *d) {
  d->ctx = C_TOP;
  d->unit_active = false;
  if (!d->has_type) return failf(d, -EBADMSG, "no \"type\"");
  enum kc_watch_type t = kc_watch_type_parse(d->type, strlen(d->type));
  if (!d->obj && t != KC_WATCH_UNKNOWN)
    return failf(d, -EBADMSG, "%s event without \"object\"", d->type);
  if (d->reject_why[0] &&
      (t == KC_WATCH_ADDED || t == KC_WATCH_MODIFIED || t == KC_WATCH_DELETED)) {
    int rr = report_reject(d, d->obj, d->reject_why, d->type);
    kc_obj_unref(d->obj);
    d->obj = NULL;
    d->reject_why[0] = '\0';
    if (rr) d->nevents++;
    return rr;
  }
  d->reject_why[0] = '\0';
  kc_watch_event ev = {
      .type = t,
      .type_name = d->type,
      .index = d->nevents + 1,
      .obj = d->obj,
      .status = t == KC_WATCH_ERROR ? &d->status : NULL,
      .initial_events_end = t == KC_WATCH_BOOKMARK && d->iee,
  };
  int r = 0;
  if (d->cbs.event) r = d->cbs.event(d->ud, &ev);
  kc_obj_unref(d->obj);
  d->obj = NULL;
  if (r < 0) return failf(d, r, "event callback failed (%d)", r);
  d->nevents++;
  return 1;
}

static const kc_jsonlex_callbacks dec_cbs = {
    .null = d_null,           .boolean = d_bool,       .number = d_number,
    .string = d_string,       .map_key = d_key,        .start_map = d_start_map,
    .end_map = d_end_map,     .start_array = d_start_array, .end_array = d_end_array,
};

kc_decoder *kc_decoder_new(enum kc_decode_mode mode, const kc_transform *t,
                           const kc_decoder_callbacks *cbs, void *ud) {
  if (mode != KC_DECODE_LIST && mode != KC_DECODE_WATCH) {
    errno = EINVAL;
    return NULL;
  }
  kc_decoder *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->mode = mode;
  if (cbs) d->cbs = *cbs;
  d->ud = ud;
  d->max_bytes = KC_OBJ_MAX_BYTES;
  d->typed = t && t->kind;
  d->meta.kind = d->meta.api_version = d->meta.resource_version = d->meta.continue_token = "";
  d->meta.shard_selector = "";
  d->b = kc_obj_builder_new(t, 0);
  if (!d->b) {
    int e = errno;
    free(d);
    errno = e;
    return NULL;
  }
  /* Watch bodies are values back to back; lists are exactly one value.
   * Strings are UTF-8 validated (jsonlex.h). */
  d->lx = kc_jsonlex_new(&dec_cbs, d, mode == KC_DECODE_WATCH ? KC_JSONLEX_MULTIPLE : 0);
  if (!d->lx) {
    kc_obj_builder_free(d->b);
    free(d);
    errno = ENOMEM;
    return NULL;
  }
  /* The envelope's levels (event; list, items) plus an object's. */
  kc_jsonlex_set_max_depth(d->lx, KC_OBJ_MAX_DEPTH + (mode == KC_DECODE_WATCH ? 1 : 2));
  kc_jsonlex_set_max_token(d->lx, d->max_bytes);
  return d;
}

void kc_decoder_set_max_bytes(kc_decoder *d, size_t max_bytes) {
  d->max_bytes = max_bytes ? max_bytes : KC_OBJ_MAX_BYTES;
  kc_obj_builder_set_max_bytes(d->b, max_bytes);
  kc_jsonlex_set_max_token(d->lx, d->max_bytes);
}

void kc_decoder_set_share_min(kc_decoder *d, size_t min_bytes) {
  kc_obj_builder_set_share_min(d->b, min_bytes);
}

void kc_decoder_free(kc_decoder *d) {
  if (!d) return;
  kc_jsonlex_free(d->lx);
  kc_obj_builder_free(d->b);
  kc_obj_unref(d->obj);
  free(d->kind);
  free(d->api_version);
  free(d->rv);
  free(d->cont);
  free(d->shardsel);
  free(d);
}

/* Appends " near '...'" with the bytes before the error position. */
static void add_near(char *dst, size_t cap, const char *buf, size_t len, size_t at) {
  if (!buf || len == 0) return;
  if (at > len) at = len;
  size_t from = at > 24 ? at - 24 : 0;
  size_t to = at + 8 < len ? at + 8 : len;
  char snip[80];
  size_t n = 0;
  for (size_t i = from; i < to && n + 4 < sizeof snip; i++) {
    unsigned char ch = (unsigned char)buf[i];
    snip[n++] = (ch >= 0x20 && ch < 0x7f && ch != '\'') ? (char)ch : '.';
  }
  snip[n] = '\0';
  size_t used = strlen(dst);
  if (used < cap) snprintf(dst + used, cap - used, " near '%s'", snip);
}

/* Puts "offset N, " in front of the recorded message. */
static void prefix_offset(kc_decoder *d, uint64_t off) {
  char tmp[sizeof d->errbuf];
  int n = snprintf(tmp, sizeof tmp, "offset %llu, ", (unsigned long long)off);
  if (n < 0 || (size_t)n >= sizeof tmp) return;
  size_t l = strnlen(d->errbuf, sizeof tmp - (size_t)n - 1);
  memcpy(tmp + n, d->errbuf, l);
  tmp[(size_t)n + l] = '\0';
  memcpy(d->errbuf, tmp, (size_t)n + l + 1);
}

/* Builds the final message after the lexer returned an error. */
static int finish_error(kc_decoder *d, const char *buf, size_t len) {
  size_t at = kc_jsonlex_pos(d->lx);
  uint64_t off = d->fed + at;
  int lrc = kc_jsonlex_result(d->lx);
  if (d->failing) {
    prefix_offset(d, off);
  } else {
    const char *m = kc_jsonlex_error(d->lx);
    char big[80];
    d->err = lrc == -E2BIG || lrc == -ENOMEM ? lrc : -EBADMSG;
    if (lrc == -ENOMEM) {
      m = "out of memory";
    } else if (lrc == -E2BIG && strncmp(m, "nesting", 7) == 0) {
      m = "nesting deeper than KC_OBJ_MAX_DEPTH (256) levels";
    } else if (lrc == -E2BIG) { /* one token spanning feeds */
      snprintf(big, sizeof big, "larger than the limit of %zu bytes", d->max_bytes);
      m = big;
    }
    snprintf(d->errbuf, sizeof d->errbuf, "offset %llu, %s %llu: %s%.200s",
             (unsigned long long)off, unit_word(d), (unsigned long long)unit_no(d),
             d->err == -EBADMSG ? "invalid JSON: " : "", m);
    d->failing = true;
  }
  add_near(d->errbuf, sizeof d->errbuf, buf, len, at);
  return d->err;
}

/* Hands one piece (cut anywhere) to the lexer and the builder. */
static int parse_piece(kc_decoder *d, const char *buf, size_t len) {
  if (len == 0) return 0;
  uint64_t seq0 = d->unit_seq;
  bool active0 = d->unit_active;
  kc_obj_builder_input(d->b, d->lx, buf, len);
  if (kc_jsonlex_feed(d->lx, buf, len)) {
    kc_obj_builder_input_end(d->b);
    int rc = finish_error(d, buf, len);
    d->fed += len;
    return rc;
  }
  d->fed += len;
  /* The rest of this piece belongs to the object being built. */
  int brc = kc_obj_builder_input_end(d->b);
  if (brc) {
    failf(d, brc, "%s", kc_obj_builder_error(d->b));
    prefix_offset(d, d->fed);
    return d->err;
  }
  /* Bound the input bytes of one event/item across pieces, not only the
   * built text. */
  if (d->unit_active) {
    if (active0 && d->unit_seq == seq0) d->unit_bytes += len;
    if (d->unit_bytes > d->max_bytes) {
      d->failing = false;
      failf(d, -E2BIG, "larger than the limit of %zu bytes", d->max_bytes);
      prefix_offset(d, d->fed);
      return d->err;
    }
  }
  return 0;
}

int kc_decoder_feed(kc_decoder *d, const char *buf, size_t len) {
  if (d->err) return d->err;
  if (len == 0) return 0;
  if (!d->any_input)
    for (size_t i = 0; i < len && !d->any_input; i++)
      d->any_input = !(buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t');
  return parse_piece(d, buf, len);
}

int kc_decoder_finish(kc_decoder *d) {
  if (d->err) return d->err;
  /* An empty watch body is a watch that ended before any event; the lexer
   * would call it a premature EOF. */
  if (d->mode == KC_DECODE_WATCH && !d->any_input) return 0;
  if (kc_jsonlex_finish(d->lx)) return finish_error(d, NULL, 0);
  bool ok = d->mode == KC_DECODE_WATCH ? (d->ctx == C_TOP && !d->building) : d->ctx == C_DONE;
  if (!ok) {
    failf(d, -EBADMSG, "%s", d->mode == KC_DECODE_WATCH ? "truncated event" : "truncated list");
    prefix_offset(d, d->fed);
    return d->err;
  }
  return 0;
}

int kc_decoder_result(const kc_decoder *d) { return d->err; }

const char *kc_decoder_error(const kc_decoder *d) { return d->err ? d->errbuf : ""; }

const kc_list_meta *kc_decoder_list_meta(const kc_decoder *d) { return &d->meta; }

uint64_t kc_decoder_count(const kc_decoder *d) {
  return d->mode == KC_DECODE_WATCH ? d->nevents : d->meta.nitems;
}

uint64_t kc_decoder_rejected(const kc_decoder *d) { return d->nrejected; }

uint64_t kc_decoder_offset(const kc_decoder *d) { return d->fed; }

uint64_t kc_decoder_lexed_bytes(const kc_decoder *d) { return kc_jsonlex_offset(d->lx); }

/* --- kc_obj_parse: the lexer's events straight into a builder ------------- */

/* The builder in event mode (not raw): the object's text is re-emitted
 * minified whatever the input's spacing and escapes. The lexer's depth
 * stays at its maximum so that the builder's limit (KC_OBJ_MAX_DEPTH) and
 * message apply. */
static int p_null(void *c) { return kc_obj_builder_null(c) == 0; }
static int p_bool(void *c, int v) { return kc_obj_builder_bool(c, v != 0) == 0; }
static int p_number(void *c, const char *s, size_t n) {
  return kc_obj_builder_number(c, s, n) == 0;
}
static int p_string(void *c, const char *s, size_t n) {
  return kc_obj_builder_string(c, s, n) == 0;
}
static int p_key(void *c, const char *s, size_t n) { return kc_obj_builder_key(c, s, n) == 0; }
static int p_start_map(void *c) { return kc_obj_builder_start_map(c) == 0; }
static int p_end_map(void *c) { return kc_obj_builder_end_map(c) == 0; }
static int p_start_array(void *c) { return kc_obj_builder_start_array(c) == 0; }
static int p_end_array(void *c) { return kc_obj_builder_end_array(c) == 0; }

static const kc_jsonlex_callbacks parse_cbs = {
    .null = p_null,           .boolean = p_bool,         .number = p_number,
    .string = p_string,       .map_key = p_key,          .start_map = p_start_map,
    .end_map = p_end_map,     .start_array = p_start_array, .end_array = p_end_array,
};

kc_obj *kc_obj_parse_status(const char *json, size_t len, const kc_transform *t, kc_status *st,
                            char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  kc_obj_builder *b = kc_obj_builder_new(t, 0);
  if (!b) {
    kc_errf(err, errlen, "%s", errno == ENOMEM ? "out of memory" : "invalid transform");
    return NULL;
  }
  kc_jsonlex *lx = kc_jsonlex_new(&parse_cbs, b, 0);
  if (!lx) {
    kc_obj_builder_free(b);
    kc_errf(err, errlen, "out of memory");
    errno = ENOMEM;
    return NULL;
  }
  kc_obj *o = NULL;
  /* Where the text failed: the lexer's position in the one feed, or the
   * end of the text when it failed at the end. */
  size_t at = len;
  int rc = kc_jsonlex_feed(lx, json, len);
  if (rc) at = kc_jsonlex_pos(lx);
  else rc = kc_jsonlex_finish(lx);
  if (rc == -ENOMEM) {
    kc_errf(err, errlen, "out of memory");
    errno = ENOMEM;
  } else if (rc) {
    if (kc_obj_builder_error(b)[0])
      kc_errf(err, errlen, "offset %zu: %s", at, kc_obj_builder_error(b));
    else
      kc_errf(err, errlen, "offset %zu: invalid JSON: %s", at, kc_jsonlex_error(lx));
    errno = EBADMSG;
  } else if (!kc_obj_builder_done(b)) {
    kc_errf(err, errlen, "not a JSON object");
    errno = EBADMSG;
  } else {
    o = kc_obj_builder_finish(b);
    if (!o) kc_errf(err, errlen, "out of memory");
    else if (st) *st = *kc_obj_builder_status(b);
  }
  kc_jsonlex_free(lx);
  kc_obj_builder_free(b);
  return o;
}

kc_obj *kc_obj_parse(const char *json, size_t len, const kc_transform *t, char *err,
                     size_t errlen) {
  return kc_obj_parse_status(json, len, t, NULL, err, errlen);
}
