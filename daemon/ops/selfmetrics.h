/* SPDX-License-Identifier: Apache-2.0 */
/* selfmetrics: the metrics of the daemon process itself and of its API
 * client, under the names, types, labels and buckets that dashboards built
 * for Go controllers query:
 *
 *  the Prometheus process collector (client_golang): process_cpu_seconds_total,
 *    process_resident_memory_bytes, process_virtual_memory_bytes,
 *    process_open_fds, process_max_fds, process_start_time_seconds
 *    (base/procstat.h, read when the registry is filled);
 *  client-go's REST client metrics (client/restmetrics.h):
 *    rest_client_requests_total{code,method,host},
 *    rest_client_request_duration_seconds{verb,host} (0.005 .. 60 s),
 *    and with an exec credential plugin rest_client_exec_plugin_call_total
 *    {code,call_status}, rest_client_exec_plugin_ttl_seconds and
 *    rest_client_exec_plugin_certificate_rotation_age (600 s .. 4 years).
 *
 * Owns: those families in a registry (metrics.h) and filling them from the
 * live figures. kctrld has no client-side request rate limiter (requests are
 * never held back before they are sent), so it reports no
 * rest_client_rate_limiter_duration_seconds, as client-go reports none for a
 * client without one.
 *
 * Context: the registry's thread (the loop thread in kctrld), every
 * function. Errors: 0 or a negative errno.
 */
#ifndef KC_SELFMETRICS_H
#define KC_SELFMETRICS_H

#include "base/metrics.h"

typedef struct kc_selfmetrics kc_selfmetrics;

/* Registers the families in reg; *out is freed with kc_selfmetrics_free. */
int kc_selfmetrics_new(kc_metrics *reg, kc_selfmetrics **out);
void kc_selfmetrics_free(kc_selfmetrics *s);
/* Sets every sample from the figures of now (the registry must have been
 * reset). A /proc that cannot be read leaves the process_* series out. */
int kc_selfmetrics_fill(const kc_selfmetrics *s);

#endif
