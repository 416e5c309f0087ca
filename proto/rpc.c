/* The one RPC helper (rpc.h). Every send and receive is non-blocking
 * (MSG_DONTWAIT) and waits in poll() up to the caller's deadline, so a
 * daemon that stalls never holds the caller past it, whether the socket
 * is blocking (the tests') or not (transport.c's). This file sends
 * requests and reads frames (the receive buffer, the descriptors that
 * come with them); a reply once its frame arrived (its bulk memfd, its
 * bytes, its release) is rpc_reply.c's. */
#include "rpc.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/parse.h"
#include "proto/rpc_reply.h"
#include "proto/segment.h"

/* Milliseconds left before deadline, 0 when it has passed. */
static int remaining_ms(uint64_t deadline) {
  uint64_t now = pcache__mono_ms();
  if (now >= deadline)
    return 0;
  return (int)(deadline - now > 0x7fffffff ? 0x7fffffff : deadline - now);
}

/* See pcache__rpc_set_cancel_fd. */
static __thread int cancel_fd = -1;

void pcache__rpc_set_cancel_fd(int fd) { cancel_fd = fd; }

int pcache__rpc_cancelled(void) {
  struct pollfd pfd = {.fd = cancel_fd, .events = POLLIN};
  return cancel_fd >= 0 && poll(&pfd, 1, 0) > 0 && pfd.revents;
}

static int wait_fd(int fd, short events, uint64_t deadline) {
  struct pollfd pfd[2] = {{.fd = fd, .events = events}, {.fd = cancel_fd, .events = POLLIN}};
  for (;;) {
    int left = remaining_ms(deadline);
    if (left == 0)
      return -ETIMEDOUT;
    int n = poll(pfd, cancel_fd >= 0 ? 2 : 1, left);
    if (n > 0 && cancel_fd >= 0 && pfd[1].revents)
      return -ECANCELED;
    if (n > 0)
      return 0; /* readiness or an error: the next I/O call says which */
    if (n == 0)
      return -ETIMEDOUT;
    if (errno != EINTR)
      return -errno;
  }
}

static int send_all(int fd, const uint8_t *buf, size_t size, uint64_t deadline) {
  while (size > 0) {
    ssize_t n = send(fd, buf, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      buf += n;
      size -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = wait_fd(fd, POLLOUT, deadline);
      if (r < 0)
        return r;
      continue;
    }
    return n < 0 ? -errno : -EPIPE;
  }
  return 0;
}

/* How long a caller waiting for a reply keeps asking the socket before it
 * sleeps in poll (PCACHE_RPC_SPIN_US, 50; 0: never). The daemon answers
 * a Get in tens of microseconds, about what the wake-up from poll costs;
 * the caller's thread waits for the reply anyway, so spinning that long
 * costs it nothing it could have used, and a reply that takes longer gets
 * the sleep after the spin. */
static uint64_t spin_ns(void) {
  static _Atomic int64_t cached = -1;
  int64_t v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    v = (int64_t)pcache__env_ms("PCACHE_RPC_SPIN_US", 50, 0, 10000) * 1000;
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return (uint64_t)v;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* Descriptors received and not yet given to a frame: a frame brings at
 * most two (a memfd, and a segment's lease); a receive buffer may hold
 * those of a few frames read ahead. */
#define FDS_MAX 8

typedef struct passed_fds {
  int fd[FDS_MAX];
  /* For each, through a receive buffer: the stream offset just past the
   * last byte of the recvmsg that brought it (rx_fds). */
  uint64_t end[FDS_MAX];
  size_t n;
} passed_fds;

static void passed_close(passed_fds *p) {
  for (size_t i = 0; i < p->n; i++)
    close(p->fd[i]);
  p->n = 0;
}

/* One recvmsg that returns bytes, into buf (size > 0), waiting in poll up
 * to deadline; while *spin_until (mono ns) lies ahead, it asks again
 * instead of sleeping, then clears it. Descriptors passed with SCM_RIGHTS
 * are added to *fds, at most max_fds in all: one more is a protocol error
 * (and closed). With stream (the count of bytes read so far on the
 * socket), the count grows by what was read and the new descriptors are
 * stamped with it. Returns the bytes read (> 0) or an error. */
static ssize_t recv_some(int fd, uint8_t *buf, size_t size, uint64_t deadline, uint64_t *spin_until,
                         passed_fds *fds, size_t max_fds, uint64_t *stream) {
  size_t had = fds->n;
  for (;;) {
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int) * 4)];
    } control;
    struct iovec iov = {.iov_base = buf, .iov_len = size};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        int r;
        if (*spin_until && pcache__mono_ns() < *spin_until) {
          cpu_relax();
          continue;
        }
        *spin_until = 0;
        if ((r = wait_fd(fd, POLLIN, deadline)) < 0)
          return r;
        continue;
      }
      return -errno;
    }
    int bad = (msg.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        continue;
      size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < nfds; i++) {
        int got;
        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
        if (fds->n < max_fds && !bad)
          fds->fd[fds->n++] = got;
        else {
          close(got);
          bad = 1;
        }
      }
    }
    if (bad)
      return PCACHE_EPROTO;
    if (n == 0)
      return -ECONNRESET; /* the daemon closed the connection */
    if (stream) {
      *stream += (uint64_t)n;
      for (size_t i = had; i < fds->n; i++)
        fds->end[i] = *stream;
    }
    return n;
  }
}

