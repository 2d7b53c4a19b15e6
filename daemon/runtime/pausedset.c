/* SPDX-License-Identifier: Apache-2.0 */
/* pausedset: see pausedset.h. */
#include "runtime/pausedset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/durablefile.h"
#include "base/log.h"
#include "json/yamltree.h"

#define NAME_MAX_LEN 63

struct kc_paused_set {
  char *dir; /* NULL: in memory only */
  char **names;
  size_t n, cap;
};

static void why_f(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_f(char *why, size_t cap, const char *fmt, ...) {
  if (!why || !cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, cap, fmt, ap);
  va_end(ap);
}

/* A controller name (config_controllers.c checks the same). */
static bool name_ok(const char *s, size_t len) {
  if (len == 0 || len > NAME_MAX_LEN) return false;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '_' || ch == '-'))
      return false;
  }
  return true;
}

kc_paused_set *kc_paused_set_new(const char *dir) {
  kc_paused_set *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  if (dir && !(p->dir = strdup(dir))) {
    free(p);
    return NULL;
  }
  return p;
}

void kc_paused_set_names_free(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

void kc_paused_set_free(kc_paused_set *p) {
  if (!p) return;
  kc_paused_set_names_free(p->names, p->n);
  free(p->dir);
  free(p);
}

int kc_paused_set_parse(const char *buf, size_t len, char ***names_out, size_t *n_out, char *why,
                        size_t cap) {
  *names_out = NULL;
  *n_out = 0;
  kc_yaml_doc *doc = NULL;
  char err[256];
  int rc = kc_yaml_load_buffer(KC_PAUSEDSET_FILE, buf, len, &doc, err, sizeof err);
  if (rc < 0) {
    why_f(why, cap, "%s", rc == -EINVAL ? err : strerror(-rc));
    return rc;
  }
  const kc_yaml_node *root = kc_yaml_root(doc);
  char **names = NULL;
  size_t n = 0, ncap = 0;
  rc = 0;
  if (!root) goto out; /* an empty file: nothing paused */
  if (root->type != KC_YAML_MAPPING || root->u.map.len != 1 ||
      strcmp(root->u.map.pairs[0].key.u.scalar.text, "paused") != 0) {
    why_f(why, cap, "expected a mapping with the one key \"paused\"");
    rc = -EINVAL;
    goto out;
  }
  const kc_yaml_node *list = &root->u.map.pairs[0].value;
  if (list->type == KC_YAML_SCALAR && kc_yaml_is_null(list)) goto out;
  if (list->type != KC_YAML_SEQUENCE) {
    why_f(why, cap, "line %u: \"paused\" is not a list of controller names", list->line);
    rc = -EINVAL;
    goto out;
  }
  for (size_t i = 0; i < list->u.seq.len; i++) {
    const kc_yaml_node *it = &list->u.seq.items[i];
    if (it->type != KC_YAML_SCALAR || !name_ok(it->u.scalar.text, it->u.scalar.len) ||
        strlen(it->u.scalar.text) != it->u.scalar.len) {
      why_f(why, cap, "line %u: not a controller name (1-%d characters of [A-Za-z0-9._-])",
            it->line, NAME_MAX_LEN);
      rc = -EINVAL;
      goto out;
    }
    for (size_t j = 0; j < n; j++)
      if (strcmp(names[j], it->u.scalar.text) == 0) {
        why_f(why, cap, "line %u: \"%s\" is listed twice", it->line, names[j]);
        rc = -EINVAL;
        goto out;
      }
    if (KC_ARRAY_RESERVE(names, ncap, n + 1, 8) < 0 || !(names[n] = strdup(it->u.scalar.text))) {
      why_f(why, cap, "out of memory");
      rc = -ENOMEM;
      goto out;
    }
    n++;
  }
out:
  kc_yaml_free(doc);
  if (rc < 0) {
    kc_paused_set_names_free(names, n);
    return rc;
  }
  *names_out = names;
  *n_out = n;
  return 0;
}

static int file_path(const kc_paused_set *p, char *out, size_t cap) {
  int k = snprintf(out, cap, "%s/%s", p->dir, KC_PAUSEDSET_FILE);
  return k < 0 || (size_t)k >= cap ? -ENAMETOOLONG : 0;
}

int kc_paused_set_load(kc_paused_set *p) {
  if (!p->dir) return 0;
  char path[4096], why[320] = "";
  if (file_path(p, path, sizeof path) < 0) return -ENAMETOOLONG;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    int e = errno;
    kc_warn("pausedset", "%s: cannot read it: %s; no controller starts paused", path, strerror(e));
    return -e;
  }
  char *buf = malloc(KC_PAUSEDSET_MAX_BYTES + 1);
  size_t len = 0;
  int rc = buf ? 0 : -ENOMEM;
  struct stat st;
  if (rc == 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
    rc = -EINVAL;
    snprintf(why, sizeof why, "not a regular file");
  }
  while (rc == 0) {
    ssize_t r = read(fd, buf + len, KC_PAUSEDSET_MAX_BYTES + 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      rc = -errno;
      snprintf(why, sizeof why, "cannot read it: %s", strerror(errno));
      break;
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len > KC_PAUSEDSET_MAX_BYTES) {
      rc = -EFBIG;
      snprintf(why, sizeof why, "larger than %u bytes", KC_PAUSEDSET_MAX_BYTES);
      break;
    }
  }
  close(fd);
  char **names = NULL;
  size_t n = 0;
  if (rc == 0) rc = kc_paused_set_parse(buf, len, &names, &n, why, sizeof why);
  free(buf);
  if (rc < 0) {
    kc_warn("pausedset", "%s: ignored: %s; no controller starts paused", path,
            why[0] ? why : strerror(-rc));
    return rc;
  }
  kc_paused_set_names_free(p->names, p->n);
  p->names = names;
  p->n = p->cap = n;
  for (size_t i = 0; i < n; i++)
    kc_info("pausedset", "controller %s stays paused (kctrld ctl pause before the restart; "
            "kctrld ctl resume %s ends it)", names[i], names[i]);
  return 0;
}

