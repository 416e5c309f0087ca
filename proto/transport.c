/* The client side of the connection: connect, check who listens, Hello,
 * and the reply window when asked for, the two sent together and their
 * answers read when the connection is first needed. Every request after
 * that, Hello included, goes through pcache__rpc (rpc.c), every reply
 * through the connection's receive buffer (pcache__rx); with a window,
 * each Get and Prefetch says what the client took of it and each reply's
 * window bytes are copied out here (window.h). */
#include "transport.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "window.h"

struct pcache__transport {
  int fd;
  uint32_t max_frame;        /* the daemon's, for what we send */
  uint32_t recv_frame;       /* for what we read: never over our own default */
  Pcachepb__Response *hello; /* the whole HelloReply response, kept for its limits */
  pcache__window *window;    /* the reply window, or NULL */
  pcache__rx *rx;            /* every Response is read through it (rpc.h) */
  uint64_t last_reply_ms;    /* pcache__mono_ms() when the last reply came */
  /* What the replies to the requests sent and not yet answered may bring
   * (reply_bounds), and how many those are. */
  pcache__reply_bounds bounds;
  unsigned unanswered;
  /* Hello's exchange, while its replies are unread (pcache__transport_start):
   * PENDING_HELLO, plus PENDING_WINDOW when a ReplyWindow went after it.
   * hello_sent: what sending the Hello gave (a refusing daemon may have
   * closed already; its reason is still there to read). */
  unsigned pending;
  int hello_sent;
  uint64_t started_ms; /* when the Hello went: the daemon's quiet starts there */
};

#define PENDING_HELLO 1u
#define PENDING_WINDOW 2u

/* What a reply adds to the bytes of the items it carries: each Blob's or
 * PutResult's fields (a result's message included), and the rest. */
#define REPLY_ITEM_OVERHEAD 1024u
#define REPLY_OVERHEAD (64u << 10)

/* A limit the daemon announced (0: none said, dflt), at most what this
 * client takes from any daemon (own_max, frame.h): the Hello comes from
 * whoever answers on the socket, so it may lower a bound, never raise
 * it. */
static uint64_t announced(uint64_t v, uint64_t dflt, uint64_t own_max) {
  v = v ? v : dflt;
  return v < own_max ? v : own_max;
}

/*
 * What a reply to request may bring (docs/protocol.md, "Bulk replies"),
 * by what it asks for: a Get of n hashes n blobs of at most max_blob,
 * and no more than a page (PCACHE_REPLY_PAGE_MAX) past its first; a
 * Prefetch page the same, and its snapshot when it asks for one; a Put's
 * results; the small replies libpcache reads otherwise, their overhead.
 * The replies pcachectl and the replayer ask for (List, Export, Verify,
 * ReplayClaim...) grow with the store they name: no bound but the
 * protocol's.
 */
