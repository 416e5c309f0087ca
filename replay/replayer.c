/* pcache-replay: rebuilds stored pipelines for a new driver (docs/replay.md).
 * pcached starts it with the new device key and supervises it; it asks the
 * daemon for one item at a time per thread (ReplayClaim, which also reports
 * a build that failed; the daemon lands an uploaded item as it stores it:
 * so it knows which item a crash interrupted), builds it on the device (replay_vk.c, the thread's
 * shader modules kept across items in module_pool.c), and hands the blob to the uploader
 * (uploader.c), which sends it in a batched ordinary Put, validated by the daemon as any other,
 * while the thread builds its next item.
 *
 * It keeps out of the user's way: nice 19, SCHED_IDLE, idle I/O class, at
 * most --threads builds at once (16) with one upload each behind them, one
 * build at a time with a pause after each while /proc/pressure/cpu says
 * tasks wait for a CPU, and none while the daemon says a client is busy.
 * Its memory is one item per thread (and its last blob, at the uploader);
 * when the driver's own grows past PCACHE_REPLAY_MAX_RSS_MB it reports
 * what it did and exits between items, and pcached starts a fresh one.
 * That is a recycle threshold; the hard bound is the RLIMIT_DATA pcached
 * sets on it (PCACHE_REPLAY_MEM_LIMIT_MB): a build that runs into it (a
 * crash, or a failed build, with its memory at the limit) exits 5, and
 * pcached blames the item once it does so alone.
 *
 * Exit codes: 0 done (nothing left to hand out), 1 error, 2 usage,
 * 3 no Vulkan device has the key, 4 memory bound reached (recycle),
 * 5 out of memory under the limit.
 *
 * This file is the program's start and end: its arguments and settings,
 * --list-keys [--binary], the device, the uploader and the threads started and
 * joined, the summary lines and the exit code. The worker threads' claim,
 * build and upload loop is replayer_worker.c, the process helpers (nice,
 * PSI, memory limit, fatal signals, OOM score, test hooks)
 * replayer_proc.c, and what they share replayer.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/devkey.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/paths.h"
#include "proto/transport.h"
#include "replay/replayer.h"
#include "replay/uploader.h"
#include "replay_vk.h"

#define MAX_THREADS 16
/* Each thread's modules across items (module_pool.h): an app's shaders
 * are a few dozen at most, PBR SPIR-V tens of KB each. */
#define POOL_MODULES 64
#define POOL_BYTES (32u << 20)

/* Where the items' time went, summed over the threads, per item: what
 * bench/run-replay.sh reports beside the rate. The uploads overlap the
 * builds; "wait" is what a thread waited for its last one. */
static void log_times(const worker *workers, unsigned n, pcache__replay_keep *keep, uint64_t put_ns,
                      uint64_t puts) {
  pcache__replay_times t = {0};
  uint64_t claim = 0, wait = 0, slept = 0, items = 0, made = 0, lent = 0;
  unsigned kept, kept_peak;
  struct rusage ru;
  for (unsigned i = 0; i < n; i++) {
    uint64_t m, l;
    t.decode_ns += workers[i].times.decode_ns;
    t.objects_ns += workers[i].times.objects_ns;
    t.compile_ns += workers[i].times.compile_ns;
    t.data_ns += workers[i].times.data_ns;
    t.seeded += workers[i].times.seeded;
    claim += workers[i].claim_ns;
    wait += workers[i].wait_ns;
    slept += workers[i].slept_ns;
    items += workers[i].items;
    pcache__module_pool_counts(workers[i].modules, &m, &l);
    made += m;
    lent += l;
  }
  if (!items)
    return;
  pcache__replay_keep_counts(keep, &kept, &kept_peak);
  /* The process's page faults and context switches: set beside a
   * program's (pcache-demo --plain prints its own), they tell a compile
   * slowed by its memory or its scheduling from one slowed by its work. */
  if (getrusage(RUSAGE_SELF, &ru) < 0)
    memset(&ru, 0, sizeof ru);
#define PER(ns) ((double)(ns) / 1e6 / (double)items)
  log_info("replay: per item (ms): claim %.3f decode %.3f objects %.3f compile %.3f data %.3f "
           "wait %.3f upload %.3f told_to_wait %.3f; puts %llu, modules made %llu, reused %llu, "
           "kept %u, rss_mb %llu, minor_faults %ld, voluntary_switches %ld, "
           "involuntary_switches %ld",
           PER(claim), PER(t.decode_ns), PER(t.objects_ns), PER(t.compile_ns), PER(t.data_ns),
           PER(wait), PER(put_ns), PER(slept), (unsigned long long)puts, (unsigned long long)made,
           (unsigned long long)(lent - made), kept_peak,
           (unsigned long long)(pcache__replay_rss_bytes() >> 20), ru.ru_minflt, ru.ru_nvcsw,
           ru.ru_nivcsw);
#undef PER
  /* Staged items that came with a blob (docs/replay.md "Staged builds"). */
  if (t.seeded)
    log_info("replay: %llu builds started from a seed", (unsigned long long)t.seeded);
}

