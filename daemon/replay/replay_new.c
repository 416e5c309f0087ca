/* Making the replay (replay.h): its settings, read once from the
 * environment (docs/replay.md), and the tables of its writer jobs, set in
 * the jobs room's table (jobs.h pcd_job_ops_set) so that the writer finds
 * them though that room cannot name them; and the hooks a Put reaches it
 * through (pcd_replay_job_hooks). Apart from replay.c, whose shared state
 * the jobs (ops_replay*.c) use: this file refers to the jobs, they to
 * that state. */
#include "ops_replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/parse.h"

/* The replayer's default path: beside pcached (both are installed to the
 * same bin directory, and the build puts them side by side). */
static void default_replayer(char *out, size_t size) {
  static const char name[] = "pcache-replay";
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  char *slash;
  size_t dir_len;
  /* No path of our own, or one too long to add the name to: the name
   * alone, found through PATH. */
  if (n <= 0 || !(slash = memrchr(self, '/', (size_t)n)) ||
      (dir_len = (size_t)(slash - self) + 1) + sizeof name > size) {
    snprintf(out, size, "%s", name);
    return;
  }
  memcpy(out, self, dir_len);
  memcpy(out + dir_len, name, sizeof name);
}

/* Sanitizers map their shadow memory private and writable, which
 * RLIMIT_DATA counts (terabytes under ASan): a replayer built with one
 * gets no limit unless asked. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REPLAY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define REPLAY_SANITIZED 1
#endif
#endif

/* The replayer's memory limit by default, in MiB: half the machine's
 * memory, at least 1 GiB (docs/replay.md, "Its memory"). */
static uint32_t default_mem_limit_mb(void) {
#ifdef REPLAY_SANITIZED
  return 0;
#else
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t mb = pages > 0 && page > 0 ? ((uint64_t)pages * (uint64_t)page / 2) >> 20 : 0;
  if (mb < 1024)
    mb = 1024;
  return mb > (1u << 24) ? 1u << 24 : (uint32_t)mb;
#endif
}

int pcd_replay_new(struct pcd_server *srv, pcd_replay **ret) {
  pcd_replay *rp = pcache__calloc(1, sizeof *rp);
  const char *bin = getenv("PCACHE_REPLAYER"), *off = getenv("PCACHE_REPLAY"), *as_program;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int r;
  if (!rp)
    return -ENOMEM;
  if ((r = pthread_mutex_init(&rp->lock, NULL)) != 0) {
    pcache__free(rp);
    return -r;
  }
  if ((r = pthread_mutex_init(&rp->fg.lock, NULL)) != 0) {
    pthread_mutex_destroy(&rp->lock);
    pcache__free(rp);
    return -r;
  }
  if ((r = pthread_mutex_init(&rp->exes.lock, NULL)) != 0) {
    pthread_mutex_destroy(&rp->fg.lock);
    pthread_mutex_destroy(&rp->lock);
    pcache__free(rp);
    return -r;
  }
  rp->srv = srv;
  if (bin && *bin)
    snprintf(rp->replayer_path, sizeof rp->replayer_path, "%s", bin);
  else
    default_replayer(rp->replayer_path, sizeof rp->replayer_path);
  rp->disabled = off && strcmp(off, "off") == 0;
  /* Each app's pipelines built by a replayer named as its program, whose
   * driver cache file NVIDIA's driver chooses by that name (replay_exe.c);
   * 0 builds everything as pcache-replay, in that name's file alone. */
  as_program = getenv("PCACHE_REPLAY_AS_PROGRAM");
  atomic_store(&rp->as_program, !(as_program && strcmp(as_program, "0") == 0));
  /* A replayer named by its path must be there to take staged items that
   * only it builds; a bare name is found through PATH when started, and
   * taken on trust. */
  rp->stages =
      !rp->disabled && (!strchr(rp->replayer_path, '/') || access(rp->replayer_path, X_OK) == 0);
  /* Half the cores, at most 4: a background job that leaves the machine
   * to its user (docs/replay.md). */
  rp->threads = cpus > 1 ? (unsigned)cpus / 2 : 1;
  if (rp->threads > 4)
    rp->threads = 4;
  /* (pcache__env_ms reads a plain bounded number: a count here.) */
  rp->threads = pcache__env_ms("PCACHE_REPLAY_THREADS", rp->threads, 1, 16);
  rp->quiet_us = (uint64_t)pcache__env_ms("PCACHE_REPLAY_QUIET_MS", 2000, 0, 3600000) * 1000;
  rp->hang_us = (uint64_t)pcache__env_ms("PCACHE_REPLAY_HANG_MS", 120000, 100, 86400000) * 1000;
  /* A hard bound the kernel enforces on the replayer (replay_supervise.c);
   * 0 turns it off. */
  rp->mem_limit_mb =
      pcache__env_ms("PCACHE_REPLAY_MEM_LIMIT_MB", default_mem_limit_mb(), 0, 1u << 24);
  /* Busy: clients asking for or uploading pipelines at 2 a second or more
   * (an app that loads or builds; one that only starts asks for a handful
   * once). Even then one item every 5 s goes out, so that an app that
   * never stops fetching cannot hold the replay back for ever. */
  rp->busy_rate = pcache__env_ms("PCACHE_REPLAY_BUSY_RATE", 2, 1, 1000000);
  rp->busy_every_us =
      (uint64_t)pcache__env_ms("PCACHE_REPLAY_BUSY_EVERY_MS", 5000, 10, 3600000) * 1000;
  /* The writer finds the jobs through the jobs room's table, which cannot
   * name them; set here, before the server or the fleet can make one. */
  pcd_job_ops_set(PCD_JOB_REPLAY_START, &pcd_job_replay_start);
  pcd_job_ops_set(PCD_JOB_REPLAY_CLAIM, &pcd_job_replay_claim);
  pcd_job_ops_set(PCD_JOB_REPLAY_SYNC, &pcd_job_replay_sync);
  *ret = rp;
  return 0;
}

void pcd_replay_free(pcd_replay *rp) {
  if (!rp)
    return;
  pthread_mutex_destroy(&rp->exes.lock);
  pthread_mutex_destroy(&rp->fg.lock);
  pthread_mutex_destroy(&rp->lock);
  pcache__free(rp);
}

static int put_stages(const pcd_job *job) { return pcd_replay_stages(pcd_replay_of(job)); }

const pcd_job_hooks pcd_replay_job_hooks = {.stages = put_stages,
                                            .stage = pcd_replay_put_stage,
                                            .landed = pcd_replay_put_landed,
                                            .settled = pcd_replay_put_settled};
