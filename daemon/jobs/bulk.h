/* Encoding replies: inline frames, or a sealed memfd for replies over
 * PCACHE_BULK_THRESHOLD (docs/protocol.md "Bulk replies"). */
#ifndef PCD_BULK_H
#define PCD_BULK_H

#include <stddef.h>
#include <stdint.h>

#include "proto/pcache.pb-c.h"

/* One encoded reply: a frame (header included) and, for bulk replies, the
 * memfd to pass with it (-1 otherwise) and its size, which the client's
 * --max-pending budget is charged until the client has taken the memfd
 * (connection.c). */
typedef struct pcd_out {
  uint8_t *frame;
  size_t size;
  int fd;
  int lease_fd; /* a segment's lease, sent after fd in the same message; -1: none */
  uint64_t bulk_size;
  /* frame lies in an I/O thread's pcd_scratch, not on the heap: good until
   * that thread encodes again. pcd_conn_send copies it if it must queue. */
  int borrowed;
} pcd_out;

/* An I/O thread's buffer for the inline frames it encodes. A reply that
 * the socket takes whole (the usual case: a client waiting for it) then
 * costs no heap allocation, and the threads do not meet in malloc's
 * shared arenas (server.c caps them at two) twice a Get. Grows to the
 * largest inline frame, PCACHE_BULK_THRESHOLD plus a little. */
typedef struct pcd_scratch {
  uint8_t *data;
  size_t cap;
} pcd_scratch;

void pcd_scratch_free(pcd_scratch *scratch);

/*
 * pcd_reply_encode - encodes resp. When its packed size exceeds the bulk
 * threshold, blob bytes (Get/Prefetch) and the archive (Export) are moved
 * into a memfd, resp is rewritten to point at them (so it is modified),
 * the packed Response is appended, the memfd sealed and a frame carrying
 * only Response.bulk is made. Blob pointers must stay valid during the
 * call. An inline frame goes into scratch when one is given (the calling
 * I/O thread's; ret_out->borrowed), else on the heap. Returns 0, -errno
 * or PCACHE_EFRAME_TOO_LARGE.
 */
int pcd_reply_encode(Pcachepb__Response *resp, pcd_scratch *scratch, pcd_out *ret_out);

/* The same for a reply whose payload (an Export's archive, streamed) is
 * in a memfd already, at [0, payload_size): the packed Response goes
 * behind it and the memfd is sealed. fd is consumed (closed on failure,
 * else ret_out->fd). Returns 0 or -errno. */
int pcd_reply_encode_fd(Pcachepb__Response *resp, int fd, uint64_t payload_size, pcd_out *ret_out);

/* Encodes a bare error reply (never fails short of -ENOMEM). */
int pcd_reply_error(int status, const char *message, pcd_out *ret_out);

void pcd_out_release(pcd_out *out);

struct iovec;
/* Writes a gathered batch of n (at most IOV_MAX) at *off, going on after
 * short writes (iov is consumed); *off ends past it. 0 or -errno. */
int pcd_write_iov(int fd, struct iovec *iov, int n, uint64_t *off);

#endif
