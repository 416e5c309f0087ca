/* pcached's command line. */
#ifndef PCD_CONFIG_H
#define PCD_CONFIG_H

#include <stdint.h>

/* Most --threads: each is a loop, a thread and an LMDB reader slot. */
#define PCD_MAX_THREADS 64

/* Longest --remote-prefix: keys stay short, and readable in redis-cli. */
#define PCD_MAX_REMOTE_PREFIX 64

typedef struct pcd_config {
  const char *socket_arg;        /* --socket, NULL: paths.h resolution */
  const char *data_dir_arg;      /* --data-dir */
  uint64_t max_size;             /* --max-size: blob + description bytes kept */
  uint64_t max_blob;             /* --max-blob */
  uint64_t max_snapshot;         /* --max-snapshot: one (device, app) snapshot */
  uint64_t map_size;             /* --map-size, 0: derived from the caps (main.c) */
  uint32_t max_frame;            /* --max-frame */
  uint32_t max_hashes;           /* --max-hashes */
  uint32_t max_connections;      /* --max-connections */
  uint32_t max_conn_per_process; /* --max-connections-per-process */
  uint32_t threads;              /* --threads: I/O loops (workers.c) */
  uint64_t idle_exit_s;          /* --idle-exit, 0: never */
  uint64_t frame_timeout_s;      /* --frame-timeout: a frame must arrive within */
  uint64_t hello_timeout_s;      /* --hello-timeout: Hello must be done within */
  uint64_t max_pending;          /* --max-pending: reply bytes queued per client */
  uint64_t flush_interval_ms;    /* --flush-interval: last-used/hit batches */
  uint64_t busy_poll_us;         /* --busy-poll-us: an I/O thread's poll after a request */
  uint64_t prefetch_window_s;    /* --prefetch-window: use before the app's latest, 0: any */
  uint32_t prefetch_max;         /* --prefetch-max: entries one Prefetch order holds */
  /* The fleet tier (remote*.c, docs/fleet.md); remote_arg NULL: none. */
  const char *remote_arg;          /* --remote: redis://host:port[/db] or a socket path */
  const char *remote_auth_file;    /* --remote-auth: the password (user, password) */
  const char *remote_signing_key;  /* --remote-signing-key: this daemon publishes, signing */
  const char *remote_trusted_keys; /* --remote-trusted-keys: the writers it accepts */
  const char *remote_prefix;       /* --remote-prefix: every key starts with it */
  uint64_t remote_ttl_s;           /* --remote-ttl, 0: keys never expire */
  uint64_t remote_timeout_ms;      /* --remote-timeout: longest a Get waits on it */
  uint64_t remote_queue;           /* --remote-queue: bytes waiting to be pushed */
  uint64_t segment_memory;         /* --segment-memory: bytes of segments held, 0: none */
  uint64_t segment_idle_s;         /* --segment-idle: drop a segment unasked this long */
  uint64_t segment_max;            /* --segment-max: segments held, and retired ones tracked */
  uint64_t reply_window;           /* --reply-window: bytes of a connection's window, 0: none */
  int log_level;
} pcd_config;

/*
 * pcd_config_parse - fills config from argv. Returns 0 to run, 1 when the
 * program should exit 0 (--help, --version printed), or -EINVAL after
 * printing a usage error.
 */
int pcd_config_parse(int argc, char **argv, pcd_config *ret_config);

/* What unpacking one request may allocate, one struct at a time
 * (pcache__request_decode's max_allocations). */
uint64_t pcd_config_max_allocations(const pcd_config *config);

/* The LMDB map size: --map-size, else derived from the size limits. */
uint64_t pcd_config_map_size(const pcd_config *config);

#endif
