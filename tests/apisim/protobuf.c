/* SPDX-License-Identifier: Apache-2.0 */
#include "protobuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

enum pbk {
  K_STR,    /* string */
  K_BYTES,  /* bytes, base64 in JSON */
  K_I32,    /* int32 varint */
  K_I64,    /* int64 varint */
  K_BOOL,   /* bool varint */
  K_MSG,    /* nested message (m) */
  K_TIME,   /* meta/v1 Time {1 seconds, 2 nanos}: RFC 3339 string */
  K_MAP_SS, /* map<string, string> */
  K_MAP_SB, /* map<string, bytes> */
  K_MAP_SQ, /* map<string, resource.Quantity{1 string}> */
  K_INTSTR, /* intstr.IntOrString {1 type, 2 intVal, 3 strVal} */
};

#define F_REP 1u  /* repeated */
#define F_KEEP 2u /* Go pointer field: present even when zero */

struct pbm;
struct pbf {
  unsigned num;
  const char *name;
  unsigned char k, flags;
  const struct pbm *m;
};
struct pbm {
  const char *name;
  const struct pbf *f;
  size_t n;
};

#define MSG(var, pname, ...)                                                \
  static const struct pbf var##_f[] = {__VA_ARGS__};                       \
  static const struct pbm var = {pname, var##_f, sizeof var##_f / sizeof var##_f[0]};

#define META "k8s.io.apimachinery.pkg.apis.meta.v1."
#define CORE "k8s.io.api.core.v1."
#define APPS "k8s.io.api.apps.v1."

MSG(m_typemeta, "k8s.io.apimachinery.pkg.runtime.TypeMeta",
    {1, "apiVersion", K_STR, 0, NULL}, {2, "kind", K_STR, 0, NULL})
MSG(m_ownerref, META "OwnerReference",
    {1, "kind", K_STR, 0, NULL}, {3, "name", K_STR, 0, NULL}, {4, "uid", K_STR, 0, NULL},
    {5, "apiVersion", K_STR, 0, NULL}, {6, "controller", K_BOOL, F_KEEP, NULL},
    {7, "blockOwnerDeletion", K_BOOL, F_KEEP, NULL})
MSG(m_objmeta, META "ObjectMeta",
    {1, "name", K_STR, 0, NULL}, {2, "generateName", K_STR, 0, NULL},
    {3, "namespace", K_STR, 0, NULL}, {4, "selfLink", K_STR, 0, NULL},
    {5, "uid", K_STR, 0, NULL}, {6, "resourceVersion", K_STR, 0, NULL},
    {7, "generation", K_I64, 0, NULL}, {8, "creationTimestamp", K_TIME, 0, NULL},
    {9, "deletionTimestamp", K_TIME, 0, NULL},
    {10, "deletionGracePeriodSeconds", K_I64, F_KEEP, NULL},
    {11, "labels", K_MAP_SS, 0, NULL}, {12, "annotations", K_MAP_SS, 0, NULL},
    {13, "ownerReferences", K_MSG, F_REP, &m_ownerref},
    {14, "finalizers", K_STR, F_REP, NULL})
MSG(m_lsreq, META "LabelSelectorRequirement",
    {1, "key", K_STR, 0, NULL}, {2, "operator", K_STR, 0, NULL},
    {3, "values", K_STR, F_REP, NULL})
MSG(m_lselector, META "LabelSelector",
    {1, "matchLabels", K_MAP_SS, 0, NULL}, {2, "matchExpressions", K_MSG, F_REP, &m_lsreq})

MSG(m_configmap, CORE "ConfigMap",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "data", K_MAP_SS, 0, NULL},
    {3, "binaryData", K_MAP_SB, 0, NULL}, {4, "immutable", K_BOOL, F_KEEP, NULL})
MSG(m_secret, CORE "Secret",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "data", K_MAP_SB, 0, NULL},
    {3, "type", K_STR, 0, NULL}, {4, "stringData", K_MAP_SS, 0, NULL},
    {5, "immutable", K_BOOL, F_KEEP, NULL})
