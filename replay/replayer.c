/* pcache-replay: rebuilds stored pipelines for a new driver (docs/replay.md).
 * pcached starts it with the new device key and supervises it; it asks the
 * daemon for one item at a time per thread (ReplayClaim, which also reports
 * the last one: the daemon so knows which item a crash interrupted), builds
 * it on the device (replay_vk.c), and uploads the blob with an ordinary Put,
 * which the daemon validates as any other.
 *
 * It keeps out of the user's way: nice 19, SCHED_IDLE, idle I/O class, at
 * most --threads builds at once (16), one build at a time with a pause
 * after each while /proc/pressure/cpu says tasks wait for a CPU, and none
 * while the daemon says a client is busy. Its memory is one item per
 * thread; when the driver's own grows past PCACHE_REPLAY_MAX_RSS_MB it
 * reports what it did and exits, and pcached starts a fresh one.
 *
 * Exit codes: 0 done (nothing left to hand out), 1 error, 2 usage,
 * 3 no Vulkan device has the key, 4 memory bound reached. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/paths.h"
#include "proto/transport.h"
#include "replay_vk.h"

#define EXIT_NO_DEVICE 3
#define EXIT_RECYCLE 4
#define MAX_THREADS 16
#define RPC_TIMEOUT_MS 30000

typedef struct replayer {
  const char *socket_path;
  pcache__devkey key;
  pcache__replay_vk *vk;
  unsigned threads;
  uint64_t max_rss;
  double psi_low;             /* avg10 % from which builds are throttled */
  atomic_uint throttle_ms;    /* the pause after each build; 0: none */
  atomic_int pressured;       /* threads past the first wait */
  atomic_int stop;            /* memory bound reached: report and exit */
  atomic_int failed;          /* a thread lost its connection */
  atomic_int finished;        /* the daemon has nothing more to hand out */
  const char *crash_hash;     /* test hook: PCACHE_REPLAY_TEST_CRASH */
  const char *hang_hash;      /* test hook: PCACHE_REPLAY_TEST_HANG */
  uint32_t delay_ms;          /* test hook: PCACHE_REPLAY_TEST_DELAY_MS */
  atomic_ullong built;
} replayer;

static void sleep_ms(uint32_t ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* The lowest CPU and I/O priority there is for an unprivileged process. */
static void be_nice(void) {
  struct sched_param sp = {0};
  if (setpriority(PRIO_PROCESS, 0, 19) < 0)
    log_debug("replay: setpriority: %s", strerror(errno));
  if (sched_setscheduler(0, SCHED_IDLE, &sp) < 0)
    log_debug("replay: SCHED_IDLE: %s", strerror(errno));
  /* ioprio_set(IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << 13): glibc has
   * no wrapper. */
  if (syscall(SYS_ioprio_set, 1, 0, 3 << 13) < 0)
    log_debug("replay: ioprio_set: %s", strerror(errno));
}

static uint64_t rss_bytes(void) {
  unsigned long size, resident;
  FILE *f = fopen("/proc/self/statm", "r");
  int ok;
  if (!f)
    return 0;
  ok = fscanf(f, "%lu %lu", &size, &resident) == 2;
  fclose(f);
  return ok ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* "some avg10=X" of /proc/pressure/cpu: the share of the last 10 s in
 * which some task waited for a CPU. -1 without PSI. */
static double cpu_pressure(void) {
  char line[256];
  double v = -1;
  FILE *f = fopen("/proc/pressure/cpu", "r");
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "some ", 5) == 0 && sscanf(line, "some avg10=%lf", &v) == 1)
      break;
  fclose(f);
  return v;
}

/* Every half second: from psi_low up, one build at a time, and after
 * each a pause that grows with the pressure (20 ms per point over the
 * threshold, at most 2 s). */
static void *psi_main(void *arg) {
  replayer *rp = arg;
  while (!atomic_load(&rp->stop) && !atomic_load(&rp->failed)) {
    double p = cpu_pressure();
    unsigned ms = 0;
    if (p >= rp->psi_low) {
      double d = (p - rp->psi_low) * 20 + 20;
      ms = d > 2000 ? 2000 : (unsigned)d;
    }
    atomic_store(&rp->throttle_ms, ms);
    atomic_store(&rp->pressured, ms > 0);
    sleep_ms(500);
  }
  return NULL;
}

typedef struct worker {
  replayer *rp;
  unsigned index;
  pthread_t thread;
  pcache__transport *t;
  /* The last item's result, sent with the next claim. */
  Pcachepb__ReplayResult result;
  uint8_t result_hash[PCACHE_HASH_SIZE];
  char result_msg[160];
  int have_result;
  int done;
} worker;