/* Writes the set (or removes the file when it is empty). */
static int save(const kc_paused_set *p, char *why, size_t cap) {
  if (!p->dir) return 0;
  if (p->n == 0) return kc_durable_remove(p->dir, KC_PAUSEDSET_FILE, why, cap);
  kc_buf b = {0};
  kc_buf_puts(&b, "# Controllers paused by `kctrld ctl pause` (`kctrld ctl resume NAME` ends a "
                  "pause).\n# Written by kctrld; read at its start.\npaused:\n");
  for (size_t i = 0; i < p->n; i++) kc_buf_printf(&b, "  - \"%s\"\n", p->names[i]);
  if (b.err || !b.p) {
    kc_buf_free(&b);
    why_f(why, cap, "out of memory");
    return -ENOMEM;
  }
  int rc = kc_durable_write_file(p->dir, KC_PAUSEDSET_FILE, 0600, b.p, b.len, why, cap);
  kc_buf_free(&b);
  return rc;
}

static ssize_t find(const kc_paused_set *p, const char *name) {
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->names[i], name) == 0) return (ssize_t)i;
  return -1;
}

bool kc_paused_set_has(const kc_paused_set *p, const char *name) {
  return p && name && find(p, name) >= 0;
}

size_t kc_paused_set_count(const kc_paused_set *p) { return p ? p->n : 0; }

const char *kc_paused_set_name(const kc_paused_set *p, size_t i) {
  return p && i < p->n ? p->names[i] : NULL;
}

static void drop(kc_paused_set *p, size_t i) {
  free(p->names[i]);
  memmove(&p->names[i], &p->names[i + 1], (p->n - i - 1) * sizeof *p->names);
  p->n--;
}

int kc_paused_set_put(kc_paused_set *p, const char *name, bool paused, char *why, size_t cap) {
  ssize_t i = find(p, name);
  if (paused == (i >= 0)) return 0;
  if (!paused) {
    drop(p, (size_t)i);
  } else {
    if (!name_ok(name, strlen(name))) {
      why_f(why, cap, "not a controller name");
      return -EINVAL;
    }
    char *copy = strdup(name);
    if (!copy || KC_ARRAY_RESERVE(p->names, p->cap, p->n + 1, 8) < 0) {
      free(copy);
      why_f(why, cap, "out of memory");
      return -ENOMEM;
    }
    p->names[p->n++] = copy;
  }
  return save(p, why, cap);
}

void kc_paused_set_retain(kc_paused_set *p, bool (*known)(const char *name, void *ud), void *ud) {
  bool dropped = false;
  for (size_t i = 0; i < p->n;) {
    if (known(p->names[i], ud)) {
      i++;
      continue;
    }
    kc_info("pausedset", "the pause of controller %s is dropped: the config has no such "
            "controller any more", p->names[i]);
    drop(p, i);
    dropped = true;
  }
  char why[320];
  if (dropped && save(p, why, sizeof why) < 0)
    kc_warn("pausedset", "%s/%s: cannot write it: %s", p->dir, KC_PAUSEDSET_FILE, why);
}