MSG(m_nsspec, CORE "NamespaceSpec", {1, "finalizers", K_STR, F_REP, NULL})
MSG(m_nsstatus, CORE "NamespaceStatus", {1, "phase", K_STR, 0, NULL})
MSG(m_namespace, CORE "Namespace",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "spec", K_MSG, 0, &m_nsspec},
    {3, "status", K_MSG, 0, &m_nsstatus})
MSG(m_objref, CORE "ObjectReference",
    {1, "kind", K_STR, 0, NULL}, {2, "namespace", K_STR, 0, NULL}, {3, "name", K_STR, 0, NULL},
    {4, "uid", K_STR, 0, NULL}, {5, "apiVersion", K_STR, 0, NULL},
    {6, "resourceVersion", K_STR, 0, NULL}, {7, "fieldPath", K_STR, 0, NULL})
MSG(m_localref, CORE "LocalObjectReference", {1, "name", K_STR, 0, NULL})
MSG(m_serviceaccount, CORE "ServiceAccount",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "secrets", K_MSG, F_REP, &m_objref},
    {3, "imagePullSecrets", K_MSG, F_REP, &m_localref},
    {4, "automountServiceAccountToken", K_BOOL, F_KEEP, NULL})

MSG(m_cport, CORE "ContainerPort",
    {1, "name", K_STR, 0, NULL}, {2, "hostPort", K_I32, 0, NULL},
    {3, "containerPort", K_I32, 0, NULL}, {4, "protocol", K_STR, 0, NULL},
    {5, "hostIP", K_STR, 0, NULL})
MSG(m_envvar, CORE "EnvVar", {1, "name", K_STR, 0, NULL}, {2, "value", K_STR, 0, NULL})
MSG(m_resreq, CORE "ResourceRequirements",
    {1, "limits", K_MAP_SQ, 0, NULL}, {2, "requests", K_MAP_SQ, 0, NULL})
MSG(m_vmount, CORE "VolumeMount",
    {1, "name", K_STR, 0, NULL}, {2, "readOnly", K_BOOL, 0, NULL},
    {3, "mountPath", K_STR, 0, NULL}, {4, "subPath", K_STR, 0, NULL},
    {5, "mountPropagation", K_STR, F_KEEP, NULL}, {6, "subPathExpr", K_STR, 0, NULL})
MSG(m_container, CORE "Container",
    {1, "name", K_STR, 0, NULL}, {2, "image", K_STR, 0, NULL},
    {3, "command", K_STR, F_REP, NULL}, {4, "args", K_STR, F_REP, NULL},
    {5, "workingDir", K_STR, 0, NULL}, {6, "ports", K_MSG, F_REP, &m_cport},
    {7, "env", K_MSG, F_REP, &m_envvar}, {8, "resources", K_MSG, 0, &m_resreq},
    {9, "volumeMounts", K_MSG, F_REP, &m_vmount},
    {13, "terminationMessagePath", K_STR, 0, NULL}, {14, "imagePullPolicy", K_STR, 0, NULL},
    {16, "stdin", K_BOOL, 0, NULL}, {17, "stdinOnce", K_BOOL, 0, NULL},
    {18, "tty", K_BOOL, 0, NULL}, {20, "terminationMessagePolicy", K_STR, 0, NULL})
