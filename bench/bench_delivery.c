/* bench_delivery - how fast pcached hands blobs to clients.
 *
 *   Get:      one Get of one blob, p50/p99 latency, with 1 and 8 clients
 *             (threads, each with its own connection): the blob through
 *             the socket (get_c<N>_), and through the connection's reply
 *             window, copied out of it as libpcache does (get_window_c<N>_;
 *             docs/protocol.md "Reply window"). --window off|on|both.
 *   Prefetch: every entry of the app, page after page (GetReply.more: a
 *             page carries at most the client's reply budget), end to end:
 *             the replies, mapping each memfd, and checksumming every byte,
 *             as libpcache does before a blob reaches the driver (GB/s).
 *   Get all:  every entry through Gets of max_hashes hashes each, asking
 *             again for what a reply with `more` left out (GB/s).
 *   Files:    the reference: the same blobs as one file per entry (how
 *             driver disk caches store them), open/read/close each into
 *             fresh memory and checksum it (GB/s). Both are warm.
 *   Segment:  the app's shared-memory segment: the first request (which
 *             builds it), then the effective prefetch as a client does it:
 *             one Segment request, mapping and checking the tables, and
 *             checksumming every blob (GB/s); and a lookup of one blob in
 *             the mapped index (ns).
 *   RSS:      with --rss-pid, pcached's RssAnon after the prefetch.
 *
 * Results are key=value lines on stdout. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_entry.h"
#include "bench_util.h"
#include "common/clock.h"
#include "proto/segment.h"

typedef struct options {
  const char *socket_path;
  const char *app;
  const char *files_dir;
  const char *prefix;
  uint64_t count;
  size_t size;
  int fill;
  unsigned clients[8];
  size_t n_clients;
  uint64_t gets;
  unsigned prefetch_reps;
  long rss_pid;
  int window_off, window_on; /* --window: the Get through the socket, the window */
} options;

static options opt = {
    .app = "bench-delivery",
    .prefix = "",
    .count = 10000,
    .size = 20480,
    .gets = 20000,
    .prefetch_reps = 3,
    .window_off = 1,
    .window_on = 1,
};

static pcache__devkey devkey;

/* ------------------------------------------------------------------ fill */

static void fill(void) {
  enum { BATCH = 64 };
  bench_put_item items[BATCH];
  pcache__transport *t = bench_connect(opt.socket_path, opt.app);
  uint64_t t0 = bench_now_ns();
  for (uint64_t base = 0; base < opt.count; base += BATCH) {
    size_t n = opt.count - base < BATCH ? (size_t)(opt.count - base) : BATCH;
    int r;
    for (size_t i = 0; i < n; i++)
      bench_put_item_make(&items[i], &devkey, base + i, opt.size);
    r = bench_put(t, &devkey, items, n, 30000);
    for (size_t i = 0; i < n; i++)
      free(items[i].blob);
    if (r < 0)
      bench_die("fill: Put of entries %llu..: %s", (unsigned long long)base, pcache_strerror(r));
  }
  bench_kv_f(opt.prefix, "fill_s", (double)(bench_now_ns() - t0) / 1e9);
  bench_kv_u64(opt.prefix, "entries", opt.count);
  bench_kv_u64(opt.prefix, "blob_bytes", opt.size);
  pcache__transport_close(t);
}

/* ------------------------------------------------------------------- get */

typedef struct get_worker {
  unsigned id;
  int window; /* through a reply window */
  uint64_t iters;
  uint64_t *lat;
  uint64_t windowed; /* replies whose blob came through the window */
  bench_barrier *barrier;
  int error;
} get_worker;