/* Reads exactly size bytes (see recv_some). spin: ask again for
 * spin_ns() before the first sleep (a reply's first bytes). A peer that
 * keeps sending never holds it past deadline: recv_some looks at the
 * clock only when the socket is empty, so it is looked at here too. */
static int recv_all(int fd, uint8_t *buf, size_t size, uint64_t deadline, passed_fds *fds,
                    size_t max_fds, uint64_t *stream, int spin) {
  uint64_t spin_until = spin ? pcache__mono_ns() + spin_ns() : 0;
  while (size > 0) {
    ssize_t n = recv_some(fd, buf, size, deadline, &spin_until, fds, max_fds, stream);
    if (n < 0)
      return (int)n;
    buf += n;
    size -= (size_t)n;
    if (size > 0 && pcache__mono_ms() >= deadline)
      return -ETIMEDOUT;
  }
  return 0;
}

/* A connection's receive buffer (rpc.h). */
#define RX_SIZE 4096

struct pcache__rx {
  size_t start, len; /* the bytes read and not yet taken: buf[start, start + len) */
  uint64_t base;     /* the stream offset of buf[start] */
  uint64_t in;       /* bytes read from the socket so far */
  passed_fds fds;    /* the descriptors not yet taken, in the order they came */
  uint8_t buf[RX_SIZE];
};

pcache__rx *pcache__rx_new(void) { return pcache__calloc(1, sizeof(pcache__rx)); }

void pcache__rx_free(pcache__rx *rx) {
  if (!rx)
    return;
  passed_close(&rx->fds);
  pcache__free(rx);
}

/* Reads into rx until it holds want bytes (<= RX_SIZE), as many more as
 * the socket has room for in one go: what comes after this frame is the
 * next one's. */
static int rx_fill(int fd, pcache__rx *rx, size_t want, uint64_t deadline, int spin) {
  uint64_t spin_until = spin ? pcache__mono_ns() + spin_ns() : 0;
  if (rx->len == 0)
    rx->start = 0;
  else if (rx->start + want > RX_SIZE) {
    memmove(rx->buf, rx->buf + rx->start, rx->len);
    rx->start = 0;
  }
  while (rx->len < want) {
    size_t end = rx->start + rx->len;
    ssize_t n = recv_some(fd, rx->buf + end, RX_SIZE - end, deadline, &spin_until, &rx->fds,
                          FDS_MAX, &rx->in);
    if (n < 0)
      return (int)n;
    rx->len += (size_t)n;
    if (rx->len < want && pcache__mono_ms() >= deadline)
      return -ETIMEDOUT; /* as in recv_all */
  }
  return 0;
}

static void rx_take(pcache__rx *rx, size_t n) {
  rx->start += n;
  rx->len -= n;
  rx->base += n;
}

/* One frame's body: in *ret_body, either inside rx (small frames; taken
 * from rx once decoded) or in *ret_owned (the caller frees it). */
