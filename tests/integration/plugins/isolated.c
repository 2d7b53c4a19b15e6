/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin for `isolation: process` (daemon/hooks/isolate.h), built by its tests
 * like an out-of-tree plugin (cc -shared -fPIC -fvisibility=hidden
 * -Iinclude): tests/unit/test_isolate.c and tests/integration/test_isolate.py.
 * Unless the setting safe is true, what reconcile does depends on the
 * object's name (any namespace):
 *   segv     dereferences NULL (SIGSEGV)
 *   abort    calls abort() (SIGABRT)
 *   exit     exits with status 3 (so does any name starting with "exit-")
 *   hang     sleeps an hour (past any reconcileTimeout)
 *   garbage  writes a line of its own to the daemon's channel: not fd 1
 *            (the child points that at stderr) but the write-only pipe
 *            the child moved the channel to (find_channel)
 *   printf   printf()s a debugging line to stdout (and flushes it), then
 *            goes on as for any other name: the line must reach the log,
 *            not the channel
 *   error    fails with the message "told to fail"
 *   list     lists the ConfigMaps of its namespace with the label
 *            app=web (cache_list with a selector) and logs
 *            "listed n=N names=A,B,"
 *   (others) reads the object from the cache and, when it exists, merge-
 *            patches the label <settings.label, default "isolated">=
 *            <settings.greeting> onto it (once),
 *            records a Normal Event "Isolated", sets and observes one
 *            creation expectation, and logs "reconciled n=N" (N: this
 *            child's reconciles so far).
 * init reads the settings greeting (string, default "hi") and fails with
 * -ECONNREFUSED when the setting failInit is true.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kctrld/plugin.h"

static const struct kctrld_host_api *H;

struct inst {
  char greeting[64];
  char label[64];
  bool safe;
  int n;
};

static int iso_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  struct inst *x = H->alloc(sizeof *x);
  if (!x) return -ENOMEM;
  memset(x, 0, sizeof *x);
  (void)ctx;
  const char *g = NULL;
  snprintf(x->greeting, sizeof x->greeting, "%s",
           H->settings_string(settings, "greeting", &g) == 0 && g ? g : "hi");
  const char *l = NULL;
  snprintf(x->label, sizeof x->label, "%s",
           H->settings_string(settings, "label", &l) == 0 && l ? l : "isolated");
  if (H->settings_bool(settings, "safe", &x->safe) < 0) x->safe = false;
  bool fail = false;
  if (H->settings_bool(settings, "failInit", &fail) == 0 && fail) {
    H->log(KCTRLD_LOG_ERROR, "told to fail init");
    H->free(x);
    return -ECONNREFUSED;
  }
  *out = x;
  return 0;
}

/* The channel to the daemon in the child: the close-on-exec write-only
 * pipe at fd 3 or above that is not stderr's pipe (isolate_child.c's
 * take_channel dups it there with F_DUPFD_CLOEXEC; a pipe inherited from
 * the daemon's process is not close-on-exec, or it would not be here).
 * -1 if none. */
static int find_channel(void) {
  struct stat err;
  if (fstat(2, &err) != 0) return -1;
  for (int fd = 3; fd < 1024; fd++) {
    struct stat st;
    int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);
    if (fl < 0 || fdfl < 0 || !(fdfl & FD_CLOEXEC) || (fl & O_ACCMODE) != O_WRONLY ||
        fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
      continue;
    if (st.st_dev == err.st_dev && st.st_ino == err.st_ino) continue;
    return fd;
  }
  return -1;
}

