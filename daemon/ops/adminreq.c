/* SPDX-License-Identifier: Apache-2.0 */
/* adminreq: see adminreq.h. */
#include "ops/adminreq.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "json/jsontree.h"

static const char *const commands[KC_ADMIN_NCOMMANDS] = {
    "queues", "keys", "trace", "requeue", "pause", "resume", "informers",
};
static const char *const states[] = {"", "queued", "inflight", "backoff", "failing"};
#define NSTATES (sizeof states / sizeof states[0])

/* What each command needs. */
enum { NEEDS_CONTROLLER = 1, NEEDS_KEY = 2, TAKES_STATE = 4 };
static const unsigned needs[KC_ADMIN_NCOMMANDS] = {
    [KC_ADMIN_QUEUES] = 0,
    [KC_ADMIN_KEYS] = NEEDS_CONTROLLER | TAKES_STATE,
    [KC_ADMIN_TRACE] = NEEDS_CONTROLLER | NEEDS_KEY,
    [KC_ADMIN_REQUEUE] = NEEDS_CONTROLLER | NEEDS_KEY,
    [KC_ADMIN_PAUSE] = NEEDS_CONTROLLER,
    [KC_ADMIN_RESUME] = NEEDS_CONTROLLER,
    [KC_ADMIN_INFORMERS] = 0,
};

const char *kc_admin_command_name(enum kc_admin_command c) {
  return (unsigned)c < KC_ADMIN_NCOMMANDS ? commands[c] : "?";
}

const char *kc_admin_state_name(enum kc_admin_state s) {
  return (unsigned)s < NSTATES ? states[s] : "?";
}

int kc_admin_command_parse(const char *name, enum kc_admin_command *out) {
  for (unsigned i = 0; i < KC_ADMIN_NCOMMANDS; i++)
    if (strcmp(name, commands[i]) == 0) {
      *out = (enum kc_admin_command)i;
      return 0;
    }
  return -EINVAL;
}

int kc_admin_state_parse(const char *name, enum kc_admin_state *out) {
  for (unsigned i = 1; i < NSTATES; i++)
    if (strcmp(name, states[i]) == 0) {
      *out = (enum kc_admin_state)i;
      return 0;
    }
  return -EINVAL;
}

/* A string field into buf: 0, or -EINVAL with err set (not a string,
 * empty, too long, holding a control character, or not UTF-8: the answer
 * and the formatted request carry it as JSON, which would replace such
 * bytes). */
static int take_string(const char *field, yajl_val v, char *buf, size_t cap, char *err,
                       size_t errlen) {
  if (!YAJL_IS_STRING(v)) {
    kc_errf(err, errlen, "\"%s\" must be a string", field);
    return -EINVAL;
  }
  const char *s = YAJL_GET_STRING(v);
  size_t n = strlen(s);
  if (n == 0 || n >= cap) {
    kc_errf(err, errlen, "\"%s\" must be 1..%zu bytes", field, cap - 1);
    return -EINVAL;
  }
  for (size_t i = 0; i < n;) {
    const unsigned char *u = (const unsigned char *)s + i;
    if (*u < 0x20 || *u == 0x7f) {
      kc_errf(err, errlen, "\"%s\" holds a control character", field);
      return -EINVAL;
    }
    size_t w = *u < 0x80 ? 1 : kc_utf8_len(u, n - i);
    if (!w) {
      kc_errf(err, errlen, "\"%s\" is not valid UTF-8", field);
      return -EINVAL;
    }
    i += w;
  }
  memcpy(buf, s, n + 1);
  return 0;
}