static int rx_frame(int fd, pcache__rx *rx, uint32_t max_frame, uint64_t deadline,
                    const uint8_t **ret_body, uint32_t *ret_length, uint8_t **ret_owned) {
  uint32_t length;
  size_t have;
  uint8_t *body;
  int r = rx_fill(fd, rx, PCACHE_FRAME_HEADER_SIZE, deadline, 1);
  if (r < 0)
    return r;
  if ((r = pcache__frame_length(rx->buf + rx->start, max_frame, &length)) < 0)
    return r;
  *ret_length = length;
  if ((size_t)length <= RX_SIZE - PCACHE_FRAME_HEADER_SIZE) {
    if ((r = rx_fill(fd, rx, PCACHE_FRAME_HEADER_SIZE + (size_t)length, deadline, 0)) < 0)
      return r;
    *ret_body = rx->buf + rx->start + PCACHE_FRAME_HEADER_SIZE;
    *ret_owned = NULL;
    return 0;
  }
  /* Larger than the buffer: what it holds, then the rest read exactly. */
  if (!(body = pcache__malloc(length)))
    return -ENOMEM;
  rx_take(rx, PCACHE_FRAME_HEADER_SIZE);
  have = rx->len < length ? rx->len : length;
  memcpy(body, rx->buf + rx->start, have);
  rx_take(rx, have);
  r = recv_all(fd, body + have, length - have, deadline, &rx->fds, FDS_MAX, &rx->in, 0);
  if (r < 0) {
    pcache__free(body);
    return r;
  }
  rx->base = rx->in; /* read exactly to the frame's end: nothing buffered */
  *ret_body = *ret_owned = body;
  return 0;
}

/* The want descriptors of the frame at stream offsets [start, end), from
 * rx's. The daemon sends a frame in one sendmsg with its descriptors, and
 * the kernel hands them over with the frame's first bytes, ending that
 * recvmsg right after the part of the frame that carried them (or sooner,
 * when the buffer is full). So a descriptor is this frame's exactly when
 * the read that brought it ended inside the frame: the first want must,
 * and any other that did, or ended before it, is one too many. Either
 * way the stream is out of step: PCACHE_EPROTO, the rest closed. */
static int rx_fds(pcache__rx *rx, size_t want, uint64_t start, uint64_t end, passed_fds *ret) {
  size_t i;
  for (i = 0; i < want; i++)
    if (i >= rx->fds.n || rx->fds.end[i] <= start || rx->fds.end[i] > end)
      goto refuse;
  if (want < rx->fds.n && rx->fds.end[want] <= end)
    goto refuse;
  memcpy(ret->fd, rx->fds.fd, want * sizeof(int));
  ret->n = want;
  rx->fds.n -= want;
  memmove(rx->fds.fd, rx->fds.fd + want, rx->fds.n * sizeof(int));
  memmove(rx->fds.end, rx->fds.end + want, rx->fds.n * sizeof(uint64_t));
  return 0;
refuse:
  passed_close(&rx->fds);
  return PCACHE_EPROTO;
}

int pcache__rpc_send(int fd, const Pcachepb__Request *request, uint32_t max_frame,
                     uint64_t deadline_ms) {
  uint8_t *buf;
  size_t size;
  int r = pcache__request_encode(request, max_frame, &buf, &size);
  if (r < 0)
    return r;
  r = send_all(fd, buf, size, deadline_ms);
  pcache__free(buf);
  return r;
}

/* The descriptors a Response says it brings: a SegmentReply of nonzero
 * size the segment's memfd (and its lease when it says so), a
 * ReplyWindowReply of nonzero size the window's memfd, a bulk one its
 * memfd; any other, none. */
static size_t fds_wanted(const Pcachepb__Response *r) {
  if (r->body_case == PCACHEPB__RESPONSE__BODY_BULK)
    return 1;
  if (r->body_case == PCACHEPB__RESPONSE__BODY_SEGMENT && r->segment->size)
    return 1u + (r->segment->lease != 0);
  if (r->body_case == PCACHEPB__RESPONSE__BODY_REPLY_WINDOW && r->reply_window->size)
    return 1;
  return 0;
}

/* Whether the descriptors r brings are within the protocol's bounds: a
 * segment or a reply window larger than pcached ever makes is a peer
 * that means harm (or is broken), not one to map. */
static int fds_bounded(const Pcachepb__Response *r) {
  if (r->body_case == PCACHEPB__RESPONSE__BODY_SEGMENT)
    return r->segment->size <= PCACHE_SEG_MAX_SIZE;
  if (r->body_case == PCACHEPB__RESPONSE__BODY_REPLY_WINDOW)
    return r->reply_window->size <= PCACHE_REPLY_WINDOW_MAX;
  return 1;
}

/* One Response frame, resolved through its memfd when it is a bulk one;
 * through rx when there is one, else read exactly. */
