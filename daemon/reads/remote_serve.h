/* The fleet tier seen from an I/O thread (remote_serve.c): whether a Get
 * or a Prefetch should first ask the fleet, and answering it afterwards. */
#ifndef PCD_REMOTE_SERVE_H
#define PCD_REMOTE_SERVE_H

#include "connection.h"

/*
 * pcd_remote_serve - dispatch.c, before answering a Get or a Prefetch of
 * conn: when the server has a remote that is up and the request misses
 * the local store (a Get's state hashes; a Prefetch's first page always,
 * since only the fleet knows what it lacks), asks the fleet and returns 1:
 * req is then the remote's to answer, once what the fleet had is stored
 * (the connection waits, as for a write). Returns 0 to answer now.
 */
int pcd_remote_serve(pcd_conn *conn, Pcachepb__Request *req);

#endif