MSG(m_podspec, CORE "PodSpec",
    {2, "containers", K_MSG, F_REP, &m_container}, {3, "restartPolicy", K_STR, 0, NULL},
    {4, "terminationGracePeriodSeconds", K_I64, F_KEEP, NULL},
    {5, "activeDeadlineSeconds", K_I64, F_KEEP, NULL}, {6, "dnsPolicy", K_STR, 0, NULL},
    {7, "nodeSelector", K_MAP_SS, 0, NULL}, {8, "serviceAccountName", K_STR, 0, NULL},
    {9, "serviceAccount", K_STR, 0, NULL}, {10, "nodeName", K_STR, 0, NULL},
    {11, "hostNetwork", K_BOOL, 0, NULL}, {12, "hostPID", K_BOOL, 0, NULL},
    {13, "hostIPC", K_BOOL, 0, NULL}, {15, "imagePullSecrets", K_MSG, F_REP, &m_localref},
    {16, "hostname", K_STR, 0, NULL}, {17, "subdomain", K_STR, 0, NULL},
    {19, "schedulerName", K_STR, 0, NULL}, {20, "initContainers", K_MSG, F_REP, &m_container},
    {21, "automountServiceAccountToken", K_BOOL, F_KEEP, NULL},
    {24, "priorityClassName", K_STR, 0, NULL}, {25, "priority", K_I32, F_KEEP, NULL},
    {29, "runtimeClassName", K_STR, F_KEEP, NULL},
    {30, "enableServiceLinks", K_BOOL, F_KEEP, NULL})
/* kubectl sends status as an empty message; any field in it is refused. */
MSG(m_podstatus, CORE "PodStatus", {1, "phase", K_STR, 0, NULL})
MSG(m_pod, CORE "Pod",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "spec", K_MSG, 0, &m_podspec},
    {3, "status", K_MSG, 0, &m_podstatus})
MSG(m_ptemplate, CORE "PodTemplateSpec",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "spec", K_MSG, 0, &m_podspec})

MSG(m_svcport, CORE "ServicePort",
    {1, "name", K_STR, 0, NULL}, {2, "protocol", K_STR, 0, NULL}, {3, "port", K_I32, 0, NULL},
    {4, "targetPort", K_INTSTR, 0, NULL}, {5, "nodePort", K_I32, 0, NULL},
    {6, "appProtocol", K_STR, F_KEEP, NULL})
MSG(m_svcspec, CORE "ServiceSpec",
    {1, "ports", K_MSG, F_REP, &m_svcport}, {2, "selector", K_MAP_SS, 0, NULL},
    {3, "clusterIP", K_STR, 0, NULL}, {4, "type", K_STR, 0, NULL},
    {5, "externalIPs", K_STR, F_REP, NULL}, {7, "sessionAffinity", K_STR, 0, NULL},
    {8, "loadBalancerIP", K_STR, 0, NULL}, {10, "externalName", K_STR, 0, NULL},
    {9, "loadBalancerSourceRanges", K_STR, F_REP, NULL},
    {11, "externalTrafficPolicy", K_STR, 0, NULL}, {12, "healthCheckNodePort", K_I32, 0, NULL},
    {13, "publishNotReadyAddresses", K_BOOL, 0, NULL}, {17, "ipFamilyPolicy", K_STR, F_KEEP, NULL},
    {18, "clusterIPs", K_STR, F_REP, NULL}, {19, "ipFamilies", K_STR, F_REP, NULL},
    {20, "allocateLoadBalancerNodePorts", K_BOOL, F_KEEP, NULL},
    {21, "loadBalancerClass", K_STR, F_KEEP, NULL},
    {22, "internalTrafficPolicy", K_STR, F_KEEP, NULL},
    {23, "trafficDistribution", K_STR, F_KEEP, NULL})
/* status.loadBalancer {} is what kubectl sends; ingress entries are refused. */
MSG(m_lbstatus, CORE "LoadBalancerStatus", {0, "", K_STR, 0, NULL})
MSG(m_svcstatus, CORE "ServiceStatus", {1, "loadBalancer", K_MSG, 0, &m_lbstatus})
MSG(m_service, CORE "Service",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "spec", K_MSG, 0, &m_svcspec},
    {3, "status", K_MSG, 0, &m_svcstatus})

MSG(m_rollupd, APPS "RollingUpdateDeployment",
    {1, "maxUnavailable", K_INTSTR, 0, NULL}, {2, "maxSurge", K_INTSTR, 0, NULL})
MSG(m_strategy, APPS "DeploymentStrategy",
    {1, "type", K_STR, 0, NULL}, {2, "rollingUpdate", K_MSG, 0, &m_rollupd})
