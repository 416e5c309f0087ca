#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "activation.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/paths.h"
#include "connection.h"
#include "private_dir.h"

/* ------------------------------------------------------------------ listen */

/* A socket file is stale when nobody accepts on it. */
static int probe_socket(const struct sockaddr_un *sun) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;
  if (fd < 0)
    return -errno;
  r = connect(fd, (const struct sockaddr *)sun, sizeof *sun) < 0 ? -errno : 0;
  close(fd);
  return r;
}

static int bind_path(pcd_server *srv) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  char dir[sizeof sun.sun_path];
  struct stat st;
  mode_t old_mask;
  int fd, r;

  r = pcache__socket_path(srv->config->socket_arg, srv->socket_path, sizeof srv->socket_path);
  if (r == -ENOENT) {
    /* The one default pcached cannot make up: apps look for the socket
     * in the same place, so both must be told. */
    log_error("XDG_RUNTIME_DIR is not set, so there is no default socket "
              "($XDG_RUNTIME_DIR/pcache/socket). A login session sets it (pam_systemd). "
              "Without one, give pcached and every app the same socket, in a directory of "
              "your own: export PCACHE_SOCKET=$HOME/.cache/pcache/socket (or pcached --socket "
              "PATH with PCACHE_SOCKET=PATH for the apps); docs/operations.md, \"Without a "
              "systemd user manager\"");
    return r;
  }
  if (r < 0) {
    log_error("the socket path is longer than a Unix socket's may be (%zu bytes): pass a "
              "shorter --socket, or set a shorter PCACHE_SOCKET",
              sizeof srv->socket_path - 1);
    return r;
  }
  memcpy(sun.sun_path, srv->socket_path, strlen(srv->socket_path) + 1);
  pcache__dirname(srv->socket_path, dir, sizeof dir);
  /* Whoever may write to the socket's directory may put their own socket
   * there for our clients to find (a shared directory like /tmp is refused
   * for that reason; --socket a path in a directory of your own). */
  if ((r = pcd_private_dir(dir, "socket directory", "--socket")) < 0)
    return r;

  if (lstat(srv->socket_path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      log_error("%s exists and is not a socket; refusing to replace it", srv->socket_path);
      return -EEXIST;
    }
    r = probe_socket(&sun);
    if (r == 0) {
      log_error("another pcached is already listening on %s; exiting", srv->socket_path);
      return -EADDRINUSE;
    }
    if (r != -ECONNREFUSED) {
      log_error("cannot tell whether %s is in use: %s", srv->socket_path, strerror(-r));
      return r;
    }
    log_info("replacing stale socket %s", srv->socket_path);
    unlink(srv->socket_path);
  }

  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  old_mask = umask(0177);
  r = bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0 ? -errno : 0;
  umask(old_mask);
  if (r == 0 && chmod(srv->socket_path, 0600) < 0)
    r = -errno;
  if (r == 0 && listen(fd, SOMAXCONN) < 0)
    r = -errno;
  if (r < 0) {
    log_error("cannot listen on %s: %s", srv->socket_path, strerror(-r));
    close(fd);
    return r;
  }
  srv->listen_fd = fd;
  return 0;
}

int pcd_server_listen(pcd_server *srv) {
  int fd, r = pcd_activation_listen_fd(&fd);
  if (r < 0)
    return r;
  if (fd >= 0) {
    struct sockaddr_un sun;
    socklen_t len = sizeof sun;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
      return -errno;
    srv->listen_fd = fd;
    srv->activated = 1;
    if (getsockname(fd, (struct sockaddr *)&sun, &len) == 0 && sun.sun_family == AF_UNIX)
      snprintf(srv->socket_path, sizeof srv->socket_path, "%s", sun.sun_path);
    log_info("using the socket systemd passed (%s)", srv->socket_path);
    return 0;
  }
  return bind_path(srv);
}

/* ------------------------------------------------------------------ accept */

static void refuse(int fd, int status, const char *msg) {
  pcd_out out;
  if (pcd_reply_error(status, msg, &out) == 0) {
    (void)!send(fd, out.frame, out.size, MSG_NOSIGNAL | MSG_DONTWAIT);
    pcd_out_release(&out);
  }
  close(fd);
}

static void on_idle(uv_timer_t *t) {
  pcd_server *srv = t->data;
  if (atomic_load(&srv->conns.n_open))
    return; /* a client came between the last close and now */
  log_info("no clients for %llu s; exiting (--idle-exit)",
           (unsigned long long)srv->config->idle_exit_s);
  pcd_server_stop(srv);
}

