#include "connection.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/log.h"
#include "prefetch_cursor.h"
#include "proto/frame.h"
#include "window.h"

struct pcd_outq {
  pcd_outq *next;
  pcd_out out;
  size_t off;
};

static void update_events(pcd_conn *c);
static void on_poll(uv_poll_t *h, int status, int events);

static void on_closed(uv_handle_t *h) {
  pcd_conn *c = h->data;
  close(c->fd);
  c->fd = -1;
  pcd_conn_unref(c);
}

void pcd_conn_ref(pcd_conn *conn) { conn->refs++; }

void pcd_conn_unref(pcd_conn *conn) {
  pcd_outq *q;
  if (--conn->refs > 0)
    return;
  while ((q = pcache_queue_pop(&conn->out)) != NULL) {
    pcd_out_release(&q->out);
    pcache__free(q);
  }
  pcache__free(conn->body);
  pcd_prefetch_cursor_free(conn->cursor);
  pcd_conn_set_window(conn, NULL);
  pcache__free(conn);
}

void pcd_conn_set_window(pcd_conn *conn, pcd_window *w) {
  pcd_stats *st = &conn->srv->stats;
  if (conn->window) {
    atomic_fetch_sub(&st->windows, 1);
    atomic_fetch_sub(&st->window_bytes, pcd_window_size(conn->window));
    pcd_window_free(conn->window);
  }
  conn->window = w;
  if (w) {
    atomic_fetch_add(&st->windows, 1);
    atomic_fetch_add(&st->window_bytes, pcd_window_size(w));
  }
}

void pcd_conn_close(pcd_conn *conn) {
  if (conn->closed)
    return;
  conn->closed = 1;
  if (conn->bulk_parked) {
    conn->bulk_parked = 0;
    conn->owner->unpark(conn->worker);
  }
  conn->owner->closed(conn->worker, conn);
  uv_poll_stop(&conn->poll);
  uv_close((uv_handle_t *)&conn->poll, on_closed);
}

/* One sendmsg of out from off; the memfd (and a segment's lease after
 * it) goes with the first byte of its frame. Returns the bytes sent, 0
 * when the socket is full, or -errno. */