static int usage(FILE *f, int code) {
  fprintf(f, "usage: pcache-replay --device KEY [--socket PATH] [--threads N]\n"
             "       pcache-replay --list-keys [--binary]\n"
             "Rebuilds the pipelines pcached hands out for the device KEY (64 hex digits).\n"
             "--list-keys prints each Vulkan device's key as a client on it computes it,\n"
             "then its name, driver name and driver info, tab-separated, and builds\n"
             "nothing (exit 3: no device). --binary adds a line of the same form with\n"
             "the binary key (pipeline binaries) of each device that has them, for which\n"
             "it makes a VkDevice. pcached starts both; see docs/replay.md.\n");
  return code;
}

/* --list-keys: pcached's probe of the drivers installed (daemon/replay_detect.c),
 * at the replayer's priority; binary (--binary) adds the binary keys. */
static int list_keys(int binary) {
  int r;
  /* Each device's lines into pcached's pipe as written: a driver that
   * hangs or crashes on a later device must not take them with it. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  pcache__replay_be_nice();
  if ((r = pcache__replay_vk_list(stdout, binary)) == PCACHE_ENOT_FOUND) {
    log_info("replay: no Vulkan device here");
    return EXIT_NO_DEVICE;
  }
  if (r < 0)
    log_error("replay: cannot list the Vulkan devices: %s", pcache_strerror(r));
  return r < 0 ? 1 : 0;
}

/* The file name NVIDIA's driver files its disk cache under (the basename
 * of /proc/self/exe): pcached starts a copy named as the program whose
 * pipelines it builds (docs/replay.md "Builds under the program's name"),
 * and its log says which. */
static void say_name(void) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const char *slash;
  exe[n > 0 ? n : 0] = '\0';
  slash = strrchr(exe, '/');
  log_info("replay: runs as '%s'", slash ? slash + 1 : exe);
}

