/* The replay's writer jobs (replay.h), in four files, each calling only
 * those after it, then replay.c:
 *   ops_replay_start.c  ReplayStart, and the start a client's new device
 *                       key sets off: finding superseded keys, writing
 *                       their records; a staged Put's plan, and its wake
 *   ops_replay_claim.c  ReplayClaim: the replayer's results taken, its
 *                       next item handed out; the replayer's own Put landed
 *   ops_replay_sync.c   the sync job: bad records the supervisor queued,
 *                       a finished replay's old key evicted, the next
 *                       replay loaded
 *   ops_replay.c        what they share: loading a replay, its records,
 *                       the walk of its order, waking the supervisor
 * They run on the writer thread, in its transaction, so the order walk,
 * the records and the entries the replayer Puts are seen in one sequence;
 * each takes the replay's lock for its transaction (pcd_replay_txn_enter)
 * and lets it go in its committed or aborted hook. replay_new.c sets
 * their tables in the jobs room's. */
#ifndef PCD_OPS_REPLAY_H
#define PCD_OPS_REPLAY_H

#include "ops.h"
#include "replay.h"

/* The tables (one a file). */
extern const pcd_job_ops pcd_job_replay_start, pcd_job_replay_claim, pcd_job_replay_sync;

/* The replay a job works for (job->ctx), or NULL (a program that made
 * none). */
pcd_replay *pcd_replay_of(const pcd_job *job);
/* Every replay job's aborted hook: the state goes back to the committed. */
void pcd_replay_job_aborted(pcd_job *job);
/* The start of a committed hook: the transaction's hold on the state ends
 * (pcd_replay_txn_leave), and its lock is taken again for what the hook
 * changes and wakes. Returns the replay, locked, or NULL without one. */
pcd_replay *pcd_replay_committed_lock(pcd_job *job);

/* The entry key of hash h under device key dev. */
void pcd_replay_entry_key(uint8_t out[PCD_ENTRY_KEY_SIZE], const uint8_t *dev,
                          const pcache__hash *h);
/* Records the replay old -> new unless it is there; a finished one is
 * taken up again only when asked (again). Returns 1 when pending now, or
 * an error. */
int pcd_replay_plan(pcd_txn *txn, const uint8_t *old_key, const uint8_t *new_key, int again);
/* Deletes the pending replays to another build of named's device, but the
 * one under way (ops_replay_start.c says why). Returns 0 or an error. */
int pcd_replay_retire_obsolete(pcd_txn *txn, const pcd_replay *rp, const uint8_t *named,
                               pcache__arena *arena);
/* Loads the first pending replay when none is under way. Returns 1 when
 * one is under way afterwards, 0 when none, or an error. */
int pcd_replay_load_next(pcd_replay *rp, pcd_txn *txn);
/* Writes the bad records waiting in rp; they leave the queue when the
 * transaction commits (pcd_replay_txn_leave). Returns 0 or an error. */
int pcd_replay_write_bad(pcd_replay *rp, pcd_txn *txn);
/* Under rp->lock: asks the supervisor for a replayer (spawn) or a sync
 * job (sync), on the accepting loop. */
void pcd_replay_wake(pcd_replay *rp, int spawn, int sync);

/* A walk of the replay's order (pcd_replay_next_item). */
struct pcd_replay_pick {
  pcd_replay *rp;
  pcd_txn *txn;
  pcache__hash found;
  int r;
};
/* Whether old entry h is still to build: not in flight, not built under
 * the new key, not recorded bad. Returns 1, 0 or an error. */
int pcd_replay_pending(struct pcd_replay_pick *p, const pcache__hash *h);
/* The next item in the replay's order: 1 (p->found), 0 (none) or an
 * error. Moves the order on. */
int pcd_replay_next_item(struct pcd_replay_pick *p);
/* The program name a replayer must run under to be handed old entry h
 * (replay_exe.c). Returns 0 or an error. */
int pcd_replay_item_exe(pcd_replay *rp, pcd_txn *txn, const pcache__hash *h,
                        char out[PCD_EXE_NAME_MAX + 1]);
/* Sets rp->next_exe to the name the next item needs, leaving the order
 * where it was. Returns 0 or an error. */
int pcd_replay_plan_exe(pcd_replay *rp, pcd_txn *txn);

/* A Put's hooks (pcd_replay_job_hooks, replay.h says what each does;
 * replay_new.c makes the table). */
int pcd_replay_put_stage(pcd_job *job, pcd_txn *txn, const pcache__devkey *key, uint64_t added);
void pcd_replay_put_landed(pcd_job *job, const Pcachepb__Put *put, const Pcachepb__PutReply *reply);
void pcd_replay_put_settled(pcd_job *job, int committed);

#endif