static void arm_idle(pcd_server *srv) {
  if (srv->config->idle_exit_s && !atomic_load(&srv->conns.n_open) && !srv->stopping)
    uv_timer_start(&srv->idle_timer, on_idle, srv->config->idle_exit_s * 1000, 0);
}

static void on_idle_async(uv_async_t *h) { arm_idle(h->data); }

static void on_segment_timer(uv_timer_t *t) {
  pcd_server *srv = t->data;
  if (srv->on_second)
    srv->on_second(srv);
}

/* How long accepting pauses when the process is out of fds (or the
 * kernel out of memory for sockets), and how often that is said. */
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_WARN_INTERVAL_US (10u * 1000000u)

static void on_listen(uv_poll_t *h, int status, int events);

static void on_accept_timer(uv_timer_t *t) {
  pcd_server *srv = t->data;
  if (!srv->stopping)
    uv_poll_start(&srv->listen_poll, UV_READABLE, on_listen);
}

/* Out of fds: the pending connection stays queued and the listening
 * socket stays readable, so polling it again at once would spin and log
 * without end. Pause accepting for a moment instead; the queued clients
 * are served once fds free up (a closing client, a finished job). */
static void pause_accepting(pcd_server *srv, int err) {
  uint64_t now = pcache__mono_us();
  if (now - srv->accept_warned_us >= ACCEPT_WARN_INTERVAL_US || !srv->accept_warned_us) {
    log_warn("accept: %s; pausing new connections for %d ms at a time (raise LimitNOFILE=)",
             strerror(err), ACCEPT_PAUSE_MS);
    srv->accept_warned_us = now;
  }
  uv_poll_stop(&srv->listen_poll);
  uv_timer_start(&srv->accept_timer, on_accept_timer, ACCEPT_PAUSE_MS, 0);
}

static void on_listen(uv_poll_t *h, int status, int events) {
  pcd_server *srv = h->data;
  (void)events;
  if (status < 0)
    return;
  for (;;) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    uint64_t open;
    int per_process;
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        pause_accepting(srv, errno);
      else if (errno != EAGAIN && errno != EWOULDBLOCK)
        log_warn("accept: %s", strerror(errno));
      return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid()) {
      log_warn("refused a client of uid %d (pid %d): only uid %d may use this daemon",
               (int)cred.uid, (int)cred.pid, (int)geteuid());
      refuse(fd, PCACHE_EPEER, "peer refused: another user");
      continue;
    }
    /* Only this thread adds, so the count can only be lower than read. At
     * a limit, an idle connection in the way is closed for this one; only
     * when none is idle is this one refused. */
    open = atomic_load(&srv->conns.n_open);
    if (pcd_workers_admit(srv, (uint32_t)cred.pid, open, &per_process) < 0) {
      if (per_process) {
        log_warn("refused a client: pid %d holds %u connections, none idle "
                 "(--max-connections-per-process)",
                 (int)cred.pid, srv->config->max_conn_per_process);
        refuse(fd, PCACHE_ETOO_MANY_CONNECTIONS,
               "too many connections from this process, none idle: close those it no longer "
               "uses, or raise pcached's --max-connections-per-process");
      } else {
        log_warn("refused a client: %llu connections open, none idle (--max-connections)",
                 (unsigned long long)open);
        refuse(fd, PCACHE_ETOO_MANY_CONNECTIONS,
               "too many connections, none idle: try again shortly, or raise pcached's "
               "--max-connections");
      }
      continue;
    }
    pcd_conn_registry_count_in(&srv->conns);
    uv_timer_stop(&srv->idle_timer);
    log_debug("client pid %d connected (%llu open)", (int)cred.pid, (unsigned long long)open + 1);
    pcd_worker_hand(&srv->workers[srv->next_worker], fd, (uint32_t)cred.pid);
    srv->next_worker = (srv->next_worker + 1) % srv->n_workers;
  }
}

/* -------------------------------------------------------------- lifecycle */

static void on_signal(uv_signal_t *h, int signum) {
  pcd_server *srv = h->data;
  log_info("received %s; shutting down", strsignal(signum));
  pcd_server_stop(srv);
}

void pcd_server_trim(uint64_t bytes) {
  if (bytes >= PCD_TRIM_BYTES)
    malloc_trim(0);
}

/* Fixed malloc thresholds: glibc otherwise raises its mmap threshold to the
 * size of the largest block freed so far (up to 32 MiB), after which big
 * temporary blocks (a Prefetch's sort vector, a large touch batch) come
 * from the heap and stay there when freed. With a fixed threshold they are
 * mapped and unmapped, and the heap's free top goes back past 1 MiB. */
