#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"

struct pcache__transport {
  int fd;
  uint32_t max_frame;
  Pcachepb__Response *hello; /* the whole HelloReply response, kept for its limits */
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Milliseconds left before deadline, 0 when it has passed. */
static int remaining_ms(uint64_t deadline) {
  uint64_t now = now_ms();
  if (now >= deadline)
    return 0;
  return (int)(deadline - now > 0x7fffffff ? 0x7fffffff : deadline - now);
}

/* See pcache__transport_set_cancel_fd. */
static __thread int cancel_fd = -1;

void pcache__transport_set_cancel_fd(int fd) { cancel_fd = fd; }

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

/* Reads exactly size bytes. A descriptor passed with SCM_RIGHTS on any of
 * them lands in *io_fd; a second one is a protocol error (the daemon sends
 * at most one per frame). */
static int recv_all(int fd, uint8_t *buf, size_t size, uint64_t deadline, int *io_fd) {
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
        int r = wait_fd(fd, POLLIN, deadline);
        if (r < 0)
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
        if (*io_fd < 0 && !bad)
          *io_fd = got;
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

static int send_request(pcache__transport *t, const Pcachepb__Request *request, uint64_t deadline) {
  uint8_t *buf;
  size_t size;
  int r = pcache__request_encode(request, t->max_frame, &buf, &size);
  if (r < 0)
    return r;
  r = send_all(t->fd, buf, size, deadline);
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
  return 0;
}

static int recv_reply(pcache__transport *t, uint64_t deadline, pcache__reply *ret_reply) {
  uint8_t header[PCACHE_FRAME_HEADER_SIZE];
  uint8_t *body = NULL;
  uint32_t length;
  int fd = -1, r;
  pcache__reply reply = {0};
  Pcachepb__Response *outer = NULL;

  r = recv_all(t->fd, header, sizeof header, deadline, &fd);
  if (r < 0)
    goto out;
  /* Checked before anything is allocated for the body. */
  r = pcache__frame_length(header, t->max_frame, &length);
  if (r < 0)
    goto out;
  body = pcache__malloc(length);
  if (!body) {
    r = -ENOMEM;
    goto out;
  }
  r = recv_all(t->fd, body, length, deadline, &fd);
  if (r < 0)
    goto out;
  r = pcache__response_decode(body, length, &outer);
  if (r < 0)
    goto out;
  if (outer->body_case != PCACHEPB__RESPONSE__BODY_BULK) {
    if (fd >= 0) {
      r = PCACHE_EPROTO; /* a descriptor nobody asked for */
      goto out_free_outer;
    }
    reply.response = outer;
    outer = NULL;
    goto done;
  }
  r = open_bulk(outer->bulk, fd, &reply);
  if (r < 0)
    goto out_free_outer;
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
  if (fd >= 0)
    close(fd);
  pcache__free(body);
  return r;
}

static int call_until(pcache__transport *t, const Pcachepb__Request *request, uint64_t deadline,
                      pcache__reply *ret_reply) {
  int r = send_request(t, request, deadline);
  if (r < 0)
    return r;
  return recv_reply(t, deadline, ret_reply);
}

int pcache__transport_call(pcache__transport *transport, const Pcachepb__Request *request,
                           uint32_t timeout_ms, pcache__reply *ret_reply) {
  if (!transport || transport->fd < 0 || !request || !ret_reply)
    return -EINVAL;
  return call_until(transport, request, now_ms() + timeout_ms, ret_reply);
}

/* Connecting to a Unix socket completes at once or fails at once, except
 * when the listen backlog is full: then a blocking connect waits up to
 * SO_SNDTIMEO, which bounds it by our deadline. */
static int connect_unix(const char *path, uint64_t deadline, int *ret_fd, long *ret_peer_uid) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  size_t len = strlen(path);
  int fd, left, r;
  struct timeval tv;
  if (len == 0 || len >= sizeof sun.sun_path)
    return -ENAMETOOLONG;
  memcpy(sun.sun_path, path, len + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  left = remaining_ms(deadline);
  if (left == 0) {
    r = -ETIMEDOUT;
    goto out_close;
  }
  tv.tv_sec = left / 1000;
  tv.tv_usec = (left % 1000) * 1000;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
    r = -errno;
    goto out_close;
  }
  while (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
    if (errno == EINTR)
      continue;
    if (errno == ENOENT || errno == ECONNREFUSED || errno == ENOTDIR)
      r = PCACHE_EUNAVAILABLE;
    else if (errno == EAGAIN || errno == EINPROGRESS)
      r = -ETIMEDOUT;
    else
      r = -errno;
    goto out_close;
  }
  /* Whoever listened first on the path answers: on a shared path that may
   * be another user's process, which must not get our requests or feed us
   * blobs. Only a daemon of our own uid (or root's) is trusted. */
  {
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
      r = -errno;
      goto out_close;
    }
    if (cred.uid != geteuid() && cred.uid != 0) {
      *ret_peer_uid = (long)cred.uid;
      r = PCACHE_EPEER;
      goto out_close;
    }
  }
  /* All further I/O is non-blocking with poll() deadlines. */
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
    r = -errno;
    goto out_close;
  }
  *ret_fd = fd;
  return 0;
