/* SPDX-License-Identifier: Apache-2.0 */
/* YAML to DOM via libyaml (seeds, application/yaml bodies, apply patches).
 * Plain scalars are typed as YAML 1.1 core-ish (null, bools, ints,
 * floats); quoted scalars are always strings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "api_int.h"

static jv *scalar(const yaml_event_t *e)
{
  const char *v = (const char *)e->data.scalar.value;
  size_t n = e->data.scalar.length;
  if (e->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || e->data.scalar.tag)
    return jv_strn_new(v, n);
  if (n == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
      strcmp(v, "NULL") == 0)
    return jv_new(J_NULL);
  if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0)
    return jv_new(J_TRUE);
  if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 || strcmp(v, "FALSE") == 0)
    return jv_new(J_FALSE);
  char *end;
  errno = 0;
  (void)strtoll(v, &end, 10);
  if (!*end && !errno && !(v[0] == '0' && n > 1) && !(v[0] == '-' && v[1] == '0' && n > 2)) {
    jv *num = jv_new(J_NUM);
    num->u.s = sim_xstrndup(v[0] == '+' ? v + 1 : v, v[0] == '+' ? n - 1 : n);
    num->n = strlen(num->u.s);
    return num;
  }
  (void)strtod(v, &end);
  bool numeric = !*end && strpbrk(v, "0123456789") && !strpbrk(v, "xXnN") && v[0] != '+' && v[0] != '.';
  if (numeric) {
    jv *num = jv_new(J_NUM);
    num->u.s = sim_xstrndup(v, n);
    num->n = n;
    return num;
  }
  return jv_strn_new(v, n);
}

int sim_yaml_parse_all(const char *buf, size_t len, jv ***docs, size_t *ndocs, char **err)
{
  yaml_parser_t p;
  *docs = NULL;
  *ndocs = 0;
  *err = NULL;
  if (!yaml_parser_initialize(&p)) {
    *err = sim_xstrdup("yaml: out of memory");
    return -ENOMEM;
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
  jv *stack[512];
  char *keys[512];
  size_t depth = 0;
  jv *root = NULL;
  int rc = 0;
  for (;;) {
    yaml_event_t e;
    if (!yaml_parser_parse(&p, &e)) {
      *err = sim_xasprintf("yaml: line %zu: %s", p.problem_mark.line + 1,
                           p.problem ? p.problem : "parse error");
      rc = -EINVAL;
      break;
    }
    jv *v = NULL;
    bool push = false, done = false;
    switch (e.type) {
    case YAML_STREAM_END_EVENT: done = true; break;
    case YAML_DOCUMENT_START_EVENT: root = NULL; break;
    case YAML_DOCUMENT_END_EVENT:
      if (root && root->t != J_NULL) {
        *docs = sim_xrealloc(*docs, (*ndocs + 1) * sizeof(jv *));
        (*docs)[(*ndocs)++] = root;
      } else {
        jv_free(root);
      }
      root = NULL;
      break;
    case YAML_SCALAR_EVENT: v = scalar(&e); break;
    case YAML_SEQUENCE_START_EVENT: v = jv_new(J_ARR); push = true; break;
    case YAML_MAPPING_START_EVENT: v = jv_new(J_OBJ); push = true; break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      if (depth) depth--;
      break;
    case YAML_ALIAS_EVENT:
      *err = sim_xstrdup("yaml: aliases are not supported");
      rc = -EINVAL;
      break;
    default: break;
    }
    yaml_event_delete(&e);
    if (rc || done) break;
    if (!v) continue;
    if (depth == 0) {
      jv_free(root);
      root = v;
    } else {
      jv *top = stack[depth - 1];
      if (top->t == J_ARR) {
        jv_push(top, v);
      } else if (!keys[depth - 1]) {
        /* a mapping key */
        if (v->t != J_STR && v->t != J_NUM && v->t != J_TRUE && v->t != J_FALSE && v->t != J_NULL) {
          *err = sim_xstrdup("yaml: complex mapping keys are not supported");
          jv_free(v);
          rc = -EINVAL;
          break;
        }
        keys[depth - 1] = v->t == J_STR || v->t == J_NUM ? sim_xstrdup(v->u.s)
                          : sim_xstrdup(v->t == J_TRUE ? "true" : v->t == J_FALSE ? "false" : "null");
        jv_free(v);
        continue;
      } else {
        jv_set(top, keys[depth - 1], v);
        free(keys[depth - 1]);
        keys[depth - 1] = NULL;
      }
    }
    if (push) {
      if (depth == 512) {
        *err = sim_xstrdup("yaml: nesting too deep");
        rc = -EINVAL;
        break;
      }
      keys[depth] = NULL;
      stack[depth++] = v;
    }
  }
  for (size_t i = 0; i < depth; i++) free(keys[i]);
  yaml_parser_delete(&p);
  if (rc) {
    jv_free(root);
    for (size_t i = 0; i < *ndocs; i++) jv_free((*docs)[i]);
    free(*docs);
    *docs = NULL;
    *ndocs = 0;
  }
  return rc;
}
