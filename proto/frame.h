/* Framing and message codecs shared by pcached, libpcache and pcachectl.
 * A frame is a u32 little-endian length, then that many bytes of one packed
 * Request or Response (proto/pcache.proto). docs/protocol.md has the rules. */
#ifndef PCACHE_PROTO_FRAME_H
#define PCACHE_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "pcache.pb-c.h"

#define PCACHE_FRAME_HEADER_SIZE 4
/* Default largest frame either side accepts (pcached --max-frame). */
#define PCACHE_DEFAULT_MAX_FRAME (64u << 20)
/* Replies larger than this travel in a sealed memfd (Response.bulk). */
#define PCACHE_BULK_THRESHOLD (64u << 10)
/* Default most state hashes / Put items in one request. */
#define PCACHE_DEFAULT_MAX_HASHES 4096u
/* Defaults of pcached's --max-blob and --max-snapshot. */
#define PCACHE_DEFAULT_MAX_BLOB (64ull << 20)
#define PCACHE_DEFAULT_MAX_SNAPSHOT (256ull << 20)

/* The protocol's own bounds on a daemon's limits: pcached's options
 * refuse more, and a client holds whatever answers to them, so that no
 * HelloReply can make it accept more (docs/protocol.md, "Limits"). */
#define PCACHE_PROTO_MAX_BLOB (1ull << 30)     /* --max-blob */
#define PCACHE_PROTO_MAX_SNAPSHOT (1ull << 32) /* --max-snapshot */
#define PCACHE_PROTO_MAX_HASHES (1u << 20)     /* --max-hashes */
#define PCACHE_REPLY_WINDOW_MAX (16ull << 20)  /* --reply-window */
/* What a client takes from any daemon, whatever its Hello announces: a
 * daemon's own Hello cannot raise them, so an impostor on our socket
 * cannot make a Get map a gigabyte (docs/protocol.md, "Limits"). They
 * are pcached's defaults: a daemon run with a larger --max-blob or
 * --max-snapshot still serves everything under them, and the client
 * refuses a reply that brings more and builds its pipelines itself
 * (libpcache logs it once, docs/client.md). */
#define PCACHE_CLIENT_MAX_BLOB PCACHE_DEFAULT_MAX_BLOB
#define PCACHE_CLIENT_MAX_SNAPSHOT PCACHE_DEFAULT_MAX_SNAPSHOT
#define PCACHE_CLIENT_MAX_HASHES PCACHE_DEFAULT_MAX_HASHES
/* A Get or Prefetch reply carries at most this beyond its first blob (and
 * a Prefetch's first page its snapshot); the rest comes with more. */
#define PCACHE_REPLY_PAGE_MAX (256ull << 20)
/* The largest inline reply frame a client reads: pcached sends larger
 * replies as memfds (PCACHE_BULK_THRESHOLD), so this is room to spare,
 * not a limit it meets. */
#define PCACHE_REPLY_FRAME_MAX (1u << 20)

/*
 * pcache__frame_length - the length a 4-byte frame header announces,
 * checked before anything is allocated for the body.
 * Returns 0, PCACHE_EEMPTY_FRAME (length 0) or PCACHE_EFRAME_TOO_LARGE.
 */
int pcache__frame_length(const uint8_t header[PCACHE_FRAME_HEADER_SIZE], uint32_t max_frame,
                         uint32_t *ret_length);

void pcache__frame_put_length(uint8_t header[PCACHE_FRAME_HEADER_SIZE], uint32_t length);

/*
 * pcache__request_decode / pcache__response_decode - unpack one frame body.
 * A message with no body set, or of a kind this build does not know, is
 * PCACHE_EUNKNOWN_REQUEST; bytes protobuf-c cannot parse are PCACHE_EPROTO.
 * max_allocations (0: no limit) bounds what unpacking may allocate one by
 * one (sub-messages, repeated elements, unknown fields), counted before
 * anything is allocated: over it, PCACHE_ETOO_MANY_HASHES.
 * Free the result with pcache__request_free / pcache__response_free.
 */
int pcache__request_decode(const uint8_t *data, size_t size, uint64_t max_allocations,
                           Pcachepb__Request **ret_request);
void pcache__request_free(Pcachepb__Request *request);
int pcache__response_decode(const uint8_t *data, size_t size, Pcachepb__Response **ret_response);
void pcache__response_free(Pcachepb__Response *response);

/*
 * pcache__request_encode / pcache__response_encode - pack a message with
 * its frame header in front into one pcache__malloc'ed buffer.
 * Returns 0, -ENOMEM or PCACHE_EFRAME_TOO_LARGE (over max_frame).
 */
int pcache__request_encode(const Pcachepb__Request *request, uint32_t max_frame,
                           uint8_t **ret_buf, size_t *ret_size);
int pcache__response_encode(const Pcachepb__Response *response, uint32_t max_frame,
                            uint8_t **ret_buf, size_t *ret_size);

/* The name of a request's kind for logs ("get", "put", ...). */
const char *pcache__request_kind_name(const Pcachepb__Request *request);

/*
 * pcache__memfd_check - whether fd, a memfd a reply passed, is sealed
 * with at least need_seals (F_SEAL_*) and holds size bytes, exactly when
 * exact, else at least; size must be nonzero and mappable. The seals are
 * what keep its writer from changing, or cutting short, bytes the client
 * has checked (a bulk reply, a segment, a reply window each ask for their
 * own). Returns 0, or PCACHE_EPROTO with *ret_why (when ret_why is not
 * NULL) saying which check failed.
 */
int pcache__memfd_check(int fd, int need_seals, uint64_t size, int exact, const char **ret_why);

/* Blob i of a Get or Prefetch reply, its snapshot counted first: i = 0 is
 * the snapshot (NULL when there is none), 1 to n_blobs the blobs. What
 * walks every blob a reply carries (reply windows: daemon/net/window.c,
 * proto/window.c). */
static inline Pcachepb__Blob *pcache__get_reply_blob(const Pcachepb__GetReply *g, size_t i) {
  return i == 0 ? g->snapshot : i <= g->n_blobs ? g->blobs[i - 1] : NULL;
}

#endif
