/* The fleet tier: a shared Redis behind the local store (docs/fleet.md).
 * Local misses of Get and Prefetch are asked of it, and what it returns is
 * checked as an upload is and stored before it is served; entries that
 * clients of this machine upload are pushed to it in the background.
 *
 * The tier runs on the accepting loop (the main thread): remote.c (its
 * life, the queues from other threads, the deadlines), remote_conn.c (the
 * connection), remote_fetch.c (asks) and remote_push.c (write-back) are
 * the only files that know hiredis. remote_pack.c makes the values on the
 * writer thread; remote_serve.c decides on an I/O thread what to ask. */
#ifndef PCD_REMOTE_H
#define PCD_REMOTE_H

#include <stdint.h>
#include <uv.h>

#include "common/arena.h"
#include "daemon.h"
#include "remote_pack.h"
#include "writer.h"

typedef struct pcd_remote pcd_remote;

/*
 * pcd_remote_new - reads config's --remote options (the URL, the AUTH file
 * and its mode) and starts connecting on loop. Fleet entries go to writer
 * as jobs; a job of an ask comes back through done (the writer's own
 * completion callback, so that the reply reaches the job's connection).
 * Reads the keys too (--remote-signing-key, --remote-trusted-keys:
 * remote_trust.h). Returns 0, or -EINVAL / -errno after logging what is
 * wrong: pcached then refuses to start rather than run without the fleet
 * it was told to use, or with another trust than it was given. put_hooks,
 * put_ctx: the hooks and ctx of every Put job the remote makes, as the
 * server's own Put jobs carry (the replay's, writer.h pcd_job_hooks: a
 * sync's Put stages its items, ops_put.c).
 */
int pcd_remote_new(const pcd_config *config, uv_loop_t *loop, pcd_store *store, pcd_writer *writer,
                   pcd_stats *stats, pcd_job_done_cb done, const pcd_job_hooks *put_hooks,
                   void *put_ctx, pcd_remote **ret_remote);

/* A sync read an app's program name from the fleet (x:APP, checked as a
 * file name): handed to the replay, which builds under it (main.c
 * installs pcd_replay_exe_record; the fleet calls up through this). ctx
 * is pcd_remote_new's put_ctx. */
typedef void (*pcd_remote_exe_cb)(void *ctx, const char *app, const char *exe);
void pcd_remote_on_exe(pcd_remote *remote, pcd_remote_exe_cb cb);

/* A Put job of the fleet's: job->fleet set, and its hooks and ctx the ones
 * given to pcd_remote_new (a sync's staged Put finds the replayer through
 * them, ops_put.c). remote may be NULL (no ctx then). NULL when out of memory. */
pcd_job *pcd_remote_put_job(pcd_remote *remote);

/* The loop's thread, before the workers stop: answers every ask now,
 * drops what waits to be pushed, closes the connection and the handles.
 * Asks made later are answered at once. */
void pcd_remote_stop(pcd_remote *remote);

/* After the loop ended. NULL is fine. */
void pcd_remote_free(pcd_remote *remote);

/* Any thread: whether asks are worth making now (the connection is up). */
int pcd_remote_ready(pcd_remote *remote);

/* Any thread: whether this daemon pushes its clients' uploads (it has a
 * signing key, --remote-signing-key); a member without one only reads.
 * NULL is fine (0). */
int pcd_remote_publishes(const pcd_remote *remote);

/* Any thread: whether any writer is trusted (--remote-trusted-keys, or
 * our own key): with none, every value would be refused, so nothing is
 * asked. NULL is fine (0). */
int pcd_remote_trusts_any(const pcd_remote *remote);

/*
 * pcd_remote_ask_get / pcd_remote_ask_prefetch - any thread: ask the fleet
 * for state hashes of a device (hashes: 16 bytes each, copied), or for the
 * entries of (device, app) this store lacks and, when snapshot is set, its
 * snapshot. job is a PCD_JOB_PUT with conn, app and finish set; it comes
 * back through done within the remote's deadline, after the writer stored
 * what was found (job->req is then the fleet's Put, job->stored what it
 * kept), or with job->req NULL when nothing was. Never fails: on any
 * error the job comes back empty.
 */
void pcd_remote_ask_get(pcd_remote *remote, pcd_job *job, const uint8_t *device_key,
                        const uint8_t *hashes, size_t n_hashes);
void pcd_remote_ask_prefetch(pcd_remote *remote, pcd_job *job, const uint8_t *device_key,
                             const char *app, int snapshot);

/* Any thread (the writer's, after a commit): queues values to write,
 * taking the list; past --remote-queue they are dropped and counted. */
void pcd_remote_push(pcd_remote *remote, pcd_push *list);

/*
 * pcd_remote_sync_devices - any thread (the probe's, replay_detect.c): the
 * device keys of the drivers installed (n of them, 32 bytes each), which
 * a fleet sync walks (docs/fleet.md "Sync"); one starts for them now, or
 * once the connection is up. NULL remote is fine.
 */
void pcd_remote_sync_devices(pcd_remote *remote, const uint8_t *keys, unsigned n);

/*
 * pcd_remote_sync_ask - any I/O thread: job (a FleetSync's, its connection
 * held, job->req NULL) is answered through done, its reply in job->out,
 * once the sync it starts ends, or the sync under way does; at once with
 * an error that says what to do when none can start.
 */
void pcd_remote_sync_ask(pcd_remote *remote, pcd_job *job);

/* Any thread: the remote's state for StatsReply.remote, from arena. */
Pcachepb__RemoteStats *pcd_remote_stats(pcd_remote *remote, pcache__arena *arena);

#endif
