/* SPDX-License-Identifier: Apache-2.0 */
/* kbuild_finish: the last step of kbuild.h's builder, kc_obj_builder_finish:
 * the finished object's layout in one allocation (the text with the object
 * type stamped in, the shared-value table, the capture record, the labels
 * sorted by key), and the capture record's reader (kc_obj_capture_open,
 * kc_capture_next_*). The builder is used by one thread at a time; the
 * reader on a finished object by any thread. */
#include "kube/kbuild.h"
#include "kube/kbuild_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/sharedtext.h"

/* Orders an object's label records by key; ctx is its json[]. */
static int label_cmp(const void *a, const void *b, void *ctx) {
  const kc_obj_lrec *x = a, *y = b;
  const char *json = ctx;
  int c = kc_str_cmp((kc_str){json + x->key_off, x->key_len}, (kc_str){json + y->key_off, y->key_len});
  if (c) return c;
  /* Equal keys (a duplicated JSON key): keep text order, the last one wins. */
  return x->key_off < y->key_off ? -1 : x->key_off > y->key_off;
}

/* Stamping the object type (kc_transform "Object type") edits the text
 * while it is copied into the object: at most an insertion after the '{'
 * and the replacement of the kind and apiVersion values, in text order. */
typedef struct tsplice {
  uint32_t at, cut; /* replaces cut bytes at offset at of the built text */
  const char *txt;
  uint32_t len;
} tsplice;

typedef struct tplan {
  tsplice sp[3];
  unsigned n;
  size_t grow;                 /* bytes added (never negative: see plan_type) */
  uint32_t kind_off, apiv_off; /* new offsets of stamped values, or NO_OFF */
} tplan;

/* Where byte x of the built text lands in the stamped text. */
static uint32_t remap(const tplan *p, uint32_t x) {
  int64_t d = 0;
  for (unsigned i = 0; i < p->n; i++)
    if (p->sp[i].at + p->sp[i].cut <= x) d += (int64_t)p->sp[i].len - (int64_t)p->sp[i].cut;
  return (uint32_t)((int64_t)x + d);
}

static bool field_is(const kc_obj_builder *b, enum field f, const char *lit, size_t n) {
  return b->f[f].off != NO_OFF && b->f[f].len == n && memcmp(b->out.p + b->f[f].off, lit, n) == 0;
}

#define POM "PartialObjectMetadata"
#define POM_AV "meta.k8s.io/v1"

static void plan_type(const kc_obj_builder *b, tplan *p) {
  p->n = 0;
  p->grow = 0;
  p->kind_off = p->apiv_off = NO_OFF;
  if (!b->type) return;
  bool hk = b->f[F_KIND].off != NO_OFF, ha = b->f[F_APIVERSION].off != NO_OFF;
  uint32_t kmem = (uint32_t)KIND_PRE_LEN + b->kind_len + 1; /* "kind":"K" */
  const char *k = b->type + KIND_PRE_LEN;
  const char *v = b->type + kmem + 1 + APIV_PRE_LEN;
  /* A metadata-only view of the watched type reports the real type. */
  bool view = hk && field_is(b, F_KIND, POM, sizeof POM - 1) &&
              (!ha || field_is(b, F_APIVERSION, POM_AV, sizeof POM_AV - 1)) &&
              !(b->kind_len == sizeof POM - 1 && memcmp(k, POM, sizeof POM - 1) == 0);
  if (!hk || !ha) {
    size_t i = 1;
    while (i < b->out.len && kc_json_is_ws(b->out.p[i])) i++;
    bool empty = i < b->out.len && b->out.p[i] == '}';
    tsplice s = {.at = 1, .cut = 0};
    if (!hk && !ha) {
      s.txt = b->type;
      s.len = b->type_len;
      p->kind_off = 1 + (uint32_t)KIND_PRE_LEN;
      p->apiv_off = 1 + kmem + 1 + (uint32_t)APIV_PRE_LEN;
    } else if (!hk) {
      s.txt = b->type;
      s.len = kmem + 1;
      p->kind_off = 1 + (uint32_t)KIND_PRE_LEN;
    } else {
      s.txt = b->type + kmem + 1;
      s.len = b->type_len - kmem - 1;
      p->apiv_off = 1 + (uint32_t)APIV_PRE_LEN;
    }
    if (empty) s.len--; /* no member follows: no comma */
    p->sp[p->n++] = s;
  }
  if (view) {
    tsplice sk = {b->f[F_KIND].off, b->f[F_KIND].len, k, b->kind_len};
    p->sp[p->n++] = sk;
    if (ha) {
      tsplice sa = {b->f[F_APIVERSION].off, b->f[F_APIVERSION].len, v, b->apiv_len};
      if (sa.at < sk.at) { /* keep text order */
        p->sp[p->n - 1] = sa;
        p->sp[p->n++] = sk;
      } else {
        p->sp[p->n++] = sa;
      }
      p->apiv_off = remap(p, sa.at);
    }
    p->kind_off = remap(p, sk.at);
  }
  for (unsigned i = 0; i < p->n; i++) p->grow += p->sp[i].len;
  for (unsigned i = 0; i < p->n; i++) p->grow -= p->sp[i].cut;
}

