/* Answering a request on its connection: encode (inline or a sealed
 * memfd, bulk.c) and queue. What every request handler shares. */
#include "respond.h"

#include <pcache/pcache.h>

#include "common/log.h"

void pcd_respond(pcd_conn *c, Pcachepb__Response *resp) {
  pcd_out out;
  int r = pcd_reply_encode(resp, c->scratch, &out);
  if (r < 0) {
    log_error("cannot encode a reply: %s", pcache_strerror(r));
    if (pcd_reply_error(r, NULL, &out) < 0) {
      pcd_conn_close(c);
      return;
    }
  }
  pcd_conn_send(c, &out);
}

void pcd_respond_error(pcd_conn *c, int status, const char *msg) {
  pcd_out out;
  if (pcd_reply_error(status, msg, &out) < 0) {
    pcd_conn_close(c);
    return;
  }
  pcd_conn_send(c, &out);
}