static int put_blob(worker *w, const Pcachepb__ReplayItem *item, const uint8_t *blob, size_t size,
                    uint64_t ns, char *msg, size_t msg_size) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Put put = PCACHEPB__PUT__INIT;
  Pcachepb__PutItem it = PCACHEPB__PUT_ITEM__INIT, *items[1] = {&it};
  pcache__reply reply = {0};
  int r;
  put.device = (Pcachepb__DeviceInfo *)pcache__replay_vk_info(w->rp->vk);
  put.items = items;
  put.n_items = 1;
  put.app = item->app;
  it.state_hash = item->state_hash;
  it.kind = item->kind;
  it.blob.data = (uint8_t *)blob;
  it.blob.len = size;
  it.desc = item->desc;
  it.compile_ns = ns;
  req.body_case = PCACHEPB__REQUEST__BODY_PUT;
  req.put = &put;
  r = pcache__transport_rpc(w->t, &req, PCACHEPB__RESPONSE__BODY_PUT,
                            pcache__mono_ms() + RPC_TIMEOUT_MS, &reply);
  if (r == 0 && reply.response->put->n_results == 1)
    r = reply.response->put->results[0]->status;
  if (r < 0)
    snprintf(msg, msg_size, "upload refused: %s",
             reply.response && reply.response->put && reply.response->put->n_results
                 ? reply.response->put->results[0]->message
                 : pcache__reply_why(&reply, r));
  pcache__reply_release(&reply);
  return r;
}

/* The test-only crash hook (docs/replay.md): dies on an item whose state
 * hash, in hex, starts with PCACHE_REPLAY_TEST_CRASH. */
static void maybe_crash(const replayer *rp, const Pcachepb__ReplayItem *item) {
  char hex[33];
  if (!rp->crash_hash || item->state_hash.len != PCACHE_HASH_SIZE)
    return;
  pcache__hex(item->state_hash.data, PCACHE_HASH_SIZE, hex);
  if (strncmp(hex, rp->crash_hash, strlen(rp->crash_hash)) == 0) {
    log_warn("replay: PCACHE_REPLAY_TEST_CRASH matches %s: aborting, as asked", hex);
    abort();
  }
}

/* The test-only hang hook: a driver that never returns, on an item whose
 * state hash, in hex, starts with PCACHE_REPLAY_TEST_HANG. */
static void maybe_hang(const replayer *rp, const Pcachepb__ReplayItem *item) {
  char hex[33];
  if (!rp->hang_hash || item->state_hash.len != PCACHE_HASH_SIZE)
    return;
  pcache__hex(item->state_hash.data, PCACHE_HASH_SIZE, hex);
  if (strncmp(hex, rp->hang_hash, strlen(rp->hang_hash)) == 0) {
    log_warn("replay: PCACHE_REPLAY_TEST_HANG matches %s: hanging, as asked", hex);
    for (;;)
      pause();
  }
}

static void build_item(worker *w, const Pcachepb__ReplayItem *item) {
  replayer *rp = w->rp;
  uint8_t *blob = NULL;
  size_t size = 0;
  uint64_t ns = 0;
  int r;
  w->result_msg[0] = '\0';
  maybe_crash(rp, item);
  maybe_hang(rp, item);
  if (rp->delay_ms)
    sleep_ms(rp->delay_ms);
  r = pcache__replay_vk_build(rp->vk, item->desc.data, item->desc.len, item->modules,
                              item->n_modules, &blob, &size, &ns);
  if (r < 0)
    snprintf(w->result_msg, sizeof w->result_msg, "build failed: %s", pcache_strerror(r));
  else
    r = put_blob(w, item, blob, size, ns, w->result_msg, sizeof w->result_msg);
  pcache__free(blob);
  pcachepb__replay_result__init(&w->result);
  memcpy(w->result_hash, item->state_hash.data, PCACHE_HASH_SIZE);
  w->result.state_hash.data = w->result_hash;
  w->result.state_hash.len = PCACHE_HASH_SIZE;
  w->result.status = r;
  w->result.message = w->result_msg;
  w->have_result = 1;
  if (r == 0)
    atomic_fetch_add(&rp->built, 1);
}

/* One ReplayClaim: reports the last result, and (unless last) gets the
 * next item, a wait or the end. Returns 0 or a failure of the exchange. */
