/* SPDX-License-Identifier: Apache-2.0 */
/* testutil: small helpers shared by the unit tests (linked into each): file
 * and fixture reading, parsing an object and asserting on its fields.
 *
 * Threads: any for tu_read_file; the test's own thread for the tu_fixture*
 * helpers (they fail the running cmocka test).
 * Errors: tu_read_file returns NULL (errno set) when the file cannot be read;
 * the tu_fixture* helpers never return on error: they fail the test with a
 * message naming the path.
 * Ownership: returned buffers are malloc'ed and objects carry one reference;
 * the caller frees them (free, kc_obj_unref).
 */
#ifndef TEST_TESTUTIL_H
#define TEST_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "watch/decode.h"

/* The tests' fixtures (real API objects and watch streams, origin in
 * tests/fixtures/SOURCES.md) are read from KC_FIXTURES_DIR: the absolute
 * path of tests/fixtures, which the Makefile passes to every unit test and
 * bench object, so a test finds them from any working directory. */
#ifndef KC_FIXTURES_DIR
#error "KC_FIXTURES_DIR (the absolute path of tests/fixtures) is set by the Makefile"
#endif

/* Real monotonic milliseconds, for a test's own deadlines (kc_clock may be
 * the manual clock). Any thread. */
uint64_t tu_mono_ms(void);

/* The whole file at path, NUL-terminated (binary-safe: *len, if not NULL,
 * is its length without the NUL). */
char *tu_read_file(const char *path, size_t *len);

/* The fixture KC_FIXTURES_DIR "/" NAME (e.g. "objects/pod-k9s-sidecar.json"), as
 * tu_read_file. */
char *tu_fixture(const char *name, size_t *len);

/* The object fixture KC_FIXTURES_DIR "/objects/" NAME parsed with transform t
 * (NULL: none). */
kc_obj *tu_fixture_obj(const char *name, const kc_transform *t);

/* json[0..len) parsed (no transform); fails the test naming the text. */
kc_obj *tu_parse(const char *json, size_t len);
/* Fail the test unless the value at path (kobj.h's paths) of o is the
 * string want / JSON true. */
void tu_str_at(const kc_obj *o, const char *path, const char *want);
void tu_true_at(const kc_obj *o, const char *path);

/* Captures what is written to stderr (fd 2, e.g. daemon/base/log.h lines)
 * between tu_stderr_begin and tu_stderr_end, which returns it (malloc'ed,
 * NUL-terminated) and restores stderr. Not nested. */
void tu_stderr_begin(void);
char *tu_stderr_end(void);

/* Writes a fresh self-signed ECDSA certificate with common name cn and its
 * key as PEM to cert_path and key_path (replaced by rename, as a Secret
 * volume swaps them); fails the test on error. */
void tu_write_cert_pair(const char *cert_path, const char *key_path, const char *cn);

/* Undoes the two logfmt escapes that change message text, \" and \\, in
 * place, so a test can look for a message holding quotes in captured log
 * lines (base/log.h: text lines are logfmt). Returns log. */
char *tu_logfmt_plain(char *log);

#endif
