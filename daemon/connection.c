#include "connection.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/log.h"
#include "dispatch.h"
#include "proto/frame.h"

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
  if (--conn->refs > 0)
    return;
  while (conn->out_head) {
    pcd_outq *q = conn->out_head;
    conn->out_head = q->next;
    pcd_out_release(&q->out);
    pcache__free(q);
  }
  pcache__free(conn->body);
  pcache__free(conn);
}

void pcd_conn_close(pcd_conn *conn) {
  if (conn->closed)
    return;
  conn->closed = 1;
  pcd_server_conn_closed(conn->srv, conn);
  uv_poll_stop(&conn->poll);
  uv_close((uv_handle_t *)&conn->poll, on_closed);
}

/* Sends what the socket takes now. Returns 0, or -errno when the peer is
 * gone. The memfd goes with the first byte of its frame. */
static int flush(pcd_conn *c) {
  while (c->out_head) {
    pcd_outq *q = c->out_head;
    struct iovec iov = {q->out.frame + q->off, q->out.size - q->off};
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } ctl;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;
    if (q->off == 0 && q->out.fd >= 0) {
      struct cmsghdr *cm;
      memset(&ctl, 0, sizeof ctl);
      msg.msg_control = ctl.buf;
      msg.msg_controllen = sizeof ctl.buf;
      cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(cm), &q->out.fd, sizeof(int));
    }
    n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return 0;
      return -errno;
    }
    q->off += (size_t)n;
    c->pending -= (uint64_t)n;
    c->last_io_us = pcd_now_us();
    if (q->off < q->out.size)
      continue;
    c->out_head = q->next;
    if (!c->out_head)
      c->out_tail = NULL;
    pcd_out_release(&q->out);
    pcache__free(q);
  }
  return 0;
}

void pcd_conn_send(pcd_conn *conn, pcd_out *out) {
  pcd_outq *q;
  if (conn->closed) {
    pcd_out_release(out);
    return;
  }
  q = pcache__calloc(1, sizeof *q);
  if (!q) {
    pcd_out_release(out);
    pcd_conn_close(conn);
    return;
  }
  q->out = *out;
  out->frame = NULL;
  out->fd = -1;
  conn->pending += q->out.size;
  if (conn->out_tail)
    conn->out_tail->next = q;
  else
    conn->out_head = q;
  conn->out_tail = q;
  if (flush(conn) < 0) {
    pcd_conn_close(conn);
    return;
  }
  update_events(conn);
}

/* Replies with an error, then closes once it is sent. */
static void fail(pcd_conn *c, int status, const char *msg) {
  pcd_out out;
  c->close_after_flush = 1;
  if (pcd_reply_error(status, msg, &out) < 0) {
    pcd_conn_close(c);
    return;
  }
  pcd_conn_send(c, &out);
}

static void frame_done(pcd_conn *c) {
  Pcachepb__Request *req = NULL;
  int r = pcache__request_decode(c->body, c->body_len, &req);
  pcache__free(c->body);
  c->body = NULL;
  c->hdr_got = c->body_got = 0;
  c->body_len = 0;
  atomic_fetch_add(&c->srv->stats.requests, 1);
  if (r == PCACHE_EUNKNOWN_REQUEST) {
    /* A newer client: answer, and keep the connection. */
    pcd_out out;
    if (pcd_reply_error(r, "request kind not known to this daemon", &out) == 0)
      pcd_conn_send(c, &out);
    return;
  }
  if (r < 0) {
    log_warn("connection: undecodable frame (%u bytes); closing", c->body_len);
    fail(c, PCACHE_EPROTO, "request does not parse");
    return;
  }
  pcd_dispatch(c, req);
}

/* Reads as much as is there, one frame at a time. */
static void do_read(pcd_conn *c) {
  while (!c->closed && !c->busy && !c->close_after_flush &&
         c->pending < c->srv->config->max_pending) {
    ssize_t n;
    if (c->hdr_got < sizeof c->hdr) {
      n = recv(c->fd, c->hdr + c->hdr_got, sizeof c->hdr - c->hdr_got, MSG_DONTWAIT);
    } else {
      n = recv(c->fd, c->body + c->body_got, c->body_len - c->body_got, MSG_DONTWAIT);
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return;
      log_debug("connection: read: %s", strerror(errno));
      pcd_conn_close(c);
      return;
    }
    if (n == 0) {
      if (c->hdr_got || c->body_got)
        log_info("connection: client closed mid-frame");
      pcd_conn_close(c);
      return;
    }
    c->last_io_us = pcd_now_us();
    if (c->hdr_got < sizeof c->hdr) {
      uint32_t len;
      int r;
      c->hdr_got += (size_t)n;
      if (c->hdr_got < sizeof c->hdr)
        continue;
      r = pcache__frame_length(c->hdr, c->srv->config->max_frame, &len);
      if (r == PCACHE_EEMPTY_FRAME) {
        log_warn("connection: zero-length frame; closing");
        fail(c, r, "zero-length frame");
        return;
      }
      if (r < 0) {
        /* Never allocated, never answered: the stream cannot be resynced. */
        log_warn("connection: frame of %u bytes announced, limit %u; closing",
                 pcache__le32(c->hdr), c->srv->config->max_frame);
        pcd_conn_close(c);
        return;
      }
      c->body = pcache__malloc(len);
      if (!c->body) {
        pcd_conn_close(c);
        return;
      }
      c->body_len = len;
      c->body_got = 0;
      continue;
    }
    c->body_got += (size_t)n;
    if (c->body_got == c->body_len)
      frame_done(c);
  }
}

static void update_events(pcd_conn *c) {
  int ev = 0;
  if (c->closed)
    return;
  if (c->close_after_flush && !c->out_head) {
    pcd_conn_close(c);
    return;
  }
  if (!c->busy && !c->close_after_flush && c->pending < c->srv->config->max_pending)
    ev |= UV_READABLE;
  if (c->out_head)
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
  if ((events & UV_READABLE) && !c->closed)
    do_read(c);
  update_events(c);
  pcd_conn_unref(c);
}

void pcd_conn_resume(pcd_conn *conn) {
  conn->busy = 0;
  if (conn->closed)
    return;
  pcd_conn_ref(conn);
  do_read(conn);
  update_events(conn);
  pcd_conn_unref(conn);
}

void pcd_conn_check_timeout(pcd_conn *conn, uint64_t now_us) {
  uint64_t limit = conn->srv->config->frame_timeout_s * 1000000u;
  int mid_frame = conn->hdr_got > 0;
  int stalled_write = conn->out_head != NULL;
  if (conn->closed || !(mid_frame || stalled_write) || now_us - conn->last_io_us < limit)
    return;
  log_warn("connection: no progress for %llu s %s; closing",
           (unsigned long long)conn->srv->config->frame_timeout_s,
           mid_frame ? "in the middle of a frame" : "on a queued reply");
  pcd_conn_close(conn);
}

int pcd_conn_open(pcd_server *srv, int fd, pcd_conn **ret_conn) {
  pcd_conn *c = pcache__calloc(1, sizeof *c);
  int r;
  if (!c)
    return -ENOMEM;
  c->srv = srv;
  c->fd = fd;
  c->refs = 1;
  c->last_io_us = pcd_now_us();
  r = uv_poll_init(srv->loop, &c->poll, fd);
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
