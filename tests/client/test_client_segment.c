/* The shared-memory segment through libpcache and lavapipe. Cold run:
 * pipelines and a snapshot are uploaded. Warm run, in a new process: the
 * device cache comes from the segment (one Segment request, no Prefetch
 * page, no Get, nothing compiled). Warm without prefetch
 * (PCACHE_NO_PREFETCH=1): the first miss loads the mapped segment's
 * snapshot, which serves every miss, again with no Get. After more pipelines, the daemon builds a new
 * segment and the next run loads it. With segments off (PCACHE_NO_SEGMENT)
 * the socket serves as before. A run handed the segment holds its lease
 * until it unmaps it (test_daemon_segment says what the daemon does with
 * leases). */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "client/device.h"
#include "client_util.h"
#include "ctl_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define N_GRAPHICS 6
#define N_COMPUTE 2
#define N_PIPELINES (N_GRAPHICS + N_COMPUTE)

/* "nopf-threads": threads that miss the same set at once, from a
 * barrier, so that all but one find the snapshot being loaded. */
#define N_THREADS 4

typedef struct builder {
  pthread_t thread;
  pthread_barrier_t *start;
  pcache_device *device;
  const test_objects *o;
} builder;

static void *build_main(void *arg) {
  builder *b = arg;
  pthread_barrier_wait(b->start);
  util_build_set(b->device, b->o, N_GRAPHICS, N_COMPUTE, NULL);
  return NULL;
}

