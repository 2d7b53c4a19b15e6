/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "recorder" (tests/faults/run_faults.py): the fault campaign's
 * witness of what the daemon saw.
 *
 * Every reconcile appends one line to settings.log:
 *     <CLOCK_MONOTONIC ns> <key> <resourceVersion> <uid>
 * with the object as the cache holds it at that moment, or "- -" in place of
 * resourceVersion and uid when the cache has no such key (the key was
 * deleted). The host never runs two reconciles of one key at once, so the
 * last line of a key is the cache state its last reconcile saw.
 *
 * The key settings.probe ("namespace/name", default faults-probe/probe) is
 * special: reconciling it dumps the whole cache of the kind to
 * settings.dumpDir/dump-<data.seq of the probe> (written to a temporary name
 * and renamed, so a reader never sees half a dump), one line per object:
 *     <key> <resourceVersion> <uid>
 * The campaign bumps data.seq and compares the dump with a fresh LIST.
 *
 * settings: log (path, required), dumpDir (path, required), probe,
 * apiVersion and kind (default v1 ConfigMap).
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 * Threads: reconcile on workers (the log fd is shared: one write(2) per line
 * under a mutex, O_APPEND), init/fini on the loop.
 * Errors: I/O failures are returned as reconcile errors (retried with
 * backoff) and logged with the path and errno text.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kctrld/plugin.h"

static const struct kctrld_host_api *H;

struct recorder {
  int fd;
  pthread_mutex_t mu;
  char dump_dir[512];
  char probe[512];
  char api_version[64];
  char kind[64];
};

static int copy_setting(const kctrld_settings *s, const char *key, char *buf, size_t cap,
                        const char *dflt) {
  const char *v = NULL;
  int rc = H->settings_string(s, key, &v);
  if (rc == -ENOENT && dflt) v = dflt;
  else if (rc < 0) return rc;
  if (!v[0] || strlen(v) >= cap) return -EINVAL;
  snprintf(buf, cap, "%s", v);
  return 0;
}

static int recorder_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  struct recorder *r = H->alloc(sizeof *r);
  if (!r) return -ENOMEM;
  memset(r, 0, sizeof *r);
  char logpath[512];
  int rc;
  if ((rc = copy_setting(settings, "log", logpath, sizeof logpath, NULL)) < 0 ||
      (rc = copy_setting(settings, "dumpDir", r->dump_dir, sizeof r->dump_dir, NULL)) < 0 ||
      (rc = copy_setting(settings, "probe", r->probe, sizeof r->probe, "faults-probe/probe")) < 0 ||
      (rc = copy_setting(settings, "apiVersion", r->api_version, sizeof r->api_version, "v1")) < 0 ||
      (rc = copy_setting(settings, "kind", r->kind, sizeof r->kind, "ConfigMap")) < 0) {
    H->log(KCTRLD_LOG_ERROR, "settings: log and dumpDir are required (paths < 512 bytes): %s",
           strerror(-rc));
    H->free(r);
    return rc;
  }
  r->fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (r->fd < 0) {
    rc = -errno;
    H->log(KCTRLD_LOG_ERROR, "open %s: %s", logpath, strerror(-rc));
    H->free(r);
    return rc;
  }
  rc = pthread_mutex_init(&r->mu, NULL);
  if (rc != 0) {
    close(r->fd);
    H->free(r);
    return -rc;
  }
  *out = r;
  return 0;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Appends "<key> <rv> <uid>\n" of obj to the buffer *buf (grown with
 * H->realloc); returns 0 or -ENOMEM. */
static int append_obj(char **buf, size_t *len, size_t *cap, const kctrld_object *obj) {
  kctrld_str ns = H->object_namespace(obj), name = H->object_name(obj);
  kctrld_str rv = H->object_resource_version(obj), uid = H->object_uid(obj);
  size_t need = ns.len + name.len + rv.len + uid.len + 8;
  if (*len + need > *cap) {
    size_t ncap = (*cap ? *cap * 2 : 65536) + need;
    char *n = H->realloc(*buf, ncap);
    if (!n) return -ENOMEM;
    *buf = n;
    *cap = ncap;
  }
  int n = snprintf(*buf + *len, *cap - *len, "%.*s%s%.*s %.*s %.*s\n", (int)ns.len,
                   ns.ptr ? ns.ptr : "", ns.len ? "/" : "", (int)name.len, name.ptr ? name.ptr : "",
                   rv.len ? (int)rv.len : 1, rv.len ? rv.ptr : "-", uid.len ? (int)uid.len : 1,
                   uid.len ? uid.ptr : "-");
  if (n < 0 || (size_t)n >= *cap - *len) return -ENOMEM;
  *len += (size_t)n;
  return 0;
}

