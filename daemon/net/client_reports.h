/* What the Vulkan layer reports about each process (ClientReport), kept
 * for `pcachectl layer` (ListClientReports): the last PCD_CLIENT_REPORTS,
 * in memory only. They are diagnostics, not cache data: a restart loses
 * them, and nothing in the store depends on them. */
#ifndef PCD_CLIENT_REPORTS_H
#define PCD_CLIENT_REPORTS_H

#include "connection.h"

/* How many reports are kept; a newer one replaces the oldest. */
#define PCD_CLIENT_REPORTS 64
/* Limits of one report (validate.c checks them): its unhashable reasons,
 * and the length of a reason word. */
#define PCD_MAX_CLIENT_REASONS 32
#define PCD_MAX_REASON_WORD 48

typedef struct pcd_client_reports pcd_client_reports;

/* A ring of PCD_CLIENT_REPORTS fixed-size slots, made at once: what a
 * client sends is copied into a slot, never kept as it came, so the ring
 * holds at most PCD_CLIENT_REPORTS * sizeof(slot) (about 170 KiB) however
 * many or large the reports. 0 or -ENOMEM. */
int pcd_client_reports_new(pcd_client_reports **ret_reports);
void pcd_client_reports_free(pcd_client_reports *reports);

/* The request handlers, on the connection's I/O thread (several at once:
 * the ring has its own lock). The request was validated (validate.c) and
 * stays the caller's. A server without a ring (none was made) answers
 * PCACHE_EUNAVAILABLE. */
void pcd_client_report_keep(pcd_conn *conn, const Pcachepb__ClientReport *report);
void pcd_client_reports_list(pcd_conn *conn, const Pcachepb__ListClientReports *list);

#endif
