/* Builds under the program's name (replay_exe.c, docs/replay.md "Builds
 * under the program's name"): the name an app runs as, learned from its
 * clients, and the copies of pcache-replay named so. In the replay room:
 * it reads the server's data directory and submits writer jobs. */
#ifndef PCD_REPLAY_EXE_H
#define PCD_REPLAY_EXE_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"

/* Any thread (an I/O thread's Hello, Prefetch or Put; replay_exe.c):
 * records the basename of /proc/PID/exe as the program name app runs as,
 * when it is one (pcd_exe_name_ok); not for the replayer's own
 * connections. Nothing when /proc cannot be read. Never waits. */
void pcd_replay_exe_note(pcd_replay *replay, const char *app, uint32_t pid);
/* Any thread: records exe (refused unless pcd_exe_name_ok) as the program
 * name app runs as: a writer job, once a run for each (app, exe). */
void pcd_replay_exe_record(pcd_replay *replay, const char *app, const char *exe);
/* The accepting loop: makes (or finds current) the replayer's copy named
 * name, <data dir>/replayers/NAME/NAME, into out. Returns 0 or -errno. */
int pcd_replay_exe_copy(pcd_replay *replay, const char *name, char *out, size_t size);

#endif
