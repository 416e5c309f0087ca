/* bench_tiers - libpcache's in-process tiers on a real device:
 *
 *   tier_hit:  pcache_tier_lookup by the app's integer key (no hashing)
 *   info_hit:  pcache_get_graphics_pipeline with the full create info
 *              (describe + hash + lookup on every call)
 *   each with 1 thread and with every core; scaling = aggregate throughput
 *   / single-thread throughput / threads (1.0 is perfect).
 *   miss_wait: threads that ask for the same new pipeline at once: one
 *              compiles, the others wait; the time from call to return of
 *              every caller, next to a lone compile of a similar pipeline.
 *
 * The daemon is disabled: this measures the library alone. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "pipeset.h"

#define N_HOT 64      /* pipelines the hit loops cycle through */
#define MISS_ROUNDS 4

static pcache_device *pdev;
static pcache_tier *tier;
static bench_pipeset *set;
static uint32_t hot[N_HOT];
static uint32_t n_hot;
static uint64_t tier_iters = 20000000, info_iters = 200000;

typedef struct worker {
  int kind; /* 0 tier lookup, 1 create info, 2 miss */
  uint64_t iters;
  uint32_t miss_index;
  bench_barrier *barrier;
  uint64_t ns;
  uintptr_t sink;
  int error;
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  uint64_t t0;
  uintptr_t sink = 0;
  bench_barrier_wait(w->barrier);
  t0 = bench_now_ns();
  if (w->kind == 0) {
    for (uint64_t k = 0; k < w->iters; k++)
      sink ^= (uintptr_t)pcache_tier_lookup(tier, hot[k % n_hot]);
  } else if (w->kind == 1) {
    for (uint64_t k = 0; k < w->iters; k++) {
      VkPipeline p;
      if (pcache_get_graphics_pipeline(pdev, bench_pipeset_graphics(set, hot[k % n_hot]), &p) !=
          VK_SUCCESS) {
        w->error = 1;
        break;
      }
      sink ^= (uintptr_t)p;
    }
  } else {
    VkPipeline p;
    if (pcache_get_graphics_pipeline(pdev, bench_pipeset_graphics(set, w->miss_index), &p) !=
        VK_SUCCESS)
      w->error = 1;
    sink = (uintptr_t)p;
  }
  w->ns = bench_now_ns() - t0;
  w->sink = sink;
  return NULL;
}

/* Runs threads workers of kind; returns the wall time in ns. */
static uint64_t run_workers(worker *w, unsigned threads) {
  bench_barrier *barrier = bench_barrier_new(threads + 1);
  uint64_t wall;
  for (unsigned i = 0; i < threads; i++)
    w[i].barrier = barrier;
  wall = bench_run_threads(worker_main, w, sizeof *w, threads, barrier);
  for (unsigned i = 0; i < threads; i++)
    if (w[i].error)
      bench_die("pipeline lookup failed");
  bench_barrier_free(barrier);
  return wall;
}

static void hits(const char *name, int kind, uint64_t iters, unsigned threads) {
  worker *w = calloc(threads, sizeof *w);
  worker one = {.kind = kind, .iters = iters};
  char prefix[64];
  double single, aggregate;
  uint64_t wall;

  if (!w)
    bench_die("out of memory");
  run_workers(&one, 1); /* warm-up */
  wall = run_workers(&one, 1);
  single = (double)iters / (double)wall; /* per ns */
  snprintf(prefix, sizeof prefix, "%s_t1_", name);
  bench_kv_f(prefix, "ns", (double)wall / (double)iters);

  for (unsigned i = 0; i < threads; i++)
    w[i] = (worker){.kind = kind, .iters = iters};
  wall = run_workers(w, threads);
  aggregate = (double)iters * threads / (double)wall;
  snprintf(prefix, sizeof prefix, "%s_t%u_", name, threads);
  bench_kv_f(prefix, "ns", (double)wall / (double)iters);
  bench_kv_f(prefix, "scaling", aggregate / single / threads);
  free(w);
}

/* The next graphics pipeline at or after *idx with the given shader set
 * parity (pipeset: even indices unlit, odd PBR), so the lone compile and
 * the shared one cost about the same. */
static uint32_t next_graphics(uint32_t *idx, uint32_t parity) {
  while (bench_pipeset_is_compute(set, *idx) || (*idx & 1) != parity)
    (*idx)++;
  return (*idx)++;
}

