/* SPDX-License-Identifier: Apache-2.0 */
/* isolate_wire: the line format between the daemon and a plugin child
 * (isolate.h, docs/plugins.md "Process isolation"). One message is one line:
 * fields separated by TAB, ended by LF; inside a field '\\', TAB and LF are
 * written as "\\\\", "\\t" and "\\n" (so object JSON, pretty or not, travels
 * as it is, and a line never holds a raw LF). The first field names the
 * message ("init", "rec", "call", "ret", "res", "ready", "fail"); what
 * follows is per message (isolate.c lists them).
 *
 * Owns: nothing but the field array of a parsed message (kc_iso_msg).
 * Threads: any; a message is used by one thread at a time.
 * Errors: kc_iso_parse returns 0, -EPROTO (an unknown escape, a raw LF in
 * the line, no fields), -E2BIG (more than KC_ISO_MAX_FIELDS fields) or
 * -ENOMEM; kc_iso_int -EPROTO for a field that is no integer or absent.
 * Ownership: a parsed message's fields point into the line it was parsed
 * from (unescaped in place, each NUL-terminated): keep the line while the
 * message is used. Writers append to the caller's kc_buf (sticky error).
 * Untrusted input: the daemon parses what a plugin child writes
 * (tests/fuzz/fuzz_isolate_wire.c).
 */
#ifndef KC_ISOLATE_WIRE_H
#define KC_ISOLATE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "kube/kobj.h"
#include "base/kstr.h"

/* A cache_list answer carries one field per object: a bound on the array. */
#define KC_ISO_MAX_FIELDS (1u << 20)

typedef struct kc_iso_msg {
  kc_str *f; /* f[0..n): the fields, each NUL-terminated in the line */
  size_t n, cap;
} kc_iso_msg;

/* Starts a message named name (appends to b). */
void kc_iso_begin(kc_buf *b, const char *name);
/* Appends one field (escaped); NULL is written as an empty field. */
void kc_iso_put(kc_buf *b, const char *p, size_t len);
/* One field holding an object's whole JSON text (kobj.h: shared pieces
 * included, written span by span without a contiguous copy). */
void kc_iso_put_obj(kc_buf *b, const kc_obj *o);
void kc_iso_puts(kc_buf *b, const char *s);
void kc_iso_puti(kc_buf *b, int64_t v);
/* Ends the message (LF). */
void kc_iso_end(kc_buf *b);

/* Splits line[0..len) (without its LF; line[len] must be writable, as a
 * kc_buf's NUL is) into m's fields, unescaping in place. m is reset first;
 * free it with kc_iso_msg_free. */
int kc_iso_parse(char *line, size_t len, kc_iso_msg *m);
void kc_iso_msg_free(kc_iso_msg *m);

/* Field i is the text s. */
bool kc_iso_is(const kc_iso_msg *m, size_t i, const char *s);
/* Field i as a decimal int64. 0 or -EPROTO. */
int kc_iso_int(const kc_iso_msg *m, size_t i, int64_t *out);
/* Field i as a C string ("" when absent). */
const char *kc_iso_str(const kc_iso_msg *m, size_t i);

#endif