static void set_malloc_policy(void) {
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
  /* glibc gives each busy thread an arena of its own (up to 8 per core),
   * and each keeps what it once held: with eight workers that doubled the
   * daemon's anonymous memory on a 16-core machine. So the I/O threads
   * share two, and a Get's reply allocates nothing there (the worker's
   * scratch frame, an arena on the stack): when it took a 16 KiB arena
   * chunk and a 20 KiB frame, eight clients' Gets waited on the arenas'
   * locks, 4 us at the median (bench/RESULTS.md, 2026-11-27). */
  mallopt(M_ARENA_MAX, 2);
}

/* Stops and frees the first n workers. */
static void stop_workers(pcd_server *srv, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    pcd_worker_request_stop(&srv->workers[i]);
  for (unsigned i = 0; i < n; i++)
    pcd_worker_join(&srv->workers[i]);
  pcache__free(srv->workers);
  srv->workers = NULL;
  srv->n_workers = 0;
}

int pcd_server_start(pcd_server *srv) {
  unsigned n = srv->config->threads ? srv->config->threads : 1, started = 0;
  int r;
  set_malloc_policy();
  srv->start_us = pcache__mono_us();
  pcd_conn_registry_init(&srv->conns);
  srv->workers = pcache__calloc(n, sizeof *srv->workers);
  if (!srv->workers)
    return -ENOMEM;
  for (; started < n; started++) {
    if ((r = pcd_worker_init(&srv->workers[started], srv, NULL)) < 0)
      goto out_workers;
    /* A worker that fails to start has undone itself. */
    if ((r = pcd_worker_start(&srv->workers[started])) < 0)
      goto out_workers;
  }
  srv->n_workers = n;
  if ((r = pcd_uv_err(uv_poll_init(srv->loop, &srv->listen_poll, srv->listen_fd))) < 0)
    goto out_workers;
  srv->listen_poll.data = srv;
  uv_poll_start(&srv->listen_poll, UV_READABLE, on_listen);
  uv_timer_init(srv->loop, &srv->idle_timer);
  srv->idle_timer.data = srv;
  uv_timer_init(srv->loop, &srv->accept_timer);
  srv->accept_timer.data = srv;
  uv_timer_init(srv->loop, &srv->segment_timer);
  srv->segment_timer.data = srv;
  /* Idle segments go within a second of --segment-idle. */
  uv_timer_start(&srv->segment_timer, on_segment_timer, 1000, 1000);
  uv_async_init(srv->loop, &srv->idle_async, on_idle_async);
  srv->idle_async.data = srv;
  srv->conns.on_empty = &srv->idle_async;
  uv_signal_init(srv->loop, &srv->sigterm);
  uv_signal_init(srv->loop, &srv->sigint);
  srv->sigterm.data = srv->sigint.data = srv;
  uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
  uv_signal_start(&srv->sigint, on_signal, SIGINT);
  arm_idle(srv);
  log_info("serving on %u I/O thread%s", n, n == 1 ? "" : "s");
  return 0;

out_workers:
  stop_workers(srv, started);
  return r;
}

void pcd_server_stop(pcd_server *srv) {
  if (srv->stopping)
    return;
  srv->stopping = 1;
  pcd_notify("STOPPING=1");
  uv_close((uv_handle_t *)&srv->listen_poll, NULL);
  close(srv->listen_fd);
  if (!srv->activated)
    unlink(srv->socket_path);
  /* Each worker answers what it has at the writer, hands over its hits
   * and closes its connections; only then may the writer stop, since
   * nothing else submits to it. Queued commits finish before the store
   * closes. */
  /* The fleet's asks and the requests waiting for a probe of the drivers
   * are answered first: the workers wait for them. */
  if (srv->on_stopping)
    srv->on_stopping(srv);
  stop_workers(srv, srv->n_workers);
  pcd_writer_stop(srv->writer);
  srv->writer = NULL;
  srv->conns.on_empty = NULL;
  uv_close((uv_handle_t *)&srv->idle_timer, NULL);
  uv_close((uv_handle_t *)&srv->accept_timer, NULL);
  uv_close((uv_handle_t *)&srv->segment_timer, NULL);
  uv_close((uv_handle_t *)&srv->idle_async, NULL);
  uv_close((uv_handle_t *)&srv->sigterm, NULL);
  uv_close((uv_handle_t *)&srv->sigint, NULL);
}