static void *get_main(void *arg) {
  get_worker *w = arg;
  pcache__transport *t = bench_connect(opt.socket_path, opt.app);
  uint64_t x = 0x1234567 + w->id * 7919;
  int opened = w->window ? pcache__transport_open_window(t, pcache__mono_ms() + 5000) : 0;
  if (opened < 0 || (w->window && opened == 0))
    bench_die("get: the daemon gave no reply window (%s)",
              opened < 0 ? pcache_strerror(opened) : "none");
  bench_barrier_wait(w->barrier);
  for (uint64_t k = 0; k < w->iters; k++) {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Get get = PCACHEPB__GET__INIT;
    ProtobufCBinaryData hb;
    pcache__hash h;
    pcache__reply reply = {0};
    uint64_t t0;
    int r;

    x = x * 6364136223846793005ull + 1442695040888963407ull;
    bench_entry_hash((x >> 33) % opt.count, &h);
    hb = (ProtobufCBinaryData){PCACHE_HASH_SIZE, h.bytes};
    get.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, devkey.bytes};
    get.n_state_hashes = 1;
    get.state_hashes = &hb;
    req.body_case = PCACHEPB__REQUEST__BODY_GET;
    req.get = &get;
    t0 = bench_now_ns();
    r = pcache__transport_rpc(t, &req, PCACHEPB__RESPONSE__BODY_GET, pcache__mono_ms() + 5000,
                              &reply);
    if (r == 0 && reply.response->get->n_blobs != 1)
      r = PCACHE_ENOT_FOUND;
    w->windowed += reply.bulk_owned;
    pcache__reply_release(&reply);
    w->lat[k] = bench_now_ns() - t0;
    if (r < 0) {
      w->error = r;
      break;
    }
  }
  pcache__transport_close(t);
  return NULL;
}

static void bench_get(unsigned clients, int window) {
  get_worker *w = calloc(clients, sizeof *w);
  uint64_t per = opt.gets / clients, total = per * clients, windowed = 0;
  uint64_t *all = malloc(total * sizeof *all);
  bench_barrier *barrier = bench_barrier_new(clients + 1);
  char prefix[64];
  uint64_t wall;

  if (!w || !all)
    bench_die("out of memory");
  for (unsigned i = 0; i < clients; i++) {
    w[i] = (get_worker){
        .id = i, .window = window, .iters = per, .lat = all + i * per, .barrier = barrier};
  }
  wall = bench_run_threads(get_main, w, sizeof *w, clients, barrier);
  for (unsigned i = 0; i < clients; i++) {
    if (w[i].error)
      bench_die("get: %s", pcache_strerror(w[i].error));
    windowed += w[i].windowed;
  }
  snprintf(prefix, sizeof prefix, "%sget_%sc%u_", opt.prefix, window ? "window_" : "", clients);
  bench_kv_u64(prefix, "requests", total);
  bench_kv_f(prefix, "p50_us", (double)bench_percentile(all, total, 0.50) / 1e3);
  bench_kv_f(prefix, "p99_us", (double)bench_percentile(all, total, 0.99) / 1e3);
  bench_kv_f(prefix, "max_us", (double)all[total - 1] / 1e3);
  bench_kv_f(prefix, "per_s", (double)total * 1e9 / (double)wall);
  bench_kv_u64(prefix, "through_window", windowed);
  bench_barrier_free(barrier);
  free(all);
  free(w);
}

/* -------------------------------------------------------------- prefetch */

/* Checksums every blob of a Get or Prefetch reply, as the client does;
 * returns their bytes. */
static uint64_t check_blobs(const pcache__reply *reply, const Pcachepb__GetReply *gr,
                            const char *what) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < gr->n_blobs; i++) {
    const Pcachepb__Blob *b = gr->blobs[i];
    size_t size;
    const uint8_t *p = pcache__reply_bytes(reply, b->blob, b->blob_offset, b->blob_size, &size);
    /* The checksum reads every byte, as the client's check does. */
    if (!p || pcache__checksum64(p, size) != b->checksum)
      bench_die("%s: a blob failed its checksum", what);
    bytes += size;
  }
  return bytes;
}