out_close:
  close(fd);
  return r;
}

int pcache__transport_open(const char *socket_path, const char *app, uint32_t timeout_ms,
                           pcache__transport **ret_transport, char **ret_message) {
  uint64_t deadline = now_ms() + timeout_ms;
  pcache__transport *t;
  pcache__reply reply = {0};
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Hello hello = PCACHEPB__HELLO__INIT;
  long peer_uid = -1;
  int r;

  if (!socket_path || !ret_transport)
    return -EINVAL;
  t = pcache__calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  t->fd = -1;
  t->max_frame = PCACHE_DEFAULT_MAX_FRAME;
  r = connect_unix(socket_path, deadline, &t->fd, &peer_uid);
  if (r == PCACHE_EPEER && ret_message) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "the process listening there runs as uid %ld, not as uid %u or root; not "
             "trusting it",
             peer_uid, (unsigned)geteuid());
    *ret_message = pcache__strdup(msg);
  }
  if (r < 0)
    goto out_free;

  hello.protocol_version = PCACHE_PROTOCOL_VERSION;
  hello.app = (char *)(app ? app : "");
  hello.pid = (uint32_t)getpid();
  hello.client_version = (char *)PCACHE_VERSION_STRING;
  request.body_case = PCACHEPB__REQUEST__BODY_HELLO;
  request.hello = &hello;
  r = call_until(t, &request, deadline, &reply);
  if (r < 0) {
    /* A daemon that refuses our uid closes the connection on us. */
    goto out_free;
  }
  if (reply.response->status != 0) {
    r = reply.response->status < 0 ? reply.response->status : PCACHE_EPROTO;
    if (ret_message && reply.response->message && *reply.response->message)
      *ret_message = pcache__strdup(reply.response->message);
    goto out_release;
  }
  if (reply.response->body_case != PCACHEPB__RESPONSE__BODY_HELLO || reply.bulk) {
    r = PCACHE_EPROTO;
    goto out_release;
  }
  if (reply.response->hello->max_frame >= PCACHE_FRAME_HEADER_SIZE &&
      reply.response->hello->max_frame <= UINT32_MAX)
    t->max_frame = (uint32_t)reply.response->hello->max_frame;
  t->hello = reply.response;
  *ret_transport = t;
  return 0;

out_release:
  pcache__reply_release(&reply);
out_free:
  pcache__transport_close(t);
  return r;
}

void pcache__transport_close(pcache__transport *transport) {
  if (!transport)
    return;
  if (transport->fd >= 0)
    close(transport->fd);
  pcache__response_free(transport->hello);
  pcache__free(transport);
}

const Pcachepb__HelloReply *pcache__transport_hello(const pcache__transport *transport) {
  return transport && transport->hello ? transport->hello->hello : NULL;
}

void pcache__reply_release(pcache__reply *reply) {
  if (!reply)
    return;
  pcache__response_free(reply->response);
  if (reply->bulk)
    munmap((void *)reply->bulk, reply->bulk_size);
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
