/* SPDX-License-Identifier: Apache-2.0 */
/* apisim_child: see apisim_child.h. */
#include "apisim_child.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

char sim_build_dir[PATH_MAX];
char sim_root_dir[PATH_MAX];
char sim_tmp_dir[64];
char sim_url[128];
char sim_kubeconfig[PATH_MAX];
static pid_t sim_pid = -1;

uint64_t sim_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sim_sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int cut_last(char *path) {
  char *slash = strrchr(path, '/');
  if (!slash) return -1;
  *slash = '\0';
  return 0;
}

int sim_paths_init(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = '\0';
  if (cut_last(exe) < 0 || cut_last(exe) < 0) return -1;
  snprintf(sim_build_dir, sizeof sim_build_dir, "%s", exe);
  if (cut_last(exe) < 0) return -1;
  snprintf(sim_root_dir, sizeof sim_root_dir, "%s", exe);
  snprintf(sim_tmp_dir, sizeof sim_tmp_dir, "/tmp/kctrld-errtest.XXXXXX");
  return mkdtemp(sim_tmp_dir) ? 0 : -1;
}

void sim_paths_free(void) {
  if (!sim_tmp_dir[0]) return;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", sim_tmp_dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", sim_tmp_dir);
}

void sim_tmp_path(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", sim_tmp_dir, name);
}

int sim_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok ? 0 : -1;
}

int sim_start(void) {
  sim_tmp_path(sim_kubeconfig, sizeof sim_kubeconfig, "kubeconfig");
  char bin[PATH_MAX + 16], crd[PATH_MAX + 32], objs[PATH_MAX + 32], log[PATH_MAX];
  snprintf(bin, sizeof bin, "%s/kube-apisim", sim_build_dir);
  snprintf(crd, sizeof crd, "%s/config/podset-crd.yaml", sim_root_dir);
  snprintf(objs, sizeof objs, "%s/config/demo-objects.yaml", sim_root_dir);
  sim_tmp_path(log, sizeof log, "apisim.log");
  int fds[2];
  if (pipe(fds) != 0) return -1;
  sim_pid = fork();
  if (sim_pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (sim_pid == 0) {
    int lf = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (lf >= 0) dup2(lf, 2);
    dup2(fds[1], 1);
    close(fds[0]);
    execl(bin, bin, "--listen", "127.0.0.1:0", "--kubeconfig-out", sim_kubeconfig, "--seed", crd,
          "--seed", objs, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  struct pollfd p = {fds[0], POLLIN, 0};
  while (n < sizeof sim_url - 1 && poll(&p, 1, 30000) == 1) {
    ssize_t r = read(fds[0], sim_url + n, 1);
    if (r <= 0 || sim_url[n] == '\n') break;
    n++;
  }
  sim_url[n] = '\0';
  close(fds[0]);
  return strncmp(sim_url, "http://", 7) == 0 ? 0 : -1;
}

void sim_stop(void) {
  if (sim_pid <= 0) return;
  int st;
  if (waitpid(sim_pid, &st, WNOHANG) == sim_pid) {
    /* It died under the test: say how, with the end of its log. */
    char log[PATH_MAX];
    sim_tmp_path(log, sizeof log, "apisim.log");
    fprintf(stderr, "# kube-apisim exited before sim_stop: %s %d; end of %s:\n",
            WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), log);
    size_t len = 0;
    char *text = tu_read_file(log, &len);
    if (text) fprintf(stderr, "%s\n", text + (len > 4000 ? len - 4000 : 0));
    free(text);
  } else {
    kill(sim_pid, SIGTERM);
    waitpid(sim_pid, &st, 0);
  }
  sim_pid = -1;
}

struct buf {
  char *p;
  size_t n;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
  struct buf *b = ud;
  size_t len = size * nmemb;
  char *p = realloc(b->p, b->n + len + 1);
  if (!p) return 0;
  memcpy(p + b->n, data, len);
  b->p = p;
  b->n += len;
  b->p[b->n] = '\0';
  return len;
}

long sim_request(const char *method, const char *url, const char *body, const char *ctype,
                 long timeout_ms, char **out) {
  char hdr[128];
  snprintf(hdr, sizeof hdr, "Content-Type: %s", ctype ? ctype : "application/json");
  if (out) *out = NULL;
  CURL *c = curl_easy_init();
  if (!c) return 0;
  struct buf b = {NULL, 0};
  struct curl_slist *h = curl_slist_append(NULL, hdr);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  if (body && h) {
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  }
  long code = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (out)
    *out = b.p;
  else
    free(b.p);
  return code;
}

long sim_call(const char *method, const char *path, const char *body, const char *ctype, char **out) {
  char url[1024];
  snprintf(url, sizeof url, "%s%s", sim_url, path);
  return sim_request(method, url, body, ctype, 20000, out);
}

long sim_get_url(const char *url, char **out) {
  return sim_request("GET", url, NULL, NULL, 20000, out);
}

unsigned sim_free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  unsigned port = 0;
  if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(s);
  return port;
}
