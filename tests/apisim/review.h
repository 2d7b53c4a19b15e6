/* SPDX-License-Identifier: Apache-2.0 */
/* review: the two reviews a server that delegates authentication and
 * authorization to the API server sends (kctrld's secure metrics), served
 * under --rbac:
 *  - POST /apis/authentication.k8s.io/v1/tokenreviews: spec.token is
 *    looked up in --token-auth-file; status.authenticated and status.user
 *    (username, groups: the file's and the implied ones, rbac.h) or
 *    status.error;
 *  - POST /apis/authorization.k8s.io/v1/subjectaccessreviews with
 *    spec.nonResourceAttributes {path, verb}: allowed when a
 *    ClusterRoleBinding binds spec.user (or one of spec.groups) to a
 *    ClusterRole with a rule whose nonResourceURLs has the path ("*", or a
 *    prefix ending in "*") and whose verbs have the verb (or "*"), as
 *    kube-apiserver's RBAC authorizer. spec.resourceAttributes are not
 *    evaluated: allowed false, with a reason saying so.
 * The caller must be allowed to create the review (sim_rbac_allow): the
 * --token superuser always is. 201 with the review and its status; 400 for
 * a body that is not one; without --rbac, 404 as any unserved group.
 *
 * Threads: any connection thread (takes sim_mu for the store).
 * Errors: answered in resp. Ownership: nothing kept.
 */
#ifndef APISIM_REVIEW_H
#define APISIM_REVIEW_H

#include <stdbool.h>

#include "server.h"

/* true when req is for one of the two reviews (answered in resp). */
bool sim_review_handle(struct sim_req *req, struct sim_resp *resp);

#endif