static pcache__reply_bounds reply_bounds(const pcache__transport *t,
                                         const Pcachepb__Request *request) {
  const Pcachepb__HelloReply *h = t->hello ? t->hello->hello : NULL;
  uint64_t blob = announced(h ? h->max_blob : 0, PCACHE_DEFAULT_MAX_BLOB, PCACHE_CLIENT_MAX_BLOB);
  uint64_t hashes =
      announced(h ? h->max_hashes : 0, PCACHE_DEFAULT_MAX_HASHES, PCACHE_CLIENT_MAX_HASHES);
  uint64_t n, blobs;
  pcache__reply_bounds b = {.bulk = REPLY_OVERHEAD, .blob = blob, .snapshot = 0};
  switch (request->body_case) {
  case PCACHEPB__REQUEST__BODY_GET:
    n = request->get->n_state_hashes;
    blobs = n * blob < blob + PCACHE_REPLY_PAGE_MAX ? n * blob : blob + PCACHE_REPLY_PAGE_MAX;
    b.bulk = blobs + n * REPLY_ITEM_OVERHEAD + REPLY_OVERHEAD;
    return b;
  case PCACHEPB__REQUEST__BODY_PREFETCH:
    n = request->prefetch->max_entries && request->prefetch->max_entries < hashes
            ? request->prefetch->max_entries
            : hashes;
    if (request->prefetch->snapshot)
      b.snapshot = announced(h ? h->max_snapshot : 0, PCACHE_DEFAULT_MAX_SNAPSHOT,
                             PCACHE_CLIENT_MAX_SNAPSHOT);
    b.bulk = blob + PCACHE_REPLY_PAGE_MAX + b.snapshot + n * REPLY_ITEM_OVERHEAD + REPLY_OVERHEAD;
    return b;
  case PCACHEPB__REQUEST__BODY_PUT:
    b.bulk = request->put->n_items * REPLY_ITEM_OVERHEAD + REPLY_OVERHEAD;
    return b;
  case PCACHEPB__REQUEST__BODY_HELLO:
  case PCACHEPB__REQUEST__BODY_REPLY_WINDOW:
  case PCACHEPB__REQUEST__BODY_SEGMENT:
  case PCACHEPB__REQUEST__BODY_REPORT:
  case PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT:
  case PCACHEPB__REQUEST__BODY_CLIENT_REPORT:
    return b;
  default:
    return (pcache__reply_bounds){UINT64_MAX, UINT64_MAX, UINT64_MAX};
  }
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

int pcache__transport_send(pcache__transport *transport, const Pcachepb__Request *request,
                           uint64_t deadline_ms) {
  Pcachepb__Request with = *request;
  Pcachepb__Get get;
  Pcachepb__Prefetch prefetch;
  pcache__reply_bounds b;
  int r;
  /* Pending: its answers come first, read by pcache__transport_finish. */
  if (!transport || transport->fd < 0 || transport->pending)
    return -EINVAL;
  /* What we took of the window goes with every request that may fill it:
   * a shallow copy, the caller's request stays as it was. */
  if (transport->window && request->body_case == PCACHEPB__REQUEST__BODY_GET) {
    get = *request->get;
    get.window_taken = pcache__window_taken(transport->window);
    with.get = &get;
  } else if (transport->window && request->body_case == PCACHEPB__REQUEST__BODY_PREFETCH) {
    prefetch = *request->prefetch;
    prefetch.window_taken = pcache__window_taken(transport->window);
    with.prefetch = &prefetch;
  }
  r = pcache__rpc_send(transport->fd, &with, transport->max_frame, deadline_ms);
  if (r == 0) {
    /* Pipelined requests share the largest of their bounds: replies are
     * told apart only by their order. */
    b = reply_bounds(transport, request);
    if (transport->unanswered++ > 0) {
      b.bulk = max_u64(b.bulk, transport->bounds.bulk);
      b.blob = max_u64(b.blob, transport->bounds.blob);
      b.snapshot = max_u64(b.snapshot, transport->bounds.snapshot);
    }
    transport->bounds = b;
  }
  return r;
}

int pcache__transport_recv(pcache__transport *transport, Pcachepb__Response__BodyCase expect,
                           uint64_t deadline_ms, pcache__reply *ret_reply) {
  int r;
  if (!transport || transport->fd < 0) {
    *ret_reply = (pcache__reply){0};
    return -EINVAL;
  }
  r = pcache__rpc_recv_rx(transport->fd, transport->rx, expect, transport->recv_frame,
                          transport->unanswered ? &transport->bounds : NULL, deadline_ms,
                          ret_reply);
  if (transport->unanswered)
    transport->unanswered--;
  transport->last_reply_ms = pcache__mono_ms();
  if (r == 0 && (r = pcache__window_take(transport->window, ret_reply)) < 0)
    pcache__reply_release(ret_reply); /* out of step: no Response, as rpc.h says */
  return r;
}

int pcache__transport_rpc(pcache__transport *transport, const Pcachepb__Request *request,
                          Pcachepb__Response__BodyCase expect, uint64_t deadline_ms,
                          pcache__reply *ret_reply) {
  int r = pcache__transport_send(transport, request, deadline_ms);
  if (r < 0) {
    *ret_reply = (pcache__reply){0};
    return r;
  }
  return pcache__transport_recv(transport, expect, deadline_ms, ret_reply);
}

static int window_send(pcache__transport *transport, uint64_t deadline_ms) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplyWindow rw = PCACHEPB__REPLY_WINDOW__INIT;
  request.body_case = PCACHEPB__REQUEST__BODY_REPLY_WINDOW;
  request.reply_window = &rw;
  return pcache__transport_send(transport, &request, deadline_ms);
}

