/* Requests answered on the connection's I/O thread, most with a read
 * transaction (read_blobs.c: Get, Prefetch; read_info.c: Hello, List,
 * Stats; read_segment.c: Segment; read_window.c: ReplyWindow, none). Each
 * sends its reply on conn; the request stays the caller's. */
#ifndef PCD_READS_H
#define PCD_READS_H

#include "connection.h"

void pcd_read_hello(pcd_conn *conn, const Pcachepb__Hello *hello);
void pcd_read_get(pcd_conn *conn, const Pcachepb__Get *get);
void pcd_read_prefetch(pcd_conn *conn, const Pcachepb__Prefetch *prefetch);
void pcd_read_list(pcd_conn *conn, const Pcachepb__List *list);
void pcd_read_stats(pcd_conn *conn);
void pcd_read_segment(pcd_conn *conn, const Pcachepb__Segment *segment);
void pcd_read_reply_window(pcd_conn *conn);

#endif
