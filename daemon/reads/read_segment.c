/* Segment: hands the client the (device, app) segment's memfd
 * (segment.h) when the held one is current. When the app's entries
 * changed since it was built, the reply comes at once without one and the
 * registry's builder thread builds it for a later request, unless the
 * request asks to wait for the build (Segment.wait: tests and tools). The descriptor travels like a
 * bulk reply's (connection.c): with the frame's first byte, at most one in flight per client; its
 * pages are the registry's, counted in --segment-memory, not in the client's --max-pending. A
 * client that asks for a lease gets it in the same message, after the memfd (segment.h). */
#include "reads.h"

#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/log.h"
#include "respond.h"
#include "segment.h"
#include "server.h"

/* Blobs the build found failing their checksum: dropped, counted and
 * logged as a Get's would be (never sent either way). */
static void drop_bad(pcd_conn *c, pcd_segment_got *got) {
  pcd_job *job;
  for (size_t i = 0; i < got->n_bad; i++) {
    char hex[33];
    pcache__hex(got->bad_keys + i * PCD_ENTRY_KEY_SIZE + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE, hex);
    log_error("store: entry %s failed its checksum; dropping it, never sent", hex);
    atomic_fetch_add(&c->srv->stats.checksum_failures, 1);
  }
  job = got->n_bad && c->srv->writer ? pcd_job_new(PCD_JOB_DROP) : NULL;
  if (job)
    job->touches = pcache__calloc(got->n_bad, sizeof *job->touches);
  if (job && job->touches) {
    for (size_t i = 0; i < got->n_bad; i++)
      memcpy(job->touches[i].key, got->bad_keys + i * PCD_ENTRY_KEY_SIZE, PCD_ENTRY_KEY_SIZE);
    job->n_touches = got->n_bad;
    pcd_writer_submit(c->srv->writer, job);
  } else {
    pcd_job_free(job);
  }
  pcache__free(got->bad_keys);
  got->bad_keys = NULL;
  got->n_bad = 0;
}

void pcd_read_segment(pcd_conn *c, const Pcachepb__Segment *req) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__SegmentReply reply = PCACHEPB__SEGMENT_REPLY__INIT;
  const char *app = req->app && *req->app ? req->app : c->app;
  pcd_segment_got got;
  int r;
  /* A request for blobs, as Get and Prefetch are (Stats.gets). */
  atomic_fetch_add(&c->srv->stats.gets, 1);
  r = req->wait ? pcd_segments_get(c->srv->segments, c->srv->store, req->device_key.data, app,
                                   req->lease, pcache__mono_us(), &got)
                : pcd_segments_ready(c->srv->segments, c->srv->store, req->device_key.data, app,
                                     req->lease, pcache__mono_us(), &got);
  drop_bad(c, &got);
  if (r < 0) {
    log_warn("segment: app '%s': %s; its clients use the socket", app, pcache_strerror(r));
    pcd_respond_error(c, r, NULL);
    return;
  }
  reply.size = got.size;
  reply.generation = got.generation;
  reply.entries = got.entries;
  reply.complete = got.complete;
  reply.lease = got.lease_fd >= 0;
  resp.body_case = PCACHEPB__RESPONSE__BODY_SEGMENT;
  resp.segment = &reply;
  pcd_respond_fds(c, &resp, got.fd, got.lease_fd);
}