MSG(m_dspec, APPS "DeploymentSpec",
    {1, "replicas", K_I32, F_KEEP, NULL}, {2, "selector", K_MSG, 0, &m_lselector},
    {3, "template", K_MSG, 0, &m_ptemplate}, {4, "strategy", K_MSG, 0, &m_strategy},
    {5, "minReadySeconds", K_I32, 0, NULL}, {6, "revisionHistoryLimit", K_I32, F_KEEP, NULL},
    {7, "paused", K_BOOL, 0, NULL}, {9, "progressDeadlineSeconds", K_I32, F_KEEP, NULL})
MSG(m_dstatus, APPS "DeploymentStatus",
    {1, "observedGeneration", K_I64, 0, NULL}, {2, "replicas", K_I32, 0, NULL},
    {3, "updatedReplicas", K_I32, 0, NULL}, {4, "availableReplicas", K_I32, 0, NULL},
    {5, "unavailableReplicas", K_I32, 0, NULL}, {7, "readyReplicas", K_I32, 0, NULL},
    {8, "collisionCount", K_I32, F_KEEP, NULL}, {9, "terminatingReplicas", K_I32, F_KEEP, NULL})
MSG(m_deployment, APPS "Deployment",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "spec", K_MSG, 0, &m_dspec},
    {3, "status", K_MSG, 0, &m_dstatus})

#define AUTHN "k8s.io.api.authentication.v1."
#define AUTHZ "k8s.io.api.authorization.v1."

/* The review kinds (review.h): kubectl auth can-i and whoami send these. */
MSG(m_tokenrspec, AUTHN "TokenReviewSpec",
    {1, "token", K_STR, 0, NULL}, {2, "audiences", K_STR, F_REP, NULL})
MSG(m_userinfo, AUTHN "UserInfo",
    {1, "username", K_STR, 0, NULL}, {2, "uid", K_STR, 0, NULL},
    {3, "groups", K_STR, F_REP, NULL})
MSG(m_tokenrstatus, AUTHN "TokenReviewStatus",
    {1, "authenticated", K_BOOL, 0, NULL}, {2, "user", K_MSG, 0, &m_userinfo},
    {3, "error", K_STR, 0, NULL}, {4, "audiences", K_STR, F_REP, NULL})
MSG(m_tokenreview, AUTHN "TokenReview",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "spec", K_MSG, 0, &m_tokenrspec},
    {3, "status", K_MSG, 0, &m_tokenrstatus})
MSG(m_ssrstatus, AUTHN "SelfSubjectReviewStatus", {1, "userInfo", K_MSG, 0, &m_userinfo})
MSG(m_ssreview, AUTHN "SelfSubjectReview",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "status", K_MSG, 0, &m_ssrstatus})
MSG(m_resattrs, AUTHZ "ResourceAttributes",
    {1, "namespace", K_STR, 0, NULL}, {2, "verb", K_STR, 0, NULL}, {3, "group", K_STR, 0, NULL},
    {4, "version", K_STR, 0, NULL}, {5, "resource", K_STR, 0, NULL},
    {6, "subresource", K_STR, 0, NULL}, {7, "name", K_STR, 0, NULL})
MSG(m_nonresattrs, AUTHZ "NonResourceAttributes",
    {1, "path", K_STR, 0, NULL}, {2, "verb", K_STR, 0, NULL})
MSG(m_sarstatus, AUTHZ "SubjectAccessReviewStatus",
    {1, "allowed", K_BOOL, 0, NULL}, {2, "reason", K_STR, 0, NULL},
    {3, "evaluationError", K_STR, 0, NULL}, {4, "denied", K_BOOL, 0, NULL})
MSG(m_sarspec, AUTHZ "SubjectAccessReviewSpec",
    {1, "resourceAttributes", K_MSG, 0, &m_resattrs},
    {2, "nonResourceAttributes", K_MSG, 0, &m_nonresattrs}, {3, "user", K_STR, 0, NULL},
    {4, "groups", K_STR, F_REP, NULL}, {6, "uid", K_STR, 0, NULL})