/* The ReplyWindow's answer: 1 with a window, 0 without, or a failure of
 * the exchange. */
static int window_take(pcache__transport *transport, uint64_t deadline_ms) {
  pcache__reply reply;
  pcache__window *w = NULL;
  int r =
      pcache__transport_recv(transport, PCACHEPB__RESPONSE__BODY_REPLY_WINDOW, deadline_ms, &reply);
  if (r < 0) {
    /* The daemon refused it (an older one: PCACHE_EUNKNOWN_REQUEST): the
     * connection is in step, only without a window. A Response it did
     * not refuse with but that is not the answer (another kind, a status
     * not ours) is out of step, as pcache__client_rpc judges. */
    int refused = reply.response != NULL && !pcache__reply_out_of_step(r, &reply);
    pcache__reply_release(&reply);
    return refused ? 0 : r;
  }
  /* first_seq 0: a window no client can name (a daemon of this
   * feature's first days); go on without it. */
  if (reply.response->reply_window->size && reply.has_passed_fd &&
      reply.response->reply_window->first_seq) {
    reply.has_passed_fd = 0; /* window_map's now */
    r = pcache__window_map(reply.passed_fd, reply.response->reply_window->size,
                           reply.response->reply_window->first_seq, &w);
  }
  pcache__reply_release(&reply);
  if (r < 0)
    return r;
  transport->window = w;
  return w != NULL;
}

int pcache__transport_open_window(pcache__transport *transport, uint64_t deadline_ms) {
  int r;
  if (transport && transport->window)
    return 1; /* one per connection (the daemon answers a second -EEXIST) */
  r = window_send(transport, deadline_ms);
  return r < 0 ? r : window_take(transport, deadline_ms);
}

/* Connecting to a Unix socket completes at once or fails at once. A full
 * listen backlog is the one wait a blocking connect() would add: a daemon
 * that accepts nobody (stopped, hung) for long enough, its backlog filled
 * by clients that gave up. Non-blocking, that is EAGAIN at once, said as
 * the timeout a silent daemon gives: nothing waits on it, and a cancel
 * (pcache_device_destroy) need not interrupt it. */
