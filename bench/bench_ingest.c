/* bench_ingest - durable Puts per second: each client sends one item per
 * Put and waits for the acknowledgement, which pcached gives only after the
 * transaction commits. Clients are threads with their own connections, so
 * concurrent Puts can share a commit (group commit). Results are key=value
 * lines on stdout. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_entry.h"
#include "bench_util.h"

static const char *socket_path;
static double seconds = 2.0;
static size_t blob_size = 20480;
static uint64_t start_index = 100000000;
static pcache__devkey devkey;

typedef struct worker {
  unsigned id;
  bench_barrier *barrier;
  uint64_t deadline;
  uint64_t done;
  uint64_t *lat;
  size_t lat_cap;
  int error;
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  pcache__transport *t = bench_connect(socket_path, "bench-ingest");
  bench_put_item item;
  bench_barrier_wait(w->barrier);
  while (bench_now_ns() < w->deadline && w->done < w->lat_cap) {
    uint64_t index = start_index + (uint64_t)w->id * 10000000u + w->done, t0;
    int r;
    bench_put_item_make(&item, &devkey, index, blob_size);
    t0 = bench_now_ns();
    r = bench_put(t, &devkey, &item, 1, 10000);
    w->lat[w->done] = bench_now_ns() - t0;
    free(item.blob);
    if (r < 0) {
      w->error = r;
      break;
    }
    w->done++;
  }
  pcache__transport_close(t);
  return NULL;
}

static void run(unsigned clients) {
  worker *w = calloc(clients, sizeof *w);
  bench_barrier *barrier = bench_barrier_new(clients + 1);
  size_t cap = 2000000 / clients;
  uint64_t total = 0, *all, wall;
  char prefix[32];

  if (!w)
    bench_die("out of memory");
  for (unsigned i = 0; i < clients; i++) {
    w[i].id = i;
    w[i].barrier = barrier;
    w[i].lat_cap = cap;
    w[i].lat = malloc(cap * sizeof(uint64_t));
    if (!w[i].lat)
      bench_die("out of memory");
  }
  /* The deadline is set before the threads start; connecting is quick
   * next to the run. */
  for (unsigned i = 0; i < clients; i++)
    w[i].deadline = bench_now_ns() + (uint64_t)(seconds * 1e9);
  wall = bench_run_threads(worker_main, w, sizeof *w, clients, barrier);
  for (unsigned i = 0; i < clients; i++) {
    if (w[i].error)
      bench_die("put: %s", pcache_strerror(w[i].error));
    total += w[i].done;
  }
  all = malloc((total ? total : 1) * sizeof *all);
  if (!all)
    bench_die("out of memory");
  total = 0;
  for (unsigned i = 0; i < clients; i++) {
    memcpy(all + total, w[i].lat, w[i].done * sizeof *all);
    total += w[i].done;
    free(w[i].lat);
  }
  snprintf(prefix, sizeof prefix, "ingest_c%u_", clients);
  bench_kv_u64(prefix, "puts", total);
  bench_kv_f(prefix, "puts_per_s", (double)total * 1e9 / (double)wall);
  bench_kv_f(prefix, "p50_us", (double)bench_percentile(all, total, 0.50) / 1e3);
  bench_kv_f(prefix, "p99_us", (double)bench_percentile(all, total, 0.99) / 1e3);
  start_index += 100000000; /* the next run stores new entries */
  free(all);
  free(w);
  bench_barrier_free(barrier);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {{"socket", required_argument, NULL, 's'},
                                           {"clients", required_argument, NULL, 'c'},
                                           {"seconds", required_argument, NULL, 't'},
                                           {"size", required_argument, NULL, 'b'},
                                           {NULL, 0, NULL, 0}};
  const char *list = "1,8";
  unsigned clients[8];
  size_t n;
  int c;

  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 's': socket_path = optarg; break;
    case 'c': list = optarg; break;
    case 't': seconds = atof(optarg); break;
    case 'b': blob_size = strtoull(optarg, NULL, 10); break;
    default:
      fprintf(stderr, "usage: bench_ingest [--socket PATH] [--clients 1,8] [--seconds S] "
                      "[--size BYTES]\n");
      return 2;
    }
  }
  if (blob_size < 64)
    bench_die("--size must be at least 64");
  socket_path = bench_socket_path(socket_path);
  bench_entry_devkey(&devkey);
  bench_kv_u64(NULL, "ingest_blob_bytes", blob_size);
  n = bench_parse_list(list, clients, 8);
  for (size_t i = 0; i < n; i++)
    if (clients[i] > 0)
      run(clients[i]);
  return 0;
}
