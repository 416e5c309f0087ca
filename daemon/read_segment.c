/* Segment: hands the client the (device, app) segment's memfd
 * (segment.h), building it first when the app's entries changed since
 * the held one was built. The descriptor travels like a bulk reply's
 * (connection.c): with the frame's first byte, at most one in flight per
 * client; its pages are the registry's, counted in --segment-memory, not
 * in the client's --max-pending. */
#include "reads.h"

#include <unistd.h>

#include <pcache/pcache.h>

#include "bulk.h"
#include "common/log.h"
#include "respond.h"
#include "segment.h"
#include "server.h"

void pcd_read_segment(pcd_conn *c, const Pcachepb__Segment *req) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__SegmentReply reply = PCACHEPB__SEGMENT_REPLY__INIT;
  const char *app = req->app && *req->app ? req->app : c->app;
  pcd_segment_got got;
  pcd_out out;
  int r = pcd_segments_get(c->srv->segments, c->srv->store, req->device_key.data, app,
                           pcache__mono_us(), &got);
  if (r < 0) {
    log_warn("segment: app '%s': %s; its clients use the socket", app, pcache_strerror(r));
    pcd_respond_error(c, r, NULL);
    return;
  }
  reply.size = got.size;
  reply.generation = got.generation;
  reply.entries = got.entries;
  reply.complete = got.complete;
  resp.body_case = PCACHEPB__RESPONSE__BODY_SEGMENT;
  resp.segment = &reply;
  if ((r = pcd_reply_encode(&resp, &out)) < 0) {
    if (got.fd >= 0)
      close(got.fd);
    pcd_respond_error(c, r, NULL);
    return;
  }
  out.fd = got.fd; /* sent with the frame, closed with out */
  pcd_conn_send(c, &out);
}