static int connect_unix(const char *path, uint32_t timeout_ms, int *ret_fd, long *ret_peer_uid) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  size_t len = strlen(path);
  int fd, r;
  if (len == 0 || len >= sizeof sun.sun_path)
    return -ENAMETOOLONG;
  memcpy(sun.sun_path, path, len + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  if (timeout_ms == 0) {
    r = -ETIMEDOUT;
    goto out_close;
  }
  while (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
    if (errno == EINTR)
      continue;
    if (errno == ENOENT || errno == ECONNREFUSED || errno == ENOTDIR)
      r = PCACHE_EUNAVAILABLE;
    else if (errno == EAGAIN || errno == EINPROGRESS)
      r = -ETIMEDOUT; /* there, but answering nobody: as a daemon that does not answer */
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
  *ret_fd = fd;
  return 0;
out_close:
  close(fd);
  return r;
}

int pcache__transport_start(const char *socket_path, const char *app, uint32_t timeout_ms,
                            int want_window, pcache__transport **ret_transport,
                            char **ret_message) {
  uint64_t deadline = pcache__mono_ms() + timeout_ms;
  pcache__transport *t;
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
  t->recv_frame = PCACHE_REPLY_FRAME_MAX;
  if (!(t->rx = pcache__rx_new())) {
    r = -ENOMEM;
    goto out_free;
  }
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
  t->started_ms = pcache__mono_ms();
  r = pcache__transport_send(t, &request, deadline);
  /* A daemon that refuses a connection (--max-connections) answers at
   * once and closes: the Hello may find the socket closed, and the reason
   * is still there to read (pcache__transport_finish). */
  if (r < 0 && r != -EPIPE && r != -ECONNRESET)
    goto out_free;
  t->hello_sent = r;
  /* Sent behind the Hello, not after its answer: one round trip for both
   * (the daemon reads a connection's requests in order). */
  if (r == 0 && want_window) {
    /* Closed on us: the Hello's answer may say why. Anything else may
     * have sent part of the request: the stream is out of step. */
    int w = window_send(t, deadline);
    if (w == 0)
      t->pending = PENDING_WINDOW;
    else if (w != -EPIPE && w != -ECONNRESET) {
      r = w;
      goto out_free;
    }
  }
  t->pending |= PENDING_HELLO; /* last: sends on a pending transport are refused */
  *ret_transport = t;
  return 0;

out_free:
  pcache__transport_close(t);
  return r;
}

int pcache__transport_pending(const pcache__transport *transport) {
  return transport && transport->pending != 0;
}

int pcache__transport_finish(pcache__transport *t, uint64_t deadline, char **ret_message) {
  pcache__reply reply = {0};
  int r;
  if (!t || !t->pending)
    return t ? 0 : -EINVAL;
  r = pcache__transport_recv(t, PCACHEPB__RESPONSE__BODY_HELLO, deadline, &reply);
  if (r < 0 && !reply.response && t->hello_sent < 0)
    r = t->hello_sent; /* closed on us, and no reason left to read */
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
  /* What we accept stays ours: a reply's length is allocated before its
   * bytes arrive, and the daemon sends no frame near 1 MiB (larger
   * replies go as memfds), so its offer must not let one header make us
   * allocate up to 4 GiB, or 64 MiB a reply. */
  if (t->max_frame < t->recv_frame)
    t->recv_frame = t->max_frame;
  t->hello = reply.response;
  if (t->pending & PENDING_WINDOW) {
    r = window_take(t, deadline);
    if (r > 0)
      r = 0;
  }
  t->pending = 0;
  /* The daemon's idea of how long the connection has been quiet starts
   * at its answers, not at our reading them (pcache__transport_closed_idle). */
  t->last_reply_ms = t->started_ms;
  return r;

out_release:
  pcache__reply_release(&reply);
  return r;
}

int pcache__transport_open(const char *socket_path, const char *app, uint32_t timeout_ms,
                           pcache__transport **ret_transport, char **ret_message) {
  uint64_t deadline = pcache__mono_ms() + timeout_ms; /* connect() included */
  pcache__transport *t = NULL;
  int r = pcache__transport_start(socket_path, app, timeout_ms, 0, &t, ret_message);
  if (r == 0 && (r = pcache__transport_finish(t, deadline, ret_message)) < 0)
    pcache__transport_close(t);
  if (r == 0)
    *ret_transport = t;
  return r;
}

void pcache__transport_close(pcache__transport *transport) {
  if (!transport)
    return;
  if (transport->fd >= 0)
    close(transport->fd);
  pcache__window_unmap(transport->window);
  pcache__rx_free(transport->rx);
  pcache__response_free(transport->hello);
  pcache__free(transport);
}

int pcache__transport_closed_idle(const pcache__transport *transport, uint64_t now_ms) {
  struct pollfd p = {.fd = transport->fd, .events = POLLIN | POLLRDHUP};
  /* Its Hello unanswered: a hang-up there is a refusal to read, not an
   * idle close (pcache__transport_finish). */
  if (transport->pending)
    return 0;
  /* The daemon closes only connections quiet for a second: one used
   * since costs no poll (a Get's path is tens of microseconds). */
  if (now_ms - transport->last_reply_ms < PCACHE_IDLE_CLOSE_MIN_MS)
    return 0;
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

const Pcachepb__HelloReply *pcache__transport_hello(const pcache__transport *transport) {
  return transport && transport->hello ? transport->hello->hello : NULL;
}
