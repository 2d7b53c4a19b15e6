/* SPDX-License-Identifier: Apache-2.0 */
/* history: see history.h. */
#include "watch/history.h"

#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "kube/kbuild.h"
#include "watch/decode.h"

static void copy_str(char *dst, size_t cap, kc_str s) {
  size_t n = s.len < cap - 1 ? s.len : cap - 1;
  if (n) memcpy(dst, s.ptr, n);
  dst[n] = 0;
}

void kc_history_forget(kc_history *h) {
  for (unsigned i = 0; i < KC_HISTORY_WITNESSES; i++) h->witness[i].set = false;
  h->seen = 0;
}

static void set_witness(kc_history_witness *w, const kc_obj *obj, uint64_t n) {
  copy_str(w->ns, sizeof w->ns, kc_obj_namespace(obj));
  copy_str(w->name, sizeof w->name, kc_obj_name(obj));
  copy_str(w->uid, sizeof w->uid, kc_obj_uid(obj));
  copy_str(w->rv, sizeof w->rv, kc_obj_resource_version(obj));
  w->rvn = n;
  w->set = true;
}

/* Witness 0 is the cached object with the highest resourceVersion (the
 * newest we know; a non-numeric RV only replaces a missing one); the others
 * keep a uniform sample (reservoir sampling). An object already sampled
 * gets its newer RV. */
void kc_history_note(kc_history *h, const kc_obj *obj, uint64_t *rng) {
  if (!kc_obj_name(obj).len || kc_obj_name(obj).len >= sizeof h->witness[0].name ||
      kc_obj_namespace(obj).len >= sizeof h->witness[0].ns ||
      kc_obj_uid(obj).len >= sizeof h->witness[0].uid ||
      kc_obj_resource_version(obj).len >= sizeof h->witness[0].rv)
    return;
  uint64_t n = kc_rv_number(kc_obj_resource_version(obj));
  kc_history_witness *top = &h->witness[0];
  if (!top->set || (n != 0 && n > top->rvn)) set_witness(top, obj, n);
  for (unsigned i = 1; i < KC_HISTORY_WITNESSES; i++) {
    kc_history_witness *w = &h->witness[i];
    if (w->set && kc_str_eq_c(kc_obj_name(obj), w->name) &&
        kc_str_eq_c(kc_obj_namespace(obj), w->ns)) {
      set_witness(w, obj, n);
      return;
    }
  }
  uint64_t seen = ++h->seen;
  const unsigned k = KC_HISTORY_WITNESSES - 1;
  if (seen <= k) {
    set_witness(&h->witness[seen], obj, n);
    return;
  }
  uint64_t j = kc_xorshift64s(rng) % seen;
  if (j < k) set_witness(&h->witness[1 + j], obj, n);
}

void kc_history_drop(kc_history *h, const kc_obj *obj) {
  for (unsigned i = 0; i < KC_HISTORY_WITNESSES; i++)
    if (h->witness[i].set && kc_str_eq_c(kc_obj_name(obj), h->witness[i].name) &&
        kc_str_eq_c(kc_obj_namespace(obj), h->witness[i].ns))
      h->witness[i].set = false;
}

bool kc_history_any(const kc_history *h) {
  bool any = false;
  for (unsigned i = 0; i < KC_HISTORY_WITNESSES; i++) any |= h->witness[i].set;
  return any;
}

void kc_history_begin(kc_history *h) { h->next = 0; }

static bool same_witness(const kc_history_witness *a, const kc_history_witness *b) {
  return strcmp(a->name, b->name) == 0 && strcmp(a->ns, b->ns) == 0;
}

const kc_history_witness *kc_history_next(kc_history *h) {
  /* Each object once: a sampled one may be the newest one too. */
  while (h->next < KC_HISTORY_WITNESSES &&
         (!h->witness[h->next].set ||
          (h->next > 0 && h->witness[0].set && same_witness(&h->witness[h->next], &h->witness[0]))))
    h->next++;
  return h->next == KC_HISTORY_WITNESSES ? NULL : &h->witness[h->next];
}

bool kc_history_judge(const kc_history *h, const char *body, size_t len, const char *resume_rv,
                      char *why, size_t cap) {
  const kc_history_witness *w = &h->witness[h->next];
  char err[256];
  static const kc_transform meta = {.metadata_only = true};
  kc_obj *o = kc_obj_parse(body ? body : "", len, &meta, err, sizeof err);
  if (!o) {
    snprintf(why, cap, "GET of %s%s%s: malformed answer: %s", w->ns, w->ns[0] ? "/" : "", w->name,
             err);
    return false;
  }
  uint64_t n = kc_rv_number(kc_obj_resource_version(o));
  uint64_t resume = kc_rv_number(kc_str_c(resume_rv));
  bool unchanged = kc_str_eq_c(kc_obj_uid(o), w->uid) && kc_str_eq_c(kc_obj_resource_version(o), w->rv);
  /* The cache holds the state at resume_rv: in the same history the object
   * is still that state, or it changed after resume_rv. */
  bool changed_later = resume && n > resume;
  if (unchanged || changed_later) {
    kc_obj_unref(o);
    return true;
  }
  snprintf(why, cap,
           "%s%s%s: cached uid %s resourceVersion %s, server uid %.*s "
           "resourceVersion %.*s",
           w->ns, w->ns[0] ? "/" : "", w->name, w->uid, w->rv, (int)kc_obj_uid(o).len,
           kc_obj_uid(o).ptr ? kc_obj_uid(o).ptr : "", (int)kc_obj_resource_version(o).len,
           kc_obj_resource_version(o).ptr ? kc_obj_resource_version(o).ptr : "");
  kc_obj_unref(o);
  return false;
}

void kc_history_passed(kc_history *h) { h->next++; }