static int dump_cache(struct recorder *r, kctrld_ctx *ctx, const kctrld_object *probe) {
  char seq[64] = "";
  int rc = H->object_string(probe, "data.seq", seq, sizeof seq);
  if (rc < 0 || !seq[0] || strchr(seq, '/')) return H->result_error(ctx, "probe without data.seq");
  kctrld_list *list = NULL;
  kctrld_list_opts opts = {.struct_size = sizeof opts};
  rc = H->cache_list(ctx, r->api_version, r->kind, &opts, &list);
  if (rc < 0) return H->result_error(ctx, "cache_list: %s", strerror(-rc));
  char *buf = NULL;
  size_t len = 0, cap = 0, n = H->list_len(list);
  for (size_t i = 0; i < n && rc == 0; i++) rc = append_obj(&buf, &len, &cap, H->list_item(list, i));
  H->list_release(list);
  if (rc < 0) {
    H->free(buf);
    return H->result_error(ctx, "dump: %s", strerror(-rc));
  }
  char tmp[600], dst[600];
  snprintf(tmp, sizeof tmp, "%s/.dump-%s.tmp", r->dump_dir, seq);
  snprintf(dst, sizeof dst, "%s/dump-%s", r->dump_dir, seq);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    rc = -errno;
  } else {
    rc = write_all(fd, buf ? buf : "", len);
    if (close(fd) != 0 && rc == 0) rc = -errno;
    if (rc == 0 && rename(tmp, dst) != 0) rc = -errno;
  }
  H->free(buf);
  if (rc < 0) return H->result_error(ctx, "dump %s: %s", dst, strerror(-rc));
  return KCTRLD_RESULT_DONE;
}

static int recorder_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct recorder *r = instance;
  char ns[254] = "", name[254];
  const char *slash = strchr(key, '/');
  const char *nm = slash ? slash + 1 : key;
  size_t nslen = slash ? (size_t)(slash - key) : 0;
  if (nslen >= sizeof ns || strlen(nm) >= sizeof name) return H->result_error(ctx, "key too long");
  memcpy(ns, key, nslen);
  ns[nslen] = '\0';
  snprintf(name, sizeof name, "%s", nm);
  kctrld_ref ref = {r->api_version, r->kind, ns, name};
  const kctrld_object *obj = NULL;
  int rc = H->cache_get(ctx, &ref, &obj);
  if (rc < 0 && rc != -ENOENT) return H->result_error(ctx, "cache_get %s: %s", key, strerror(-rc));
  if (rc == 0 && strcmp(key, r->probe) == 0) {
    rc = dump_cache(r, ctx, obj);
    H->object_release(obj);
    return rc;
  }
  char line[1200];
  int n;
  if (obj) {
    kctrld_str rv = H->object_resource_version(obj), uid = H->object_uid(obj);
    n = snprintf(line, sizeof line, "%llu %s %.*s %.*s\n", (unsigned long long)now_ns(), key,
                 (int)rv.len, rv.ptr ? rv.ptr : "", (int)uid.len, uid.ptr ? uid.ptr : "");
    H->object_release(obj);
  } else {
    n = snprintf(line, sizeof line, "%llu %s - -\n", (unsigned long long)now_ns(), key);
  }
  if (n < 0 || (size_t)n >= sizeof line) return H->result_error(ctx, "record line too long");
  pthread_mutex_lock(&r->mu);
  rc = write_all(r->fd, line, (size_t)n);
  pthread_mutex_unlock(&r->mu);
  if (rc < 0) return H->result_error(ctx, "write record: %s", strerror(-rc));
  return KCTRLD_RESULT_DONE;
}

static void recorder_fini(void *instance) {
  struct recorder *r = instance;
  close(r->fd);
  pthread_mutex_destroy(&r->mu);
  H->free(r);
}

static const struct kctrld_plugin recorder = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "recorder",
    .init = recorder_init,
    .reconcile = recorder_reconcile,
    .fini = recorder_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &recorder;
}
