/* The listening socket, the accepting loop, the I/O workers it hands
 * connections to, and what every request handler shares. */
#ifndef PCD_SERVER_H
#define PCD_SERVER_H

#include <stdint.h>
#include <sys/un.h>
#include <uv.h>

#include "conn_registry.h"
#include "daemon.h"
#include "workers.h"
#include "writer.h"

typedef struct pcd_conn pcd_conn;

/* Handles one decoded request of conn (takes ownership of req). */
typedef void (*pcd_request_fn)(pcd_conn *conn, Pcachepb__Request *req);

typedef struct pcd_server {
  pcd_request_fn on_request; /* the router; main.c wires pcd_dispatch */
  /* What the accepting loop does for the parts above it, installed by
   * main.c so that this file calls none of them (each may be NULL):
   * every second (drop idle segments), and at stop before the workers
   * (answer the fleet's asks and the probe's requests: the workers wait
   * for them). */
  void (*on_second)(struct pcd_server *srv);
  void (*on_stopping)(struct pcd_server *srv);
  /* What the replay hears of clients (replay.h), installed by main.c so
   * that the router calls none of it (each may be NULL): a client (pid)
   * named device_key as app in a Get, Prefetch or Put, for `pipelines`
   * pipelines; a Hello's app runs as pid's program (replay_exe.c); an
   * Import may bring entries of keys seen before. put_hooks: what every
   * client's Put job carries, with replay as its ctx (writer.h). */
  void (*on_note)(struct pcd_server *srv, const uint8_t *device_key, size_t key_len,
                  const char *app, uint32_t pid, size_t pipelines);
  void (*on_hello)(struct pcd_server *srv, const char *app, uint32_t pid);
  void (*on_import)(struct pcd_server *srv);
  const pcd_job_hooks *put_hooks;
  uv_loop_t *loop; /* accepting loop: listen, signals, idle exit */
  const pcd_config *config;
  pcd_store *store;
  pcd_writer *writer;
  pcd_stats stats;
  struct pcd_client_reports *client_reports; /* the layer's reports; main.c makes it */
  struct pcd_replay *replay;     /* replays for new drivers (replay.h); main.c makes it */
  struct pcd_detect *detect;     /* the probe of installed drivers (replay_detect.h); main.c */
  struct pcd_remote *remote;     /* the fleet tier (--remote), or NULL; main.c makes it */
  struct pcd_segments *segments; /* shared-memory segments (segment.h); main.c makes it */
  char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  char data_dir[4096];
  int listen_fd;
  int activated; /* the fd came from systemd: never unlink */
  uv_poll_t listen_poll;
  uv_timer_t idle_timer;     /* --idle-exit */
  uv_timer_t accept_timer;   /* resumes accepting after fds ran out */
  uv_timer_t segment_timer;  /* drops idle segments (--segment-idle) */
  uint64_t accept_warned_us; /* last "out of fds" warning (monotonic) */
  uv_async_t idle_async;     /* a worker closed the last connection */
  uv_signal_t sigterm, sigint;
  pcd_worker *workers; /* config->threads I/O loops */
  unsigned n_workers, next_worker;
  /* Every open connection and their count, across workers: the workers
   * add and remove theirs, the accepting thread counts them in and picks
   * one to close at the limits (pcd_workers_admit). */
  pcd_conn_registry conns;
  uint64_t start_us;
  int stopping;
} pcd_server;

/*
 * pcd_server_listen - the socket to serve: systemd's (LISTEN_FDS) when
 * present, else the configured path, bound 0600 in a 0700 directory. A
 * stale socket file is replaced; a live daemon's is left alone and the
 * call returns -EADDRINUSE.
 */
int pcd_server_listen(pcd_server *srv);

/* Starts the workers, accepting, the idle timer and the signal handlers. */
int pcd_server_start(pcd_server *srv);

/* Graceful stop: no new clients; each worker answers what it has at the
 * writer, writes its last-used batch and closes its connections; the
 * workers are joined, queued commits finish, and every handle is closed
 * so uv_run returns. Blocks while the workers finish. */
void pcd_server_stop(pcd_server *srv);

/*
 * pcd_server_trim - after a request that moved at least PCD_TRIM_BYTES
 * through malloc (a big reply, a large touch batch), gives the freed memory
 * back to the system: glibc keeps freed heap memory for reuse otherwise, and
 * a daemon that served one big Prefetch would hold it for good.
 */
void pcd_server_trim(uint64_t bytes);

#endif
