/* SPDX-License-Identifier: Apache-2.0 */
/* adminsock: see adminsock.h. */
#include "ops/adminsock.h"

#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "ops/admin.h"
#include "ops/adminreq.h"

typedef struct client client;

struct kc_adminsock {
  uv_pipe_t server;
  char *path;
  kc_ops_view_fn view;
  void *ud;
  client *clients; /* open connections */
  unsigned nclients;
  unsigned handles; /* handles not closed yet: the server's and each client's two */
  bool closing;
};

struct client {
  client *next, **pprev;
  kc_adminsock *s;
  uv_pipe_t pipe;
  uv_timer_t idle;
  uv_write_t wr;
  char in[KC_ADMIN_REQUEST_MAX];
  size_t inlen;
  kc_buf answer;
  bool answered; /* no more reading: the answer is written, then the close */
  bool closing;
  unsigned open; /* of pipe and idle: the last close callback frees */
};

static void maybe_free(kc_adminsock *s) {
  if (s->closing && s->handles == 0) {
    free(s->path);
    free(s);
  }
}

static void on_client_handle_closed(uv_handle_t *h) {
  client *c = h->data;
  kc_adminsock *s = c->s;
  s->handles--;
  if (--c->open) return;
  kc_buf_free(&c->answer);
  free(c);
  maybe_free(s);
}

static void client_close(client *c) {
  if (c->closing) return;
  c->closing = true;
  *c->pprev = c->next;
  if (c->next) c->next->pprev = c->pprev;
  c->s->nclients--;
  uv_close((uv_handle_t *)&c->idle, on_client_handle_closed);
  uv_close((uv_handle_t *)&c->pipe, on_client_handle_closed);
}

static void on_written(uv_write_t *w, int status) {
  client *c = w->data;
  if (status < 0 && status != UV_ECANCELED)
    kc_debug("adminsock", "answer not delivered: %s", uv_strerror(status));
  client_close(c);
}

static void send_answer(client *c) {
  c->answered = true;
  uv_read_stop((uv_stream_t *)&c->pipe);
  uv_timer_stop(&c->idle);
  if (!c->answer.p || c->answer.err) {
    kc_buf_reset(&c->answer);
    kc_admin_error(&c->answer, "out of memory");
  }
  if (!c->answer.p) {
    client_close(c);
    return;
  }
  uv_buf_t b = uv_buf_init(c->answer.p, (unsigned)c->answer.len);
  c->wr.data = c;
  int rc = uv_write(&c->wr, (uv_stream_t *)&c->pipe, &b, 1, on_written);
  if (rc < 0) client_close(c);
}

static void handle_request(client *c, size_t len) {
  kc_admin_request r;
  char err[256];
  int rc = kc_admin_request_parse(c->in, len, &r, err, sizeof err);
  if (rc < 0) {
    kc_admin_error(&c->answer, err);
    kc_info("adminsock", "request refused: %s", err);
  } else {
    kc_ops_view v = {0};
    c->s->view(c->s->ud, &v);
    rc = kc_admin_answer(&v, &r, &c->answer);
    if (r.command == KC_ADMIN_REQUEUE || r.command == KC_ADMIN_PAUSE ||
        r.command == KC_ADMIN_RESUME)
      kc_info("adminsock", "kctrld ctl %s controller=%s%s%s: %s", kc_admin_command_name(r.command),
              r.controller, r.key[0] ? " key=" : "", r.key, rc < 0 ? "refused" : "done");
  }
  send_answer(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  client *c = h->data;
  size_t room = sizeof c->in - c->inlen;
  *buf = uv_buf_init(c->in + c->inlen, (unsigned)room);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  client *c = st->data;
  if (c->answered) return;
  if (n < 0) {
    if (n != UV_EOF) kc_debug("adminsock", "read: %s", uv_strerror((int)n));
    if (n == UV_EOF && c->inlen) { /* a request without its newline */
      handle_request(c, c->inlen);
      return;
    }
    client_close(c);
    return;
  }
  if (n == 0) return;
  const char *nl = memchr(c->in + c->inlen, '\n', (size_t)n);
  c->inlen += (size_t)n;
  if (nl) {
    handle_request(c, (size_t)(nl - c->in));
    return;
  }
  if (c->inlen >= sizeof c->in) {
    char msg[96];
    snprintf(msg, sizeof msg, "request longer than %u bytes", KC_ADMIN_REQUEST_MAX - 1);
    kc_admin_error(&c->answer, msg);
    send_answer(c);
  }
}

static void on_idle(uv_timer_t *t) {
  client *c = t->data;
  kc_debug("adminsock", "client sent no request in %d ms: closed", KC_ADMINSOCK_IDLE_MS);
  client_close(c);
}

static void on_connection(uv_stream_t *server, int status) {
  kc_adminsock *s = server->data;
  if (status < 0) {
    kc_warn("adminsock", "accept: %s", uv_strerror(status));
    return;
  }
  client *c = calloc(1, sizeof *c);
  if (!c) {
    kc_warn("adminsock", "connection dropped: out of memory");
    return;
  }
  c->s = s;
  int rc = uv_pipe_init(server->loop, &c->pipe, 0);
  if (rc < 0) {
    free(c);
    kc_warn("adminsock", "connection dropped: %s", uv_strerror(rc));
    return;
  }
  c->pipe.data = c;
  c->open = 1;
  s->handles++;
  rc = uv_timer_init(server->loop, &c->idle);
  if (rc < 0) { /* the pipe is initialised: close it, which frees */
    c->closing = true;
    uv_close((uv_handle_t *)&c->pipe, on_client_handle_closed);
    kc_warn("adminsock", "connection dropped: %s", uv_strerror(rc));
    return;
  }
  c->idle.data = c;
  c->open = 2;
  s->handles++;
  c->next = s->clients;
  c->pprev = &s->clients;
  if (s->clients) s->clients->pprev = &c->next;
  s->clients = c;
  s->nclients++;
  if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
    client_close(c);
    return;
  }
  if (s->nclients > KC_ADMINSOCK_MAX_CLIENTS) {
    kc_warn("adminsock", "more than %d clients at once: connection closed", KC_ADMINSOCK_MAX_CLIENTS);
    client_close(c);
    return;
  }
  if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) < 0 ||
      uv_timer_start(&c->idle, on_idle, KC_ADMINSOCK_IDLE_MS, 0) < 0)
    client_close(c);
}

