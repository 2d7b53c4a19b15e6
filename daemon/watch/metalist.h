/* SPDX-License-Identifier: Apache-2.0 */
/* metalist: one paged, metadata-only LIST of a reflector's scope (its path,
 * selectors and shard selector) at a given resourceVersion and
 * resourceVersionMatch, for the checks that compare the server's state with
 * a cache: the history check before a resumed watch (reflector_verify.c) and
 * the periodic consistency check (cache/consistency.h).
 *
 * Each page is asked for as PartialObjectMetadataList and decoded on the
 * decode pool (decodepool.h; inline without one) with managedFields,
 * annotations, labels, ownerReferences and finalizers dropped: the checks
 * compare keys, uids and resourceVersions only. Every item goes to the
 * caller's item callback in list order; a page's continue token asks for
 * the next page; the list ends with exactly one call of done: every page
 * read, or the first failure (the URL does not fit, the request cannot
 * start, a transport error, a non-2xx answer, a body that does not decode,
 * an item callback's error, a continue token too long to follow). The
 * caller judges a failure: the result carries the page's HTTP outcome and
 * its decoding's.
 *
 * Owns: the page's request and decode stream, the continue token and the
 * list's resourceVersion. Borrows: the api, the pool and the scope, which
 * must outlive the list (kc_metalist_cancel first). A zeroed kc_metalist is
 * idle; its fields are private.
 *
 * Threads: loop thread only; the callbacks run on the loop. done may run
 * inside kc_metalist_start (a first page that cannot be sent). Once done
 * runs the list is idle: done may start it again or cancel it.
 */
#ifndef KC_METALIST_H
#define KC_METALIST_H

#include <stdbool.h>
#include <stddef.h>

#include "client/apiclient.h"
#include "kube/kobj.h"
#include "watch/decodepool.h"
#include "watch/reflector.h"

enum kc_metalist_end {
  KC_METALIST_COMPLETE,          /* every page read, every item handed over */
  KC_METALIST_FAILED,            /* a page's answer or its decoding failed (below) */
  KC_METALIST_URL_TOO_LONG,      /* a page's URL does not fit */
  KC_METALIST_NOT_SENT,          /* a page's request could not start: send_rc */
  KC_METALIST_CONTINUE_TOO_LONG, /* a continue token does not fit */
};

typedef struct kc_metalist_result {
  enum kc_metalist_end end;
  /* KC_METALIST_FAILED: the page's HTTP outcome (error -ECANCELED when the
   * decoding stopped while the response ran: an item callback's error or a
   * malformed body), whether its body went to a decode stream, that
   * stream's result and error text ("" none). */
  kc_api_result api;
  bool decoded;
  int decode_rc;
  const char *decode_error;
  int send_rc; /* KC_METALIST_NOT_SENT: kc_api_request's error */
  /* The list's metadata.resourceVersion (the first page that had one; ""
   * none). Borrowed for the call, like decode_error. */
  const char *resource_version;
} kc_metalist_result;

typedef struct kc_metalist_opts {
  kc_api *api;
  kc_decode_pool *pool;      /* NULL: decode inline */
  size_t budget;             /* decode bytes in flight per page; 0: the default */
  const kc_reflector *scope; /* path, selectors, page size */
  const char *rv;            /* NULL or "": a consistent read; copied */
  const char *match;         /* resourceVersionMatch with rv (NULL: none); a literal */
  bool with_limit;           /* pages of the scope's page size */
  const char *log_tag;       /* debug line per page: "<scope>: [what: ]GET <url>" */
  const char *what;          /* NULL: none */
  /* 0 to go on; a negative errno ends the list (KC_METALIST_FAILED). The
   * object is borrowed for the call (kc_obj_ref to keep it). */
  int (*item)(void *ud, kc_obj *obj);
  void (*done)(void *ud, const kc_metalist_result *res);
  void *ud;
} kc_metalist_opts;

typedef struct kc_metalist {
  kc_metalist_opts o;
  char rv[64];
  kc_api_call *req;
  kc_dstream *stream;   /* the page's decoding */
  kc_api_result result; /* the page's answer, kept until the stream is done */
  bool http_done;
  char cont[1024];      /* the next page's continue token */
  char list_rv[64];
} kc_metalist;

/* Cancels any list under way and starts one (first page) with `o`. */
void kc_metalist_start(kc_metalist *ml, const kc_metalist_opts *o);
/* Stops the list: no callback runs afterwards. Idle: a no-op. */
void kc_metalist_cancel(kc_metalist *ml);

#endif
