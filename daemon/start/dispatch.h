/* Request -> store -> reply. Reads (Hello, Get, Prefetch, List, Stats) are
 * answered on the connection's worker thread with a short read
 * transaction, and the layer's reports (ClientReport, ListClientReports)
 * there too, from memory; writes and long walks (Put, Report, Purge,
 * Verify, Export, Import) go to the writer. */
#ifndef PCD_DISPATCH_H
#define PCD_DISPATCH_H

#include "connection.h"

/* Handles one decoded request (takes ownership of req). */
void pcd_dispatch(pcd_conn *conn, Pcachepb__Request *req);

/* The writer's completion callback (writer thread): a job with a
 * connection goes to that connection's worker, the others are freed. */
void pcd_dispatch_job_done(pcd_job *job);

#endif