static void bench_prefetch(void) {
  pcache__transport *t = bench_connect(opt.socket_path, opt.app);
  double best = 0;
  uint64_t got = 0, bytes = 0, pages = 0, best_ns = 0, best_call_ns = 0, first_ns = 0;

  for (unsigned rep = 0; rep < opt.prefetch_reps + 1; rep++) {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
    uint64_t t0 = bench_now_ns(), ns, call_ns = 0;
    int more = 1;

    pf.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, devkey.bytes};
    req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
    req.prefetch = &pf;
    got = bytes = pages = 0;
    while (more) {
      pcache__reply reply = {0};
      const Pcachepb__GetReply *gr;
      uint64_t c0 = bench_now_ns();
      int r = pcache__transport_rpc(t, &req, PCACHEPB__RESPONSE__BODY_PREFETCH,
                                    pcache__mono_ms() + 60000, &reply);
      call_ns += bench_now_ns() - c0;
      if (r < 0)
        bench_die("prefetch: %s", pcache__reply_why(&reply, r));
      gr = reply.response->prefetch;
      bytes += check_blobs(&reply, gr, "prefetch");
      got += gr->n_blobs;
      pages++;
      more = gr->more && gr->n_blobs + gr->dropped > 0;
      pf.offset += (uint32_t)(gr->n_blobs + gr->dropped);
      pcache__reply_release(&reply);
    }
    ns = bench_now_ns() - t0;
    if (rep == 0)
      first_ns = ns;
    /* The first round warms the daemon's page cache and is not counted
     * among the best (against a fleet member with an empty store, it is
     * the one that fetches, checks and stores every entry: prefetch_first_ms). */
    if (rep > 0 && (best == 0 || (double)bytes / (double)ns > best)) {
      best = (double)bytes / (double)ns;
      best_ns = ns;
      best_call_ns = call_ns;
    }
  }
  bench_kv_u64(opt.prefix, "prefetch_entries", got);
  bench_kv_u64(opt.prefix, "prefetch_pages", pages);
  /* The requests and replies; the rest is the client reading every byte. */
  bench_kv_f(opt.prefix, "prefetch_call_ms", (double)best_call_ns / 1e6);
  bench_kv_u64(opt.prefix, "prefetch_bytes", bytes);
  bench_kv_f(opt.prefix, "prefetch_ms", (double)best_ns / 1e6);
  bench_kv_f(opt.prefix, "prefetch_gbps", best);
  bench_kv_f(opt.prefix, "prefetch_first_ms", (double)first_ns / 1e6);
  pcache__transport_close(t);
}

/* --------------------------------------------------------------- get all */

/* Every entry through Gets of the daemon's largest batch (max_hashes, from
 * its Hello). A reply stops at the client's reply budget with `more` set:
 * the hashes after its blobs and misses are asked for again. */
static void bench_get_all(void) {
  pcache__transport *t = bench_connect(opt.socket_path, opt.app);
  const Pcachepb__HelloReply *hello = pcache__transport_hello(t);
  uint32_t batch = hello && hello->max_hashes ? hello->max_hashes : 1024;
  pcache__hash *hashes = malloc(opt.count * sizeof *hashes);
  ProtobufCBinaryData *hb = malloc((size_t)batch * sizeof *hb);
  double best = 0;
  uint64_t best_ns = 0, got = 0, bytes = 0, calls = 0;

  if (!hashes || !hb)
    bench_die("out of memory");
  for (uint64_t i = 0; i < opt.count; i++)
    bench_entry_hash(i, &hashes[i]);
  for (unsigned rep = 0; rep < opt.prefetch_reps + 1; rep++) {
    uint64_t t0 = bench_now_ns(), ns;
    got = bytes = calls = 0;
    for (uint64_t base = 0; base < opt.count;) {
      Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
      Pcachepb__Get get = PCACHEPB__GET__INIT;
      pcache__reply reply = {0};
      size_t n = opt.count - base < batch ? (size_t)(opt.count - base) : batch;
      const Pcachepb__GetReply *gr;
      size_t answered;
      int r;
      for (size_t i = 0; i < n; i++)
        hb[i] = (ProtobufCBinaryData){PCACHE_HASH_SIZE, hashes[base + i].bytes};
      get.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, devkey.bytes};
      get.n_state_hashes = n;
      get.state_hashes = hb;
      req.body_case = PCACHEPB__REQUEST__BODY_GET;
      req.get = &get;
      r = pcache__transport_rpc(t, &req, PCACHEPB__RESPONSE__BODY_GET, pcache__mono_ms() + 60000,
                                &reply);
      if (r < 0)
        bench_die("get all: %s", pcache__reply_why(&reply, r));
      gr = reply.response->get;
      bytes += check_blobs(&reply, gr, "get all");
      got += gr->n_blobs;
      calls++;
      /* The hashes are distinct: blobs and misses are the first ones
       * asked for, and `more` leaves the rest for the next Get. */
      answered = gr->n_blobs + gr->n_missing;
      if (answered == 0 || (!gr->more && answered != n))
        bench_die("get all: a reply answered %zu of %zu hashes", answered, n);
      base += answered;
      pcache__reply_release(&reply);
    }
    ns = bench_now_ns() - t0;
    if (rep > 0 && (best == 0 || (double)bytes / (double)ns > best)) {
      best = (double)bytes / (double)ns;
      best_ns = ns;
    }
  }
  bench_kv_u64(opt.prefix, "getall_batch", batch);
  bench_kv_u64(opt.prefix, "getall_entries", got);
  bench_kv_u64(opt.prefix, "getall_calls", calls);
  bench_kv_f(opt.prefix, "getall_ms", (double)best_ns / 1e6);
  bench_kv_f(opt.prefix, "getall_gbps", best);
  free(hb);
  free(hashes);
  pcache__transport_close(t);
}

