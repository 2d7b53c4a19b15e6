/* SPDX-License-Identifier: Apache-2.0 */
/* review: the create-only review resources, answered from the simulator's
 * authenticators and RBAC (rbac.h) as kube-apiserver answers them:
 *  - authentication.k8s.io/v1 TokenReview: who spec.token is (a
 *    --token-auth-file user, or kubernetes-admin for the --token and
 *    --token-file tokens); status.audiences is spec.audiences, or the
 *    server's audience https://kubernetes.default.svc.cluster.local;
 *  - authentication.k8s.io/v1 SelfSubjectReview (`kubectl auth whoami`):
 *    the requester;
 *  - authorization.k8s.io/v1 SubjectAccessReview: whether spec.user with
 *    spec.groups may do spec.resourceAttributes or spec.nonResourceAttributes
 *    (a path such as /metrics with verb get);
 *  - authorization.k8s.io/v1 SelfSubjectAccessReview (`kubectl auth
 *    can-i`): the same for the requester.
 * Creating TokenReviews and SubjectAccessReviews is authorized like any
 * create (system:auth-delegator's rights); the two self reviews are allowed
 * to every authenticated user (system:basic-user). Nothing is stored; the
 * answer is 201 with the object and its status. Without authentication
 * configured the requester is kubernetes-admin; without --rbac every access
 * review is allowed.
 *
 * Threads: any connection thread.
 * Errors: answered as Status objects (400 for a body that is not JSON, 415
 * for another media type, 422 for a spec the server rejects).
 */
#ifndef APISIM_REVIEW_H
#define APISIM_REVIEW_H

#include "server.h"
#include "types.h"

/* Handles a request to the collection of rt (rt->review_only). */
void sim_review_handle(struct sim_req *req, const struct sim_rtype *rt, const char *ns,
                       const char *name, struct sim_resp *resp);

#endif
