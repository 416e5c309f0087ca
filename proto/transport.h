/* The client side of a connection to pcached: connect, check that the
 * daemon runs as us, exchange Hello, then make requests on it with the one
 * RPC helper (proto/rpc.h). libpcache's client uses it, and so does
 * pcachectl: there is no second copy of the protocol. */
#ifndef PCACHE_PROTO_TRANSPORT_H
#define PCACHE_PROTO_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "proto/rpc.h"

typedef struct pcache__transport pcache__transport;

/*
 * pcache__transport_open - connect to socket_path and exchange Hello
 * (protocol PCACHE_PROTOCOL_VERSION, app, pid), all within timeout_ms:
 * pcache__transport_start, then pcache__transport_finish.
 * Returns 0; PCACHE_EUNAVAILABLE when no daemon listens (ENOENT,
 * ECONNREFUSED); -ETIMEDOUT, at once too when the daemon's listen backlog
 * is full (it accepts nobody); PCACHE_EVERSION when the daemon refuses our
 * version (the daemon's message is then in *ret_message if non-NULL,
 * pcache__malloc'ed); PCACHE_EPEER when the daemon refuses our uid, or
 * when the process listening on socket_path runs as another uid than our
 * effective uid and root (checked with SO_PEERCRED before anything is
 * sent; *ret_message then names its uid); PCACHE_EPROTO.
 */
int pcache__transport_open(const char *socket_path, const char *app, uint32_t timeout_ms,
                           pcache__transport **ret_transport, char **ret_message);

/*
 * pcache__transport_start - the first half of pcache__transport_open:
 * connects and checks who listens (both at once on a Unix socket), sends
 * the Hello and, with want_window, a ReplyWindow request behind it, and
 * returns without waiting for the answers. Returns 0 with *ret_transport
 * set (pending: pcache__transport_finish reads the answers), or what
 * pcache__transport_open returns for a failure it can see without an
 * answer: PCACHE_EUNAVAILABLE, PCACHE_EPEER (*ret_message), -ETIMEDOUT,
 * -ENOMEM, a send failure. A daemon's refusal shows at finish.
 */
int pcache__transport_start(const char *socket_path, const char *app, uint32_t timeout_ms,
                            int want_window, pcache__transport **ret_transport, char **ret_message);

/*
 * pcache__transport_finish - reads the answers to what
 * pcache__transport_start sent, by deadline_ms (pcache__mono_ms()).
 * Returns 0 (a window, when asked for, is mapped if the daemon gave one:
 * pcache__transport_open_window's 0 is no failure), at once for a
 * transport that is not pending; or what pcache__transport_open returns
 * for the Hello (a refusal's reason in *ret_message), or a failure of the
 * window's exchange: close the transport then. Not thread-safe, like
 * every call on a transport.
 */
int pcache__transport_finish(pcache__transport *transport, uint64_t deadline_ms,
                             char **ret_message);

/* 1 while a started transport's Hello is unanswered (not finished). */
int pcache__transport_pending(const pcache__transport *transport);
void pcache__transport_close(pcache__transport *transport);

/* pcached closes a connection that stands in another's way only once it
 * has been quiet this long (docs/protocol.md, "Connections"). */
#define PCACHE_IDLE_CLOSE_MIN_MS 1000u

/*
 * pcache__transport_closed_idle - 1 when the daemon closed the connection
 * while it was idle (no reply for PCACHE_IDLE_CLOSE_MIN_MS before now_ms,
 * pcache__mono_ms(), and the peer hung up): it should be replaced before
 * the next request, which would otherwise fail. 0 otherwise. Does not
 * wait.
 */
int pcache__transport_closed_idle(const pcache__transport *transport, uint64_t now_ms);

/* The daemon's Hello reply (limits, version); NULL while pending. Valid
 * until close. */
const Pcachepb__HelloReply *pcache__transport_hello(const pcache__transport *transport);

/*
 * pcache__transport_rpc - pcache__rpc on the transport's connection, with
 * the frame limit the daemon announced; -EINVAL (ret_reply zeroed) for a
 * NULL transport. After a failure with no Response (ret_reply->response
 * NULL) the stream is out of step: close the transport and open a new one.
 * Not thread-safe: one call at a time per transport.
 */
int pcache__transport_rpc(pcache__transport *transport, const Pcachepb__Request *request,
                          Pcachepb__Response__BodyCase expect, uint64_t deadline_ms,
                          pcache__reply *ret_reply);

/* The two halves of pcache__transport_rpc (pcache__rpc_send and
 * pcache__rpc_recv), for a caller that works while the daemon answers.
 * -EINVAL for a NULL transport, and for a send on a pending one (its
 * answers come first: pcache__transport_finish). A request sent before the last reply was
 * received gets its blobs inline, never through the window. */
int pcache__transport_send(pcache__transport *transport, const Pcachepb__Request *request,
                           uint64_t deadline_ms);
int pcache__transport_recv(pcache__transport *transport, Pcachepb__Response__BodyCase expect,
                           uint64_t deadline_ms, pcache__reply *ret_reply);

/*
 * pcache__transport_open_window - asks the daemon for a reply window
 * (proto/window.h, docs/protocol.md "Reply window"): from then on the
 * blob bytes of Get and Prefetch replies that fit come through shared
 * memory, copied out as each reply arrives, instead of through the
 * socket; callers see the same replies. Asked once: a transport that has
 * a window keeps it (1 at once). Returns 1 with a window; 0 when
 * the daemon gave none (an older daemon, --reply-window 0; the connection
 * is as it was); or a failure of the exchange (-ETIMEDOUT, PCACHE_EPROTO
 * for a memfd that is not sealed against shrinking, ...): close the
 * transport.
 */
int pcache__transport_open_window(pcache__transport *transport, uint64_t deadline_ms);

#endif
