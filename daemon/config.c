#include "config.h"

#include <errno.h>
#include <getopt.h>
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
          "  --max-size SIZE        blob + description bytes kept, LRU evicted (1G)\n"
          "  --max-blob SIZE        largest blob accepted (64M)\n"
          "  --max-snapshot SIZE    largest (device, app) snapshot accepted (256M;\n"
          "                         a request frame must still fit --max-frame)\n"
          "  --max-frame SIZE       largest request frame accepted (64M)\n"
          "  --max-hashes N         most state hashes / items per request (%u)\n"
          "  --max-connections N    concurrent clients (256)\n"
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
          "  --map-size SIZE        LMDB map size (default: from --max-size and\n"
          "                         --max-blob); a small one tests a full map\n"
          "  --idle-exit SECS       exit after this long without clients (0: never)\n"
          "  --log-level LEVEL      error, warn, info or debug (info)\n"
          "  --version              print the version and exit\n"
          "  --help                 print this help and exit\n",
          PCACHE_DEFAULT_MAX_HASHES);
}

static int parse_u64(const char *opt, const char *text, int duration, uint64_t min, uint64_t max,
                     uint64_t *ret) {
  uint64_t v;
  int r = duration ? pcache__parse_duration(text, &v) : pcache__parse_size(text, &v);
  if (r < 0 || v < min || v > max) {
    fprintf(stderr, "pcached: invalid value for --%s: '%s'\n", opt, text);
    return -EINVAL;
  }
  *ret = v;
  return 0;
}

int pcd_config_parse(int argc, char **argv, pcd_config *ret_config) {
  enum {
    OPT_SOCKET = 256, OPT_DATA_DIR, OPT_MAX_SIZE, OPT_MAX_BLOB, OPT_MAX_FRAME, OPT_MAX_HASHES,
    OPT_MAX_CONN, OPT_MAX_PENDING, OPT_FRAME_TIMEOUT, OPT_FLUSH, OPT_IDLE_EXIT, OPT_LOG_LEVEL, OPT_MAP_SIZE,
    OPT_MAX_SNAPSHOT, OPT_THREADS, OPT_HELLO_TIMEOUT, OPT_VERSION, OPT_HELP,
  };
  static const struct option options[] = {
      {"socket", required_argument, NULL, OPT_SOCKET},
      {"data-dir", required_argument, NULL, OPT_DATA_DIR},
      {"max-size", required_argument, NULL, OPT_MAX_SIZE},
      {"max-blob", required_argument, NULL, OPT_MAX_BLOB},
      {"max-snapshot", required_argument, NULL, OPT_MAX_SNAPSHOT},
      {"max-frame", required_argument, NULL, OPT_MAX_FRAME},
      {"max-hashes", required_argument, NULL, OPT_MAX_HASHES},
      {"max-connections", required_argument, NULL, OPT_MAX_CONN},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"max-pending", required_argument, NULL, OPT_MAX_PENDING},
      {"frame-timeout", required_argument, NULL, OPT_FRAME_TIMEOUT},
      {"hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT},
      {"flush-interval", required_argument, NULL, OPT_FLUSH},
      {"idle-exit", required_argument, NULL, OPT_IDLE_EXIT},
      {"map-size", required_argument, NULL, OPT_MAP_SIZE},
      {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
      {"version", no_argument, NULL, OPT_VERSION},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  pcd_config c = {
      .max_size = 1ull << 30,
      .max_blob = 64ull << 20,
      .max_snapshot = 256ull << 20,
      .max_frame = PCACHE_DEFAULT_MAX_FRAME,
      .max_hashes = PCACHE_DEFAULT_MAX_HASHES,
      .max_connections = 256,
      .frame_timeout_s = 10,
      .hello_timeout_s = 10,
      .max_pending = 4ull << 20,
      .flush_interval_ms = 5000,
      .log_level = PCACHE_LOG_INFO,
  };
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t v;
  int opt;

  /* One loop per core keeps concurrent Gets from queueing behind each
   * other; past 8 the single store and writer are the limit anyway. */
  c.threads = cores < 1 ? 1 : cores > 8 ? 8 : (uint32_t)cores;

  optind = 1;
  while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (opt) {
    case OPT_SOCKET:
      c.socket_arg = optarg;
      break;
    case OPT_DATA_DIR:
      c.data_dir_arg = optarg;
      break;
    case OPT_MAX_SIZE:
      if (parse_u64("max-size", optarg, 0, 4096, 1ull << 46, &c.max_size) < 0)
        return -EINVAL;
      break;
    case OPT_MAX_BLOB:
      if (parse_u64("max-blob", optarg, 0, 32, 1ull << 30, &c.max_blob) < 0)
        return -EINVAL;
      break;
    case OPT_MAX_SNAPSHOT:
      if (parse_u64("max-snapshot", optarg, 0, 32, 1ull << 32, &c.max_snapshot) < 0)
        return -EINVAL;
      break;
    case OPT_MAX_FRAME:
      if (parse_u64("max-frame", optarg, 0, 1024, UINT32_MAX, &v) < 0)
        return -EINVAL;
      c.max_frame = (uint32_t)v;
      break;
    case OPT_MAX_HASHES:
      if (parse_u64("max-hashes", optarg, 0, 1, 1u << 20, &v) < 0)
        return -EINVAL;
      c.max_hashes = (uint32_t)v;
      break;
    case OPT_MAX_CONN:
      if (parse_u64("max-connections", optarg, 0, 1, 65536, &v) < 0)
        return -EINVAL;
      c.max_connections = (uint32_t)v;
      break;
    case OPT_THREADS:
      if (parse_u64("threads", optarg, 0, 1, PCD_MAX_THREADS, &v) < 0)
        return -EINVAL;
      c.threads = (uint32_t)v;
      break;
    case OPT_MAX_PENDING:
      if (parse_u64("max-pending", optarg, 0, 4096, 1ull << 34, &c.max_pending) < 0)
        return -EINVAL;
      break;
    case OPT_FRAME_TIMEOUT:
      if (parse_u64("frame-timeout", optarg, 1, 1, 86400, &c.frame_timeout_s) < 0)
        return -EINVAL;
      break;
    case OPT_HELLO_TIMEOUT:
      if (parse_u64("hello-timeout", optarg, 1, 1, 86400, &c.hello_timeout_s) < 0)
        return -EINVAL;
      break;
    case OPT_FLUSH:
      if (parse_u64("flush-interval", optarg, 0, 10, 3600000, &c.flush_interval_ms) < 0)
        return -EINVAL;
      break;
    case OPT_IDLE_EXIT:
      if (parse_u64("idle-exit", optarg, 1, 0, 1ull << 32, &c.idle_exit_s) < 0)
        return -EINVAL;
      break;
    case OPT_MAP_SIZE:
      if (parse_u64("map-size", optarg, 0, 1ull << 20, 1ull << 46, &c.map_size) < 0)
        return -EINVAL;
      break;
    case OPT_LOG_LEVEL:
      c.log_level = pcache_log_parse_level(optarg);
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
