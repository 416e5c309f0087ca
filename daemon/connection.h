/* One client: non-blocking framing on a raw fd (uv_poll_t, because libuv
 * streams cannot pass a memfd with SCM_RIGHTS), a bounded write queue, and
 * one request at a time so replies keep request order. */
#ifndef PCD_CONNECTION_H
#define PCD_CONNECTION_H

#include <stdint.h>
#include <uv.h>

#include "bulk.h"
#include "server.h"

typedef struct pcd_outq pcd_outq;

struct pcd_conn {
  pcd_server *srv;
  pcd_conn *prev, *next;
  int fd;
  uv_poll_t poll;
  int poll_events;      /* what poll watches now: restarting costs an epoll_ctl */
  int refs;
  int closed;
  int busy;             /* a request waits on the writer */
  int close_after_flush;
  int hello_done;
  char app[PCD_MAX_APP + 1];
  uint32_t pid;
  uint8_t hdr[4];
  size_t hdr_got;
  uint8_t *body;
  uint32_t body_len;
  size_t body_got;
  uint64_t last_io_us;
  pcd_outq *out_head, *out_tail;
  uint64_t pending;     /* reply bytes queued */
};

/* Takes over an accepted, non-blocking fd. */
int pcd_conn_open(pcd_server *srv, int fd, pcd_conn **ret_conn);
/* Queues an encoded reply (takes its frame and fd). */
void pcd_conn_send(pcd_conn *conn, pcd_out *out);
/* A request that went to the writer is answered: read the next one. */
void pcd_conn_resume(pcd_conn *conn);
void pcd_conn_close(pcd_conn *conn);
void pcd_conn_ref(pcd_conn *conn);
void pcd_conn_unref(pcd_conn *conn);
/* Closes a connection that stalls mid-frame. */
void pcd_conn_check_timeout(pcd_conn *conn, uint64_t now_us);

#endif