static ssize_t send_out(pcd_conn *c, const pcd_out *out, size_t off) {
  struct iovec iov = {out->frame + off, out->size - off};
  union {
    char buf[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  ssize_t n;
  if (off == 0 && out->fd >= 0) {
    int fds[2] = {out->fd, out->lease_fd};
    size_t n_fds = out->lease_fd >= 0 ? 2 : 1;
    struct cmsghdr *cm;
    memset(&ctl, 0, sizeof ctl);
    msg.msg_control = ctl.buf;
    msg.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, n_fds * sizeof(int));
  }
  do
    n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  c->last_io_us = pcache__mono_us();
  return n;
}

/* send_out for the reply at the head of the stream. A memfd the kernel
 * will not pass (ETOOMANYREFS: this uid has more fds in flight than its
 * RLIMIT_NOFILE, from clients that do not read) must not cost this client
 * its connection: the reply becomes an error it can retry on. */
static ssize_t send_head(pcd_conn *c, pcd_out *out, size_t off) {
  ssize_t n = send_out(c, out, off);
  if (n != -ETOOMANYREFS || off != 0 || out->fd < 0)
    return n;
  log_warn("connection: the kernel refused to pass a %llu-byte reply memfd to client pid %u "
           "(too many fds in flight for this uid; raise LimitNOFILE); answering with an error",
           (unsigned long long)out->bulk_size, c->pid);
  c->bulk_fds--;
  c->bulk_bytes -= out->bulk_size;
  c->pending -= out->size;
  pcd_out_release(out);
  if (pcd_reply_error(-ETOOMANYREFS, "too many reply memfds in flight; try again", out) < 0)
    return -ENOMEM;
  c->pending += out->size;
  return send_out(c, out, 0);
}

/* Sends what the socket takes now. Returns 0, or -errno when the peer is
 * gone. */
static int flush(pcd_conn *c) {
  while (!pcache_queue_empty(&c->out)) {
    pcd_outq *q = c->out.head;
    ssize_t n = send_head(c, &q->out, q->off);
    if (n < 0)
      return (int)n;
    if (n == 0)
      return 0;
    q->off += (size_t)n;
    c->pending -= (uint64_t)n;
    if (q->off < q->out.size)
      continue;
    (void)pcache_queue_pop(&c->out);
    pcd_out_release(&q->out);
    pcache__free(q);
  }
  return 0;
}

void pcd_conn_send(pcd_conn *conn, pcd_out *out) {
  pcd_outq *q;
  size_t off = 0;
  if (conn->closed) {
    pcd_out_release(out);
    return;
  }
  if (out->fd >= 0) {
    conn->bulk_fds++;
    conn->bulk_bytes += out->bulk_size;
  }
  /* Nothing queued: one sendmsg straight from the reply, which a small
   * reply on a reading client always fits; only the rest is queued. */
  if (pcache_queue_empty(&conn->out)) {
    ssize_t n;
    conn->pending += out->size; /* as if queued: send_head may swap it */
    n = send_head(conn, out, 0);
    conn->pending -= out->size;
    if (n < 0) {
      pcd_out_release(out);
      pcd_conn_close(conn);
      return;
    }
    if ((size_t)n == out->size) {
      pcd_out_release(out);
      update_events(conn);
      return;
    }
    off = (size_t)n;
  }
  q = pcache__calloc(1, sizeof *q);
  if (q && out->borrowed) {
    /* The thread's scratch is reused by its next reply: what waits here
     * must be its own. */
    uint8_t *own = pcache__malloc(out->size);
    if (!own) {
      pcache__free(q);
      q = NULL;
    } else {
      memcpy(own, out->frame, out->size);
      out->frame = own;
      out->borrowed = 0;
    }
  }
  if (!q) {
    pcd_out_release(out);
    pcd_conn_close(conn);
    return;
  }
  q->out = *out;
  q->off = off;
  out->frame = NULL;
  out->fd = out->lease_fd = -1;
  conn->pending += q->out.size - off;
  pcache_queue_push(&conn->out, q);
  if (flush(conn) < 0) {
    pcd_conn_close(conn);
    return;
  }
  update_events(conn);
}

/* Queues an error reply. 0, or <0 when not even that could be encoded. */
static int send_error(pcd_conn *c, int status, const char *msg) {
  pcd_out out;
  int r = pcd_reply_error(status, msg, &out);
  if (r == 0)
    pcd_conn_send(c, &out);
  return r;
}

/* Replies with an error, then closes once it is sent. */
static void fail(pcd_conn *c, int status, const char *msg) {
  c->close_after_flush = 1;
  if (send_error(c, status, msg) < 0)
    pcd_conn_close(c);
}

static void frame_done(pcd_conn *c, const uint8_t *body, uint32_t len) {
  Pcachepb__Request *req = NULL;
  uint64_t max_allocations = pcd_config_max_allocations(c->srv->config);
  int r = pcache__request_decode(body, len, max_allocations, &req);
  atomic_fetch_add(&c->srv->stats.requests, 1);
  /* Both leave the stream in step (the frame was read whole), so the
   * connection stays: a newer client's request kind, and a frame refused
   * before anything was allocated for it. */
  if (r == PCACHE_EUNKNOWN_REQUEST) {
    send_error(c, r, "request kind not known to this daemon");
    return;
  }
  if (r == PCACHE_ETOO_MANY_HASHES) {
    log_warn("connection: a %u-byte frame would unpack into more than %llu structures; refused",
             len, (unsigned long long)max_allocations);
    send_error(c, r, "request has more elements than any request may");
    return;
  }
  if (r < 0) {
    log_warn("connection: undecodable frame (%u bytes); closing", len);
    fail(c, PCACHE_EPROTO, "request does not parse");
    return;
  }
  c->srv->on_request(c, req);
}

/* Handles the frame at the front of rbuf when it is all there, or moves
 * a frame too large for rbuf into its own buffer. Returns 0 when it did
 * either, -EAGAIN when more bytes are needed, or -ECONNABORTED when it
 * closed the connection. */
static int take_frame(pcd_conn *c) {
  size_t have = c->rlen - c->roff;
  const uint8_t *p = c->rbuf + c->roff;
  uint32_t len;
  int r;
  if (have < PCACHE_FRAME_HEADER_SIZE)
    return -EAGAIN;
  r = pcache__frame_length(p, c->srv->config->max_frame, &len);
  if (r == PCACHE_EEMPTY_FRAME) {
    log_warn("connection: zero-length frame; closing");
    fail(c, r, "zero-length frame");
    return -ECONNABORTED;
  }
  if (r < 0) {
    /* Never allocated, never answered: the stream cannot be resynced. */
    log_warn("connection: frame of %u bytes announced, limit %u; closing", pcache__le32(p),
             c->srv->config->max_frame);
    pcd_conn_close(c);
    return -ECONNABORTED;
  }
  if (have - PCACHE_FRAME_HEADER_SIZE >= len) {
    /* Decoding copies what it keeps, so rbuf is free again after. */
    c->roff += PCACHE_FRAME_HEADER_SIZE + len;
    if (c->roff == c->rlen)
      c->roff = c->rlen = 0;
    frame_done(c, p + PCACHE_FRAME_HEADER_SIZE, len);
    return 0;
  }
  if (PCACHE_FRAME_HEADER_SIZE + (size_t)len <= sizeof c->rbuf)
    return -EAGAIN;
  c->body = pcache__malloc(len);
  if (!c->body) {
    pcd_conn_close(c);
    return -ECONNABORTED;
  }
  c->body_len = len;
  c->body_got = have - PCACHE_FRAME_HEADER_SIZE;
  memcpy(c->body, p + PCACHE_FRAME_HEADER_SIZE, c->body_got);
  c->roff = c->rlen = 0;
  return 0;
}

uint64_t pcd_conn_reply_budget(const pcd_conn *conn) {
  uint64_t held = conn->pending + conn->bulk_bytes, max = conn->srv->config->max_pending;
  return held < max ? max - held : 0;
}

/* Whether the client has taken every memfd sent to it. Each one sits in
 * the client's receive queue, pinning its pages and counting against this
 * uid's fds in flight, until the client reads the frame it came with, and
 * the socket's send queue (SIOCOUTQ) is empty only once every frame sent
 * has been read. A memfd still queued here counts as not taken. */
static int bulk_taken(pcd_conn *c) {
  int outq = 0;
  if (!c->bulk_fds)
    return 1;
  if (!pcache_queue_empty(&c->out) || ioctl(c->fd, SIOCOUTQ, &outq) < 0 || outq > 0)
    return 0;
  c->bulk_fds = 0;
  c->bulk_bytes = 0;
  return 1;
}

/* Whether the next request may be read, but for memfds the client has
 * not taken yet. */
static int may_read(const pcd_conn *c) {
  return !c->closed && !c->busy && !c->close_after_flush &&
         c->pending < c->srv->config->max_pending;
}

/* The client asked again before taking its memfd: its requests wait, and
 * its socket is not watched (it would poll readable all along), until the
 * worker's bulk timer finds the memfd taken. */
static void park(pcd_conn *c) {
  if (c->bulk_parked)
    return;
  log_debug("connection: client pid %u asks again before taking its reply memfd; "
            "holding its requests until it does",
            c->pid);
  atomic_fetch_add(&c->srv->stats.parked, 1);
  c->bulk_parked = 1;
  c->owner->park(c->worker);
}

/* Handles the frames already read, then reads as much as is there: a
 * whole small request is one recv. Returns 1 when a memfd the client has
 * not taken kept it from reading anything, else 0.
 *
 * A memfd just sent is not taken yet, and that alone parks nothing: a
 * client that reads each reply before it asks again has taken it by the
 * time its next request is readable (the kernel frees the message, and
 * SIOCOUTQ drops to 0, in the recvmsg that reads its last byte), so that
 * request is the sign to look again. A request already read ahead behind
 * the memfd parks here; one still on the socket parks in on_poll. */
static int do_read(pcd_conn *c) {
  int first = 1;
  while (may_read(c)) {
    ssize_t n;
    if (!bulk_taken(c)) {
      if (c->rlen > c->roff)
        park(c);
      return first;
    }
    first = 0;
    if (c->body) {
      n = recv(c->fd, c->body + c->body_got, c->body_len - c->body_got, MSG_DONTWAIT);
    } else {
      int r = take_frame(c);
      if (r == 0)
        continue;
      if (r != -EAGAIN)
        break;
      if (c->roff) {
        memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
        c->rlen -= c->roff;
        c->roff = 0;
      }
      n = recv(c->fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen, MSG_DONTWAIT);
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        break;
      log_debug("connection: read: %s", strerror(errno));
      pcd_conn_close(c);
      break;
    }
    if (n == 0) {
      if (c->body || c->rlen)
        log_info("connection: client closed mid-frame");
      pcd_conn_close(c);
      break;
    }
    c->last_io_us = pcache__mono_us();
    if (!c->body) {
      c->rlen += (size_t)n;
      continue;
    }
    c->body_got += (size_t)n;
    if (c->body_got == c->body_len) {
      uint8_t *body = c->body;
      c->body = NULL;
      frame_done(c, body, c->body_len);
      c->body_len = 0;
      c->body_got = 0;
      pcache__free(body);
    }
  }
  return 0;
}

/* Publishes whether c is quiet (quiet_since_us): nothing in flight,
 * whatever the client does next. A memfd not yet taken is in flight: its
 * client has not read the reply. */
static void publish_quiet(pcd_conn *c) {
  int quiet = !c->busy && !c->body && c->rlen == c->roff && pcache_queue_empty(&c->out) &&
              !c->bulk_parked && !c->bulk_fds;
  atomic_store_explicit(&c->quiet_since_us, quiet ? c->last_io_us : 0, memory_order_relaxed);
}

static void update_events(pcd_conn *c) {
  int ev = 0;
  if (c->closed)
    return;
  publish_quiet(c);
  if (c->close_after_flush && pcache_queue_empty(&c->out)) {
    pcd_conn_close(c);
    return;
  }
  /* With a memfd not yet taken, the first sign of the client (its next
   * request) is still watched for: a client that reads each reply before
   * asking again has taken it by then. One that asks before reading is
   * parked, rechecked by the worker's bulk timer, since no poll event
   * says when it reads. */
  if (may_read(c) && (!c->bulk_parked || bulk_taken(c)))
    ev |= UV_READABLE;
  if (!pcache_queue_empty(&c->out))
    ev |= UV_WRITABLE;
  /* libuv's uv_poll_start re-arms even when nothing changed: one epoll_ctl
   * a request for nothing. */
  if (ev == c->poll_events)
    return;
  c->poll_events = ev;
  if (ev)
    uv_poll_start(&c->poll, ev, on_poll);
  else
    uv_poll_stop(&c->poll);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  pcd_conn *c = h->data;
  if (status < 0) {
    pcd_conn_close(c);
    return;
  }
  pcd_conn_ref(c);
  if (events & UV_WRITABLE) {
    if (flush(c) < 0)
      pcd_conn_close(c);
  }
  /* Frames read ahead wait in rbuf with nothing new on the socket. A
   * readable socket that could not be read: the client asked again (or
   * hung up) before taking its memfd. */
  if (((events & UV_READABLE) || c->rlen > c->roff) && !c->closed) {
    if (do_read(c) && (events & UV_READABLE))
      park(c);
    if (events & UV_READABLE)
      c->owner->served(c->worker);
  }
  update_events(c);
  pcd_conn_unref(c);
}

int pcd_conn_bulk_recheck(pcd_conn *conn) {
  if (!conn->bulk_parked)
    return 1;
  if (!conn->closed && !bulk_taken(conn))
    return 0;
  conn->bulk_parked = 0;
  conn->owner->unpark(conn->worker);
  if (conn->closed)
    return 1;
  pcd_conn_ref(conn);
  do_read(conn);
  update_events(conn);
  pcd_conn_unref(conn);
  return 1;
}

void pcd_conn_resume(pcd_conn *conn) {
  conn->busy = 0;
  if (conn->closed)
    return;
  if (conn->worker->stopping) {
    pcd_conn_close(conn);
    return;
  }
  pcd_conn_ref(conn);
  do_read(conn);
  update_events(conn);
  pcd_conn_unref(conn);
}

void pcd_conn_check_timeout(pcd_conn *conn, uint64_t now_us) {
  uint64_t hello_limit = conn->srv->config->hello_timeout_s * 1000000u;
  if (conn->cursor && pcd_prefetch_cursor_stale(conn->cursor, now_us)) {
    pcd_prefetch_cursor_free(conn->cursor);
    conn->cursor = NULL;
  }
  if (!conn->closed && !conn->hello_done && !conn->busy &&
      now_us - conn->opened_us >= hello_limit) {
    log_warn("connection: client pid %u sent no Hello in %llu s; closing (--hello-timeout)",
             conn->pid, (unsigned long long)conn->srv->config->hello_timeout_s);
    pcd_conn_close(conn);
    return;
  }
  /* Parked on a memfd its client has not taken: the daemon chose not to
   * read, so the frames read ahead are no stall of the client's. Closing
   * would not even free the memfd (it stays in the client's receive
   * queue) and would free the slot for another connection and another
   * memfd: a parked connection keeps its one memfd and its slot
   * (docs/protocol.md, "Reply budget"). */
  if (conn->bulk_parked)
    return;
  if (!conn->closed && conn->bulk_fds && pcache_queue_empty(&conn->out) && bulk_taken(conn))
    publish_quiet(conn);
  uint64_t limit = conn->srv->config->frame_timeout_s * 1000000u;
  int mid_frame = conn->body || conn->rlen > conn->roff;
  int stalled_write = !pcache_queue_empty(&conn->out);
  if (conn->closed || !(mid_frame || stalled_write) || now_us - conn->last_io_us < limit)
    return;
  log_warn("connection: no progress for %llu s %s; closing",
           (unsigned long long)conn->srv->config->frame_timeout_s,
           mid_frame ? "in the middle of a frame" : "on a queued reply");
  pcd_conn_close(conn);
}

int pcd_conn_open(pcd_worker *w, const pcd_conn_owner *owner, int fd, pcd_conn **ret_conn) {
  pcd_conn *c = pcache__malloc(sizeof *c);
  int r;
  if (!c)
    return -ENOMEM;
  /* Not rbuf: 16 KiB of zeroes a connection for nothing. */
  memset(c, 0, offsetof(pcd_conn, rbuf));
  c->srv = w->srv;
  c->worker = w;
  c->scratch = &w->scratch;
  c->owner = owner;
  c->fd = fd;
  c->refs = 1;
  pcache_queue_init(&c->out);
  c->opened_us = c->last_io_us = pcache__mono_us();
  atomic_init(&c->quiet_since_us, c->opened_us);
  r = pcd_uv_err(uv_poll_init(w->loop, &c->poll, fd));
  if (r < 0) {
    pcache__free(c);
    return r;
  }
  c->poll.data = c;
  c->poll_events = UV_READABLE;
  uv_poll_start(&c->poll, UV_READABLE, on_poll);
  *ret_conn = c;
  return 0;
}
