/* Hello, List and Stats: the session's start and what the store holds, on
 * the connection's I/O thread, each in one short read transaction. */
#include "reads.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <pcache/pcache.h>

#include "common/arena.h"
#include "common/alloc.h"
#include "common/log.h"
#include "remote.h"
#include "replay.h"
#include "respond.h"
#include "segment.h"
#include "server.h"

void pcd_read_hello(pcd_conn *c, const Pcachepb__Hello *h) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__HelloReply reply = PCACHEPB__HELLO_REPLY__INIT;
  char msg[256];
  if (h->protocol_version != PCACHE_PROTOCOL_VERSION) {
    snprintf(msg, sizeof msg,
             "unsupported protocol version: client speaks %u, this daemon speaks %u",
             h->protocol_version, PCACHE_PROTOCOL_VERSION);
    log_warn("hello from pid %u: %s", h->pid, msg);
    pcd_respond_error(c, PCACHE_EVERSION, msg);
    return;
  }
  snprintf(c->app, sizeof c->app, "%s", h->app);
  c->hello_done = 1;
  log_debug("hello: app '%s' pid %u client %s", c->app, h->pid, h->client_version);
  reply.protocol_version = PCACHE_PROTOCOL_VERSION;
  reply.daemon_version = (char *)PCACHE_VERSION_STRING;
  reply.max_frame = c->srv->config->max_frame;
  reply.max_hashes = c->srv->config->max_hashes;
  reply.max_blob = c->srv->config->max_blob;
  reply.max_snapshot = c->srv->config->max_snapshot;
  reply.stages = pcd_replay_stages(c->srv->replay);
  resp.body_case = PCACHEPB__RESPONSE__BODY_HELLO;
  resp.hello = &reply;
  pcd_respond(c, &resp);
}

typedef struct list_ctx {
  pcache__arena *arena;
  Pcachepb__ListReply *reply;
  size_t cap_dev, cap_ent, cap_snap;
  const char *app;
  Pcachepb__DeviceInfo **unpacked;
  size_t n_unpacked;
} list_ctx;

static int list_device(void *ctx, const pcd_device *d) {
  list_ctx *l = ctx;
  Pcachepb__DeviceRecord *rec = pcache__arena_alloc(l->arena, sizeof *rec);
  Pcachepb__DeviceInfo **un;
  void *p = pcache__arena_grow(l->arena, l->reply->devices, l->reply->n_devices, &l->cap_dev,
                               sizeof *l->reply->devices);
  if (!rec || !p)
    return -ENOMEM;
  l->reply->devices = p;
  pcachepb__device_record__init(rec);
  rec->info = pcachepb__device_info__unpack(&pcache__pb_allocator, d->info_size, d->info);
  if (rec->info) {
    un = pcache__realloc(l->unpacked, (l->n_unpacked + 1) * sizeof *un);
    if (!un) {
      pcachepb__device_info__free_unpacked(rec->info, &pcache__pb_allocator);
      return -ENOMEM;
    }
    un[l->n_unpacked++] = rec->info;
    l->unpacked = un;
  }
  rec->entries = d->entries;
  rec->bytes = d->bytes;
  rec->first_seen = d->first_seen;
  rec->last_seen = d->last_seen;
  l->reply->devices[l->reply->n_devices++] = rec;
  return 0;
}

