/* SPDX-License-Identifier: Apache-2.0 */
/* protobuf: decoder for request bodies in the Kubernetes protobuf encoding
 * (Content-Type application/vnd.kubernetes.protobuf), which kubectl's
 * generators send (kubectl create configmap/secret/namespace/deployment/
 * serviceaccount/service, kubectl run). The body is the 4-byte magic "k8s\0" and a
 * runtime.Unknown message (typeMeta 1, raw 2, contentEncoding 3,
 * contentType 4); raw is the object message, decoded with field tables
 * written from the generated.proto files of k8s.io/api (core/v1, apps/v1,
 * authentication/v1, authorization/v1)
 * and k8s.io/apimachinery (meta/v1, runtime, intstr, resource).
 *
 * Covered kinds: v1 ConfigMap, Secret, Namespace, ServiceAccount, Pod,
 * Service (no load balancer ingress), apps/v1 Deployment, and TokenReview,
 * SelfSubjectReview (authentication.k8s.io/v1), SubjectAccessReview and
 * SelfSubjectAccessReview (authorization.k8s.io/v1; without extra and
 * selectors), as kubectl auth whoami and can-i send them; of the pod
 * template only the fields those generators set (containers with name,
 * image, command, args, workingDir, ports, env values, resources, imagePullPolicy, terminationMessage*, volumeMounts
 * and the scalar PodSpec fields). Anything else is refused, never dropped.
 * The JSON written follows the Go types' encoding/json output: unset
 * optional scalars, empty maps/lists and zero Times are left out.
 *
 * Threads: any thread; no shared state.
 * Errors: 0, -EINVAL (malformed: truncated varint or length, bad wire type,
 * missing magic) or -ENOTSUP (a kind or field outside the tables); *err
 * (malloc'd) then describes the problem with the message and field number.
 * Ownership: *out is a new DOM (caller frees) with apiVersion and kind set
 * from typeMeta.
 */
#ifndef APISIM_PROTOBUF_H
#define APISIM_PROTOBUF_H

#include <stddef.h>

#include "json.h"

#define SIM_PB_MEDIA_TYPE "application/vnd.kubernetes.protobuf"

int sim_pb_decode(const void *buf, size_t len, jv **out, char **err);

#endif