int kc_admin_request_parse(const char *line, size_t len, kc_admin_request *out, char *err,
                           size_t errlen) {
  memset(out, 0, sizeof *out);
  if (len >= KC_ADMIN_REQUEST_MAX) {
    kc_errf(err, errlen, "request longer than %u bytes", KC_ADMIN_REQUEST_MAX - 1);
    return -E2BIG;
  }
  yajl_val root = NULL;
  char why[160];
  if (kc_jsontree_parse(line, len, &root, why, sizeof why) < 0) {
    kc_errf(err, errlen, "request is not JSON: %s", why);
    return -EINVAL;
  }
  int rc = 0;
  bool have_command = false;
  char state[32] = "", command[32] = "";
  if (!YAJL_IS_OBJECT(root)) {
    kc_errf(err, errlen, "request must be a JSON object");
    rc = -EINVAL;
    goto out;
  }
  for (size_t i = 0; rc == 0 && i < root->u.object.len; i++) {
    const char *k = root->u.object.keys[i];
    yajl_val v = root->u.object.values[i];
    for (size_t j = 0; j < i; j++)
      if (strcmp(root->u.object.keys[j], k) == 0) {
        kc_errf(err, errlen, "\"%s\" given twice", k);
        rc = -EINVAL;
        goto out;
      }
    if (strcmp(k, "command") == 0) {
      rc = take_string(k, v, command, sizeof command, err, errlen);
      have_command = rc == 0;
    } else if (strcmp(k, "controller") == 0) {
      rc = take_string(k, v, out->controller, sizeof out->controller, err, errlen);
    } else if (strcmp(k, "key") == 0) {
      rc = take_string(k, v, out->key, sizeof out->key, err, errlen);
    } else if (strcmp(k, "state") == 0) {
      rc = take_string(k, v, state, sizeof state, err, errlen);
    } else {
      kc_errf(err, errlen, "unknown field \"%.64s\"", k);
      rc = -EINVAL;
    }
  }
  if (rc < 0) goto out;
  if (!have_command) {
    kc_errf(err, errlen, "\"command\" is required");
    rc = -EINVAL;
    goto out;
  }
  if (kc_admin_command_parse(command, &out->command) < 0) {
    kc_errf(err, errlen, "unknown command \"%s\"", command);
    rc = -EINVAL;
    goto out;
  }
  unsigned n = needs[out->command];
  const char *name = commands[out->command];
  if ((n & NEEDS_CONTROLLER) && !out->controller[0]) {
    kc_errf(err, errlen, "%s needs \"controller\"", name);
    rc = -EINVAL;
  } else if ((n & NEEDS_KEY) && !out->key[0]) {
    kc_errf(err, errlen, "%s needs \"key\"", name);
    rc = -EINVAL;
  } else if (!(n & NEEDS_CONTROLLER) && out->controller[0]) {
    kc_errf(err, errlen, "%s takes no \"controller\"", name);
    rc = -EINVAL;
  } else if (!(n & NEEDS_KEY) && out->key[0]) {
    kc_errf(err, errlen, "%s takes no \"key\"", name);
    rc = -EINVAL;
  } else if (state[0] && !(n & TAKES_STATE)) {
    kc_errf(err, errlen, "%s takes no \"state\"", name);
    rc = -EINVAL;
  } else if (state[0] && kc_admin_state_parse(state, &out->state) < 0) {
    kc_errf(err, errlen, "unknown state \"%s\" (want queued, inflight, backoff or failing)", state);
    rc = -EINVAL;
  }
out:
  yajl_tree_free(root);
  if (rc < 0) memset(out, 0, sizeof *out);
  return rc;
}

void kc_admin_request_format(const kc_admin_request *r, kc_buf *out) {
  kc_buf_puts(out, "{\"command\":");
  kc_buf_json_c(out, kc_admin_command_name(r->command));
  if (r->controller[0]) {
    kc_buf_puts(out, ",\"controller\":");
    kc_buf_json_c(out, r->controller);
  }
  if (r->key[0]) {
    kc_buf_puts(out, ",\"key\":");
    kc_buf_json_c(out, r->key);
  }
  if (r->state != KC_ADMIN_STATE_ANY) {
    kc_buf_puts(out, ",\"state\":");
    kc_buf_json_c(out, kc_admin_state_name(r->state));
  }
  kc_buf_puts(out, "}\n");
}
