/* Answering a request on its connection (respond.c). */
#ifndef PCD_RESPOND_H
#define PCD_RESPOND_H

#include "connection.h"

/* Encodes resp and queues it on c; a reply that cannot be encoded becomes
 * an error reply, and a connection that cannot even get that is closed. */
void pcd_respond(pcd_conn *c, Pcachepb__Response *resp);
/* An error reply (status, and msg when not NULL). */
void pcd_respond_error(pcd_conn *c, int status, const char *msg);

#endif
