/* Reports to the daemon (reports.c): the uses of prefetched pipelines,
 * and refused blobs. Whoever refused a blob from the
 * daemon (a Get, a prefetch page, the mapped segment, a snapshot) queues
 * its report;
 * the device's upload thread sends the queue in one Report over the
 * background connection. The daemon answers a Report after its commit,
 * which a busy disk can hold far longer than the app's timeout: sent from
 * an app thread on the app's connection it could time out and close that
 * connection for a second. Best effort: a report that is lost only lets
 * the daemon offer that blob again, and it is refused again. */
#ifndef PCACHE_CLIENT_REPORTS_H
#define PCACHE_CLIENT_REPORTS_H

#include "client/device.h"

/* Sends report (its device key set here) as one Report on the background
 * lane, with its timeout: the upload thread's way to tell the daemon of
 * uses and refusals. Best effort: the daemon's answer is not looked at. */
void pcache__report_send(pcache_device *device, Pcachepb__Report *report);

/* Queues the n items' state hashes and reasons (copied) and wakes the
 * upload thread. At most PCACHE__REFUSED_MAX wait; the rest are dropped.
 * Any thread; takes upload_lock. */
void pcache__refused_queue(pcache_device *device, const Pcachepb__ReportItem *const *items,
                           size_t n);

/* Queues the report of a refused snapshot (the device's app's, its
 * checksum as sent: the daemon drops only that one), as
 * pcache__refused_queue does a blob's. Any thread; takes upload_lock. */
void pcache__refused_snapshot_queue(pcache_device *device, Pcachepb__ReportReason reason,
                                    uint64_t checksum);

/* A pipeline was built from the prefetched blob of state_hash: the
 * daemon counts a use (the entry's place in its LRU) only when told.
 * Queued, at most the upload queue's bound, for one Report a while
 * (USED_DELAY_MS) or a Report's worth (USED_BATCH): not a Report, and a
 * wakeup of the upload thread, for each pipeline of a warm start. Any
 * thread; takes upload_lock. */
void pcache__used_queue(pcache_device *device, const pcache__hash *state_hash);
/* Whether the uses queued go now: a flush wants them (used_now), a
 * Report's worth waits, or the first waited USED_DELAY_MS; else
 * *ret_wait_ms is how long they may wait. Under upload_lock. */
int pcache__used_due_locked(const pcache_device *device, uint64_t *ret_wait_ms);
/* From the upload thread, under upload_lock: one Report of the uses
 * queued (at most max_hashes), best effort: what the daemon does not take
 * is dropped, not retried. Drops the lock while the Report goes. */
void pcache__used_send_locked(pcache_device *device);

/* Whether reports are queued, not yet sent. Under upload_lock. */
int pcache__refused_queued_locked(const pcache_device *device);

/* Whether reports wait or one is being sent. Under upload_lock. */
int pcache__refused_pending_locked(const pcache_device *device);

/* From the upload thread, under upload_lock: takes what is queued, drops
 * the lock while the Report goes (the background lane and its timeout),
 * takes it back and wakes the flushers. */
void pcache__refused_send_locked(pcache_device *device);

#endif