static int list_entry(void *ctx, const pcd_entry *e) {
  list_ctx *l = ctx;
  Pcachepb__EntryRecord *rec;
  void *p;
  if (l->app && *l->app && strcmp(e->app, l->app) != 0)
    return 0;
  rec = pcache__arena_alloc(l->arena, sizeof *rec);
  p = pcache__arena_grow(l->arena, l->reply->entries, l->reply->n_entries, &l->cap_ent,
                         sizeof *l->reply->entries);
  if (!rec || !p)
    return -ENOMEM;
  l->reply->entries = p;
  pcachepb__entry_record__init(rec);
  rec->device_key.data = pcache__arena_memdup(l->arena, e->key, PCACHE_DEVKEY_SIZE);
  rec->device_key.len = PCACHE_DEVKEY_SIZE;
  rec->state_hash.data =
      pcache__arena_memdup(l->arena, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  rec->state_hash.len = PCACHE_HASH_SIZE;
  rec->app = pcache__arena_strdup(l->arena, e->app);
  rec->kind = (Pcachepb__EntryKind)e->kind;
  rec->blob_size = e->blob_size;
  rec->desc_size = e->desc_size;
  rec->checksum = e->checksum;
  rec->created = e->created_us / 1000000;
  rec->last_used = e->last_used_us / 1000000;
  rec->hits = e->hits;
  rec->compile_ns = e->compile_ns;
  rec->size = pcd_entry_size(e);
  l->reply->entries[l->reply->n_entries++] = rec;
  return 0;
}

static int list_snapshot(void *ctx, const pcd_snapshot *s) {
  list_ctx *l = ctx;
  Pcachepb__SnapshotRecord *rec;
  void *p;
  if (l->app && *l->app && strcmp(s->app, l->app) != 0)
    return 0;
  rec = pcache__arena_alloc(l->arena, sizeof *rec);
  p = pcache__arena_grow(l->arena, l->reply->snapshots, l->reply->n_snapshots, &l->cap_snap,
                         sizeof *l->reply->snapshots);
  if (!rec || !p)
    return -ENOMEM;
  l->reply->snapshots = p;
  pcachepb__snapshot_record__init(rec);
  rec->device_key.data = pcache__arena_memdup(l->arena, s->device_key, PCACHE_DEVKEY_SIZE);
  rec->device_key.len = PCACHE_DEVKEY_SIZE;
  rec->app = pcache__arena_strdup(l->arena, s->app);
  rec->blob_size = s->blob_size;
  rec->hashes = s->n_hashes;
  rec->checksum = s->checksum;
  rec->created = s->created_us / 1000000;
  l->reply->snapshots[l->reply->n_snapshots++] = rec;
  return 0;
}

void pcd_read_list(pcd_conn *c, const Pcachepb__List *req) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__ListReply reply = PCACHEPB__LIST_REPLY__INIT;
  pcache__arena arena = {0};
  list_ctx l = {.arena = &arena, .reply = &reply, .app = req->app};
  const uint8_t *dev = NULL;
  pcd_txn *txn;
  int r;
  if (req->device_key.len)
    dev = req->device_key.data;
  if ((r = pcd_txn_begin(c->srv->store, 0, &txn)) < 0) {
    pcd_respond_error(c, r, NULL);
    return;
  }
  if (dev) {
    pcd_device d;
    r = pcd_device_get(txn, dev, &d);
    r = r == 0 ? list_device(&l, &d) : r == PCACHE_ENOT_FOUND ? 0 : r;
  } else {
    r = pcd_devices_foreach(txn, list_device, &l);
  }
  /* Entries come from `entries` alone: listing never touches blob pages. */
  if (r == 0 && req->entries)
    r = pcd_entries_foreach(txn, dev, list_entry, &l);
  /* Snapshot metadata only (a small record each), never their data. */
  if (r == 0)
    r = pcd_snapshots_foreach(txn, dev, list_snapshot, &l);
  pcd_txn_abort(txn);
  if (r < 0 || arena.failed) {
    resp.status = r < 0 ? r : -ENOMEM;
  } else {
    resp.body_case = PCACHEPB__RESPONSE__BODY_LIST;
    resp.list = &reply;
  }
  pcd_respond(c, &resp);
  for (size_t i = 0; i < l.n_unpacked; i++)
    pcachepb__device_info__free_unpacked(l.unpacked[i], &pcache__pb_allocator);
  pcache__free(l.unpacked);
  pcache__arena_free(&arena);
}

/* Says why writes do not fit, and the commands that fix it (they work in
 * that state: docs/storage.md "A full disk or store"). */
static void full_state(pcd_server *srv, Pcachepb__StatsReply *s) {
  switch (atomic_load(&srv->stats.full)) {
  case PCD_FULL_DISK:
    s->full = (char *)"disk";
    s->full_message = (char *)"the disk holding the store is full: data.mdb cannot grow, so new "
                              "entries replace the "
                              "least recently used ones. Free space on that disk, or make room "
                              "inside the store with "
                              "`pcachectl purge --all` (or --app NAME, --older-than 30d); data.mdb "
                              "keeps its size and "
                              "reuses the room";
    break;
  case PCD_FULL_STORE:
    s->full = (char *)"store";
    s->full_message =
        (char *)"the store is full and nothing could be evicted: run `pcachectl purge "
                "--all`, or restart pcached with a larger --max-size";
    break;
  default:
    s->full = (char *)"";
    s->full_message = (char *)"";
  }
}

