/* ReplyWindow: makes the connection's reply window (window.h) and hands its
 * memfd over with the reply, as a segment's travels (respond.c, connection.c:
 * with the frame's first byte, one in flight). One per connection: a
 * second request is answered -EEXIST, so a client cannot make the daemon
 * allocate window after window on one connection (each it keeps the fd of
 * stays allocated). With --reply-window 0, or a kernel that refuses the
 * seals or the memory, the reply has size 0 and no descriptor, and the
 * client gets its blobs through the socket. */
#include "reads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/log.h"
#include "respond.h"
#include "server.h"
#include "window.h"

void pcd_read_reply_window(pcd_conn *c) {
  static atomic_int warned; /* the last failure said: each new one once */
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__ReplyWindowReply reply = PCACHEPB__REPLY_WINDOW_REPLY__INIT;
  uint64_t size = c->srv->config->reply_window;
  pcd_window *w = NULL;
  int fd = -1, r = 0;
  if (c->window) {
    pcd_respond_error(c, -EEXIST, "this connection has its reply window");
    return;
  }
  if (size && (r = pcd_window_open((size_t)size, &w)) == 0 &&
      (fd = fcntl(pcd_window_fd(w), F_DUPFD_CLOEXEC, 0)) < 0)
    r = -errno;
  if (r < 0) {
    if (atomic_exchange(&warned, r) != r)
      log_warn("reply window: %s; clients get their blobs through the socket", pcache_strerror(r));
    pcd_window_free(w);
    w = NULL;
  }
  reply.size = w ? size : 0;
  reply.first_seq = w ? pcd_window_first_seq(w) : 0;
  resp.body_case = PCACHEPB__RESPONSE__BODY_REPLY_WINDOW;
  resp.reply_window = &reply;
  /* Held from now on even if the reply is lost (an error reply instead):
   * the client then never names first_seq, so the window is never used,
   * and it is freed with the connection. */
  pcd_conn_set_window(c, w);
  pcd_respond_fds(c, &resp, fd, -1);
}
