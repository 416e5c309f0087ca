/* ReplyWindow: makes the connection's reply window (window.h) and hands its
 * memfd over with the reply, as a segment's travels (connection.c: with
 * the frame's first byte, one in flight). A second request replaces the
 * window; the client's mapping of the old one stays its own. With
 * --reply-window 0, or a kernel that refuses the seals, the reply has size
 * 0 and no descriptor, and the client gets its blobs through the socket. */
#include "reads.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/log.h"
#include "respond.h"
#include "server.h"
#include "window.h"

void pcd_read_reply_window(pcd_conn *c) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__ReplyWindowReply reply = PCACHEPB__REPLY_WINDOW_REPLY__INIT;
  uint64_t size = c->srv->config->reply_window;
  pcd_window *w = NULL;
  pcd_out out;
  int fd = -1, r = 0;
  if (size && (r = pcd_window_open((size_t)size, &w)) == 0 &&
      (fd = fcntl(pcd_window_fd(w), F_DUPFD_CLOEXEC, 0)) < 0)
    r = -errno;
  if (r < 0) {
    log_warn("reply window: %s; client pid %u gets its blobs through the socket",
             pcache_strerror(r), c->pid);
    pcd_window_free(w);
    w = NULL;
  }
  pcd_conn_set_window(c, w);
  reply.size = w ? size : 0;
  resp.body_case = PCACHEPB__RESPONSE__BODY_REPLY_WINDOW;
  resp.reply_window = &reply;
  if ((r = pcd_reply_encode(&resp, c->scratch, &out)) < 0) {
    if (fd >= 0)
      close(fd);
    pcd_respond_error(c, r, NULL);
    return;
  }
  out.fd = fd; /* sent with the frame, closed with out */
  pcd_conn_send(c, &out);
}
