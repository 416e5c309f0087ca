/* A client's reply window (docs/protocol.md "Reply window"; the daemon's
 * side is daemon/net/window.h): the memfd the daemon writes a Get's or a
 * Prefetch's blob bytes into instead of the frame, mapped here read-only.
 * The transport (transport.c) owns it: it fills window_taken into each Get
 * and Prefetch it sends and, as each reply arrives, copies the window's
 * bytes out before anything reads them, so a reply never points into the
 * window, and what the caller checks is what the driver gets. */
#ifndef PCACHE_PROTO_WINDOW_H
#define PCACHE_PROTO_WINDOW_H

#include <stdint.h>

#include "proto/rpc.h"

typedef struct pcache__window pcache__window;

/*
 * pcache__window_map - maps fd, a window of size bytes whose replies count
 * from first_seq (ReplyWindowReply), read-only. fd is consumed (kept until
 * unmap, closed on failure). The memfd must be sealed against shrinking
 * (else the daemon, or anyone else holding it, could cut it under our
 * reads: SIGBUS) and at least size bytes long, and first_seq nonzero.
 * Returns 0, PCACHE_EPROTO (not such a memfd), -ENOMEM or -errno.
 */
int pcache__window_map(int fd, uint64_t size, uint64_t first_seq, pcache__window **ret_window);
/* window may be NULL. */
void pcache__window_unmap(pcache__window *window);

/* The last GetReply.window_seq copied out (first_seq before any): what
 * Get.window_taken says. 0 for a NULL window. */
uint64_t pcache__window_taken(const pcache__window *window);

/*
 * pcache__window_take - when reply (a Get or Prefetch reply) says its
 * blobs are in the window (GetReply.window_seq), checks that it is the
 * window's next reply and that every such Blob lies inside the window,
 * copies their bytes into one heap buffer that reply owns from now on
 * (reply->bulk, bulk_owned) and points the Blobs at it, so
 * pcache__reply_bytes finds them. Any other reply: 0, untouched. Returns
 * 0; PCACHE_EPROTO (no window, not the next reply, a range outside the
 * window, a reply with a memfd too: the stream is out of step, close it);
 * -ENOMEM.
 */
int pcache__window_take(pcache__window *window, pcache__reply *reply);

#endif
