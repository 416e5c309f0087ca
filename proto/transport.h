/* The one implementation of the client side of the wire protocol: connect,
 * Hello, send a request, read the reply (mapping a bulk memfd when one
 * comes). libpcache's client uses it, and so does pcachectl: there is no
 * second copy of the protocol. Blocking I/O bounded by a timeout per call. */
#ifndef PCACHE_CLIENT_TRANSPORT_H
#define PCACHE_CLIENT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "proto/frame.h"

typedef struct pcache__transport pcache__transport;

typedef struct pcache__reply {
  Pcachepb__Response *response; /* never NULL after a successful call */
  const uint8_t *bulk;          /* the mapped memfd, or NULL for inline */
  size_t bulk_size;
} pcache__reply;

/*
 * pcache__transport_open - connect to socket_path and exchange Hello
 * (protocol PCACHE_PROTOCOL_VERSION, app, pid), all within timeout_ms.
 * Returns 0; PCACHE_EUNAVAILABLE when no daemon listens (ENOENT,
 * ECONNREFUSED); -ETIMEDOUT; PCACHE_EVERSION when the daemon refuses our
 * version (the daemon's message is then in *ret_message if non-NULL,
 * pcache__malloc'ed); PCACHE_EPEER when the daemon refuses our uid, or
 * when the process listening on socket_path runs as another uid than our
 * effective uid and root (checked with SO_PEERCRED before anything is
 * sent; *ret_message then names its uid); PCACHE_EPROTO.
 */
int pcache__transport_open(const char *socket_path, const char *app, uint32_t timeout_ms,
                           pcache__transport **ret_transport, char **ret_message);
void pcache__transport_close(pcache__transport *transport);

/* The daemon's Hello reply (limits, version). Valid until close. */
const Pcachepb__HelloReply *pcache__transport_hello(const pcache__transport *transport);

/*
 * pcache__transport_call - send request, wait for its reply. Returns 0 when
 * a reply arrived (check reply->response->status for the daemon's verdict),
 * or a transport failure: -ETIMEDOUT, -EPIPE/-ECONNRESET (the daemon went
 * away), PCACHE_EPROTO, PCACHE_EFRAME_TOO_LARGE. After a failure the
 * transport is unusable: close it and open a new one. Not thread-safe: one
 * call at a time per transport.
 */
int pcache__transport_call(pcache__transport *transport, const Pcachepb__Request *request,
                           uint32_t timeout_ms, pcache__reply *ret_reply);

/*
 * pcache__transport_set_cancel_fd - from now on, every wait of the calling
 * thread's transport I/O (connect, Hello, calls) also watches fd, an
 * eventfd or pipe (-1: none), and gives up with -ECANCELED as soon as it is
 * readable. This is how a background thread is stopped in the middle of a
 * call without another thread touching its socket. Thread-local.
 */
void pcache__transport_set_cancel_fd(int fd);

/* Frees the response and unmaps the bulk memfd. Accepts a zeroed reply. */
void pcache__reply_release(pcache__reply *reply);

/*
 * pcache__reply_bytes - the bytes a Blob (or an ExportReply archive) stands
 * for: the inline field when set, else [offset, offset + size) of the bulk
 * mapping. NULL (and *ret_size 0) when the range is outside the mapping.
 */
const uint8_t *pcache__reply_bytes(const pcache__reply *reply, ProtobufCBinaryData inline_data,
                                   uint64_t offset, uint64_t size, size_t *ret_size);

#endif
