/* SPDX-License-Identifier: Apache-2.0 */
/* rbac: `--rbac` authorization (off by default) and `--token-auth-file`
 * users, as kube-apiserver's RBAC authorizer and static token file do.
 *
 * Authentication: the token file (kube-apiserver's format, one user per
 * line: `token,user,uid[,"group1,group2"]`, `#` comments) maps bearer tokens
 * to users; a user named system:serviceaccount:NS:NAME also gets the groups
 * system:serviceaccounts and system:serviceaccounts:NS; every user gets
 * system:authenticated. The --token token and client certificates stay
 * superusers (system:masters: never checked), as the cluster admin.
 * Authorization: Roles, ClusterRoles, RoleBindings and ClusterRoleBindings
 * (rbac.authorization.k8s.io/v1, served from the store) are evaluated per
 * request: verbs, apiGroups, resources with subresources ("pods/status",
 * "*", "*\/status"), resourceNames, namespace scoping (a RoleBinding grants
 * in its namespace only, also when it refers to a ClusterRole), `*`.
 * Non-resource paths: a GET (or HEAD) of /api, /api/\*, /apis, /apis/\*,
 * /openapi, /openapi/\*, /healthz, /livez, /readyz, /version or /version/ is
 * allowed for every authenticated user, as the default system:discovery and
 * system:public-info-viewer bindings of system:authenticated do; any other
 * method or path is a 403 ("forbidden: User \"alice\" cannot post path
 * \"/version\""). There are no anonymous requests: no credentials is a 401
 * everywhere, as kube-apiserver with --anonymous-auth=false. A resource
 * denial is the real 403 Status (reason Forbidden, details, the authorizer's
 * message). No escalation checks on writes of RBAC objects, no aggregation
 * rules. ClusterRoles' nonResourceURLs rules (bound by ClusterRoleBindings)
 * grant non-resource paths, as in kube-apiserver.
 *
 * Threads: sim_rbac_load_tokens from main before the server starts; the
 * rest from any connection thread (takes sim_mu for the store).
 * Errors: sim_rbac_load_tokens returns 0 or -errno/-EINVAL with a message.
 * Ownership: users live until exit; req->user is borrowed.
 */
#ifndef APISIM_RBAC_H
#define APISIM_RBAC_H

#include <stdbool.h>

#include "server.h"

struct sim_user {
  char *token, *name, *uid;
  char **groups;
  size_t ngroups;
};

/* Who the --token token, --token-file tokens and client certificates are:
 * kubernetes-admin in system:masters (and system:authenticated). */
extern const struct sim_user sim_admin_user;

extern bool sim_rbac_enabled;

/* Reads the token file; *err (malloc'd) says which line is wrong. The file
 * is read again when it changes (inode, size or mtime, looked at on each
 * lookup): users rotate on disk as in kube-apiserver's reloading
 * authenticators. A version that does not parse keeps the last one. */
int sim_rbac_load_tokens(const char *path, char **err);

/* The user of a bearer token from the token file, or NULL. */
const struct sim_user *sim_rbac_user_for_token(const char *token);

/* What a SubjectAccessReview asks about: a resource (resource set) or a
 * non-resource path (path set); NULL fields are empty. */
struct sim_access {
  const char *verb, *group, *resource, *sub, *ns, *name;
  const char *path;
};

/* Whether u may do acc under the store's RBAC objects (always without
 * --rbac; always for system:masters). Non-resource paths: the discovery
 * paths above for system:authenticated, and nonResourceURLs rules of
 * ClusterRoles bound by ClusterRoleBindings. *why (malloc'd or NULL): the
 * authorizer's reason when allowed. */
bool sim_rbac_decide(const struct sim_user *u, const struct sim_access *acc, char **why);

/* With --rbac and a token-file user on req: whether the user may do what
 * the request asks (verb from method, name and watch); on false, resp holds
 * the 403. ns, name, sub may be NULL. Always true without --rbac or for a
 * superuser (req->user NULL). */
bool sim_rbac_allow(struct sim_req *req, const char *group, const char *resource,
                    const char *sub, const char *ns, const char *name, struct sim_resp *resp);

/* The same for a non-resource path (no query), verb from the method. */
bool sim_rbac_allow_path(struct sim_req *req, const char *path, struct sim_resp *resp);

#endif
