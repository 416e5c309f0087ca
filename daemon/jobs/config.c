#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/log.h"
#include "common/parse.h"
#include "ops.h"
#include "proto/desc_check.h"
#include "proto/frame.h"

static void usage(FILE *out) {
  fprintf(out,
          "Usage: pcached [OPTION]...\n"
          "Keeps Vulkan pipeline-cache blobs for the user's apps (libpcache).\n\n"
          "  --socket PATH          listen here (default $PCACHE_SOCKET, else\n"
          "                         $XDG_RUNTIME_DIR/pcache/socket; ignored under\n"
          "                         socket activation)\n"
          "  --data-dir DIR         store (default $PCACHE_DATA_DIR, else\n"
          "                         $XDG_CACHE_HOME/pcache, else ~/.cache/pcache)\n"
          "  --max-size SIZE        bytes kept (docs/storage.md \"Sizes\"), LRU evicted (1G)\n"
          "  --max-blob SIZE        largest blob accepted (64M)\n"
          "  --max-snapshot SIZE    largest (device, app) snapshot accepted (256M;\n"
          "                         a request frame must still fit --max-frame)\n"
          "  --max-frame SIZE       largest request frame accepted (64M)\n"
          "  --max-hashes N         most state hashes / items per request (%u)\n"
          "  --max-connections N    concurrent connections (256); at the limit the\n"
          "                         oldest idle one is closed for a new one\n"
          "  --max-connections-per-process N\n"
          "                         connections one process may hold (32); past it\n"
          "                         its oldest idle one is closed for a new one\n"
          "  --threads N            I/O threads serving clients (default: one per\n"
          "                         core, at most 8); writes always go to one\n"
          "                         writer thread\n"
          "  --max-pending SIZE     reply bytes held for one client (queued, or in\n"
          "                         a memfd it has not read yet) before the daemon\n"
          "                         stops reading from it; also bounds one\n"
          "                         Get/Prefetch reply (4M)\n"
          "  --frame-timeout SECS   close a client that stalls mid-frame (10s)\n"
          "  --hello-timeout SECS   close a client that has not said Hello this long\n"
          "                         after connecting, so it frees its\n"
          "                         --max-connections slot (10s)\n"
          "  --flush-interval MS    how often last-used times are written (5000)\n"
          "  --busy-poll-us US      an I/O thread that served a request polls this\n"
          "                         long for the next before it sleeps: a client's\n"
          "                         next request costs no wake-up (50; 0: never)\n"
          "  --prefetch-window SECS a Prefetch sends an app's entries used within\n"
          "                         this long of its latest use (7d; 0: all)\n"
          "  --prefetch-max N       and at most this many, most recent first; the\n"
          "                         rest are served per miss (65536)\n"
          "  --segment-memory SIZE  shared-memory segments (each app's snapshot and\n"
          "                         blobs, mapped by its clients) held at once;\n"
          "                         least recently used dropped first (512M; 0: off)\n"
          "  --segment-idle SECS    drop a segment no client asked for this long (300s)\n"
          "  --segment-max N        segments held at most, and at most as many replaced\n"
          "                         ones still mapped by clients (1024)\n"
          "  --reply-window SIZE    a connection's reply window, into which its Get\n"
          "                         replies' blobs go instead of the socket (256K;\n"
          "                         0: off; at most 16M), its pages made as replies\n"
          "                         first reach them\n"
          "  --map-size SIZE        LMDB map size (default: from --max-size and\n"
          "                         --max-blob); a small one tests a full map\n"
          "  --idle-exit SECS       exit after this long without clients (0: never)\n"
          "  --remote URL           share entries with a fleet through Redis:\n"
          "                         redis://HOST:PORT[/DB] or a Unix socket path\n"
          "                         (docs/fleet.md); default: none\n"
          "  --remote-auth FILE     the Redis password (or a user, then the password,\n"
          "                         on two lines); FILE must be the user's, mode 0600\n"
          "  --remote-signing-key FILE\n"
          "                         this daemon's Ed25519 signing key (mode 0600;\n"
          "                         pcachectl fleet keygen makes one): it pushes\n"
          "                         what its clients upload, signed; without it,\n"
          "                         it only reads from the fleet\n"
          "  --remote-trusted-keys FILE\n"
          "                         the public keys of the writers whose fleet\n"
          "                         values it accepts, one per line; without it,\n"
          "                         only its own, and none without a signing key\n"
          "  --remote-prefix TEXT   start of every Redis key (pcache:), so fleets can\n"
          "                         share one Redis\n"
          "  --remote-ttl SECS      Redis keys expire this long after their last\n"
          "                         write (0: never; leave it to maxmemory)\n"
          "  --remote-timeout MS    longest a Get waits on Redis (20; a Prefetch's\n"
          "                         first page waits ten times this)\n"
          "  --remote-queue SIZE    entries waiting to be pushed, at most (64M);\n"
          "                         more are dropped and counted\n"
          "  --log-level LEVEL      error, warn, info or debug (info)\n"
          "  --version              print the version and exit\n"
          "  --help                 print this help and exit\n",
          PCACHE_DEFAULT_MAX_HASHES);
}

