/* The listening socket, the set of connections and the loop-side state
 * every request handler needs. */
#ifndef PCD_SERVER_H
#define PCD_SERVER_H

#include <stdint.h>
#include <sys/un.h>
#include <uv.h>

#include "daemon.h"
#include "writer.h"

typedef struct pcd_conn pcd_conn;

typedef struct pcd_server {
  uv_loop_t *loop;
  const pcd_config *config;
  pcd_store *store;
  pcd_writer *writer;
  pcd_stats stats;
  char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  char data_dir[4096];
  int listen_fd;
  int activated;              /* the fd came from systemd: never unlink */
  uv_poll_t listen_poll;
  uv_timer_t sweep_timer;     /* frame timeouts and touch flushes */
  uv_timer_t idle_timer;      /* --idle-exit */
  uv_signal_t sigterm, sigint;
  pcd_conn *conns;
  uint64_t n_conns;
  uint64_t start_us, last_flush_us;
  pcd_touch *touches;         /* hits not yet written */
  size_t n_touches, cap_touches;
  int stopping;
} pcd_server;

/*
 * pcd_server_listen - the socket to serve: systemd's (LISTEN_FDS) when
 * present, else the configured path, bound 0600 in a 0700 directory. A
 * stale socket file is replaced; a live daemon's is left alone and the
 * call returns -EADDRINUSE.
 */
int pcd_server_listen(pcd_server *srv);

/* Starts accepting, the timers and the signal handlers. */
int pcd_server_start(pcd_server *srv);

/* Graceful stop: no new clients, queued commits finish, the last-used
 * batch is written, every handle is closed so uv_run returns. */
void pcd_server_stop(pcd_server *srv);

/* Records a hit for the next flush. */
void pcd_server_touch(pcd_server *srv, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t now_us);
/* Hands the pending touches to the writer (no-op when none). */
void pcd_server_flush_touches(pcd_server *srv);

/*
 * pcd_server_trim - after a request that moved at least PCD_TRIM_BYTES
 * through malloc (a big reply, a large touch batch), gives the freed memory
 * back to the system: glibc keeps freed heap memory for reuse otherwise, and
 * a daemon that served one big Prefetch would hold it for good.
 */
#define PCD_TRIM_BYTES (4u << 20)
void pcd_server_trim(uint64_t bytes);

/* Called by connection.c. */
void pcd_server_conn_closed(pcd_server *srv, pcd_conn *conn);

#endif