MSG(m_sar, AUTHZ "SubjectAccessReview",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "spec", K_MSG, 0, &m_sarspec},
    {3, "status", K_MSG, 0, &m_sarstatus})
MSG(m_ssarspec, AUTHZ "SelfSubjectAccessReviewSpec",
    {1, "resourceAttributes", K_MSG, 0, &m_resattrs},
    {2, "nonResourceAttributes", K_MSG, 0, &m_nonresattrs})
MSG(m_ssar, AUTHZ "SelfSubjectAccessReview",
    {1, "metadata", K_MSG, 0, &m_objmeta}, {2, "spec", K_MSG, 0, &m_ssarspec},
    {3, "status", K_MSG, 0, &m_sarstatus})

static const struct {
  const char *api_version, *kind;
  const struct pbm *m;
} kinds[] = {
  {"authentication.k8s.io/v1", "TokenReview", &m_tokenreview},
  {"authentication.k8s.io/v1", "SelfSubjectReview", &m_ssreview},
  {"authorization.k8s.io/v1", "SubjectAccessReview", &m_sar},
  {"authorization.k8s.io/v1", "SelfSubjectAccessReview", &m_ssar},
  {"v1", "ConfigMap", &m_configmap},   {"v1", "Secret", &m_secret},
  {"v1", "Namespace", &m_namespace},   {"v1", "ServiceAccount", &m_serviceaccount},
  {"v1", "Pod", &m_pod},               {"v1", "Service", &m_service},
  {"apps/v1", "Deployment", &m_deployment},
};

/* ---- wire format ---- */

struct rd {
  const uint8_t *base, *p, *end;
  char **err;
};

static int fail(struct rd *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct rd *r, int code, const char *fmt, ...)
{
  if (*r->err) return code;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  *r->err = sim_xasprintf("%s (protobuf body offset %zu)", msg, (size_t)(r->p - r->base));
  return code;
}