enum {
  OPT_SOCKET = 256,
  OPT_DATA_DIR,
  OPT_MAX_SIZE,
  OPT_MAX_BLOB,
  OPT_MAX_FRAME,
  OPT_MAX_HASHES,
  OPT_MAX_CONN,
  OPT_MAX_CONN_PER_PROCESS,
  OPT_MAX_PENDING,
  OPT_FRAME_TIMEOUT,
  OPT_FLUSH,
  OPT_BUSY_POLL,
  OPT_IDLE_EXIT,
  OPT_LOG_LEVEL,
  OPT_MAP_SIZE,
  OPT_MAX_SNAPSHOT,
  OPT_THREADS,
  OPT_HELLO_TIMEOUT,
  OPT_PREFETCH_WINDOW,
  OPT_PREFETCH_MAX,
  OPT_REMOTE,
  OPT_REMOTE_AUTH,
  OPT_REMOTE_SIGNING_KEY,
  OPT_REMOTE_TRUSTED_KEYS,
  OPT_REMOTE_PREFIX,
  OPT_REMOTE_TTL,
  OPT_REMOTE_TIMEOUT,
  OPT_REMOTE_QUEUE,
  OPT_SEGMENT_MEMORY,
  OPT_SEGMENT_IDLE,
  OPT_SEGMENT_MAX,
  OPT_REPLY_WINDOW,
  OPT_VERSION,
  OPT_HELP,
};

/* The numeric options: a size (or a count) or a duration in seconds,
 * its bounds, and the field of pcd_config it sets (8 or 4 bytes wide). */
typedef struct number_option {
  int opt;
  const char *name;
  int duration;
  uint64_t min, max;
  size_t offset, width;
} number_option;

#define FIELD(f) offsetof(pcd_config, f), sizeof(((pcd_config *)0)->f)
/* clang-format off */
static const number_option numbers[] = {
    {OPT_MAX_SIZE,      "max-size",        0, 4096,      1ull << 46,      FIELD(max_size)},
    {OPT_MAX_BLOB,      "max-blob",        0, 32,        PCACHE_PROTO_MAX_BLOB, FIELD(max_blob)},
    {OPT_MAX_SNAPSHOT,  "max-snapshot",    0, 32,        PCACHE_PROTO_MAX_SNAPSHOT, FIELD(max_snapshot)},
    {OPT_MAX_FRAME,     "max-frame",       0, 1024,      UINT32_MAX,      FIELD(max_frame)},
    {OPT_MAX_HASHES,    "max-hashes",      0, 1,         PCACHE_PROTO_MAX_HASHES, FIELD(max_hashes)},
    {OPT_MAX_CONN,      "max-connections", 0, 1,         65536,           FIELD(max_connections)},
    {OPT_MAX_CONN_PER_PROCESS, "max-connections-per-process", 0, 1, 65536,    FIELD(max_conn_per_process)},
    {OPT_THREADS,       "threads",         0, 1,         PCD_MAX_THREADS, FIELD(threads)},
    {OPT_MAX_PENDING,   "max-pending",     0, 4096,      1ull << 34,      FIELD(max_pending)},
    {OPT_FRAME_TIMEOUT, "frame-timeout",   1, 1,         86400,           FIELD(frame_timeout_s)},
    {OPT_HELLO_TIMEOUT, "hello-timeout",   1, 1,         86400,           FIELD(hello_timeout_s)},
    {OPT_FLUSH,         "flush-interval",  0, 10,        3600000,         FIELD(flush_interval_ms)},
    {OPT_BUSY_POLL,     "busy-poll-us",    0, 0,         10000,           FIELD(busy_poll_us)},
    {OPT_PREFETCH_WINDOW, "prefetch-window", 1, 0,       1ull << 32,      FIELD(prefetch_window_s)},
    {OPT_PREFETCH_MAX,  "prefetch-max",    0, 1,         1u << 24,        FIELD(prefetch_max)},
    {OPT_SEGMENT_MEMORY, "segment-memory", 0, 0,        1ull << 40,      FIELD(segment_memory)},
    {OPT_SEGMENT_IDLE,  "segment-idle",    1, 1,         1ull << 32,      FIELD(segment_idle_s)},
    {OPT_SEGMENT_MAX,   "segment-max",     0, 1,         1u << 16,        FIELD(segment_max)},
    {OPT_REPLY_WINDOW,  "reply-window",    0, 0,         PCACHE_REPLY_WINDOW_MAX, FIELD(reply_window)},
    {OPT_IDLE_EXIT,     "idle-exit",       1, 0,         1ull << 32,      FIELD(idle_exit_s)},
    {OPT_MAP_SIZE,      "map-size",        0, 1ull << 20, 1ull << 46,     FIELD(map_size)},
    {OPT_REMOTE_TTL,    "remote-ttl",      1, 0,         1ull << 31,      FIELD(remote_ttl_s)},
    {OPT_REMOTE_TIMEOUT, "remote-timeout", 0, 1,         60000,           FIELD(remote_timeout_ms)},
    {OPT_REMOTE_QUEUE,  "remote-queue",    0, 1ull << 20, 1ull << 40,     FIELD(remote_queue)},
};
/* clang-format on */
#undef FIELD

