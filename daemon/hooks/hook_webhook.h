/* SPDX-License-Identifier: Apache-2.0 */
/* hook_webhook: webhook hooks (docs/hooks.md), the second transport of
 * kctrld.io/hook/v1 next to exec hooks (hook_exec.h): a built-in plugin
 * (struct kctrld_plugin compiled into the daemon, instantiated by
 * plugin_host with the controller's kc_controller_spec as init argument)
 * whose reconcile builds the request from the cache (hook_host.h), POSTs it
 * as application/json to hook.webhook.url, parses the body with
 * kc_hook_response_parse (the same size limit) and performs the actions
 * through the host table (kc_hook_perform), exactly as exec hooks do.
 *
 * The POST is a blocking libcurl easy transfer on the reconcile's worker
 * thread (like the host's own API writes, hostenv.c), not on the loop: the
 * loop never waits for a hook. One easy handle per worker slot (workers:
 * N -> up to N handles, created on first use), so connections are kept
 * alive between reconciles. TLS verification is on by default (caFile or
 * the system store), a client certificate is optional.
 *
 * Every failure is a reconcile error (so the workqueue's per-key backoff
 * applies) naming the URL without its query (which may hold a secret), and
 * the status and reason or the transport error: `webhook
 * https://h:8443/sync: HTTP 500 Internal Server Error: <body start>`,
 * `webhook https://h/sync: SSL certificate problem: ...`.
 *
 * Owns (per instance): copies of the URL and TLS file names, the kinds,
 * the slots with their easy handles, the per-key attempt counters.
 * Threads: init/fini as plugin.h; reconcile on worker threads,
 * concurrently for different keys (a mutex guards only the choice of a
 * slot and the counters). Errors: init returns 0, -EINVAL (no webhook
 * spec), -ENOENT (a TLS file is missing), -EPERM (the client key file fails
 * the credential permission rule of fileperm.h) or -ENOMEM.
 * Ownership: the spec is borrowed during init only.
 */
#ifndef KC_HOOK_WEBHOOK_H
#define KC_HOOK_WEBHOOK_H

#include <stddef.h>

#include "config/config.h"
#include "kctrld/plugin.h"

/* The checks init makes, for --check-config too (configcheck.c): caFile,
 * clientCertFile and clientKeyFile exist; the key file is not writable by
 * others (fileperm.h; readable by others only warns). 0, -ENOENT, -EPERM,
 * -EINVAL with a message naming the file in err. Any thread. */
int kc_hook_webhook_check(const kc_hook_webhook_spec *wh, char *err, size_t errlen);

/* url without userinfo, query and fragment ("https://h:8443/sync"), for
 * logs and errors; a URL libcurl cannot parse is written as "(bad URL)". */
void kc_hook_webhook_redact(const char *url, char *out, size_t cap);

/* The reason phrase of an HTTP/1.x status line ("HTTP/1.1 500 Internal
 * Server Error\r\n" -> "Internal Server Error"), control characters
 * blanked; "" when line is no status line or has none. out: cap bytes, NUL
 * terminated. Untrusted input (the webhook's); tests/fuzz/fuzz_webhook.c. */
void kc_hook_webhook_status_reason(const char *line, size_t len, char *out, size_t cap);

/* The start of an error body (at most 200 bytes) as one printable line,
 * for the reconcile error; trailing blanks dropped. */
void kc_hook_webhook_excerpt(const char *body, size_t len, char *out, size_t cap);

/* The built-in plugin table ("webhook-hook"); static storage. */
const struct kctrld_plugin *kc_hook_webhook_plugin(void);

#endif
