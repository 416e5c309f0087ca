/* The one RPC helper (rpc.h). Every send and receive is non-blocking
 * (MSG_DONTWAIT) and waits in poll() up to the caller's deadline, so a
 * daemon that stalls never holds the caller past it, whether the socket
 * is blocking (the tests') or not (transport.c's). */
#include "rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/parse.h"

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

/* Descriptors a frame may bring: a memfd, and a segment's lease. */
typedef struct passed_fds {
  int fd[2];
  size_t n;
} passed_fds;

static void passed_close(passed_fds *p) {
  for (size_t i = 0; i < p->n; i++)
    close(p->fd[i]);
  p->n = 0;
}

/* Reads exactly size bytes. Descriptors passed with SCM_RIGHTS on any of
 * them are added to *fds; a third is a protocol error (the daemon sends
 * at most a memfd and a lease per frame). spin: ask again for spin_ns()
 * before the first sleep (a reply's first bytes). */
static int recv_all(int fd, uint8_t *buf, size_t size, uint64_t deadline, passed_fds *fds,
                    int spin) {
  uint64_t spin_until = spin ? pcache__mono_ns() + spin_ns() : 0;
  while (size > 0) {
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
        if (spin_until && pcache__mono_ns() < spin_until) {
          cpu_relax();
          continue;
        }
        spin_until = 0;
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
        if (fds->n < 2 && !bad)
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
    buf += n;
    size -= (size_t)n;
  }
  return 0;
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

/* A bulk reply: the frame's Response only says where, in the sealed memfd
 * that came with it, the real Response lies. The memfd must be sealed
 * against writes and shrinking, or the daemon (or anyone holding the fd)
 * could change the bytes after we checked them. */
static int open_bulk(const Pcachepb__Bulk *bulk, int fd, pcache__reply *reply) {
  struct stat st;
  int seals;
  void *map;
  if (fd < 0 || bulk->size == 0 || bulk->size > SIZE_MAX)
    return PCACHE_EPROTO;
  seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_SHRINK)) != (F_SEAL_WRITE | F_SEAL_SHRINK))
    return PCACHE_EPROTO;
  if (fstat(fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size < bulk->size)
    return PCACHE_EPROTO;
  if (bulk->response_offset > bulk->size ||
      bulk->response_size > bulk->size - bulk->response_offset || bulk->response_size == 0)
    return PCACHE_EPROTO;
  /* Prefaulted: every byte is read (checksum, then the driver), and a
   * fault per 4 KiB on first touch cost much of a large prefetch. */
  map = mmap(NULL, (size_t)bulk->size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map == MAP_FAILED)
    return -errno;
  reply->bulk = map;
  reply->bulk_size = (size_t)bulk->size;
  reply->memfd = fd;
  return 0;
}

/* One Response frame, resolved through its memfd when it is a bulk one. */
static int recv_response(int sock, uint32_t max_frame, uint64_t deadline,
                         pcache__reply *ret_reply) {
  uint8_t header[PCACHE_FRAME_HEADER_SIZE];
  uint8_t *body = NULL;
  uint32_t length;
  passed_fds fds = {.n = 0};
  int r;
  pcache__reply reply = {0};
  Pcachepb__Response *outer = NULL;

  r = recv_all(sock, header, sizeof header, deadline, &fds, 1);
  if (r < 0)
    goto out;
  /* Checked before anything is allocated for the body. */
  r = pcache__frame_length(header, max_frame, &length);
  if (r < 0)
    goto out;
  body = pcache__malloc(length);
  if (!body) {
    r = -ENOMEM;
    goto out;
  }
  r = recv_all(sock, body, length, deadline, &fds, 0);
  if (r < 0)
    goto out;
  r = pcache__response_decode(body, length, &outer);
  if (r < 0)
    goto out;
  if (outer->body_case != PCACHEPB__RESPONSE__BODY_BULK) {
    /* A SegmentReply of nonzero size is one other frame with an fd (the
     * segment's memfd, and its lease when it says so), a ReplyWindowReply
     * of nonzero size the other (the window's memfd); any other
     * descriptor nobody asked for. */
    int seg = outer->body_case == PCACHEPB__RESPONSE__BODY_SEGMENT && outer->segment->size;
    int win = outer->body_case == PCACHEPB__RESPONSE__BODY_REPLY_WINDOW &&
              outer->reply_window->size;
    size_t want = seg ? 1u + (outer->segment->lease != 0) : win ? 1u : 0u;
    if (fds.n != want) {
      r = PCACHE_EPROTO;
      goto out_free_outer;
    }
    reply.passed_fd = want ? fds.fd[0] : -1;
    reply.has_passed_fd = want > 0;
    reply.lease_fd = want > 1 ? fds.fd[1] : -1;
    reply.has_lease_fd = want > 1;
    fds.n = 0;
    reply.response = outer;
    outer = NULL;
    goto done;
  }
  if (fds.n != 1) {
    r = PCACHE_EPROTO;
    goto out_free_outer;
  }
  r = open_bulk(outer->bulk, fds.fd[0], &reply);
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
  pcache__free(body);
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
  int r;
  *ret_reply = (pcache__reply){0};
  r = recv_response(fd, max_frame, deadline_ms, ret_reply);
  return r < 0 ? r : verdict(ret_reply->response, expect);
}

int pcache__rpc(int fd, const Pcachepb__Request *request, Pcachepb__Response__BodyCase expect,
                uint32_t max_frame, uint64_t deadline_ms, pcache__reply *ret_reply) {
  int r;
  *ret_reply = (pcache__reply){0};
  r = pcache__rpc_send(fd, request, max_frame, deadline_ms);
  return r < 0 ? r : pcache__rpc_recv(fd, expect, max_frame, deadline_ms, ret_reply);
}

const char *pcache__reply_why(const pcache__reply *reply, int err) {
  if (reply && reply->response && reply->response->message && *reply->response->message)
    return reply->response->message;
  return pcache_strerror(err);
}

void pcache__reply_release(pcache__reply *reply) {
  if (!reply)
    return;
  pcache__response_free(reply->response);
  if (reply->has_passed_fd)
    close(reply->passed_fd);
  if (reply->has_lease_fd)
    close(reply->lease_fd);
  if (reply->bulk && reply->bulk_owned) {
    pcache__free((void *)reply->bulk);
  } else if (reply->bulk) {
    munmap((void *)reply->bulk, reply->bulk_size);
    close(reply->memfd);
  }
  *reply = (pcache__reply){0};
}

const uint8_t *pcache__reply_bytes(const pcache__reply *reply, ProtobufCBinaryData inline_data,
                                   uint64_t offset, uint64_t size, size_t *ret_size) {
  *ret_size = 0;
  if (inline_data.len > 0) {
    *ret_size = inline_data.len;
    return inline_data.data;
  }
  if (!reply || !reply->bulk || offset > reply->bulk_size || size > reply->bulk_size - offset)
    return NULL;
  *ret_size = (size_t)size;
  return reply->bulk + offset;
}
