/* Answering a request on its connection (respond.c). */
#ifndef PCD_RESPOND_H
#define PCD_RESPOND_H

#include "connection.h"

/* Encodes resp and queues it on c; a reply that cannot be encoded becomes
 * an error reply, and a connection that cannot even get that is closed.
 * Returns 0 when resp itself went to the connection, else the encoder's
 * failure (what the error reply says). */
int pcd_respond(pcd_conn *c, Pcachepb__Response *resp);
/* pcd_respond for a small reply that passes descriptors with its frame (a
 * memfd, and after it a segment's lease; -1: none), as bulk replies do
 * (connection.c). Both are consumed: sent, or closed when resp cannot be
 * encoded or would itself need a bulk memfd (-EINVAL). */
int pcd_respond_fds(pcd_conn *c, Pcachepb__Response *resp, int fd, int lease_fd);
/* An error reply (status, and msg when not NULL). */
void pcd_respond_error(pcd_conn *c, int status, const char *msg);

#endif