int main(int argc, char **argv) {
  static replayer rp;
  worker *workers = NULL;
  pthread_t psi;
  char sock[4096];
  const char *device = NULL, *socket_arg = NULL, *v;
  unsigned started = 0;
  uint64_t t0, elapsed_us, put_ns = 0, puts = 0;
  int r, code = 1, psi_started = 0;
  unsigned keep_max, keep_mb;

  pcache__log_set_ident("pcache-replay");
  /* pcached starts and supervises the replayer: once pcached is gone
   * (killed -9 included), one stuck in its driver must not live on, nor
   * one whose parent died before this line. */
  pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != parent)
    return 1;
  rp.threads = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0)
      return usage(stdout, 0);
    if (strcmp(argv[i], "--list-keys") == 0 && i == 1 &&
        (argc == 2 || (argc == 3 && strcmp(argv[2], "--binary") == 0)))
      return list_keys(argc == 3);
    if (i + 1 >= argc)
      return usage(stderr, 2);
    if (strcmp(argv[i], "--device") == 0)
      device = argv[++i];
    else if (strcmp(argv[i], "--socket") == 0)
      socket_arg = argv[++i];
    else if (strcmp(argv[i], "--threads") == 0)
      rp.threads = (unsigned)atoi(argv[++i]);
    else
      return usage(stderr, 2);
  }
  if (!device || pcache__devkey_parse(device, &rp.key) < 0 || rp.threads < 1 ||
      rp.threads > MAX_THREADS)
    return usage(stderr, 2);
  if ((r = pcache__socket_path(socket_arg, sock, sizeof sock)) < 0) {
    log_error("replay: no socket path: %s", strerror(-r));
    return 1;
  }
  rp.socket_path = sock;
  say_name();
  rp.max_rss = (uint64_t)pcache__env_ms("PCACHE_REPLAY_MAX_RSS_MB", 1024, 16, 1u << 20) << 20;
  rp.psi_low = pcache__env_ms("PCACHE_REPLAY_PSI", 10, 1, 100);
  rp.delay_ms = pcache__env_ms("PCACHE_REPLAY_TEST_DELAY_MS", 0, 0, 60000);
  keep_max = (unsigned)pcache__env_ms("PCACHE_REPLAY_KEEP", 1024, 0, 65536);
  keep_mb = (unsigned)pcache__env_ms("PCACHE_REPLAY_KEEP_MB", 128, 1, 4096);
  /* The driver's own disk cache stays on: each pipeline the replayer
   * builds for a new driver is then in that cache too, so the first launch
   * after the update finds it there through driver first (client/build.c)
   * as a warm launch would. On the H200 that launch was 1.21 times a warm
   * one with it on and 1.56 with it off (bench/RESULTS.md, "Driver first").
   * PCACHE_REPLAY_DRIVER_CACHE=0 turns it off for the replayer (NVIDIA's
   * __GL_SHADER_DISK_CACHE=0, set before the loader loads the driver,
   * while this process has one thread), as it was before: unless no
   * pipeline is kept, since then the disk cache is what lets the driver
   * share compiled stages between pipelines (keep.h). */
  v = getenv("PCACHE_REPLAY_DRIVER_CACHE");
  if (keep_max && v && strcmp(v, "0") == 0)
    setenv("__GL_SHADER_DISK_CACHE", "0", 1);
  v = getenv("PCACHE_REPLAY_TEST_CRASH");
  rp.crash_hash = v && *v ? v : NULL;
  v = getenv("PCACHE_REPLAY_TEST_KILLSELF");
  rp.killself_hash = v && *v ? v : NULL;
  v = getenv("PCACHE_REPLAY_TEST_HANG");
  rp.hang_hash = v && *v ? v : NULL;
  v = getenv("PCACHE_REPLAY_TEST_HOG");
  rp.hog_hash = v && *v ? v : NULL;
  pcache__replay_catch_fatal_signals();
  pcache__replay_prefer_oom_kill();
  pcache__replay_be_nice();

  if ((r = pcache__replay_vk_open(&rp.key, &rp.vk)) < 0 && pcache__replay_near_memory_limit()) {
    log_error("replay: the Vulkan driver ran out of memory under the limit pcached set "
              "(PCACHE_REPLAY_MEM_LIMIT_MB) as it loaded");
    return EXIT_OUT_OF_MEMORY;
  }
  if (r < 0) {
    log_error("replay: no Vulkan device for key %s: %s", device, pcache_strerror(r));
    return r == PCACHE_ENOT_FOUND ? EXIT_NO_DEVICE : 1;
  }
  if (pcache__replay_keep_new(pcache__replay_vk_device(rp.vk), keep_max, (size_t)keep_mb << 20,
                              &rp.keep) < 0) {
    log_error("replay: out of memory for %u kept pipelines", keep_max);
    goto out_vk;
  }
  if ((r = pcache__replay_uploader_start(rp.socket_path, RPC_TIMEOUT_MS,
                                         pcache__replay_vk_info(rp.vk), &rp.uploader)) < 0) {
    log_error("replay: cannot reach pcached at %s: %s", rp.socket_path, pcache_strerror(r));
    goto out_vk;
  }
  if (!(workers = pcache__calloc(rp.threads, sizeof *workers)))
    goto out_uploader;
  for (unsigned i = 0; i < rp.threads; i++) {
    workers[i].rp = &rp;
    workers[i].index = i;
    pthread_mutex_init(&workers[i].lock, NULL);
    pthread_cond_init(&workers[i].cond, NULL);
    if (pcache__module_pool_new(pcache__replay_vk_device(rp.vk), POOL_MODULES, POOL_BYTES,
                                &workers[i].modules) < 0)
      goto out_workers;
    r = pcache__transport_open(rp.socket_path, "pcache-replay", RPC_TIMEOUT_MS, &workers[i].t,
                               NULL);
    if (r < 0) {
      log_error("replay: cannot reach pcached at %s: %s", rp.socket_path, pcache_strerror(r));
      goto out_workers;
    }
  }
  t0 = pcache__mono_us();
  {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&rp.psi_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&rp.psi_lock, NULL);
  }
  psi_started = pthread_create(&psi, NULL, pcache__replay_psi_main, &rp) == 0;
  for (started = 0; started < rp.threads; started++)
    if (pthread_create(&workers[started].thread, NULL, pcache__replay_worker_main,
                       &workers[started]) != 0)
      break;
  for (unsigned i = 0; i < started; i++)
    pthread_join(workers[i].thread, NULL);
  elapsed_us = pcache__mono_us() - t0;
  atomic_store(&rp.failed, 1); /* ends the PSI thread */
  pthread_mutex_lock(&rp.psi_lock);
  rp.psi_stop = 1;
  pthread_cond_signal(&rp.psi_cond);
  pthread_mutex_unlock(&rp.psi_lock);
  if (psi_started)
    pthread_join(psi, NULL);
  pthread_cond_destroy(&rp.psi_cond);
  pthread_mutex_destroy(&rp.psi_lock);
  /* The replay benchmark (bench/run-replay.sh) reads this line. */
  log_info("replay: built %llu pipelines in %.1f ms with %u threads",
           (unsigned long long)atomic_load(&rp.built), (double)elapsed_us / 1e3, rp.threads);
  /* What a thread that failed left queued is sent (its results are not
   * reported: the daemon hands those items out again, and skips them
   * when their Put had landed). */
  pcache__replay_uploader_stop(rp.uploader, &put_ns, &puts);
  rp.uploader = NULL;
  log_times(workers, started, rp.keep, put_ns, puts);
  code = atomic_load(&rp.out_of_memory) ? EXIT_OUT_OF_MEMORY
         : atomic_load(&rp.stop)        ? EXIT_RECYCLE
         : started == rp.threads        ? 0
                                        : 1;
  for (unsigned i = 0; i < started; i++)
    if (!workers[i].done && !atomic_load(&rp.stop))
      code = 1;
out_workers:
  pcache__replay_uploader_stop(rp.uploader, NULL, NULL); /* before the workers it calls back */
  rp.uploader = NULL;
  for (unsigned i = 0; i < rp.threads; i++) {
    pcache__transport_close(workers[i].t);
    pcache__module_pool_free(workers[i].modules);
    pthread_cond_destroy(&workers[i].cond);
    pthread_mutex_destroy(&workers[i].lock);
  }
  pcache__free(workers);
out_uploader:
  pcache__replay_uploader_stop(rp.uploader, NULL, NULL);
out_vk:
  pcache__replay_keep_free(rp.keep);
  pcache__replay_vk_close(rp.vk);
  return code;
}
