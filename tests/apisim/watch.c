/* SPDX-License-Identifier: Apache-2.0 */
#include "watch.h"

#include "table.h"

#include <errno.h>
#include <stdio.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

atomic_ullong sim_events_sent;
unsigned sim_bookmark_interval_ms = 60000;

static atomic_uint drop_gen;
/* Watches of a generation below this one end with a broken connection. */
static atomic_uint reset_upto;
static atomic_int open_watches;

struct sim_watch {
  struct sim_rtype *rt;
  struct sim_coll *coll;
  struct sim_filter filter;
  bool bookmarks, meta_only;
  uint64_t seq;             /* next history event to examine */
  bool seq_set;
  uint64_t from_rv;
  struct sim_obj **initial;
  size_t ninitial, iinitial;
  bool initial_end_bookmark;
  uint64_t init_rv;
  uint64_t deadline, next_bookmark;
  bool expired;
  char *expired_msg;
  size_t chunk_split;
  bool stall;
  int reset_after, sent;
  unsigned gen;
  int fd;
  struct sim_buf out;
  size_t outpos;
  bool ending; /* flush out, then end */
  bool abort_conn;
  int table;          /* 0 or the SIM_TABLE_* include of Table events */
  bool table_headers; /* the column definitions went out */
  unsigned event_delay_ms;
};

bool sim_filter_match(void *arg, const struct sim_obj *o)
{
  const struct sim_filter *f = arg;
  if (f->ns && strcmp(f->ns, o->ns) != 0) return false;
  if (f->has_lsel && !sim_lsel_match(&f->lsel, jv_geta(o->dom, "metadata", "labels", (const char *)NULL)))
    return false;
  for (size_t i = 0; f->has_fsel && i < f->fsel.n; i++) {
    const struct sim_freq *r = &f->fsel.r[i];
    char *v = sim_field_value(o->dom, r->field);
    bool eq = strcmp(v, r->value) == 0;
    free(v);
    if (eq == r->neq) return false;
  }
  if (f->has_ssel && !sim_shardsel_match(&f->ssel, o->dom)) return false;
  return true;
}

void sim_filter_free(struct sim_filter *f)
{
  free(f->ns);
  sim_lsel_free(&f->lsel);
  sim_fsel_free(&f->fsel);
  sim_shardsel_free(&f->ssel);
}

static void put_type_prefix(struct sim_buf *b, const struct sim_rtype *rt, const char *body,
                            size_t blen)
{
  sim_buf_printf(b, "{\"kind\":\"%s\",\"apiVersion\":\"%s\"", rt->kind, rt->gv);
  if (blen > 2) {
    sim_buf_putc(b, ',');
    sim_buf_put(b, body + 1, blen - 1);
  } else {
    sim_buf_putc(b, '}');
  }
}