/* The file system holding the data dir, and data.mdb's size on it. */
static void disk_state(pcd_server *srv, Pcachepb__StatsReply *s) {
  char path[4200];
  struct statvfs fs;
  struct stat st;
  if (statvfs(srv->data_dir, &fs) == 0) {
    s->disk_free = (uint64_t)fs.f_bavail * fs.f_frsize;
    s->disk_size = (uint64_t)fs.f_blocks * fs.f_frsize;
  }
  snprintf(path, sizeof path, "%s/data.mdb", srv->data_dir);
  if (stat(path, &st) == 0)
    s->data_file_size = (uint64_t)st.st_blocks * 512;
}

void pcd_read_stats(pcd_conn *c) {
  pcd_server *srv = c->srv;
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__StatsReply s = PCACHEPB__STATS_REPLY__INIT;
  pcd_totals t = {0};
  pcd_segment_stats seg;
  pcache__arena arena = {0};
  pcd_txn *txn;
  uint64_t snap_records = 0;
  int r = pcd_txn_begin(srv->store, 0, &txn);
  if (r == 0) {
    r = pcd_totals_get(txn, &t);
    if (r == 0)
      r = pcd_snapshots_record_bytes(txn, &snap_records);
    if (r == 0)
      r = pcd_replay_progress(srv->replay, txn, &arena, &s.replay, &s.n_replay);
    pcd_txn_abort(txn);
  }
  if (r < 0) {
    pcache__arena_free(&arena);
    pcd_respond_error(c, r, NULL);
    return;
  }
  s.daemon_version = (char *)PCACHE_VERSION_STRING;
  s.protocol_version = PCACHE_PROTOCOL_VERSION;
  s.data_dir = srv->data_dir;
  s.socket_path = srv->socket_path;
  s.entries = t.entries;
  s.bytes_used = t.bytes;
  s.max_size = srv->config->max_size;
  s.map_size = t.map_size;
  s.uptime_s = (pcache__mono_us() - srv->start_us) / 1000000;
  s.connections = atomic_load(&srv->conns.n_open);
  s.requests = atomic_load(&srv->stats.requests);
  s.gets = atomic_load(&srv->stats.gets);
  s.hits = atomic_load(&srv->stats.hits);
  s.misses = atomic_load(&srv->stats.misses);
  s.puts = atomic_load(&srv->stats.puts);
  s.put_rejected = atomic_load(&srv->stats.put_rejected);
  s.evictions = atomic_load(&srv->stats.evictions);
  s.commits = atomic_load(&srv->stats.commits);
  s.checksum_failures = atomic_load(&srv->stats.checksum_failures);
  s.devices = t.devices;
  s.modules = t.modules;
  s.reports = atomic_load(&srv->stats.reports);
  s.snapshots = t.snapshots;
  s.snapshot_bytes = t.snapshot_bytes;
  s.parked = atomic_load(&srv->stats.parked);
  s.prefetch_scans = atomic_load(&srv->stats.prefetch_scans);
  if (srv->remote)
    s.remote = pcd_remote_stats(srv->remote, &arena);
  pcd_segments_stats(srv->segments, &seg);
  s.segments = seg.segments;
  s.segment_bytes = seg.bytes;
  s.segment_builds = seg.builds;
  s.segment_drops = seg.drops;
  s.segment_sent = seg.sent;
  s.segment_retired = seg.retired;
  s.segment_retired_bytes = seg.retired_bytes;
  s.windows = atomic_load(&srv->stats.windows);
  s.window_bytes = atomic_load(&srv->stats.window_bytes);
  s.window_replies = atomic_load(&srv->stats.window_replies);
  s.window_busy = atomic_load(&srv->stats.window_busy);
  /* index_bytes holds the snapshots' records too: they are the
   * snapshots' part, the rest the entries'. */
  s.entry_bytes = t.entry_bytes + (t.index_bytes > snap_records ? t.index_bytes - snap_records : 0);
  s.snapshot_part_bytes = t.snapshot_bytes + snap_records;
  s.module_bytes = t.module_bytes;
  s.device_bytes = t.device_bytes;
  full_state(srv, &s);
  disk_state(srv, &s);
  resp.body_case = PCACHEPB__RESPONSE__BODY_STATS;
  resp.stats = &s;
  pcd_respond(c, &resp);
  pcache__arena_free(&arena);
}
