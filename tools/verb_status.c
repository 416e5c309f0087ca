/* pcachectl status: the daemon's version, size, uptime and counters. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/version.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/parse.h"
#include "tools/ctl.h"

/* The fleet tier's counters (StatsReply.remote), as JSON fields. */
static void json_remote(ctl_json *j, const Pcachepb__RemoteStats *m) {
  ctl_json_key(j, "remote");
  ctl_json_object_begin(j);
  ctl_json_kv_string(j, "url", m->url);
  ctl_json_kv_string(j, "state", m->state);
  ctl_json_kv_string(j, "last_error", m->last_error);
  ctl_json_kv_uint(j, "reconnects", m->reconnects);
  ctl_json_kv_uint(j, "asks", m->asks);
  ctl_json_kv_uint(j, "skipped", m->skipped);
  ctl_json_kv_uint(j, "fetched", m->fetched);
  ctl_json_kv_uint(j, "stored", m->stored);
  ctl_json_kv_uint(j, "refused", m->refused);
  ctl_json_kv_uint(j, "refused_unsigned", m->refused_unsigned);
  ctl_json_kv_uint(j, "refused_untrusted", m->refused_untrusted);
  ctl_json_kv_uint(j, "refused_signature", m->refused_signature);
  ctl_json_kv_string(j, "signing_key", m->signing_key);
  ctl_json_kv_uint(j, "trusted_keys", m->trusted_keys);
  ctl_json_kv_uint(j, "timeouts", m->timeouts);
  ctl_json_kv_uint(j, "pushed", m->pushed);
  ctl_json_kv_uint(j, "push_dropped", m->push_dropped);
  ctl_json_kv_uint(j, "push_errors", m->push_errors);
  ctl_json_kv_uint(j, "queued", m->queued);
  ctl_json_kv_uint(j, "queued_bytes", m->queued_bytes);
  ctl_json_key(j, "sync");
  ctl_json_object_begin(j);
  ctl_json_kv_string(j, "state", m->sync_state);
  ctl_json_kv_uint(j, "age_ms", m->sync_age_ms);
  ctl_json_kv_string(j, "error", m->sync_error);
  if (m->sync)
    ctl_fleet_sync_json(j, m->sync);
  ctl_json_object_end(j);
  ctl_json_object_end(j);
}

static void print_remote(const Pcachepb__RemoteStats *m) {
  char queued[32];
  ctl_fmt_size(m->queued_bytes, queued, sizeof queued);
  printf("%-12s %s, %s (%" PRIu64 " reconnects)%s%s\n", "remote:", m->url, m->state, m->reconnects,
         m->last_error && *m->last_error ? "; last error: " : "",
         m->last_error ? m->last_error : "");
  printf("%-12s %" PRIu64 " asks, %" PRIu64 " skipped while down, %" PRIu64 " timed out; %" PRIu64
         " fetched, %" PRIu64 " stored, %" PRIu64 " refused\n",
         "fleet reads:", m->asks, m->skipped, m->timeouts, m->fetched, m->stored, m->refused);
  printf("%-12s %" PRIu64 " pushed, %" PRIu64 " dropped, %" PRIu64 " refused by Redis, %" PRIu64
         " queued (%s)\n",
         "fleet writes:", m->pushed, m->push_dropped, m->push_errors, m->queued, queued);
  if (m->signing_key && *m->signing_key)
    printf("%-12s signs as %s; ", "fleet trust:", m->signing_key);
  else
    printf("%-12s reads only (no signing key); ", "fleet trust:");
  printf("accepts %" PRIu32 " key%s; refused %" PRIu64 " unsigned, %" PRIu64
         " by untrusted keys, %" PRIu64 " with bad signatures\n",
         m->trusted_keys, m->trusted_keys == 1 ? "" : "s", m->refused_unsigned,
         m->refused_untrusted, m->refused_signature);
  if (m->sync_state && strcmp(m->sync_state, "running") == 0)
    printf("%-12s running\n", "fleet sync:");
  else if (!m->sync)
    printf("%-12s none yet (pcached syncs after its probe of the drivers; `pcachectl fleet "
           "sync` runs one)\n",
           "fleet sync:");
  else if (m->sync_error && *m->sync_error)
    printf("%-12s failed %" PRIu64 " s ago: %s\n", "fleet sync:", m->sync_age_ms / 1000,
           m->sync_error);
  if (m->sync && !(m->sync_state && strcmp(m->sync_state, "running") == 0)) {
    char label[48];
    snprintf(label, sizeof label, "fleet sync: %" PRIu64 " s ago,", m->sync_age_ms / 1000);
    ctl_fleet_sync_print(label, m->sync);
  }
}