void sim_write_obj(struct sim_buf *b, const struct sim_rtype *rt, const struct sim_obj *o,
                   bool with_type, bool meta_only)
{
  if (meta_only) {
    sim_buf_puts(b, "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":");
    const jv *md = jv_get(o->dom, "metadata");
    if (md) jv_write(b, md);
    else sim_buf_puts(b, "{}");
    sim_buf_putc(b, '}');
  } else if (with_type) {
    put_type_prefix(b, rt, o->body, o->blen);
  } else {
    sim_buf_put(b, o->body, o->blen);
  }
}

void sim_write_event(struct sim_buf *b, const char *type, const struct sim_rtype *rt,
                     const struct sim_obj *o, uint64_t rv_override, bool meta_only)
{
  sim_buf_printf(b, "{\"type\":\"%s\",\"object\":", type);
  if (rv_override && rv_override != o->rv) {
    jv *d = jv_copy(o->dom);
    char rvs[24];
    snprintf(rvs, sizeof rvs, "%llu", (unsigned long long)rv_override);
    jv_set_str(jv_obj_ensure(d, "metadata"), "resourceVersion", rvs);
    struct sim_obj tmp = {.dom = d};
    struct sim_buf body = {0};
    jv_write(&body, d);
    tmp.body = body.p;
    tmp.blen = body.len;
    sim_write_obj(b, rt, &tmp, true, meta_only);
    sim_buf_free(&body);
    jv_free(d);
  } else {
    sim_write_obj(b, rt, o, true, meta_only);
  }
  sim_buf_puts(b, "}\n");
}

/* One ADDED/MODIFIED/DELETED event, as the object or as a one-row Table
 * (tests/apisim/table.h; column definitions in the first only). */
static void write_event(struct sim_watch *w, const char *type, struct sim_obj *o, uint64_t rvo)
{
  if (!w->table) {
    sim_write_event(&w->out, type, w->rt, o, rvo, w->meta_only);
    return;
  }
  struct sim_obj tmp = {0}, *src = o;
  struct sim_buf body = {0};
  if (rvo && rvo != o->rv) {
    tmp.dom = jv_copy(o->dom);
    char rvs[24];
    snprintf(rvs, sizeof rvs, "%llu", (unsigned long long)rvo);
    jv_set_str(jv_obj_ensure(tmp.dom, "metadata"), "resourceVersion", rvs);
    jv_write(&body, tmp.dom);
    tmp.body = body.p;
    tmp.blen = body.len;
    tmp.rv = rvo;
    src = &tmp;
  }
  char md[48];
  snprintf(md, sizeof md, "\"resourceVersion\":\"%llu\"", (unsigned long long)src->rv);
  sim_buf_printf(&w->out, "{\"type\":\"%s\",\"object\":", type);
  sim_table_json(&w->out, w->rt, &src, 1, w->table, !w->table_headers, md);
  sim_buf_puts(&w->out, "}\n");
  w->table_headers = true;
  sim_buf_free(&body);
  jv_free(tmp.dom);
}

static void write_bookmark(struct sim_watch *w, uint64_t rv, bool end)
{
  struct sim_buf *b = &w->out;
  if (w->meta_only)
    sim_buf_printf(b, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"%llu\"",
                   (unsigned long long)rv);
  else
    sim_buf_printf(b, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"%llu\"",
                   w->rt->kind, w->rt->gv, (unsigned long long)rv);
  if (!w->rt->is_crd && !w->meta_only) sim_buf_puts(b, ",\"creationTimestamp\":null");
  if (end) sim_buf_puts(b, ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}");
  sim_buf_puts(b, "}");
  if (!w->meta_only) sim_buf_puts(b, w->rt->bookmark_tail);
  sim_buf_puts(b, "}}\n");
}

struct sim_watch *sim_watch_new(struct sim_watch_opts *o, int fd)
{
  struct sim_watch *w = sim_xcalloc(1, sizeof *w);
  w->rt = o->rt;
  w->coll = o->rt->coll;
  w->filter = o->filter;
  memset(&o->filter, 0, sizeof o->filter);
  w->bookmarks = o->bookmarks;
  w->meta_only = o->meta_only;
  w->table = o->table;
  w->event_delay_ms = o->event_delay_ms;
  w->from_rv = o->from_rv;
  w->initial = o->initial;
  w->ninitial = o->ninitial;
  o->initial = NULL;
  w->initial_end_bookmark = o->initial_end_bookmark;
  w->init_rv = o->from_rv;
  uint64_t now = sim_now_ms();
  w->deadline = now + o->timeout_ms;
  w->next_bookmark = now + sim_bookmark_interval_ms;
  /* kube-apiserver sends a bookmark shortly before the deadline. */
  if (o->timeout_ms > 2000 && w->deadline - 2000 < w->next_bookmark) w->next_bookmark = w->deadline - 2000;
  w->expired = o->expired;
  w->expired_msg = o->expired_msg;
  o->expired_msg = NULL;
  w->chunk_split = o->chunk_split;
  w->stall = o->stall;
  w->reset_after = o->reset_after;
  w->gen = atomic_load(&drop_gen);
  w->fd = fd;
  atomic_fetch_add(&open_watches, 1);
  return w;
}

void sim_watch_set_conn(struct sim_watch *w, int fd, bool stall, int reset_after,
                        size_t chunk_split)
{
  w->fd = fd;
  if (stall) w->stall = true;
  if (reset_after >= 0) w->reset_after = reset_after;
  if (chunk_split) w->chunk_split = chunk_split;
}

void sim_watch_free(void *cls)
{
  struct sim_watch *w = cls;
  if (!w) return;
  for (size_t i = w->iinitial; i < w->ninitial; i++) sim_obj_unref(w->initial[i]);
  free(w->initial);
  sim_filter_free(&w->filter);
  sim_buf_free(&w->out);
  free(w->expired_msg);
  atomic_fetch_sub(&open_watches, 1);
  free(w);
}

void sim_watch_drop_all_locked(bool reset)
{
  unsigned gen = atomic_fetch_add(&drop_gen, 1) + 1;
  if (reset) atomic_store(&reset_upto, gen);
  pthread_cond_broadcast(&sim_cond);
}

int sim_watch_drop_all(void)
{
  pthread_mutex_lock(&sim_mu);
  atomic_fetch_add(&drop_gen, 1);
  int n = atomic_load(&open_watches);
  pthread_cond_broadcast(&sim_cond);
  pthread_mutex_unlock(&sim_mu);
  return n;
}

int sim_watch_count(void) { return atomic_load(&open_watches); }

static bool peer_gone(int fd)
{
  if (fd < 0) return false;
  struct pollfd p = {.fd = fd, .events = POLLRDHUP};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

struct pending {
  const char *type;
  struct sim_obj *obj; /* referenced */
  uint64_t rvo;
};

#define MAX_PENDING 512

/* Translates one history event into what this watch sees; queues it for
 * serialization after the lock is dropped. */
static void handle_event_locked(struct sim_watch *w, const struct sim_event *e,
                                struct pending *pend, size_t *npend)
{
  if (e->coll != w->coll || e->rv <= w->from_rv) return;
  bool now_m = sim_filter_match(&w->filter, e->obj);
  bool was_m = e->old && sim_filter_match(&w->filter, e->old);
  const char *type = NULL;
  const struct sim_obj *o = e->obj;
  uint64_t rvo = 0;
  switch (e->type) {
  case SIM_ADDED:
    if (now_m) type = "ADDED";
    break;
  case SIM_MODIFIED:
    if (now_m && was_m) type = "MODIFIED";
    else if (now_m) type = "ADDED";
    else if (was_m) {
      /* Stopped matching: DELETED with the previous content, new RV. */
      type = "DELETED";
      o = e->old;
      rvo = e->rv;
    }
    break;
  case SIM_DELETED:
    if (was_m || (!e->old && now_m)) type = "DELETED";
    break;
  }
  if (!type) return;
  pend[*npend].type = type;
  pend[*npend].obj = sim_obj_ref((struct sim_obj *)o);
  pend[*npend].rvo = rvo;
  (*npend)++;
}

static void fill(struct sim_watch *w)
{
  if (w->expired) {
    struct sim_details d = {0};
    sim_buf_puts(&w->out, "{\"type\":\"ERROR\",\"object\":");
    sim_status_json(&w->out, 410, "Expired", &d, w->expired_msg ? w->expired_msg : "too old resource version");
    sim_buf_puts(&w->out, "}\n");
    w->ending = true;
    return;
  }
  /* Initial events are serialized outside the lock (objects are immutable). */
  while (w->iinitial < w->ninitial && w->out.len < 256 * 1024) {
    struct sim_obj *o = w->initial[w->iinitial++];
    if (!w->stall) {
      write_event(w, "ADDED", o, 0);
      atomic_fetch_add_explicit(&sim_events_sent, 1, memory_order_relaxed);
      w->sent++;
    }
    sim_obj_unref(o);
  }
  if (w->out.len) return;
  if (w->initial_end_bookmark) {
    w->initial_end_bookmark = false;
    if (!w->stall) {
      write_bookmark(w, w->init_rv, true);
      return;
    }
  }
  struct pending pend[MAX_PENDING];
  size_t npend = 0;
  pthread_mutex_lock(&sim_mu);
  for (;;) {
    if (atomic_load(&sim_shutting_down) || atomic_load(&drop_gen) != w->gen) {
      w->ending = true;
      if (w->gen < atomic_load(&reset_upto)) w->abort_conn = true;
      break;
    }
    if (!w->seq_set) {
      w->seq = sim_event_seq_after_locked(w->from_rv);
      w->seq_set = true;
    }
    if (w->seq < sim_event_oldest_seq_locked()) {
      /* Fell out of the window (too slow): the watch cache drops such a
       * watcher with a plain end of stream. */
      w->ending = true;
      break;
    }
    struct sim_event e;
    uint64_t now = sim_now_ms(), held_until = 0;
    while (npend < MAX_PENDING && sim_event_at_locked(w->seq, &e)) {
      if (w->event_delay_ms && e.at_ms + w->event_delay_ms > now) {
        held_until = e.at_ms + w->event_delay_ms; /* latency: not yet */
        break;
      }
      w->seq++;
      if (!w->stall) handle_event_locked(w, &e, pend, &npend);
    }
    if (npend) break;
    if (now >= w->deadline) {
      w->ending = true;
      break;
    }
    if (w->bookmarks && !w->stall && now >= w->next_bookmark) {
      /* never past an event still held back */
      write_bookmark(w, held_until ? e.rv - 1 : sim_rv, false);
      w->next_bookmark = now + sim_bookmark_interval_ms;
      if (w->deadline > 2000 && now < w->deadline - 2000 && w->next_bookmark > w->deadline - 2000)
        w->next_bookmark = w->deadline - 2000;
      break;
    }
    uint64_t wake = w->deadline;
    if (w->bookmarks && w->next_bookmark < wake) wake = w->next_bookmark;
    if (held_until && held_until < wake) wake = held_until;
    if (wake > now + 1000) wake = now + 1000; /* check the peer once a second */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (wake - now) * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    pthread_cond_timedwait(&sim_cond, &sim_mu, &ts);
    if (sim_event_seq == w->seq && peer_gone(w->fd)) {
      w->abort_conn = true;
      w->ending = true;
      break;
    }
  }
  pthread_mutex_unlock(&sim_mu);
  /* Objects are immutable: serialize without holding the store lock. */
  for (size_t i = 0; i < npend; i++) {
    write_event(w, pend[i].type, pend[i].obj, pend[i].rvo);
    sim_obj_unref(pend[i].obj);
  }
  w->sent += (int)npend;
  atomic_fetch_add_explicit(&sim_events_sent, npend, memory_order_relaxed);
}

ssize_t sim_watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
  struct sim_watch *w = cls;
  (void)pos;
  while (w->outpos >= w->out.len) {
    w->out.len = 0;
    w->outpos = 0;
    if (w->abort_conn) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (w->ending) return MHD_CONTENT_READER_END_OF_STREAM;
    if (w->reset_after >= 0 && w->sent >= w->reset_after) return MHD_CONTENT_READER_END_WITH_ERROR;
    fill(w);
  }
  size_t n = w->out.len - w->outpos;
  if (n > max) n = max;
  if (w->chunk_split && n > w->chunk_split) n = w->chunk_split;
  memcpy(buf, w->out.p + w->outpos, n);
  w->outpos += n;
  return (ssize_t)n;
}