static int claim(worker *w, int last) {
  replayer *rp = w->rp;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplayClaim c = PCACHEPB__REPLAY_CLAIM__INIT;
  Pcachepb__ReplayResult *results[1] = {&w->result};
  pcache__reply reply = {0};
  const Pcachepb__ReplayClaimReply *cr;
  int r;
  c.new_key.data = rp->key.bytes;
  c.new_key.len = PCACHE_DEVKEY_SIZE;
  c.results = w->have_result ? results : NULL;
  c.n_results = w->have_result ? 1 : 0;
  c.last = last;
  req.body_case = PCACHEPB__REQUEST__BODY_REPLAY_CLAIM;
  req.replay_claim = &c;
  r = pcache__transport_rpc(w->t, &req, PCACHEPB__RESPONSE__BODY_REPLAY_CLAIM,
                            pcache__mono_ms() + RPC_TIMEOUT_MS, &reply);
  if (r < 0) {
    log_error("replay: claim: %s", pcache__reply_why(&reply, r));
    pcache__reply_release(&reply);
    return r;
  }
  w->have_result = 0;
  cr = reply.response->replay_claim;
  if (cr->item && !last)
    build_item(w, cr->item);
  else if (cr->finished || last) {
    w->done = 1;
    if (cr->finished)
      atomic_store(&rp->finished, 1);
  }
  else if (cr->wait_ms)
    sleep_ms(cr->wait_ms);
  pcache__reply_release(&reply);
  return 0;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  replayer *rp = w->rp;
  while (!w->done) {
    if (atomic_load(&rp->failed))
      break;
    if (atomic_load(&rp->stop) || (rp->max_rss && rss_bytes() > rp->max_rss)) {
      atomic_store(&rp->stop, 1);
      (void)claim(w, 1);
      break;
    }
    /* Under CPU pressure one thread builds, with a pause after each. */
    if (w->index > 0 && atomic_load(&rp->pressured)) {
      if (atomic_load(&rp->finished)) {
        w->done = 1; /* nothing out, nothing to report */
        break;
      }
      sleep_ms(500);
      continue;
    }
    if (claim(w, 0) < 0) {
      atomic_store(&rp->failed, 1);
      break;
    }
    if (w->have_result && atomic_load(&rp->throttle_ms))
      sleep_ms(atomic_load(&rp->throttle_ms));
  }
  return NULL;
}

static int usage(FILE *f, int code) {
  fprintf(f, "usage: pcache-replay --device KEY [--socket PATH] [--threads N]\n"
             "Rebuilds the pipelines pcached hands out for the device KEY (64 hex digits).\n"
             "pcached starts it; see docs/replay.md.\n");
  return code;
}

int main(int argc, char **argv) {
  static replayer rp;
  worker *workers = NULL;
  pthread_t psi;
  char sock[4096];
  const char *device = NULL, *socket_arg = NULL, *v;
  unsigned started = 0;
  uint64_t t0;
  int r, code = 1, psi_started = 0;

  pcache_log_set_ident("pcache-replay");
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
  rp.max_rss = (uint64_t)pcache__env_ms("PCACHE_REPLAY_MAX_RSS_MB", 1024, 16, 1u << 20) << 20;
  rp.psi_low = pcache__env_ms("PCACHE_REPLAY_PSI", 10, 1, 100);
  rp.delay_ms = pcache__env_ms("PCACHE_REPLAY_TEST_DELAY_MS", 0, 0, 60000);
  v = getenv("PCACHE_REPLAY_TEST_CRASH");
  rp.crash_hash = v && *v ? v : NULL;
  v = getenv("PCACHE_REPLAY_TEST_HANG");
  rp.hang_hash = v && *v ? v : NULL;
  be_nice();

  if ((r = pcache__replay_vk_open(&rp.key, &rp.vk)) < 0) {
    log_error("replay: no Vulkan device for key %s: %s", device, pcache_strerror(r));
    return r == PCACHE_ENOT_FOUND ? EXIT_NO_DEVICE : 1;
  }
  if (!(workers = pcache__calloc(rp.threads, sizeof *workers)))
    goto out_vk;
  for (unsigned i = 0; i < rp.threads; i++) {
    workers[i].rp = &rp;
    workers[i].index = i;
    r = pcache__transport_open(rp.socket_path, "pcache-replay", RPC_TIMEOUT_MS, &workers[i].t,
                               NULL);
    if (r < 0) {
      log_error("replay: cannot reach pcached at %s: %s", rp.socket_path, pcache_strerror(r));
      goto out_workers;
    }
  }
  t0 = pcache__mono_us();
  psi_started = pthread_create(&psi, NULL, psi_main, &rp) == 0;
  for (started = 0; started < rp.threads; started++)
    if (pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]) != 0)
      break;
  for (unsigned i = 0; i < started; i++)
    pthread_join(workers[i].thread, NULL);
  atomic_store(&rp.failed, 1); /* ends the PSI thread */
  if (psi_started)
    pthread_join(psi, NULL);
  /* The replay benchmark (bench/run-replay.sh) reads this line. */
  log_info("replay: built %llu pipelines in %.1f ms with %u threads",
           (unsigned long long)atomic_load(&rp.built), (double)(pcache__mono_us() - t0) / 1e3,
           rp.threads);
  code = atomic_load(&rp.stop) ? EXIT_RECYCLE : started == rp.threads ? 0 : 1;
  for (unsigned i = 0; i < started; i++)
    if (!workers[i].done && !atomic_load(&rp.stop))
      code = 1;
out_workers:
  for (unsigned i = 0; i < rp.threads; i++)
    pcache__transport_close(workers[i].t);
  pcache__free(workers);
out_vk:
  pcache__replay_vk_close(rp.vk);
  return code;
}