/* -------------------------------------------------------------- segment */

/* One Segment request and its mapping; dies unless there is one. */
static void segment_map(pcache__transport *t, pcache__seg_map *ret, uint64_t *ret_call_ns) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Segment sg = PCACHEPB__SEGMENT__INIT;
  pcache__reply reply = {0};
  const char *why = "";
  uint64_t t0 = bench_now_ns();
  int r;
  sg.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, devkey.bytes};
  sg.wait = 1; /* measures the build too, where there is one */
  req.body_case = PCACHEPB__REQUEST__BODY_SEGMENT;
  req.segment = &sg;
  r = pcache__transport_rpc(t, &req, PCACHEPB__RESPONSE__BODY_SEGMENT, pcache__mono_ms() + 60000,
                            &reply);
  *ret_call_ns = bench_now_ns() - t0;
  if (r < 0 || !reply.has_passed_fd)
    bench_die("segment: %s", r < 0 ? pcache__reply_why(&reply, r) : "none handed out");
  r = pcache__seg_map_open(reply.passed_fd, reply.response->segment->size, &devkey, 1, ret, &why);
  if (r < 0)
    bench_die("segment refused: %s", r == PCACHE_EPROTO ? why : pcache_strerror(r));
  pcache__reply_release(&reply);
}

static void bench_segment(void) {
  pcache__transport *t = bench_connect(opt.socket_path, opt.app);
  pcache__seg_map m;
  pcache__hash *hashes = malloc(opt.count * sizeof *hashes);
  double best = 0;
  uint64_t build_ns, best_ns = 0, best_call_ns = 0, bytes = 0, found = 0, t0, lookups = 1000000;
  uint64_t x = 0x9e3779b97f4a7c15ull;

  if (!hashes)
    bench_die("out of memory");
  /* The first request builds the segment (the store's pages are warm
   * from the runs before). */
  segment_map(t, &m, &build_ns);
  pcache__seg_map_close(&m);
  for (unsigned rep = 0; rep < opt.prefetch_reps + 1; rep++) {
    uint64_t call_ns, ns;
    t0 = bench_now_ns();
    segment_map(t, &m, &call_ns);
    bytes = 0;
    for (uint32_t i = 0; i < m.seg.n_entries; i++) {
      pcache__seg_blob b;
      pcache__seg_at(&m.seg, i, &b);
      if (pcache__checksum64(b.data, b.size) != b.checksum)
        bench_die("segment: a blob failed its checksum");
      bytes += b.size;
    }
    ns = bench_now_ns() - t0;
    if (rep > 0 && (best == 0 || (double)bytes / (double)ns > best)) {
      best = (double)bytes / (double)ns;
      best_ns = ns;
      best_call_ns = call_ns;
    }
    if (rep < opt.prefetch_reps)
      pcache__seg_map_close(&m);
  }
  /* Lookups of random entries in the last mapping, as a miss does. */
  for (uint64_t i = 0; i < opt.count; i++)
    bench_entry_hash(i, &hashes[i]);
  t0 = bench_now_ns();
  for (uint64_t i = 0; i < lookups; i++) {
    pcache__seg_blob b;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    found += (uint64_t)pcache__seg_find(&m.seg, hashes[(x >> 33) % opt.count].bytes, &b);
  }
  bench_kv_f(opt.prefix, "seg_lookup_ns", (double)(bench_now_ns() - t0) / (double)lookups);
  bench_kv_u64(opt.prefix, "seg_lookup_found", found);
  bench_kv_u64(opt.prefix, "seg_entries", m.seg.n_entries);
  bench_kv_u64(opt.prefix, "seg_bytes", m.map_size);
  bench_kv_f(opt.prefix, "seg_build_ms", (double)build_ns / 1e6);
  bench_kv_f(opt.prefix, "seg_call_ms", (double)best_call_ns / 1e6);
  bench_kv_f(opt.prefix, "seg_prefetch_ms", (double)best_ns / 1e6);
  bench_kv_f(opt.prefix, "seg_prefetch_gbps", best);
  pcache__seg_map_close(&m);
  free(hashes);
  pcache__transport_close(t);
}