/* The capture record sits right after the text (8-aligned), before the
 * labels: found from json_len alone. Layout: u64 tag, u32 groups, u32 size
 * (whole record), then per group u32 count and count x (u32 len, bytes). */
#define CAP_HDR 16u

static size_t capture_offset(size_t json_len, unsigned nshared) {
  return kc_obj_tail_offset(json_len) + kc_obj_shared_table_size(nshared);
}

static size_t capture_size(const kc_obj_builder *b) {
  size_t n = CAP_HDR + 4 * (size_t)b->ngroups;
  for (size_t i = 0; i < b->ncent; i++) n += 4 + (size_t)b->cents[i].len;
  return n;
}

static unsigned char *put_u32(unsigned char *w, uint32_t v) {
  memcpy(w, &v, 4);
  return w + 4;
}

static void capture_write(const kc_obj_builder *b, unsigned char *w, size_t size) {
  memcpy(w, &b->ctag, 8);
  w = put_u32(w + 8, b->ngroups);
  w = put_u32(w, (uint32_t)size);
  for (uint32_t g = 0; g < b->ngroups; g++) {
    uint32_t cnt = 0;
    for (size_t i = 0; i < b->ncent; i++) cnt += b->cents[i].group == g;
    w = put_u32(w, cnt);
    for (size_t i = 0; cnt && i < b->ncent; i++) {
      const cent *c = &b->cents[i];
      if (c->group != g) continue;
      w = put_u32(w, c->len);
      memcpy(w, b->cvals.p + c->off, c->len);
      w += c->len;
    }
  }
}

bool kc_obj_capture_open(const kc_obj *obj, uint64_t tag, kc_capture_cursor *c) {
  if (!obj || !obj->captured || !tag) return false;
  const unsigned char *p =
      (const unsigned char *)obj + capture_offset(obj->json_len, obj->nshared);
  uint64_t t;
  uint32_t size;
  memcpy(&t, p, 8);
  memcpy(&size, p + 12, 4);
  if (t != tag) return false;
  c->p = p + CAP_HDR;
  c->end = p + size;
  c->left = 0;
  return true;
}

uint32_t kc_capture_next_group(kc_capture_cursor *c) {
  while (c->left) (void)kc_capture_next_value(c); /* the caller skipped some */
  if (c->end - c->p < 4) return 0;
  memcpy(&c->left, c->p, 4);
  c->p += 4;
  return c->left;
}

kc_str kc_capture_next_value(kc_capture_cursor *c) {
  uint32_t n;
  if (!c->left || c->end - c->p < 4) return (kc_str){NULL, 0};
  memcpy(&n, c->p, 4);
  c->left--;
  kc_str v = {(const char *)c->p + 4, n};
  c->p += 4 + (size_t)n;
  return v;
}

