/* The one RPC helper of pcache: send a Request on a connected socket, read
 * its Response (mapping the sealed memfd of a bulk reply), and give the
 * verdict in the error convention. libpcache (through its connection,
 * transport.c), pcachectl and the tests all make their requests with it;
 * only tests that send raw or malformed frames on purpose go around it.
 * Non-blocking I/O bounded by a monotonic deadline (pcache__mono_ms), so
 * the socket may be blocking or not. */
#ifndef PCACHE_PROTO_RPC_H
#define PCACHE_PROTO_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <pcache/pcache.h>

#include "proto/frame.h"

/* A Response and what came with it; release with pcache__reply_release
 * (a zeroed one too). */
typedef struct pcache__reply {
  Pcachepb__Response *response; /* NULL when no whole Response arrived */
  const uint8_t *bulk;          /* the mapped memfd of a bulk reply, or NULL */
  size_t bulk_size;
  int memfd; /* that memfd, kept open until release; meaningful only when bulk is set */
  /* bulk is instead a heap copy of a reply window's bytes (window.h),
   * freed at release. */
  int bulk_owned;
  /* The descriptor an inline reply carries (a SegmentReply's memfd), when
   * has_passed_fd: closed at release unless the caller takes it (then it
   * clears has_passed_fd). */
  int passed_fd;
  int has_passed_fd;
  /* A SegmentReply's lease (SegmentReply.lease), when has_lease_fd: the
   * same rule. */
  int lease_fd;
  int has_lease_fd;
} pcache__reply;

/*
 * pcache__rpc - send request on fd and read its Response, all before
 * deadline_ms (pcache__mono_ms). Frames over max_frame are refused either
 * way (PCACHE_EFRAME_TOO_LARGE). Returns 0 when the daemon answered status
 * 0 with the body `expect` (PCACHEPB__RESPONSE__BODY__NOT_SET: any body).
 * Otherwise:
 *   - the daemon's status (< 0) when it refused the request, or
 *     PCACHE_EPROTO for a positive status or another body: a Response
 *     arrived, and ret_reply->response holds it (its message, and whatever
 *     body it carries);
 *   - a failure of the exchange, ret_reply->response NULL: -ETIMEDOUT,
 *     -ECANCELED (pcache__rpc_set_cancel_fd), -EPIPE or -ECONNRESET (the
 *     peer went away), another -errno, PCACHE_EPROTO (a malformed frame or
 *     bulk memfd), PCACHE_EFRAME_TOO_LARGE. The stream is then out of step:
 *     close fd.
 * Unlike most outputs, *ret_reply is written in every case, so that a
 * refusal can be read: release it in every case.
 */
int pcache__rpc(int fd, const Pcachepb__Request *request, Pcachepb__Response__BodyCase expect,
                uint32_t max_frame, uint64_t deadline_ms, pcache__reply *ret_reply);

/* The two halves of pcache__rpc, for callers that keep several requests in
 * flight on one socket. Same results. */
int pcache__rpc_send(int fd, const Pcachepb__Request *request, uint32_t max_frame,
                     uint64_t deadline_ms);
int pcache__rpc_recv(int fd, Pcachepb__Response__BodyCase expect, uint32_t max_frame,
                     uint64_t deadline_ms, pcache__reply *ret_reply);

/*
 * A connection's receive buffer. Read through one, a small Response
 * (up to about 4 KiB) takes one recvmsg where reading it exactly takes
 * two (its length, then its body); what that read brought of the next
 * frames, and the descriptors that came with them, wait in it for them.
 * So once one is used on a socket, every Response on it must be read
 * through it. The kernel hands descriptors over with the first bytes of
 * the message that carried them and ends that read right after its part
 * of the message, and the daemon sends each frame in one message: so a
 * descriptor is the frame's inside which the read that brought it ended.
 * A frame whose descriptors are not those its Response says it brings
 * (a memfd, a segment and its lease, a window) is PCACHE_EPROTO.
 * pcache__rx_new returns NULL when out of memory; pcache__rx_free closes
 * the descriptors it still holds (rx may be NULL).
 */
typedef struct pcache__rx pcache__rx;
pcache__rx *pcache__rx_new(void);
void pcache__rx_free(pcache__rx *rx);

/* What a reply may bring (pcache__rpc_recv_rx), in bytes: a bulk memfd
 * of at most bulk, and in a Get or Prefetch reply, Blobs of at most
 * blob (the snapshot: snapshot) whose ranges lie inside the memfd and
 * together hold no more than it. */
typedef struct pcache__reply_bounds {
  uint64_t bulk;
  uint64_t blob;
  uint64_t snapshot;
} pcache__reply_bounds;

/* pcache__rpc_recv through rx (NULL: read exactly, as pcache__rpc_recv),
 * with bounds on what the reply may bring (NULL: any; pcache__rpc_recv
 * accepts any). A bulk memfd over bounds->bulk is refused before it is
 * mapped, a Blob past the others after only its Response (at the
 * memfd's end) was read: PCACHE_EPROTO like any malformed reply. Only
 * the ranges a Get or Prefetch reply's Blobs name are faulted in (any
 * other bulk reply: all of it), a few MiB at a time, and deadline_ms
 * covers that too (-ETIMEDOUT). A segment over PCACHE_SEG_MAX_SIZE or a
 * reply window over PCACHE_REPLY_WINDOW_MAX is refused whatever bounds
 * says. Same results otherwise. */
int pcache__rpc_recv_rx(int fd, pcache__rx *rx, Pcachepb__Response__BodyCase expect,
                        uint32_t max_frame, const pcache__reply_bounds *bounds,
                        uint64_t deadline_ms, pcache__reply *ret_reply);

/*
 * pcache__rpc_set_cancel_fd - from now on, every wait of the calling
 * thread's RPCs also watches fd, an eventfd or pipe (-1: none), and gives
 * up with -ECANCELED as soon as it is readable. This is how a background
 * thread is stopped in the middle of a call without another thread
 * touching its socket. Thread-local.
 */
void pcache__rpc_set_cancel_fd(int fd);

/* 1 when the calling thread's cancel fd (pcache__rpc_set_cancel_fd) is
 * readable now, 0 otherwise or without one. Does not wait. */
int pcache__rpc_cancelled(void);

/* Why a call failed, for a person: the message of the daemon's refusal
 * when it gave one, else pcache_strerror(err). */
const char *pcache__reply_why(const pcache__reply *reply, int err);

/* Frees the response, unmaps and closes the bulk memfd. Accepts a zeroed
 * reply; leaves it zeroed. */
void pcache__reply_release(pcache__reply *reply);

/* 1 when a call's result r came with a Response that is not the daemon's
 * refusal but the answer to something else (another kind, a status not
 * ours, pcache__rpc's PCACHE_EPROTO with status >= 0): the stream is out of
 * step. A refusal (status < 0) is final for that request; out of step is
 * the connection's fault, and the request may be tried again on a new one. */
static inline int pcache__reply_out_of_step(int r, const pcache__reply *reply) {
  return r == PCACHE_EPROTO && reply->response && reply->response->status >= 0;
}

/*
 * pcache__reply_bytes - the bytes a Blob (or an ExportReply archive) stands
 * for: the inline field when set, else [offset, offset + size) of the bulk
 * mapping. NULL (and *ret_size 0) when the range is outside the mapping.
 */
const uint8_t *pcache__reply_bytes(const pcache__reply *reply, ProtobufCBinaryData inline_data,
                                   uint64_t offset, uint64_t size, size_t *ret_size);

#endif