/* Whether a process answers at path (a live socket). */
static bool someone_serves(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  bool live = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return live;
}

static void on_server_closed(uv_handle_t *h) {
  kc_adminsock *s = h->data;
  s->handles--;
  maybe_free(s);
}

int kc_adminsock_group_id(const char *name, gid_t *out) {
  if (!name || !*name) return -ENOENT;
  long size = sysconf(_SC_GETGR_R_SIZE_MAX);
  size_t cap = size > 0 ? (size_t)size : 16384;
  for (;;) {
    char *buf = malloc(cap);
    if (!buf) return -ENOMEM;
    struct group g, *found = NULL;
    int rc = getgrnam_r(name, &g, buf, cap, &found);
    if (rc == ERANGE && cap < (1u << 20)) {
      free(buf);
      cap *= 2;
      continue;
    }
    if (rc == 0 && found) *out = g.gr_gid;
    free(buf);
    /* Not found is rc 0 with no entry (some libcs answer ENOENT or ESRCH). */
    if (rc == 0 || rc == ENOENT || rc == ESRCH) return found ? 0 : -ENOENT;
    return -rc;
  }
}

int kc_adminsock_start(uv_loop_t *loop, const char *path, gid_t group, kc_ops_view_fn view,
                       void *ud, kc_adminsock **out) {
  struct sockaddr_un a;
  if (!path || !*path) return -EINVAL;
  if (strlen(path) >= sizeof a.sun_path) return -ENAMETOOLONG;
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return -EEXIST;
    if (someone_serves(path)) return -EADDRINUSE;
    if (unlink(path) < 0 && errno != ENOENT) return -errno;
    kc_info("adminsock", "replaced the stale socket %s", path);
  } else if (errno != ENOENT) {
    return -errno;
  }
  kc_adminsock *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return -ENOMEM;
  }
  s->view = view;
  s->ud = ud;
  int rc = uv_pipe_init(loop, &s->server, 0);
  if (rc < 0) {
    free(s->path);
    free(s);
    return rc;
  }
  s->server.data = s;
  s->handles = 1;
  /* Never wider than asked, not even between bind and chmod: bound 0600,
   * then given the group while still 0600, then opened to the group. */
  bool grouped = group != KC_ADMINSOCK_NO_GROUP;
  mode_t old = umask(0177);
  rc = uv_pipe_bind(&s->server, path);
  umask(old);
  if (rc == 0 && grouped && lchown(path, (uid_t)-1, group) < 0) rc = -errno;
  if (rc == 0 && chmod(path, grouped ? 0660 : 0600) < 0) rc = -errno;
  if (rc == 0) rc = uv_listen((uv_stream_t *)&s->server, 16, on_connection);
  if (rc < 0) {
    if (rc != UV_EADDRINUSE) unlink(path);
    s->closing = true;
    uv_close((uv_handle_t *)&s->server, on_server_closed);
    return rc;
  }
  if (grouped)
    kc_info("adminsock", "serving kctrld ctl path=%s mode=0660 gid=%u", path, (unsigned)group);
  else
    kc_info("adminsock", "serving kctrld ctl path=%s mode=0600", path);
  *out = s;
  return 0;
}

void kc_adminsock_close(kc_adminsock *s) {
  if (!s || s->closing) return;
  s->closing = true;
  while (s->clients) client_close(s->clients);
  if (unlink(s->path) < 0 && errno != ENOENT)
    kc_warn("adminsock", "cannot remove %s: %s", s->path, strerror(errno));
  uv_close((uv_handle_t *)&s->server, on_server_closed);
}
