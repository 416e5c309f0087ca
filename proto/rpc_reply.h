/* A reply once its frame arrived (rpc_reply.c): its bulk memfd checked,
 * mapped and faulted in. Inside proto/ only: rpc.c's receive calls these;
 * what a caller reads of a reply is in rpc.h. */
#ifndef PCACHE_PROTO_RPC_REPLY_H
#define PCACHE_PROTO_RPC_REPLY_H

#include <stdint.h>

#include "proto/rpc.h"

/* Maps bulk's sealed memfd fd into reply (bulk, bulk_size, memfd), not
 * faulted in, after checking its seals and that its size is within
 * max_bulk with the Response last in it. Returns 0, PCACHE_EPROTO or
 * -errno (mmap). */
int pcache__rpc_open_bulk(const Pcachepb__Bulk *bulk, int fd, uint64_t max_bulk,
                          pcache__reply *reply);
/* Checks the Blobs of reply (a bulk one, its Response decoded) against
 * bounds (NULL: any) and faults in the bytes they name (any other reply:
 * all of it) before deadline (pcache__mono_ms). Returns 0, PCACHE_EPROTO,
 * -ETIMEDOUT or -errno. */
int pcache__rpc_bulk_populate(const pcache__reply *reply, const pcache__reply_bounds *bounds,
                              uint64_t deadline);

#endif