static int recv_response(int sock, pcache__rx *rx, uint32_t max_frame,
                         const pcache__reply_bounds *bounds, uint64_t deadline,
                         pcache__reply *ret_reply) {
  uint8_t header[PCACHE_FRAME_HEADER_SIZE];
  uint8_t *owned = NULL;
  const uint8_t *body;
  uint32_t length;
  passed_fds fds = {.n = 0};
  size_t want;
  uint64_t start = 0;
  int r;
  pcache__reply reply = {0};
  Pcachepb__Response *outer = NULL;

  if (rx) {
    start = rx->base;
    r = rx_frame(sock, rx, max_frame, deadline, &body, &length, &owned);
    if (r < 0)
      goto out;
  } else {
    r = recv_all(sock, header, sizeof header, deadline, &fds, 2, NULL, 1);
    if (r < 0)
      goto out;
    /* Checked before anything is allocated for the body. */
    r = pcache__frame_length(header, max_frame, &length);
    if (r < 0)
      goto out;
    body = owned = pcache__malloc(length);
    if (!owned) {
      r = -ENOMEM;
      goto out;
    }
    r = recv_all(sock, owned, length, deadline, &fds, 2, NULL, 0);
    if (r < 0)
      goto out;
  }
  r = pcache__response_decode(body, length, &outer);
  if (rx && !owned)
    rx_take(rx, PCACHE_FRAME_HEADER_SIZE + (size_t)length); /* decoded: a copy */
  if (r < 0)
    goto out;
  want = fds_wanted(outer);
  if (rx)
    r = rx_fds(rx, want, start, start + PCACHE_FRAME_HEADER_SIZE + length, &fds);
  else if (fds.n != want)
    r = PCACHE_EPROTO;
  if (r == 0 && !fds_bounded(outer))
    r = PCACHE_EPROTO;
  if (r < 0)
    goto out_free_outer;
  if (outer->body_case != PCACHEPB__RESPONSE__BODY_BULK) {
    reply.passed_fd = want ? fds.fd[0] : -1;
    reply.has_passed_fd = want > 0;
    reply.lease_fd = want > 1 ? fds.fd[1] : -1;
    reply.has_lease_fd = want > 1;
    fds.n = 0;
    reply.response = outer;
    outer = NULL;
    goto done;
  }
  r = pcache__rpc_open_bulk(outer->bulk, fds.fd[0], bounds ? bounds->bulk : UINT64_MAX, &reply);
  if (r < 0)
    goto out_free_outer;
  fds.n = 0; /* the reply's now */
  r = pcache__response_decode(reply.bulk + outer->bulk->response_offset,
                              (size_t)outer->bulk->response_size, &reply.response);
  if (r < 0)
    goto out_unmap;
  if (reply.response->body_case == PCACHEPB__RESPONSE__BODY_BULK) {
    r = PCACHE_EPROTO; /* no bulk inside a bulk */
    goto out_unmap;
  }
  if ((r = pcache__rpc_bulk_populate(&reply, bounds, deadline)) < 0)
    goto out_unmap;
done:
  *ret_reply = reply;
  reply = (pcache__reply){0};
  r = 0;
out_unmap:
  pcache__reply_release(&reply);
out_free_outer:
  pcache__response_free(outer);
out:
  passed_close(&fds);
  pcache__free(owned);
  return r;
}

/* The verdict on a Response that arrived: see pcache__rpc. */
static int verdict(const Pcachepb__Response *response, Pcachepb__Response__BodyCase expect) {
  if (response->status < 0)
    return response->status;
  if (response->status > 0)
    return PCACHE_EPROTO; /* not a code of ours */
  if (expect != PCACHEPB__RESPONSE__BODY__NOT_SET && response->body_case != expect)
    return PCACHE_EPROTO;
  return 0;
}

int pcache__rpc_recv(int fd, Pcachepb__Response__BodyCase expect, uint32_t max_frame,
                     uint64_t deadline_ms, pcache__reply *ret_reply) {
  return pcache__rpc_recv_rx(fd, NULL, expect, max_frame, NULL, deadline_ms, ret_reply);
}

int pcache__rpc_recv_rx(int fd, pcache__rx *rx, Pcachepb__Response__BodyCase expect,
                        uint32_t max_frame, const pcache__reply_bounds *bounds,
                        uint64_t deadline_ms, pcache__reply *ret_reply) {
  int r;
  *ret_reply = (pcache__reply){0};
  r = recv_response(fd, rx, max_frame, bounds, deadline_ms, ret_reply);
  return r < 0 ? r : verdict(ret_reply->response, expect);
}

int pcache__rpc(int fd, const Pcachepb__Request *request, Pcachepb__Response__BodyCase expect,
                uint32_t max_frame, uint64_t deadline_ms, pcache__reply *ret_reply) {
  int r;
  *ret_reply = (pcache__reply){0};
  r = pcache__rpc_send(fd, request, max_frame, deadline_ms);
  return r < 0 ? r : pcache__rpc_recv(fd, expect, max_frame, deadline_ms, ret_reply);
}
