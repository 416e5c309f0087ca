/* Every open connection of the daemon, across the I/O workers, oldest
 * first, and how many are open. A file of its own because two sides share
 * it and neither should call the other for it: the accepting loop
 * (server.c) counts a connection in at accept, admits by the count and
 * waits for it to reach 0 (--idle-exit); the workers (workers.c) add and
 * remove their connections, count them out, and pick ones to close for a
 * newcomer (pcd_workers_admit). */
#ifndef PCD_CONN_REGISTRY_H
#define PCD_CONN_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

typedef struct pcd_conn pcd_conn;

typedef struct pcd_conn_registry {
  /* Counted in at accept, before a worker has the connection, and out
   * when it is gone: --max-connections, Stats, --idle-exit. */
  atomic_uint_fast64_t n_open;
  /* Sent when n_open drops to 0; NULL while no one waits for that (before
   * the server starts, and once it stops). */
  uv_async_t *on_empty;
  /* The connections themselves, oldest first. Under lock, with their
   * reg_prev, reg_next, id and reg_reaping (connection.h). */
  pthread_mutex_t lock;
  pcd_conn *head, *tail;
  uint64_t n_reaping; /* of them, picked to be closed and not yet gone */
  uint64_t last_id;
} pcd_conn_registry;

void pcd_conn_registry_init(pcd_conn_registry *r);

/* The accepting thread: a connection is accepted, before it is handed to
 * a worker. */
void pcd_conn_registry_count_in(pcd_conn_registry *r);
/* Any thread: a connection counted in is gone. */
void pcd_conn_registry_count_out(pcd_conn_registry *r);

/* The connection's worker thread: conn joins at the end, with a new id;
 * conn leaves. */
void pcd_conn_registry_add(pcd_conn_registry *r, pcd_conn *conn);
void pcd_conn_registry_remove(pcd_conn_registry *r, pcd_conn *conn);

#endif
