/* SPDX-License-Identifier: Apache-2.0 */
/* decodepool: decodes LIST and WATCH response bodies off the loop thread.
 *
 * The loop only routes bytes: a reflector hands each body chunk to its
 * response's stream (kc_dstream_feed copies it and returns at once); a pool
 * thread runs the stream's decoder (decode.h) on the queued chunks, in
 * order, one thread at a time per stream (different streams decode in
 * parallel); the finished objects and events come back to the loop through
 * one uv_async and are delivered there, in stream order, to the stream's
 * callbacks, at most 1,024 per stream and loop turn (the rest in the next
 * turn, after a poll for I/O, so a budget full of small objects does not
 * hold the loop). For a bulk stream (kc_dstream_set_bulk: a list) the pool thread
 * wakes the loop once per 64 results (at once for a continue token) while
 * more received input is queued, rather than once per chunk; the last queued
 * chunk's results are never held. So the store is still written only by the
 * loop, a relist's replace stays atomic (the reflector collects items as
 * before), and a slow decode (a 3 MiB object in 1-byte chunks) never delays
 * Lease renewal, other watches, timers or /metrics.
 *
 * Feeds of less than 16 KiB are gathered on the loop into pieces of up to
 * 16 KiB before a pool thread sees them: a piece is queued when full, at the
 * end of a loop iteration in which a newline came (a watch event may have
 * ended) and otherwise at most 5 ms after that iteration. A pool thread is
 * woken for queued input that may end an event (a newline), for 256 KiB of
 * one object without one (a quarter of a smaller budget), when the stream is
 * full, or by that 5 ms timer. So neither the decoder's
 * cost nor the pool's wake-ups depend on how the server cut the body, a
 * 1-byte feed costs the loop a memcpy, and an event ended by a newline is
 * not delayed.
 *
 * Memory in flight is bounded per stream: input bytes queued plus the bytes
 * of decoded objects not yet delivered. When they reach the budget,
 * kc_dstream_feed refuses the chunk (KC_DSTREAM_FULL): the caller pauses the
 * transfer (the socket is no longer read) and calls feed again after the
 * resume callback, which runs once the stream has drained below half.
 *
 * Held streams (pipelined LIST pages, reflector.h "Pipelined pages"): a
 * stream set held accepts and budgets input (and its end) like any other,
 * but no pool thread decodes it and nothing is delivered until it is
 * released; then it decodes what was queued, in order. So the next page's
 * bytes can arrive while the page before is still decoded, and its objects
 * still come after all of that page's. The byte budget of a held stream is
 * its own: the caller splits its budget between the two streams
 * (kc_dstream_set_budget) so that both together stay within it. Only pooled
 * streams can be held.
 *
 * LIST metadata: when the list's metadata object has been decoded (the API
 * server sends it before the items), list_continue runs on the loop with
 * its continue token, in stream order with the items (after the items
 * before it, before the items after it), through the same hand-off as the
 * objects. No second scan of the bytes on the loop.
 *
 * A pool of 0 threads (or a NULL pool) decodes inline, inside feed, on the
 * calling thread: the callbacks then run from within kc_dstream_feed and
 * kc_dstream_finish (tests, --decode-threads 0).
 *
 * Threads: kc_decode_pool_new/free and every kc_dstream_* function: loop
 * thread only. Callbacks run on the loop thread. Decoding (the decoder and
 * the kobj builder) runs on pool threads; objects are handed over under the
 * stream's mutex (the happens-before edge for their contents).
 * Errors: 0 or a negative errno.
 * Ownership: objects passed to callbacks are borrowed for the call
 * (kc_obj_ref to keep one), as with decode.h.
 */
#ifndef KC_DECODEPOOL_H
#define KC_DECODEPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "watch/decode.h"

typedef struct kc_decode_pool kc_decode_pool;
typedef struct kc_dstream kc_dstream;

/* One thread per core beyond the loop's, at least one. */
unsigned kc_decode_pool_default_threads(void);

/* Starts `threads` decode threads (0: none, streams decode inline). */
int kc_decode_pool_new(uv_loop_t *loop, unsigned threads, kc_decode_pool **out);
/* Stops and joins the threads. Every stream must be closed before. The
 * async handle closes with the loop's next iteration: run the loop
 * afterwards. NULL is a no-op. */
void kc_decode_pool_free(kc_decode_pool *p);
unsigned kc_decode_pool_threads(const kc_decode_pool *p);