static void misses(uint32_t first, unsigned threads) {
  uint64_t *waits = calloc((size_t)MISS_ROUNDS * threads, sizeof *waits), lone = 0, first_ns = 0,
           last_ns = 0;
  worker *w = calloc(threads, sizeof *w);
  pcache_stats before, after;
  size_t n = 0;
  uint32_t idx = first;

  if (!waits || !w)
    bench_die("out of memory");
  pcache_device_get_stats(pdev, &before);
  for (int r = 0; r < MISS_ROUNDS; r++) {
    worker solo = {.kind = 2};
    uint64_t lo = UINT64_MAX, hi = 0;
    /* A lone compile of one fresh pipeline, then all threads on another
     * of the same shader set. */
    solo.miss_index = next_graphics(&idx, (uint32_t)r & 1);
    run_workers(&solo, 1);
    lone += solo.ns;
    uint32_t shared = next_graphics(&idx, (uint32_t)r & 1);
    for (unsigned i = 0; i < threads; i++)
      w[i] = (worker){.kind = 2, .miss_index = shared};
    run_workers(w, threads);
    for (unsigned i = 0; i < threads; i++) {
      waits[n++] = w[i].ns;
      lo = w[i].ns < lo ? w[i].ns : lo;
      hi = w[i].ns > hi ? w[i].ns : hi;
    }
    /* Waiters return when the pipeline is published; the compiling
     * thread returns after its own bookkeeping (cache data, upload queue),
     * so it is not always the first back. */
    first_ns += lo;
    last_ns += hi;
  }
  pcache_device_get_stats(pdev, &after);
  bench_kv_u64("miss_", "threads", threads);
  bench_kv_f("miss_", "lone_compile_ms", (double)lone / MISS_ROUNDS / 1e6);
  bench_kv_f("miss_", "wait_p50_ms", (double)bench_percentile(waits, n, 0.5) / 1e6);
  bench_kv_f("miss_", "wait_max_ms", (double)waits[n - 1] / 1e6);
  bench_kv_f("miss_", "first_return_ms", (double)first_ns / MISS_ROUNDS / 1e6);
  bench_kv_f("miss_", "last_return_ms", (double)last_ns / MISS_ROUNDS / 1e6);
  /* 2 per round (the lone one and the shared one) when concurrent misses
   * of one key compile once. */
  bench_kv_u64("miss_", "compiles", after.compiles - before.compiles);
  bench_kv_u64("miss_", "expected_compiles", 2 * MISS_ROUNDS);
  free(waits);
  free(w);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {{"threads", required_argument, NULL, 't'},
                                           {"tier-iters", required_argument, NULL, 'k'},
                                           {"info-iters", required_argument, NULL, 'i'},
                                           {NULL, 0, NULL, 0}};
  unsigned threads = bench_ncpus();
  pcache_client_options copt = {.app_name = "pcache-bench-tiers", .disable_daemon = 1};
  pcache_client *client = NULL;
  bench_vk vk;
  int c, r;

  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 't': threads = (unsigned)atoi(optarg); break;
    case 'k': tier_iters = strtoull(optarg, NULL, 10); break;
    case 'i': info_iters = strtoull(optarg, NULL, 10); break;
    default:
      fprintf(stderr, "usage: bench_tiers [--threads N] [--tier-iters N] [--info-iters N]\n");
      return 2;
    }
  }
  if (threads < 2)
    threads = 2; /* a miss needs someone to wait */

  bench_vk_init(&vk, "pcache-bench-tiers");
  pcache_device_info info = {.instance = vk.instance,
                             .physical_device = vk.physical_device,
                             .device = vk.device,
                             .creation_feedback = vk.creation_feedback,
                             .instance_api_version = VK_API_VERSION_1_3 /* pipeset.c asks 1.3 */};
  if ((r = pcache_client_open(&copt, &client)) < 0 ||
      (r = pcache_device_create(client, &info, &pdev)) < 0)
    bench_die("pcache set-up: %s", pcache_strerror(r));
  set = bench_pipeset_create(&vk, pdev, N_HOT + 4 * MISS_ROUNDS + 8);
  if ((r = pcache_device_select_tier(pdev, 1, &tier)) < 0)
    bench_die("pcache_device_select_tier: %s", pcache_strerror(r));
  for (uint32_t i = 0; i < N_HOT; i++) {
    VkPipeline p;
    if (bench_pipeset_is_compute(set, i))
      continue;
    if (pcache_tier_get_graphics_pipeline(tier, i, bench_pipeset_graphics(set, i), &p) !=
        VK_SUCCESS)
      bench_die("pipeline %u failed", i);
    hot[n_hot++] = i;
  }
  /* Publish, so hits take the lock-free path. */
  pcache_device_end_frame(pdev);
  for (uint32_t i = 0; i < n_hot; i++)
    if (pcache_tier_lookup(tier, hot[i]) == VK_NULL_HANDLE)
      bench_die("tier lookup of key %u missed after end_frame", hot[i]);

  bench_kv_str(NULL, "device_name", vk.props.deviceName);
  bench_kv_u64(NULL, "cpus", bench_ncpus());
  bench_kv_u64(NULL, "hot_pipelines", n_hot);
  hits("tier_hit", 0, tier_iters, threads);
  hits("info_hit", 1, info_iters, threads);
  misses(N_HOT, threads);

  bench_pipeset_destroy(set);
  pcache_device_destroy(pdev);
  pcache_client_close(client);
  bench_vk_fini(&vk);
  return 0;
}
