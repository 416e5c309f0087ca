/* Checks every request field a client controls that the daemon would use
 * as a key or a name, before anything is looked up or queued for the
 * writer: one place, so no request kind can be forgotten. */
#ifndef PCD_VALIDATE_H
#define PCD_VALIDATE_H

#include <stddef.h>

#include "config.h"
#include "proto/pcache.pb-c.h"

/*
 * pcd_request_validate - checks req's device keys (32 bytes where one is
 * required or given), state hashes (16 bytes), hash count (Get: at most
 * config->max_hashes) and app names (at most PCD_MAX_APP bytes: a longer
 * one would be cut to the key of another app). A ClientReport's text must
 * also be printable UTF-8 within its limits, and it may carry at most
 * PCD_MAX_CLIENT_REASONS reasons, each a word of [a-z0-9_]
 * (client_reports.h). No device key may carry the staged mark
 * (pcache__devkey_is_staged): PCACHE_EBAD_KEY. Put and PutSnapshot items
 * are judged one by one by the writer (ops_put.c, ops_snapshot.c).
 * Returns 0, or a PCACHE_E* code with the reason written to msg.
 */
int pcd_request_validate(const Pcachepb__Request *req, const pcd_config *config, char *msg,
                         size_t size);

#endif