static void run(const char *mode) {
  util_app a;
  pcache_stats st;
  int more = strcmp(mode, "more") == 0, after = strcmp(mode, "after") == 0;
  int threads = strcmp(mode, "nopf-threads") == 0;
  int nopf = strcmp(mode, "nopf") == 0 || threads, handed;
  uint64_t sent = util_segments_sent();

  util_app_open_device(&a, 5000);
  /* Whether this run was handed the segment (nothing else asks for one
   * meanwhile): one that went stale first is not, and asks the socket. */
  handed = util_segments_sent() > sent;
  /* Held with its lease (the daemon counts it until the mapping goes). */
  if (handed)
    ASSERT_TRUE(a.device->segment.map && a.device->segment.map->lease_fd >= 0);
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  if (strcmp(mode, "warm") == 0 || more) {
    ASSERT_EQ(st.snapshot_loaded, N_PIPELINES);
    ASSERT_EQ(st.prefetched, N_PIPELINES);
  } else if (after) {
    ASSERT_EQ(st.prefetched, N_PIPELINES + 2);
  } else {
    ASSERT_EQ(st.prefetched, 0);
  }
  test_objects_create(&a.o, a.device);
  if (threads) {
    pthread_barrier_t start;
    builder b[N_THREADS];
    ASSERT_EQ(pthread_barrier_init(&start, NULL, N_THREADS), 0);
    for (int i = 0; i < N_THREADS; i++) {
      b[i] = (builder){.start = &start, .device = a.device, .o = &a.o};
      ASSERT_EQ(pthread_create(&b[i].thread, NULL, build_main, &b[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++)
      ASSERT_EQ(pthread_join(b[i].thread, NULL), 0);
    pthread_barrier_destroy(&start);
  } else {
    util_build_set(a.device, &a.o, N_GRAPHICS + (more || after ? 2 : 0), N_COMPUTE, NULL);
  }
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  if (strcmp(mode, "cold") == 0) {
    ASSERT_EQ(st.compiles, N_PIPELINES);
  } else {
    ASSERT_EQ(st.compiles, more ? 2u : 0u);
    ASSERT_EQ(st.daemon_hits, N_PIPELINES + (after ? 2u : 0u));
    ASSERT_EQ(st.rejected_blobs, 0);
  }
  if (nopf && handed) {
    /* The first miss loaded the segment's snapshot, which covers them
     * all: no blob of its own for any. */
    ASSERT_EQ(st.snapshot_loaded, N_PIPELINES);
    ASSERT_EQ(st.prefetched, N_PIPELINES);
    /* Nothing new for the daemon's snapshot. (A miss that takes its own
     * blob while another thread loads the snapshot must not count as news
     * either; on lavapipe the load is too quick for that to be caught.) */
    ASSERT_EQ(st.snapshots_uploaded, 0);
  }
  util_app_close(&a);
}

static Pcachepb__StatsReply stats(void) {
  Pcachepb__Response *r = util_stats();
  Pcachepb__StatsReply s = *r->stats;
  s.daemon_version = s.data_dir = s.socket_path = NULL;
  s.n_replay = 0;
  s.replay = NULL;
  pcache__response_free(r);
  return s;
}

/* Runs mode in a child until a run is handed the segment, five runs at
 * most: a run whose segment went stale meanwhile (a commit of the run
 * before landed after the build) asks over the socket and for another
 * build, which the next run waits for. *before and *after: the daemon's
 * stats around the run that was handed it. */
static void run_until_handed(const char *argv0, const char *mode, Pcachepb__StatsReply *before,
                             Pcachepb__StatsReply *after) {
  for (int i = 0;; i++) {
    *before = stats();
    util_run_self(argv0, mode);
    *after = stats();
    if (after->segment_sent > before->segment_sent)
      return;
    ASSERT_LT(i, 5);
    util_wait_segment_builds(after->segment_builds + 1);
  }
}

int main(int argc, char **argv) {
  test_env env;
  Pcachepb__StatsReply s0, s1;
  if (argc > 1) {
    run(argv[1]);
    return 0;
  }
  test_env_init(&env, "client-segment");
  test_daemon_start(&env, NULL);
  run("cold");

  /* The first warm run: the daemon holds no current segment, so it
   * answers at once without one and builds it on its builder thread; the
   * run takes its blobs over the socket (a Prefetch). */
  s0 = stats();
  util_run_self(argv[0], "warm");
  s1 = stats();
  ASSERT_GE(s1.prefetch_scans - s0.prefetch_scans, 1);
  util_wait_segment_builds(1);

  /* A later warm run: the Segment request is the one request for blobs.
   * (A commit of the first warm run, its flush, may land after the build
   * and make that segment stale: run_until_handed.) */
  run_until_handed(argv[0], "warm", &s0, &s1);
  ASSERT_EQ(s1.gets - s0.gets, 1);
  ASSERT_EQ(s1.prefetch_scans - s0.prefetch_scans, 0);
  ASSERT_EQ(s1.segment_builds, s0.segment_builds);
  ASSERT_EQ(s1.segments, 1);
  ASSERT_EQ(s1.segment_sent - s0.segment_sent, 1);
  /* pcachectl status shows them. */
  ctl_json_check(&env, 0, "status",
                 "d[\"segments\"] == 1 and d[\"segment_bytes\"] > 0 and d[\"segment_builds\"] >= 1 "
                 "and d[\"segment_sent\"] >= 1 and d[\"segment_retired\"] == 0 "
                 "and d[\"segment_retired_bytes\"] == 0");

  /* Per miss, from the mapped index: still no Get. (As above, a run
   * whose segment went stale meanwhile asks over the socket; the next one
   * is handed the rebuilt segment.) */
  setenv("PCACHE_NO_PREFETCH", "1", 1);
  run_until_handed(argv[0], "nopf", &s1, &s0);
  ASSERT_EQ(s0.gets - s1.gets, 1);
  ASSERT_EQ(s0.segment_builds, s1.segment_builds); /* shared: not built again */
  ASSERT_EQ(s0.segment_sent - s1.segment_sent, 1);
  /* The same with threads that miss at once (under TSan too). */
  util_run_self(argv[0], "nopf-threads");
  unsetenv("PCACHE_NO_PREFETCH");

  /* The next run adds two pipelines: each change has a new segment built
   * (never more than one held), and once the builds are done a run that
   * changes nothing is handed the current one. */
  util_run_self(argv[0], "more");
  util_run_self(argv[0], "after");
  util_wait_segment_builds(s0.segment_builds + 1);
  s1 = stats();
  ASSERT_EQ(s1.segments, 1);
  run_until_handed(argv[0], "after", &s0, &s1); /* until a run finds the segment current */

  /* Segments off: the socket path serves (a Prefetch). */
  setenv("PCACHE_NO_SEGMENT", "1", 1);
  s0 = stats();
  util_run_self(argv[0], "after");
  s1 = stats();
  ASSERT_EQ(s1.segment_sent, s0.segment_sent);
  ASSERT_GE(s1.prefetch_scans - s0.prefetch_scans, 1);
  test_env_cleanup(&env);
  return 0;
}
