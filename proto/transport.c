/* The client side of the connection: connect, check who listens, Hello.
 * Every request after that, Hello included, goes through pcache__rpc
 * (rpc.c). */
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"

struct pcache__transport {
  int fd;
  uint32_t max_frame;
  Pcachepb__Response *hello; /* the whole HelloReply response, kept for its limits */
};

int pcache__transport_rpc(pcache__transport *transport, const Pcachepb__Request *request,
                          Pcachepb__Response__BodyCase expect, uint64_t deadline_ms,
                          pcache__reply *ret_reply) {
  if (!transport || transport->fd < 0) {
    *ret_reply = (pcache__reply){0};
    return -EINVAL;
  }
  return pcache__rpc(transport->fd, request, expect, transport->max_frame, deadline_ms, ret_reply);
}

int pcache__transport_send(pcache__transport *transport, const Pcachepb__Request *request,
                           uint64_t deadline_ms) {
  if (!transport || transport->fd < 0)
    return -EINVAL;
  return pcache__rpc_send(transport->fd, request, transport->max_frame, deadline_ms);
}

int pcache__transport_recv(pcache__transport *transport, Pcachepb__Response__BodyCase expect,
                           uint64_t deadline_ms, pcache__reply *ret_reply) {
  if (!transport || transport->fd < 0) {
    *ret_reply = (pcache__reply){0};
    return -EINVAL;
  }
  return pcache__rpc_recv(transport->fd, expect, transport->max_frame, deadline_ms, ret_reply);
}

/* Connecting to a Unix socket completes at once or fails at once, except
 * when the listen backlog is full: then a blocking connect waits up to
 * SO_SNDTIMEO, which bounds it by our timeout. */
static int connect_unix(const char *path, uint32_t timeout_ms, int *ret_fd, long *ret_peer_uid) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  size_t len = strlen(path);
  int fd, r;
  struct timeval tv;
  if (len == 0 || len >= sizeof sun.sun_path)
    return -ENAMETOOLONG;
  memcpy(sun.sun_path, path, len + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (timeout_ms == 0) {
    r = -ETIMEDOUT;
    goto out_close;
  }
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (long)(timeout_ms % 1000) * 1000;
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
  uint64_t deadline = pcache__mono_ms() + timeout_ms;
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
  r = connect_unix(socket_path, timeout_ms, &t->fd, &peer_uid);
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
  r = pcache__transport_rpc(t, &request, PCACHEPB__RESPONSE__BODY_HELLO, deadline, &reply);
  if (r < 0) {
    /* A refusal (our version, our uid) comes with the daemon's reason. */
    if (reply.response && ret_message && reply.response->message && *reply.response->message)
      *ret_message = pcache__strdup(reply.response->message);
    goto out_release;
  }
  if (reply.bulk) {
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