kc_obj *kc_obj_builder_finish(kc_obj_builder *b) {
  if (!b->done) {
    errno = EINVAL;
    return NULL;
  }
  tplan plan;
  plan_type(b, &plan);
  size_t len = b->out.len + plan.grow;
  size_t hdr = offsetof(kc_obj, json);
  size_t capoff = capture_offset(len, (unsigned)b->npend);
  size_t capsize = b->ctag ? capture_size(b) : 0;
  size_t laboff = capoff + ((capsize + 7) & ~(size_t)7);
  size_t total = laboff + b->nlabels * sizeof(kc_obj_lrec);
  kc_obj *o = len <= UINT32_MAX - 16 && capsize <= UINT32_MAX ? malloc(total) : NULL;
  if (!o) {
    errno = ENOMEM;
    return NULL;
  }
  memset(o, 0, hdr);
  if (b->ctag) {
    capture_write(b, (unsigned char *)o + capoff, capsize);
    o->captured = true;
  }
  atomic_init(&o->refs, 1);
  o->json_len = (uint32_t)len;
  if (plan.n == 0) {
    memcpy(o->json, b->out.p, b->out.len);
  } else {
    char *w = o->json;
    size_t from = 0;
    for (unsigned i = 0; i < plan.n; i++) {
      const tsplice *sp = &plan.sp[i];
      memcpy(w, b->out.p + from, sp->at - from);
      w += sp->at - from;
      memcpy(w, sp->txt, sp->len);
      w += sp->len;
      from = sp->at + sp->cut;
    }
    memcpy(w, b->out.p + from, b->out.len - from);
  }
  o->json[len] = '\0';
  _Static_assert((int)F_KIND == KC_OBJ_KIND && (int)F_APIVERSION == KC_OBJ_API_VERSION &&
                     (int)F_NAMESPACE == KC_OBJ_NAMESPACE && (int)F_NAME == KC_OBJ_NAME &&
                     (int)F_UID == KC_OBJ_UID && (int)F_RV == KC_OBJ_RESOURCE_VERSION &&
                     (int)F_CTS == KC_OBJ_CREATION_TIMESTAMP && (int)F_COUNT == KC_OBJ_NFIELDS,
                 "enum field is enum kc_obj_field");
  for (int i = 0; i < F_COUNT; i++)
    if (b->f[i].off != NO_OFF) o->field[i] = (kc_obj_sref){remap(&plan, b->f[i].off), b->f[i].len};
  if (plan.kind_off != NO_OFF) o->field[KC_OBJ_KIND] = (kc_obj_sref){plan.kind_off, b->kind_len};
  if (plan.apiv_off != NO_OFF)
    o->field[KC_OBJ_API_VERSION] = (kc_obj_sref){plan.apiv_off, b->apiv_len};
  o->generation = b->generation;
  o->deleting = b->deleting;
  if (b->npend) {
    kc_obj_shared_table *t = kc_obj_shared_table_at(o, len);
    atomic_init(&t->flat, NULL);
    for (size_t i = 0; i < b->npend; i++)
      t->hole[i] = (kc_obj_shared){b->pend[i].text, remap(&plan, b->pend[i].at), 0};
    o->nshared = (uint16_t)b->npend;
    b->npend = 0; /* the object holds the references now */
  }
  if (b->nlabels) {
    kc_obj_lrec *l = (kc_obj_lrec *)(void *)((char *)o + laboff);
    size_t n = b->nlabels;
    for (size_t i = 0; i < n; i++) {
      const lab *s = &b->labels[i];
      l[i] = (kc_obj_lrec){remap(&plan, s->koff), s->klen, remap(&plan, s->voff), s->vlen};
    }
    if (n <= 16) {
      for (size_t i = 1; i < n; i++) {
        kc_obj_lrec x = l[i];
        size_t j = i;
        while (j > 0 && label_cmp(&l[j - 1], &x, o->json) > 0) {
          l[j] = l[j - 1];
          j--;
        }
        l[j] = x;
      }
    } else {
      qsort_r(l, n, sizeof *l, label_cmp, o->json);
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
      if (w > 0 && l[w - 1].key_len == l[i].key_len &&
          !memcmp(o->json + l[w - 1].key_off, o->json + l[i].key_off, l[i].key_len))
        l[w - 1] = l[i];
      else
        l[w++] = l[i];
    }
    o->labels = l;
    o->nlabels = (uint32_t)w;
  }
  return o;
}