static int rd_varint(struct rd *r, uint64_t *out)
{
  uint64_t v = 0;
  for (unsigned i = 0; i < 10; i++) {
    if (r->p >= r->end) return fail(r, -EINVAL, "truncated varint");
    uint8_t b = *r->p++;
    if (i == 9 && b > 1) return fail(r, -EINVAL, "varint overflows 64 bits");
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return fail(r, -EINVAL, "varint overflows 64 bits");
}

/* A length-delimited payload: [*p, *p + *n). */
static int rd_bytes(struct rd *r, const uint8_t **p, size_t *n)
{
  uint64_t len;
  int rc = rd_varint(r, &len);
  if (rc < 0) return rc;
  if (len > (uint64_t)(r->end - r->p)) return fail(r, -EINVAL, "length %llu exceeds the message", (unsigned long long)len);
  *p = r->p;
  *n = (size_t)len;
  r->p += len;
  return 0;
}

/* Well-formed UTF-8 (no overlongs, surrogates or code points past
 * U+10FFFF), as the JSON side requires of every string. */
static bool utf8_ok(const uint8_t *p, size_t n)
{
  size_t i = 0;
  while (i < n) {
    uint8_t c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1fu; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0fu; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07u; min = 0x10000; }
    else return false;
    if (n - i < len) return false;
    for (size_t j = 1; j < len; j++) {
      if ((p[i + j] & 0xc0) != 0x80) return false;
      cp = cp << 6 | (p[i + j] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

static jv *str_new(const uint8_t *p, size_t n)
{
  jv *v = jv_new(J_STR);
  v->u.s = sim_xmalloc(n + 1);
  memcpy(v->u.s, p, n);
  v->u.s[n] = 0;
  v->n = n;
  return v;
}

static int decode_msg(struct rd *r, const struct pbm *m, jv *obj, unsigned depth);

/* Decodes the sub-message [p, p+n) with a reader sharing r's base. */
static int sub_msg(struct rd *r, const uint8_t *p, size_t n, const struct pbm *m, jv *obj,
                   unsigned depth)
{
  struct rd s = {.base = r->base, .p = p, .end = p + n, .err = r->err};
  return decode_msg(&s, m, obj, depth + 1);
}

/* Reads the two string-ish members {1 key, 2 value} of a map entry; the
 * value of a Quantity map is itself a message {1 string}. */
static int map_entry(struct rd *r, const uint8_t *p, size_t n, enum pbk k, jv *map)
{
  struct rd e = {.base = r->base, .p = p, .end = p + n, .err = r->err};
  const uint8_t *kp = NULL, *vp = NULL;
  size_t kn = 0, vn = 0;
  while (e.p < e.end) {
    uint64_t tag;
    int rc = rd_varint(&e, &tag);
    if (rc < 0) return rc;
    if ((tag & 7) != 2 || ((tag >> 3) != 1 && (tag >> 3) != 2))
      return fail(&e, -EINVAL, "map entry field %llu with wire type %u", (unsigned long long)(tag >> 3),
                  (unsigned)(tag & 7));
    rc = (tag >> 3) == 1 ? rd_bytes(&e, &kp, &kn) : rd_bytes(&e, &vp, &vn);
    if (rc < 0) return rc;
  }
  if (kp && memchr(kp, 0, kn)) return fail(&e, -EINVAL, "map key contains a NUL byte");
  if ((kp && !utf8_ok(kp, kn)) || (k == K_MAP_SS && vp && !utf8_ok(vp, vn)))
    return fail(&e, -EINVAL, "map entry is not valid UTF-8");
  jv *val;
  if (k == K_MAP_SB) {
    char *b64 = sim_b64_encode(vp ? (const void *)vp : "", vn);
    val = jv_str_new(b64);
    free(b64);
  } else if (k == K_MAP_SQ) {
    /* resource.Quantity {optional string string = 1} */
    struct rd q = {.base = r->base, .p = vp, .end = vp ? vp + vn : NULL, .err = r->err};
    const uint8_t *sp = NULL;
    size_t sn = 0;
    while (q.p < q.end) {
      uint64_t tag;
      int rc = rd_varint(&q, &tag);
      if (rc < 0) return rc;
      if (tag != ((1u << 3) | 2)) return fail(&q, -EINVAL, "Quantity field %llu", (unsigned long long)(tag >> 3));
      rc = rd_bytes(&q, &sp, &sn);
      if (rc < 0) return rc;
    }
    if (sp && !utf8_ok(sp, sn)) return fail(&q, -EINVAL, "Quantity is not valid UTF-8");
    val = str_new(sp ? sp : (const uint8_t *)"", sn);
  } else {
    val = str_new(vp ? vp : (const uint8_t *)"", vn);
  }
  char *key = sim_xstrndup(kp ? (const char *)kp : "", kn);
  jv_set(map, key, val);
  free(key);
  return 0;
}

static int intorstr(struct rd *r, const uint8_t *p, size_t n, jv **out)
{
  struct rd s = {.base = r->base, .p = p, .end = p + n, .err = r->err};
  uint64_t type = 0, iv = 0;
  const uint8_t *sp = NULL;
  size_t sn = 0;
  while (s.p < s.end) {
    uint64_t tag;
    int rc = rd_varint(&s, &tag);
    if (rc < 0) return rc;
    if (tag == ((1u << 3) | 0)) rc = rd_varint(&s, &type);
    else if (tag == ((2u << 3) | 0)) rc = rd_varint(&s, &iv);
    else if (tag == ((3u << 3) | 2)) rc = rd_bytes(&s, &sp, &sn);
    else rc = fail(&s, -EINVAL, "IntOrString field %llu", (unsigned long long)(tag >> 3));
    if (rc < 0) return rc;
  }
  if (sp && !utf8_ok(sp, sn)) return fail(&s, -EINVAL, "IntOrString is not valid UTF-8");
  *out = type == 1 ? str_new(sp ? sp : (const uint8_t *)"", sn) : jv_int_new((int32_t)iv);
  return 0;
}

static int time_value(struct rd *r, const uint8_t *p, size_t n, jv **out)
{
  struct rd s = {.base = r->base, .p = p, .end = p + n, .err = r->err};
  uint64_t secs = 0, nanos = 0;
  while (s.p < s.end) {
    uint64_t tag;
    int rc = rd_varint(&s, &tag);
    if (rc < 0) return rc;
    if (tag == ((1u << 3) | 0)) rc = rd_varint(&s, &secs);
    else if (tag == ((2u << 3) | 0)) rc = rd_varint(&s, &nanos);
    else rc = fail(&s, -EINVAL, "Time field %llu", (unsigned long long)(tag >> 3));
    if (rc < 0) return rc;
  }
  *out = NULL;
  if (secs == 0 && nanos == 0) return 0; /* the zero Time: JSON null, left out */
  time_t t = (time_t)(int64_t)secs;
  struct tm tm;
  char buf[64];
  if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999)
    return fail(&s, -EINVAL, "Time seconds %lld out of range", (long long)(int64_t)secs);
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  *out = jv_str_new(buf);
  return 0;
}

static const struct pbf *find_field(const struct pbm *m, unsigned num)
{
  for (size_t i = 0; i < m->n; i++)
    if (m->f[i].num == num) return &m->f[i];
  return NULL;
}

static void put(jv *obj, const struct pbf *f, jv *v)
{
  if (!(f->flags & F_REP)) {
    jv_set(obj, f->name, v);
    return;
  }
  jv *arr = jv_get(obj, f->name);
  if (!arr || arr->t != J_ARR) {
    arr = jv_new(J_ARR);
    jv_set(obj, f->name, arr);
  }
  jv_push(arr, v);
}

static int decode_msg(struct rd *r, const struct pbm *m, jv *obj, unsigned depth)
{
  if (depth > 16) return fail(r, -EINVAL, "messages nested too deeply");
  while (r->p < r->end) {
    uint64_t tag;
    int rc = rd_varint(r, &tag);
    if (rc < 0) return rc;
    uint64_t num = tag >> 3;
    unsigned wt = (unsigned)(tag & 7);
    if (num == 0 || num > 536870911u) return fail(r, -EINVAL, "invalid field number in %s", m->name);
    const struct pbf *f = find_field(m, (unsigned)num);
    if (!f)
      return fail(r, -ENOTSUP, "field %llu of %s is not supported by kube-apisim's protobuf decoder",
                  (unsigned long long)num, m->name);
    bool varint = f->k == K_I32 || f->k == K_I64 || f->k == K_BOOL;
    if (wt != (varint ? 0u : 2u))
      return fail(r, -EINVAL, "field %s (%llu) of %s has wire type %u", f->name,
                  (unsigned long long)num, m->name, wt);
    bool keep = (f->flags & (F_KEEP | F_REP)) != 0;
    if (varint) {
      uint64_t v;
      rc = rd_varint(r, &v);
      if (rc < 0) return rc;
      if (!v && !keep) continue;
      if (f->k == K_BOOL) put(obj, f, jv_bool_new(v != 0));
      else if (f->k == K_I32) put(obj, f, jv_int_new((int32_t)(uint32_t)v));
      else put(obj, f, jv_int_new((int64_t)v));
      continue;
    }
    const uint8_t *p;
    size_t n;
    rc = rd_bytes(r, &p, &n);
    if (rc < 0) return rc;
    jv *v = NULL;
    switch (f->k) {
    case K_STR:
      if (!utf8_ok(p, n)) {
        rc = fail(r, -EINVAL, "field %s of %s is not valid UTF-8", f->name, m->name);
        break;
      }
      if (n || keep) v = str_new(p, n);
      break;
    case K_BYTES: {
      char *b64 = sim_b64_encode(p, n);
      v = jv_str_new(b64);
      free(b64);
      break;
    }
    case K_MSG:
      v = jv_new(J_OBJ);
      rc = sub_msg(r, p, n, f->m, v, depth);
      break;
    case K_TIME:
      rc = time_value(r, p, n, &v);
      break;
    case K_INTSTR:
      rc = intorstr(r, p, n, &v);
      break;
    case K_MAP_SS:
    case K_MAP_SB:
    case K_MAP_SQ:
      rc = map_entry(r, p, n, (enum pbk)f->k, jv_obj_ensure(obj, f->name));
      break;
    default:
      rc = fail(r, -EINVAL, "internal: field kind %u", f->k);
      break;
    }
    if (rc < 0) {
      jv_free(v);
      return rc;
    }
    if (v) put(obj, f, v);
  }
  return 0;
}

int sim_pb_decode(const void *buf, size_t len, jv **out, char **err)
{
  *out = NULL;
  *err = NULL;
  const uint8_t *b = buf;
  struct rd r = {.base = b, .p = b, .end = b + len, .err = err};
  if (len < 4 || memcmp(b, "k8s\0", 4) != 0)
    return fail(&r, -EINVAL, "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]");
  r.p += 4;
  /* runtime.Unknown */
  jv *tm = jv_new(J_OBJ);
  const uint8_t *raw = NULL, *enc = NULL, *ct = NULL;
  size_t rawn = 0, encn = 0, ctn = 0;
  int rc = 0;
  while (rc == 0 && r.p < r.end) {
    uint64_t tag;
    rc = rd_varint(&r, &tag);
    if (rc < 0) break;
    const uint8_t *p;
    size_t n;
    if ((tag & 7) != 2) {
      rc = fail(&r, -EINVAL, "runtime.Unknown field %llu has wire type %u", (unsigned long long)(tag >> 3),
                (unsigned)(tag & 7));
      break;
    }
    rc = rd_bytes(&r, &p, &n);
    if (rc < 0) break;
    switch (tag >> 3) {
    case 1: rc = sub_msg(&r, p, n, &m_typemeta, tm, 0); break;
    case 2: raw = p; rawn = n; break;
    case 3: enc = p; encn = n; break;
    case 4: ct = p; ctn = n; break;
    default:
      rc = fail(&r, -EINVAL, "runtime.Unknown field %llu", (unsigned long long)(tag >> 3));
      break;
    }
  }
  (void)ct;
  (void)ctn;
  if (rc == 0 && encn) rc = fail(&r, -ENOTSUP, "contentEncoding \"%.*s\" is not supported", (int)(encn > 64 ? 64 : encn), (const char *)enc);
  const char *av = jv_gets(tm, "apiVersion"), *kind = jv_gets(tm, "kind");
  const struct pbm *m = NULL;
  for (size_t i = 0; rc == 0 && i < sizeof kinds / sizeof kinds[0]; i++)
    if (av && kind && strcmp(av, kinds[i].api_version) == 0 && strcmp(kind, kinds[i].kind) == 0)
      m = kinds[i].m;
  if (rc == 0 && !m)
    rc = fail(&r, -ENOTSUP,
              "kube-apisim decodes protobuf only for v1 ConfigMap, Secret, Namespace, ServiceAccount, "
              "Pod, Service, apps/v1 Deployment and the review kinds of authentication.k8s.io/v1 "
              "and authorization.k8s.io/v1, not %s %s; send application/json",
              av && *av ? av : "(no apiVersion)", kind && *kind ? kind : "(no kind)");
  if (rc < 0) {
    jv_free(tm);
    return rc;
  }
  jv *obj = jv_new(J_OBJ);
  jv_set_str(obj, "apiVersion", av);
  jv_set_str(obj, "kind", kind);
  jv_free(tm);
  rc = sub_msg(&r, raw ? raw : b, raw ? rawn : 0, m, obj, 0);
  if (rc < 0) {
    jv_free(obj);
    return rc;
  }
  *out = obj;
  return 0;
}
