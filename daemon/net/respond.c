/* Answering a request on its connection: encode (inline or a sealed
 * memfd, bulk.c) and queue. What every request handler shares. */
#include "respond.h"

#include <errno.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/log.h"

int pcd_respond_fds(pcd_conn *c, Pcachepb__Response *resp, int fd, int lease_fd) {
  pcd_out out;
  int r = pcd_reply_encode(resp, c->scratch, &out);
  /* A frame carries one memfd and a lease after it: a reply that became a
   * bulk one has its memfd already (never so for the small replies that
   * pass descriptors of their own). */
  if (r == 0 && fd >= 0 && out.fd >= 0) {
    pcd_out_release(&out);
    r = -EINVAL;
  }
  if (r < 0) {
    log_error("cannot encode a reply: %s", pcache_strerror(r));
    if (fd >= 0)
      close(fd);
    if (lease_fd >= 0)
      close(lease_fd);
    pcd_respond_error(c, r, NULL);
    return r;
  }
  if (fd >= 0) {
    out.fd = fd; /* sent with the frame, closed with out */
    out.lease_fd = lease_fd;
  } else if (lease_fd >= 0) {
    close(lease_fd); /* a lease with no memfd means nothing */
  }
  pcd_conn_send(c, &out);
  return 0;
}

int pcd_respond(pcd_conn *c, Pcachepb__Response *resp) { return pcd_respond_fds(c, resp, -1, -1); }

void pcd_respond_error(pcd_conn *c, int status, const char *msg) {
  pcd_out out;
  if (pcd_reply_error(status, msg, &out) < 0) {
    pcd_conn_close(c);
    return;
  }
  pcd_conn_send(c, &out);
}