/* opt's entry in numbers, or NULL. */
static const number_option *find_number(int opt) {
  for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
    if (numbers[i].opt == opt)
      return &numbers[i];
  return NULL;
}

/* Sets n's field of c from text: 0, or -EINVAL after saying what was
 * wrong. */
static int set_number(pcd_config *c, const number_option *n, const char *text) {
  uint64_t v;
  int r = n->duration ? pcache__parse_duration(text, &v) : pcache__parse_size(text, &v);
  if (r < 0 || v < n->min || v > n->max) {
    fprintf(stderr, "pcached: invalid value for --%s: '%s'\n", n->name, text);
    return -EINVAL;
  }
  if (n->width == sizeof(uint32_t)) {
    uint32_t v32 = (uint32_t)v;
    memcpy((char *)c + n->offset, &v32, sizeof v32);
  } else {
    memcpy((char *)c + n->offset, &v, sizeof v);
  }
  return 0;
}

int pcd_config_parse(int argc, char **argv, pcd_config *ret_config) {
  static const struct option options[] = {
      {"socket", required_argument, NULL, OPT_SOCKET},
      {"data-dir", required_argument, NULL, OPT_DATA_DIR},
      {"max-size", required_argument, NULL, OPT_MAX_SIZE},
      {"max-blob", required_argument, NULL, OPT_MAX_BLOB},
      {"max-snapshot", required_argument, NULL, OPT_MAX_SNAPSHOT},
      {"max-frame", required_argument, NULL, OPT_MAX_FRAME},
      {"max-hashes", required_argument, NULL, OPT_MAX_HASHES},
      {"max-connections", required_argument, NULL, OPT_MAX_CONN},
      {"max-connections-per-process", required_argument, NULL, OPT_MAX_CONN_PER_PROCESS},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"max-pending", required_argument, NULL, OPT_MAX_PENDING},
      {"frame-timeout", required_argument, NULL, OPT_FRAME_TIMEOUT},
      {"hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT},
      {"flush-interval", required_argument, NULL, OPT_FLUSH},
      {"busy-poll-us", required_argument, NULL, OPT_BUSY_POLL},
      {"prefetch-window", required_argument, NULL, OPT_PREFETCH_WINDOW},
      {"prefetch-max", required_argument, NULL, OPT_PREFETCH_MAX},
      {"segment-memory", required_argument, NULL, OPT_SEGMENT_MEMORY},
      {"segment-idle", required_argument, NULL, OPT_SEGMENT_IDLE},
      {"segment-max", required_argument, NULL, OPT_SEGMENT_MAX},
      {"reply-window", required_argument, NULL, OPT_REPLY_WINDOW},
      {"idle-exit", required_argument, NULL, OPT_IDLE_EXIT},
      {"map-size", required_argument, NULL, OPT_MAP_SIZE},
      {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
      {"remote", required_argument, NULL, OPT_REMOTE},
      {"remote-auth", required_argument, NULL, OPT_REMOTE_AUTH},
      {"remote-signing-key", required_argument, NULL, OPT_REMOTE_SIGNING_KEY},
      {"remote-trusted-keys", required_argument, NULL, OPT_REMOTE_TRUSTED_KEYS},
      {"remote-prefix", required_argument, NULL, OPT_REMOTE_PREFIX},
      {"remote-ttl", required_argument, NULL, OPT_REMOTE_TTL},
      {"remote-timeout", required_argument, NULL, OPT_REMOTE_TIMEOUT},
      {"remote-queue", required_argument, NULL, OPT_REMOTE_QUEUE},
      {"version", no_argument, NULL, OPT_VERSION},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  pcd_config c = {
      .max_size = 1ull << 30,
      .max_blob = PCACHE_DEFAULT_MAX_BLOB,
      .max_snapshot = PCACHE_DEFAULT_MAX_SNAPSHOT,
      .max_frame = PCACHE_DEFAULT_MAX_FRAME,
      .max_hashes = PCACHE_DEFAULT_MAX_HASHES,
      .max_connections = 256,
      /* pcache-replay's 16 threads hold two connections each. */
      .max_conn_per_process = 32,
      .frame_timeout_s = 10,
      .hello_timeout_s = 10,
      .max_pending = 4ull << 20,
      .flush_interval_ms = 5000,
      .busy_poll_us = 50,
      .prefetch_window_s = 7 * 86400,
      .prefetch_max = 65536,
      .segment_memory = 512ull << 20,
      .segment_idle_s = 300,
      .segment_max = 1024,
      .reply_window = 256u << 10,
      .log_level = PCACHE_LOG_INFO,
      .remote_prefix = "pcache:",
      .remote_timeout_ms = 20,
      .remote_queue = 64ull << 20,
  };
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const number_option *n;
  int opt;

  /* One loop per core keeps concurrent Gets from queueing behind each
   * other; past 8 the single store and writer are the limit anyway. */
  c.threads = cores < 1 ? 1 : cores > 8 ? 8 : (uint32_t)cores;

  optind = 1;
  while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
    if ((n = find_number(opt))) {
      if (set_number(&c, n, optarg) < 0)
        return -EINVAL;
      continue;
    }
    switch (opt) {
    case OPT_SOCKET:
      c.socket_arg = optarg;
      break;
    case OPT_DATA_DIR:
      c.data_dir_arg = optarg;
      break;
    case OPT_REMOTE:
      c.remote_arg = optarg;
      break;
    case OPT_REMOTE_AUTH:
      c.remote_auth_file = optarg;
      break;
    case OPT_REMOTE_SIGNING_KEY:
      c.remote_signing_key = optarg;
      break;
    case OPT_REMOTE_TRUSTED_KEYS:
      c.remote_trusted_keys = optarg;
      break;
    case OPT_REMOTE_PREFIX:
      if (strlen(optarg) > PCD_MAX_REMOTE_PREFIX ||
          !pcache__utf8_printable(optarg, strlen(optarg))) {
        fprintf(stderr, "pcached: --remote-prefix must be printable text of at most %d bytes\n",
                PCD_MAX_REMOTE_PREFIX);
        return -EINVAL;
      }
      c.remote_prefix = optarg;
      break;
    case OPT_LOG_LEVEL:
      c.log_level = pcache__log_parse_level(optarg);
      if (c.log_level < 0) {
        fprintf(stderr, "pcached: unknown log level '%s' (error, warn, info, debug)\n", optarg);
        return -EINVAL;
      }
      break;
    case OPT_VERSION:
      printf("pcached %s (protocol %u)\n", PCACHE_VERSION_STRING, PCACHE_PROTOCOL_VERSION);
      return 1;
    case OPT_HELP:
      usage(stdout);
      return 1;
    default:
      usage(stderr);
      return -EINVAL;
    }
  }
  if (!c.remote_arg && (c.remote_auth_file || c.remote_signing_key || c.remote_trusted_keys)) {
    fprintf(stderr, "pcached: --remote-%s needs --remote\n",
            c.remote_auth_file     ? "auth"
            : c.remote_signing_key ? "signing-key"
                                   : "trusted-keys");
    return -EINVAL;
  }
  if (optind < argc) {
    fprintf(stderr, "pcached: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return -EINVAL;
  }
  *ret_config = c;
  return 0;
}

/* Map = twice the cap (LMDB never reuses pages freed in the transaction
 * that frees them, and old pages stay live for readers) plus room for the
 * largest blob and the indexes. */
uint64_t pcd_config_map_size(const pcd_config *c) {
  if (c->map_size)
    return c->map_size;
  uint64_t largest = c->max_snapshot < c->max_frame ? c->max_snapshot : c->max_frame;
  if (largest < c->max_blob)
    largest = c->max_blob;
  return 2 * c->max_size + 2 * largest + (32ull << 20);
}

/* Allocations one request may cost when unpacked: a Put of max_hashes
 * items, each naming up to PCACHE_DESC_MAX_MODULES modules, or a
 * PutSnapshot of its most hashes, whichever is more, plus slack for the
 * few fields around them. */
uint64_t pcd_config_max_allocations(const pcd_config *c) {
  uint64_t put = (uint64_t)c->max_hashes * (1 + PCACHE_DESC_MAX_MODULES);
  uint64_t snapshot = PCD_MAX_SNAPSHOT_HASHES;
  return (put > snapshot ? put : snapshot) + 64;
}