/* ---------------------------------------------------------------- files */

static void file_path(char *out, size_t size, uint64_t index) {
  pcache__hash h;
  char hex[33];
  bench_entry_hash(index, &h);
  pcache__hash_format(&h, hex);
  /* Mesa's layout: a two-digit directory, then the rest of the key. */
  snprintf(out, size, "%s/%.2s/%s", opt.files_dir, hex, hex + 2);
}

static void bench_files(void) {
  uint8_t *blob = malloc(opt.size);
  char path[512];
  double best = 0;
  uint64_t best_ns = 0, bytes = 0;

  if (!blob)
    bench_die("out of memory");
  if (mkdir(opt.files_dir, 0700) < 0 && errno != EEXIST)
    bench_die("mkdir %s: %s", opt.files_dir, strerror(errno));
  for (unsigned d = 0; d < 256; d++) {
    snprintf(path, sizeof path, "%s/%02x", opt.files_dir, d);
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
      bench_die("mkdir %s: %s", path, strerror(errno));
  }
  for (uint64_t i = 0; i < opt.count; i++) {
    int fd;
    file_path(path, sizeof path, i);
    bench_entry_blob(&devkey, i, blob, opt.size);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, blob, opt.size) != (ssize_t)opt.size)
      bench_die("write %s: %s", path, strerror(errno));
    close(fd);
  }
  free(blob);

  for (unsigned rep = 0; rep < opt.prefetch_reps + 1; rep++) {
    uint64_t t0 = bench_now_ns(), ns, sum = 0;
    bytes = 0;
    for (uint64_t i = 0; i < opt.count; i++) {
      struct stat st;
      uint8_t *buf;
      int fd;
      /* Path building is part of the driver's lookup too. */
      file_path(path, sizeof path, i);
      fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || fstat(fd, &st) < 0)
        bench_die("open %s: %s", path, strerror(errno));
      buf = malloc((size_t)st.st_size);
      if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
        bench_die("read %s: %s", path, strerror(errno));
      close(fd);
      sum += pcache__checksum64(buf, (size_t)st.st_size);
      bytes += (uint64_t)st.st_size;
      free(buf);
    }
    ns = bench_now_ns() - t0;
    if (sum == 42)
      fputc(' ', stderr); /* keep the checksums from being optimized out */
    if (rep > 0 && (best == 0 || (double)bytes / (double)ns > best)) {
      best = (double)bytes / (double)ns;
      best_ns = ns;
    }
  }
  bench_kv_u64(opt.prefix, "files_entries", opt.count);
  bench_kv_f(opt.prefix, "files_ms", (double)best_ns / 1e6);
  bench_kv_f(opt.prefix, "files_gbps", best);
}

/* ------------------------------------------------------------------ rss */

