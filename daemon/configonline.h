/* SPDX-License-Identifier: Apache-2.0 */
/* configonline: what `kctrld --check-config --online` asks the API server
 * about a loaded config, with the credentials the daemon would use
 * (configcheck.h kc_configcheck_credentials), through the daemon's own
 * client (apiclient.h, discovery.h, kurl.h):
 *  - the credentials are accepted: GET /api; a 401 or 403 is reported with
 *    the server's code, reason and message, and nothing else is asked;
 *  - every informer's kind (explicit and the default ones controllers add)
 *    is served: discovery resolves it ("kind X is not served by G/V (did
 *    you mean Y?)" at its `kind:`);
 *  - the server accepts each informer's label and field selector and lets
 *    these credentials list the resource: a dry LIST with limit=1 per
 *    selector (and one without selectors when it has none) in the first of
 *    its namespaces; a 400 is reported at the selector's file:line:col with
 *    the server's Status message, a 403 at the informer.
 * Each problem is one line "file:line:col: message" (a line without
 * position for the server as a whole). A problem at a position that a line
 * of `already` (the offline checks' report, may be NULL) starts with is
 * left out: the offline check said it first.
 *
 * Context: the main thread of --check-config, before any loop of the
 * daemon exists: it runs a loop of its own until every answer came (each
 * request times out after 30 s). Needs kc_http_global_init.
 * Errors: 0 when everything checked out, -EINVAL with the lines in err
 * ('\n'-separated, up to KC_CONFIG_MAX_ERRORS), -ENOMEM, -EIO (no client).
 * Ownership: cfg and creds are borrowed.
 */
#ifndef KC_CONFIGONLINE_H
#define KC_CONFIGONLINE_H

#include <stdbool.h>
#include <stddef.h>

#include "client/kubeconfig.h"
#include "config/config.h"

int kc_configonline_run(const kc_config *cfg, const kc_kube_creds *creds, const char *already,
                        char *err, size_t errlen);

#endif
