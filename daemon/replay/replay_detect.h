/* Driver changes pcached finds itself (docs/replay.md, "When a replay
 * starts"). pcached links no Vulkan, so a probe, `pcache-replay
 * --list-keys` (the replayer's own key computation, a client's), lists the
 * device keys of the drivers installed, and each key is noted exactly as
 * a client naming it in a Get would note it (pcd_replay_note): a key that
 * supersedes stored ones starts their replays before any program runs on
 * the new driver. The probe runs at pcached's start (unless
 * PCACHE_REPLAY_DETECT=off) and when asked (ReplayStart.detect: pcachectl
 * replay --detect, which systemd's pcache-detect.path runs when an ICD
 * manifest changes), on a thread of its own, at the replayer's priority,
 * killed past PCACHE_REPLAY_DETECT_MS. A probe that fails or hangs is
 * logged; the whole lines it wrote before (each device's, as made) are
 * used all the same. PCACHE_REPLAY=off turns it off. */
#ifndef PCD_REPLAY_DETECT_H
#define PCD_REPLAY_DETECT_H

struct pcd_server;
struct pcd_job;

typedef struct pcd_detect pcd_detect;

/* Reads the settings; starts nothing. Returns 0 or -errno. */
int pcd_detect_new(struct pcd_server *srv, pcd_detect **ret_detect);

/* Once the server serves (srv->writer and srv->replay are set): starts
 * the thread and the probe of pcached's start. Returns 0 or -errno. */
int pcd_detect_start(pcd_detect *d);

/* Any I/O thread: job is a ReplayStart with detect, its connection held
 * (dispatch.c). It goes to the writer once the next probe to begin has
 * ended, its reply's detected and detect_error filled in, and the keys
 * noted first; at once, with detect_error saying why, when replay is off
 * or pcached is stopping. */
void pcd_detect_submit(pcd_detect *d, struct pcd_job *job);

/* Before the I/O threads stop (they wait for the jobs held here): kills a
 * probe under way, answers the jobs held, joins the thread. Idempotent. */
void pcd_detect_stop(pcd_detect *d);
void pcd_detect_free(pcd_detect *d);

#endif