static void print_rss(long pid, const char *suffix) {
  char path[64], line[256], key[64];
  FILE *f;
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  f = fopen(path, "r");
  if (!f)
    bench_die("%s: %s", path, strerror(errno));
  while (fgets(line, sizeof line, f)) {
    static const struct {
      const char *field, *key;
    } keys[] = {{"RssAnon:", "rss_anon_kib"},
                {"RssFile:", "rss_file_kib"},
                {"RssShmem:", "rss_shmem_kib"},
                {"VmHWM:", "vm_hwm_kib"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
      size_t n = strlen(keys[i].field);
      if (strncmp(line, keys[i].field, n) == 0) {
        snprintf(key, sizeof key, "%s%s", keys[i].key, suffix);
        bench_kv_u64(NULL, key, strtoull(line + n, NULL, 10));
      }
    }
  }
  fclose(f);
}

static void usage(void) {
  fprintf(stderr,
          "usage: bench_delivery [--socket PATH] [--count N] [--size BYTES] [--fill]\n"
          "         [--clients 1,8] [--gets N] [--prefetch-reps N] [--files-dir DIR]\n"
          "         [--rss-pid PID] [--prefix STR] [--app NAME] [--window off|on|both]\n"
          "  --clients 0 skips the Get test; --prefetch-reps 0 skips prefetch and files;\n"
          "  --window: the Get through the socket, through a reply window, or both (both).\n");
  exit(2);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"socket", required_argument, NULL, 's'},        {"count", required_argument, NULL, 'n'},
      {"size", required_argument, NULL, 'b'},          {"fill", no_argument, NULL, 'f'},
      {"clients", required_argument, NULL, 'c'},       {"gets", required_argument, NULL, 'g'},
      {"prefetch-reps", required_argument, NULL, 'r'}, {"files-dir", required_argument, NULL, 'd'},
      {"rss-pid", required_argument, NULL, 'p'},       {"prefix", required_argument, NULL, 'x'},
      {"app", required_argument, NULL, 'a'},           {"help", no_argument, NULL, 'h'},
      {"window", required_argument, NULL, 'w'},        {NULL, 0, NULL, 0}};
  const char *clients = "1,8";
  int c;

  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 's': opt.socket_path = optarg; break;
    case 'n': opt.count = strtoull(optarg, NULL, 10); break;
    case 'b': opt.size = strtoull(optarg, NULL, 10); break;
    case 'f': opt.fill = 1; break;
    case 'c': clients = optarg; break;
    case 'g': opt.gets = strtoull(optarg, NULL, 10); break;
    case 'r': opt.prefetch_reps = (unsigned)atoi(optarg); break;
    case 'd': opt.files_dir = optarg; break;
    case 'p': opt.rss_pid = atol(optarg); break;
    case 'x': opt.prefix = optarg; break;
    case 'a': opt.app = optarg; break;
    case 'w':
      opt.window_off = strcmp(optarg, "on") != 0;
      opt.window_on = strcmp(optarg, "off") != 0;
      if (!strcmp(optarg, "on") + !strcmp(optarg, "off") + !strcmp(optarg, "both") != 1)
        usage();
      break;
    default: usage();
    }
  }
  if (opt.count == 0 || opt.size < 64)
    usage();
  opt.socket_path = bench_socket_path(opt.socket_path);
  opt.n_clients = bench_parse_list(clients, opt.clients, 8);
  bench_entry_devkey(&devkey);

  if (opt.fill)
    fill();
  for (size_t i = 0; i < opt.n_clients; i++) {
    if (opt.clients[i] > 0 && opt.window_off)
      bench_get(opt.clients[i], 0);
    if (opt.clients[i] > 0 && opt.window_on)
      bench_get(opt.clients[i], 1);
  }
  if (opt.rss_pid > 0)
    print_rss(opt.rss_pid, "_before");
  if (opt.prefetch_reps > 0) {
    bench_prefetch();
    bench_segment();
    bench_get_all();
    if (opt.files_dir)
      bench_files();
  }
  /* After a Prefetch and a read of every entry: what the daemon kept. */
  if (opt.rss_pid > 0)
    print_rss(opt.rss_pid, "");
  return 0;
}