/* What the size counts, part by part (docs/storage.md "Sizes"): the
 * entries' part is list's sum; and the disk under data.mdb. */
static void print_parts(const Pcachepb__StatsReply *s) {
  char e[32], sn[32], m[32], d[32], file[32], free_[32], disk[32];
  ctl_fmt_size(s->entry_bytes, e, sizeof e);
  ctl_fmt_size(s->snapshot_part_bytes, sn, sizeof sn);
  ctl_fmt_size(s->module_bytes, m, sizeof m);
  ctl_fmt_size(s->device_bytes, d, sizeof d);
  printf("%-12s entries %s (as list counts them), snapshots %s, SPIR-V modules %s, device "
         "records %s\n",
         "", e, sn, m, d);
  if (!s->disk_size)
    return;
  ctl_fmt_size(s->data_file_size, file, sizeof file);
  ctl_fmt_size(s->disk_free, free_, sizeof free_);
  ctl_fmt_size(s->disk_size, disk, sizeof disk);
  printf("%-12s data.mdb takes %s; %s free of %s on its file system\n", "disk:", file, free_, disk);
}

static int cmd_status(ctl *c, int argc, char **argv) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Stats stats_req = PCACHEPB__STATS__INIT;
  pcache__reply reply = {0};
  const Pcachepb__StatsReply *s;
  int r;

  if ((r = ctl_parse(c, &ctl_verb_status, argc, argv, NULL, NULL)) <= 0)
    return -r;

  request.body_case = PCACHEPB__REQUEST__BODY_STATS;
  request.stats = &stats_req;
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_STATS, &reply);
  if (r != EXIT_OK)
    return r;
  s = reply.response->stats;

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_string(&j, "daemon_version", s->daemon_version);
    ctl_json_kv_uint(&j, "protocol_version", s->protocol_version);
    ctl_json_kv_string(&j, "client_version", PCACHE_VERSION_STRING);
    ctl_json_kv_string(&j, "data_dir", s->data_dir);
    ctl_json_kv_string(&j, "socket_path",
                       s->socket_path && *s->socket_path ? s->socket_path : c->socket_path);
    ctl_json_kv_uint(&j, "entries", s->entries);
    ctl_json_kv_uint(&j, "devices", s->devices);
    ctl_json_kv_uint(&j, "modules", s->modules);
    ctl_json_kv_uint(&j, "bytes_used", s->bytes_used);
    ctl_json_kv_uint(&j, "entry_bytes", s->entry_bytes);
    ctl_json_kv_uint(&j, "snapshot_part_bytes", s->snapshot_part_bytes);
    ctl_json_kv_uint(&j, "module_bytes", s->module_bytes);
    ctl_json_kv_uint(&j, "device_bytes", s->device_bytes);
    ctl_json_kv_string(&j, "full", s->full ? s->full : "");
    ctl_json_kv_string(&j, "full_message", s->full_message ? s->full_message : "");
    ctl_json_kv_uint(&j, "disk_free", s->disk_free);
    ctl_json_kv_uint(&j, "disk_size", s->disk_size);
    ctl_json_kv_uint(&j, "data_file_size", s->data_file_size);
    ctl_json_kv_uint(&j, "max_size", s->max_size);
    ctl_json_kv_uint(&j, "map_size", s->map_size);
    ctl_json_kv_uint(&j, "uptime_s", s->uptime_s);
    ctl_json_kv_uint(&j, "connections", s->connections);
    ctl_json_kv_uint(&j, "requests", s->requests);
    ctl_json_kv_uint(&j, "gets", s->gets);
    ctl_json_kv_uint(&j, "hits", s->hits);
    ctl_json_kv_uint(&j, "misses", s->misses);
    ctl_json_kv_uint(&j, "puts", s->puts);
    ctl_json_kv_uint(&j, "put_rejected", s->put_rejected);
    ctl_json_kv_uint(&j, "evictions", s->evictions);
    ctl_json_kv_uint(&j, "commits", s->commits);
    ctl_json_kv_uint(&j, "checksum_failures", s->checksum_failures);
    ctl_json_kv_uint(&j, "reports", s->reports);
    ctl_json_kv_uint(&j, "snapshots", s->snapshots);
    ctl_json_kv_uint(&j, "snapshot_bytes", s->snapshot_bytes);
    ctl_json_kv_uint(&j, "segments", s->segments);
    ctl_json_kv_uint(&j, "segment_bytes", s->segment_bytes);
    ctl_json_kv_uint(&j, "segment_builds", s->segment_builds);
    ctl_json_kv_uint(&j, "segment_drops", s->segment_drops);
    ctl_json_kv_uint(&j, "segment_sent", s->segment_sent);
    ctl_json_kv_uint(&j, "segment_retired", s->segment_retired);
    ctl_json_kv_uint(&j, "segment_retired_bytes", s->segment_retired_bytes);
    ctl_json_kv_uint(&j, "windows", s->windows);
    ctl_json_kv_uint(&j, "window_bytes", s->window_bytes);
    ctl_json_kv_uint(&j, "window_replies", s->window_replies);
    ctl_json_kv_uint(&j, "window_busy", s->window_busy);
    ctl_json_kv_uint(&j, "prefetch_scans", s->prefetch_scans);
    ctl_replay_show(s, &j);
    if (s->remote)
      json_remote(&j, s->remote);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    char used[32], cap[32], map[32], up[32];
    uint64_t lookups = s->hits + s->misses;
    /* What the cap bounds: entries, modules, device records and snapshots. */
    uint64_t capped = s->bytes_used + s->snapshot_bytes;
    ctl_fmt_size(capped, used, sizeof used);
    ctl_fmt_size(s->max_size, cap, sizeof cap);
    ctl_fmt_size(s->map_size, map, sizeof map);
    pcache__format_duration(s->uptime_s, up, sizeof up);
    printf("%-12s pcached %s, protocol %" PRIu32 " (pcachectl %s)\n", "daemon:", s->daemon_version,
           s->protocol_version, PCACHE_VERSION_STRING);
    printf("%-12s %s\n",
           "socket:", s->socket_path && *s->socket_path ? s->socket_path : c->socket_path);
    printf("%-12s %s\n", "data dir:", s->data_dir);
    printf("%-12s %s\n", "uptime:", up);
    printf("%-12s %" PRIu64 " (%" PRIu64 " devices, %" PRIu64 " SPIR-V modules)\n",
           "entries:", s->entries, s->devices, s->modules);
    if (s->full && *s->full)
      printf("%-12s %s\n", "FULL:", s->full_message);
    printf("%-12s %s of %s (%.1f%%), map %s\n", "size:", used, cap,
           s->max_size ? 100.0 * (double)capped / (double)s->max_size : 0.0, map);
    print_parts(s);
    printf("%-12s %" PRIu64 " (%" PRIu64 " connections open)\n", "requests:", s->requests,
           s->connections);
    printf("%-12s %" PRIu64 " hits, %" PRIu64 " misses (%.1f%% hit rate), %" PRIu64 " gets\n",
           "lookups:", s->hits, s->misses,
           lookups ? 100.0 * (double)s->hits / (double)lookups : 0.0, s->gets);
    printf("%-12s %" PRIu64 " stored, %" PRIu64 " rejected, %" PRIu64 " commits\n",
           "puts:", s->puts, s->put_rejected, s->commits);
    printf("%-12s %" PRIu64 " evictions, %" PRIu64 " checksum failures, %" PRIu64 " reports\n",
           "dropped:", s->evictions, s->checksum_failures, s->reports);
    ctl_fmt_size(s->snapshot_bytes, used, sizeof used);
    printf("%-12s %" PRIu64 " (%s, counted in the size cap)\n", "snapshots:", s->snapshots, used);
    ctl_fmt_size(s->segment_bytes, used, sizeof used);
    printf("%-12s %" PRIu64 " alive (%s), %" PRIu64 " built, %" PRIu64 " dropped, %" PRIu64
           " handed to clients\n",
           "segments:", s->segments, used, s->segment_builds, s->segment_drops, s->segment_sent);
    if (s->segment_retired) {
      ctl_fmt_size(s->segment_retired_bytes, used, sizeof used);
      printf("%-12s %" PRIu64 " replaced or dropped but still mapped by clients (%s, counted in "
             "--segment-memory)\n",
             "", s->segment_retired, used);
    }
    ctl_fmt_size(s->window_bytes, used, sizeof used);
    printf("%-12s %" PRIu64 " open (%s at most), %" PRIu64 " replies through them, %" PRIu64
           " sent inline while the client held the last\n",
           "windows:", s->windows, used, s->window_replies, s->window_busy);
    ctl_replay_show(s, NULL);
    if (s->remote)
      print_remote(s->remote);
  }
  pcache__reply_release(&reply);
  return EXIT_OK;
}

const ctl_command ctl_verb_status = {
    .name = "status",
    .run = cmd_status,
    .synopsis = "status",
    .summary = "the daemon's version, data directory, size, counters",
    .help = "Show the daemon's version, data directory, size, uptime and counters, and\n"
            "the fleet tier's state when pcached runs with --remote.\n",
    .options = NULL,
    .short_options = NULL,
};
