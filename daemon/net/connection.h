/* One client: non-blocking framing on a raw fd (uv_poll_t, because libuv
 * streams cannot pass a memfd with SCM_RIGHTS), a bounded write queue, and
 * one request at a time so replies keep request order. */
#ifndef PCD_CONNECTION_H
#define PCD_CONNECTION_H

#include <stdint.h>
#include <uv.h>

#include "bulk.h"
#include "common/queue.h"
#include "server.h"

typedef struct pcd_outq pcd_outq;

/* What a connection tells the loop that owns it (workers.c passes its
 * own): the connection never calls its owner's code directly, so the two
 * files do not call each other. */
typedef struct pcd_conn_owner {
  /* The connection is closing: unlink it, count it gone. */
  void (*closed)(pcd_worker *w, pcd_conn *conn);
  /* A reply memfd waits for its client to take it: recheck it
   * (pcd_conn_bulk_recheck) until unpark. */
  void (*park)(pcd_worker *w);
  void (*unpark)(pcd_worker *w);
  /* A request frame was read: the thread may poll a while for the next
   * (--busy-poll-us). */
  void (*served)(pcd_worker *w);
} pcd_conn_owner;

/* Bytes read ahead: a request frame that fits is read with one recv and
 * decoded in place; a larger one gets its own buffer. */
#define PCD_RBUF_SIZE 16384

struct pcd_conn {
  pcd_server *srv;
  pcd_worker *worker;   /* the thread that owns it: all it does runs there */
  pcd_scratch *scratch; /* the worker's, where its inline replies are encoded */
  const pcd_conn_owner *owner;
  pcd_conn *prev, *next;
  /* Every open connection, across workers (conn_registry.h): under the
   * registry's lock, as are reg_reaping and the id. */
  pcd_conn *reg_prev, *reg_next;
  uint64_t id;     /* never 0, never reused */
  int reg_reaping; /* picked to be closed for a newcomer */
  /* When it went quiet: nothing in flight either way (no request at the
   * writer, none half read, no reply queued or memfd untaken) since this
   * pcache__mono_us(); 0 while not. Written by its thread, read by the
   * accepting one. */
  _Atomic uint64_t quiet_since_us;
  int fd;
  uv_poll_t poll;
  int poll_events; /* what poll watches now: restarting costs an epoll_ctl */
  int refs;
  int closed;
  int busy; /* a request waits on the writer */
  int close_after_flush;
  int hello_done;
  char app[PCD_MAX_APP + 1];
  uint32_t pid;
  uint8_t *body; /* a frame too large for rbuf, being read */
  uint32_t body_len;
  size_t body_got;
  size_t roff, rlen;          /* rbuf[roff, rlen): read, not yet handled */
  uint64_t opened_us;         /* pcache__mono_us() at accept */
  uint64_t last_io_us;        /* pcache__mono_us() of the last progress */
  PCACHE_QUEUE(pcd_outq) out; /* replies not yet sent whole */
  uint64_t pending;           /* reply bytes queued */
  /* Memfds of bulk replies the client has not taken off the socket yet
   * (queued, or sent and unread), and their bytes: charged to the
   * client's --max-pending budget, and while there is one no further
   * request is read, so a client holds at most one memfd in flight. */
  uint32_t bulk_fds;
  uint64_t bulk_bytes;
  int bulk_parked; /* reading waits on the worker's bulk timer */
  /* Its Gets' last note to the replay (dispatch.c): when (0: none yet),
   * for which key, and the pipelines asked for since. */
  struct {
    uint64_t us;
    uint8_t key[PCACHE_DEVKEY_SIZE];
    size_t unnoted;
  } get_note;
  /* Where a paged Prefetch stopped (read_blobs.c), or NULL. */
  struct pcd_prefetch_cursor *cursor;
  /* Its reply window (window.h, ReplyWindow), or NULL. */
  struct pcd_window *window;
  uint8_t rbuf[PCD_RBUF_SIZE];
};

/* Gives conn the reply window w (NULL: none), freeing the one it had;
 * counted in Stats.windows. conn's thread. */
void pcd_conn_set_window(pcd_conn *conn, struct pcd_window *w);

/* Takes over an accepted, non-blocking fd, on w's loop (w's thread).
 * Each request is handed to srv->on_request. */
int pcd_conn_open(pcd_worker *w, const pcd_conn_owner *owner, int fd, pcd_conn **ret_conn);
/* Queues an encoded reply (takes its frame and fd). */
void pcd_conn_send(pcd_conn *conn, pcd_out *out);
/* A request that went to the writer is answered: read the next one (or
 * close, when the worker is stopping). */
void pcd_conn_resume(pcd_conn *conn);
void pcd_conn_close(pcd_conn *conn);
/* Bytes the next reply may carry beyond its first item: what is left of
 * --max-pending once the replies still held for this client are counted. */
uint64_t pcd_conn_reply_budget(const pcd_conn *conn);
/* Worker's bulk timer: resumes reading when the client has taken its
 * memfd; returns 1 when the connection is no longer parked. */
int pcd_conn_bulk_recheck(pcd_conn *conn);
void pcd_conn_ref(pcd_conn *conn);
void pcd_conn_unref(pcd_conn *conn);
/* Closes a connection that stalls mid-frame or on a queued reply, or that
 * has not completed Hello within --hello-timeout (it would hold a
 * --max-connections slot for nothing). now_us is pcache__mono_us(). Also
 * notices a reply memfd taken while the client stayed silent, which makes
 * the connection quiet (quiet_since_us). */
void pcd_conn_check_timeout(pcd_conn *conn, uint64_t now_us);

#endif