static int iso_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct inst *x = instance;
  const char *slash = strchr(key, '/');
  const char *name = slash ? slash + 1 : key;
  char ns[64] = "";
  if (slash && (size_t)(slash - key) < sizeof ns) memcpy(ns, key, (size_t)(slash - key));
  if (x->safe) name = "";
  if (!strcmp(name, "segv")) {
    fprintf(stderr, "about to crash on %s\n", key);
    fflush(stderr);
    volatile int *p = NULL;
    *p = 1;
  }
  if (!strcmp(name, "abort")) abort();
  if (!strcmp(name, "exit") || !strncmp(name, "exit-", 5)) _exit(3);
  if (!strcmp(name, "hang")) sleep(3600);
  if (!strcmp(name, "garbage")) {
    int fd = find_channel();
    if (fd < 0) return H->result_error(ctx, "garbage: no channel found");
    if (write(fd, "garbage\n", 8) != 8) return KCTRLD_RESULT_REQUEUE;
    return KCTRLD_RESULT_DONE;
  }
  if (!strcmp(name, "printf")) {
    printf("printf debugging in reconcile of %s\n", key);
    fflush(stdout);
  }
  if (!strcmp(name, "error")) return H->result_error(ctx, "told to fail");
  if (!strcmp(name, "soon")) return H->result_requeue_priority(ctx, 5, KCTRLD_PRIORITY_HIGH);
  if (!strcmp(name, "list")) {
    const kctrld_list_opts opts = {
        .struct_size = sizeof opts, .namespace_ = ns, .label_selector = "app=web"};
    kctrld_list *l = NULL;
    int rc = H->cache_list(ctx, "v1", "ConfigMap", &opts, &l);
    if (rc < 0) return H->result_error(ctx, "cache_list: %d", rc);
    char names[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < H->list_len(l); i++) {
      kctrld_str n = H->object_name(H->list_item(l, i));
      int w = snprintf(names + len, sizeof names - len, "%.*s,", (int)n.len, n.ptr);
      if (w > 0 && (size_t)w < sizeof names - len) len += (size_t)w;
    }
    H->log(KCTRLD_LOG_INFO, "listed n=%zu names=%s", H->list_len(l), names);
    H->list_release(l);
    return KCTRLD_RESULT_DONE;
  }
  x->n++;
  const kctrld_ref ref = {"v1", "ConfigMap", ns, slash ? slash + 1 : key};
  const kctrld_object *o = NULL;
  int rc = H->cache_get(ctx, &ref, &o);
  if (rc == -ENOENT) return KCTRLD_RESULT_DONE;
  if (rc < 0) return H->result_error(ctx, "cache_get: %d", rc);
  kctrld_str have = H->object_label(o, x->label);
  if (!have.ptr) {
    char patch[256];
    int n = snprintf(patch, sizeof patch, "{\"metadata\":{\"labels\":{\"%s\":\"%s\"}}}", x->label,
                     x->greeting);
    rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, patch, (size_t)n, false, NULL);
    if (rc < 0) {
      H->object_release(o);
      return rc == -ESTALE ? KCTRLD_RESULT_REQUEUE
                           : H->result_error(ctx, "patch: %d %s", rc, H->ctx_api_error(ctx));
    }
  }
  H->event(ctx, o, KCTRLD_EVENT_NORMAL, "Isolated", "seen by %s", x->greeting);
  H->object_release(o);
  H->expect_creations(ctx, key, 1);
  bool before = H->expectations_satisfied(ctx, key);
  H->creation_observed(ctx, key);
  bool after = H->expectations_satisfied(ctx, key);
  if (before || !after)
    return H->result_error(ctx, "expectations: before=%d after=%d", before, after);
  H->log(KCTRLD_LOG_INFO, "reconciled n=%d", x->n);
  return KCTRLD_RESULT_DONE;
}

static void iso_fini(void *instance) {
  H->free(instance);
}

static const kctrld_permission perms[] = {
    {"", "configmaps", "patch"}, KCTRLD_PERMISSION_EVENTS, KCTRLD_PERMISSIONS_END};

static const struct kctrld_plugin table = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "isolated-test",
    .version = "1",
    .init = iso_init,
    .reconcile = iso_reconcile,
    .fini = iso_fini,
    .permissions = perms,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *host) {
  H = host;
  return &table;
}