typedef struct kc_dstream_callbacks {
  /* Return 0 to go on, a negative errno to stop: the stream then ends with
   * that error (done() follows, no more item/event). */
  int (*item)(void *ud, kc_obj *obj);                 /* LIST */
  int (*event)(void *ud, const kc_watch_event *ev);   /* WATCH */
  /* An object the decoder skipped (decode.h "Rejected objects"), in stream
   * order with the others. May be NULL. */
  int (*reject)(void *ud, const kc_decode_reject *rj);
  /* Feed may be called again after it returned KC_DSTREAM_FULL. */
  void (*resume)(void *ud);
  /* Exactly once: after kc_dstream_finish once every decoded object was
   * delivered (rc: the decoder's finish result, or the first error), or
   * earlier when decoding failed (rc < 0; the caller stops its transfer and
   * may still call kc_dstream_finish, which then does nothing). Not called
   * after kc_dstream_close. The stream may be closed inside. */
  void (*done)(void *ud, int rc);
  /* LIST: the list's metadata was decoded; `continue_token` is its
   * metadata.continue ("" on the last page; borrowed for the call). Once per
   * metadata object, in stream order. May be NULL. */
  int (*list_continue)(void *ud, const char *continue_token);
} kc_dstream_callbacks;

#define KC_DSTREAM_DEFAULT_BUDGET (8u << 20)

/* budget: bytes in flight (0: KC_DSTREAM_DEFAULT_BUDGET). `t` is copied (its
 * capture is borrowed, as by kc_decoder_new). Returns NULL with errno. */
kc_dstream *kc_dstream_new(kc_decode_pool *p, enum kc_decode_mode mode, const kc_transform *t,
                           const kc_dstream_callbacks *cbs, void *ud, size_t budget);

enum { KC_DSTREAM_FULL = 1 };
/* Queues a copy of the chunk: 0, KC_DSTREAM_FULL (not taken: pause and wait
 * for resume), or a negative errno (the stream failed; done() has run or
 * runs, inline mode: the decode error). */
int kc_dstream_feed(kc_dstream *s, const char *buf, size_t len);
/* End of input. `complete`: the body ended normally (the decoder's finish
 * checks that nothing is cut off); false: the transfer broke, objects and
 * events decoded so far are still delivered and the cut-off rest is
 * dropped. done() follows (inline mode: before this returns). */
void kc_dstream_finish(kc_dstream *s, bool complete);
/* Drops the stream: no callback runs afterwards; queued work is discarded.
 * Safe inside the stream's own callbacks. NULL is a no-op. */
void kc_dstream_close(kc_dstream *s);

/* Held (true): input is queued and counted against the budget but not
 * decoded; kc_dstream_finish is remembered. Released (false): decoding of
 * what is queued starts (done() may follow later, never inside this call).
 * Set it right after kc_dstream_new, before the first feed. -EINVAL for an
 * inline stream (no pool threads): it cannot queue. */
int kc_dstream_set_held(kc_dstream *s, bool held);
/* Changes the byte budget (0: the default). A paused stream that is now
 * below half of it is resumed: its resume callback runs inside this call. */
void kc_dstream_set_budget(kc_dstream *s, size_t budget);

/* Valid in done() and afterwards (until close): "" while no error. */
const char *kc_dstream_error(const kc_dstream *s);
/* LIST metadata; complete in done() with rc == 0. */
const kc_list_meta *kc_dstream_list_meta(const kc_dstream *s);

/* Marks a new stream, before its first feed, as a list (LIST pages or a
 * streaming list's initial events): its results may reach the loop in
 * batches of up to 64 while more input is queued (above). An event that
 * ends the initial events ends that: the watch after it goes event by event. */
void kc_dstream_set_bulk(kc_dstream *s);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Objects or events delivered to the callbacks so far. */
uint64_t kc_dstream_count(const kc_dstream *s);
/* Bytes in flight now (input queued + objects not yet delivered). */
size_t kc_dstream_inflight(const kc_dstream *s);
/* Times a pool thread woke the loop for this stream's results. */
uint64_t kc_dstream_wakes(kc_dstream *s);
/* CPU seconds pool threads spent on this stream (decoding it and handing
 * its results over; 0 inline), complete once done() ran (bench seam:
 * bench_chunking's decode column). */
double kc_dstream_decode_seconds(const kc_dstream *s);
/* Pieces pool threads handed to this stream's decoder (0 inline); read it
 * once done() ran. */
uint64_t kc_dstream_decode_feeds(const kc_dstream *s);
/* Times a pool thread took the stream up to decode what was queued (0
 * inline); read it once done() ran. */
uint64_t kc_dstream_decode_runs(const kc_dstream *s);

#endif
