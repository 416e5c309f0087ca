/* pcachectl replay: start (or take up again) the replay of superseded
 * device keys for the driver now installed (docs/replay.md), optionally
 * one app's first, and with --wait follow it to the end with a progress
 * bar. Also how status shows replays (ctl_replay_show). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/parse.h"
#include "tools/ctl.h"

typedef struct replay_args {
  ctl_entry_filter filter;
  int wait, detect;
} replay_args;

enum { OPT_WAIT = 0x200, OPT_DETECT };

static const struct option replay_options[] = {
    {"device", required_argument, NULL, 'd'},
    {"app", required_argument, NULL, 'a'},
    {"wait", no_argument, NULL, OPT_WAIT},
    {"detect", no_argument, NULL, OPT_DETECT},
    {0},
};

static int replay_option(ctl *c, const ctl_command *cmd, int opt, const char *arg, void *state) {
  replay_args *a = state;
  if (opt == OPT_WAIT || opt == OPT_DETECT) {
    *(opt == OPT_WAIT ? &a->wait : &a->detect) = 1;
    return 0;
  }
  return ctl_filter_option(c, cmd, opt, arg, &a->filter);
}

/* What pcached's probe of the drivers found (--detect): a line per
 * device, or JSON fields. Returns an exit code: EXIT_FAIL when the probe
 * could not list them. */
static int show_detected(const Pcachepb__ReplayStartReply *r, ctl_json *j) {
  if (j) {
    ctl_json_key(j, "detected");
    ctl_json_array_begin(j);
    for (size_t i = 0; i < r->n_detected; i++) {
      ctl_json_object_begin(j);
      ctl_json_kv_hex(j, "key", r->detected[i]->key.data, r->detected[i]->key.len);
      ctl_json_kv_string(j, "name", r->detected[i]->name);
      ctl_json_kv_string(j, "driver_name", r->detected[i]->driver_name);
      ctl_json_kv_string(j, "driver_info", r->detected[i]->driver_info);
      ctl_json_object_end(j);
    }
    ctl_json_array_end(j);
    ctl_json_kv_string(j, "detect_error", r->detect_error);
  } else {
    for (size_t i = 0; i < r->n_detected; i++) {
      char name[256], driver[256], info[256], hex[65] = "?";
      pcache__devkey key = {{0}};
      if (r->detected[i]->key.len == PCACHE_DEVKEY_SIZE) {
        pcache__hex(r->detected[i]->key.data, PCACHE_DEVKEY_SIZE, hex);
        memcpy(key.bytes, r->detected[i]->key.data, PCACHE_DEVKEY_SIZE);
      }
      /* A device with pipeline binaries is listed twice (docs/replay.md):
       * its second key is its binary key. */
      printf("installed: %s (%s %s), %skey %s\n",
             ctl_printable(r->detected[i]->name, name, sizeof name),
             ctl_printable(r->detected[i]->driver_name, driver, sizeof driver),
             ctl_printable(r->detected[i]->driver_info, info, sizeof info),
             pcache__devkey_abi(&key) & PCACHE_DEVKEY_ABI_BINARY ? "binary " : "", hex);
    }
    if (!r->n_detected && !*r->detect_error)
      printf("installed: no Vulkan device (pcache-replay --list-keys, in pcached's "
             "environment, found none)\n");
  }
  if (!*r->detect_error)
    return EXIT_OK;
  /* A probe that failed after some devices still lists those (replay_detect.c). */
  log_error("pcached could not list %s: %s",
            r->n_detected ? "all the installed drivers (those above are used)"
                          : "the installed drivers",
            r->detect_error);
  return EXIT_FAIL;
}

/* One replay as a line: a bar of 30 cells on a terminal, counts either way. */
static void print_line(const Pcachepb__ReplayProgress *p, int bar, FILE *out) {
  char eta[32] = "";
  uint64_t settled = p->done + p->failed;
  double frac = p->total ? (double)settled / (double)p->total : 1.0;
  if (p->eta_s && !p->finished)
    pcache__format_duration(p->eta_s, eta, sizeof eta);
  if (bar) {
    char cells[31];
    int full = (int)(frac * 30 + 0.5);
    for (int i = 0; i < 30; i++)
      cells[i] = i < full ? '#' : '.';
    cells[30] = '\0';
    fprintf(out, "[%s] ", cells);
  }
  fprintf(out, "%3.0f%% %" PRIu64 "/%" PRIu64 " done, %" PRIu64 " failed%s%s%s%s", frac * 100,
          p->done, p->total, p->failed, p->finished ? ", finished" : "", eta[0] ? ", ETA " : "",
          eta, p->paused && *p->paused ? ", paused" : "");
  /* A staged key's replay builds staged items for the same driver
   * (docs/replay.md "Staged builds"), not an update's. */
  if (p->old_key.len == PCACHE_DEVKEY_SIZE &&
      pcache__le32(p->old_key.data + 28) & PCACHE_DEVKEY_ABI_STAGED)
    fprintf(out, " (staged builds, driver %u)",
            p->new_key.len == PCACHE_DEVKEY_SIZE ? pcache__le32(p->new_key.data + 24) : 0);
  else
    fprintf(out, " (driver %u -> %u)",
            p->old_key.len == PCACHE_DEVKEY_SIZE ? pcache__le32(p->old_key.data + 24) : 0,
            p->new_key.len == PCACHE_DEVKEY_SIZE ? pcache__le32(p->new_key.data + 24) : 0);
}

void ctl_replay_show(const Pcachepb__StatsReply *s, ctl_json *j) {
  if (j) {
    ctl_json_key(j, "replay");
    ctl_json_array_begin(j);
    for (size_t i = 0; i < s->n_replay; i++) {
      const Pcachepb__ReplayProgress *p = s->replay[i];
      ctl_json_object_begin(j);
      ctl_json_kv_hex(j, "old_key", p->old_key.data, p->old_key.len);
      ctl_json_kv_hex(j, "new_key", p->new_key.data, p->new_key.len);
      ctl_json_kv_bool(j, "staged",
                       p->old_key.len == PCACHE_DEVKEY_SIZE &&
                           (pcache__le32(p->old_key.data + 28) & PCACHE_DEVKEY_ABI_STAGED) != 0);
      ctl_json_kv_uint(j, "total", p->total);
      ctl_json_kv_uint(j, "done", p->done);
      ctl_json_kv_uint(j, "failed", p->failed);
      ctl_json_kv_uint(j, "eta_s", p->eta_s);
      ctl_json_kv_bool(j, "running", p->running);
      ctl_json_kv_bool(j, "finished", p->finished);
      ctl_json_kv_uint(j, "replayer_pid", p->replayer_pid);
      ctl_json_kv_string(j, "replayer_name", p->replayer_name ? p->replayer_name : "");
      ctl_json_kv_uint(j, "restarts", p->restarts);
      ctl_json_kv_string(j, "paused", p->paused ? p->paused : "");
      ctl_json_key(j, "failures");
      ctl_json_array_begin(j);
      for (size_t k = 0; k < p->n_failures; k++) {
        ctl_json_object_begin(j);
        ctl_json_kv_hex(j, "state_hash", p->failures[k]->state_hash.data,
                        p->failures[k]->state_hash.len);
        ctl_json_kv_string(j, "reason", p->failures[k]->reason);
        ctl_json_object_end(j);
      }
      ctl_json_array_end(j);
      ctl_json_object_end(j);
    }
    ctl_json_array_end(j);
    return;
  }
  for (size_t i = 0; i < s->n_replay; i++) {
    const Pcachepb__ReplayProgress *p = s->replay[i];
    printf("%-12s ", i ? "" : "replay:");
    print_line(p, isatty(STDOUT_FILENO), stdout);
    printf("\n");
    /* The program whose pipelines it builds: NVIDIA's driver files what
     * it compiles under that name (docs/replay.md). */
    if (p->running && p->replayer_name && *p->replayer_name) {
      char name[128];
      printf("%-12s   replayer pid %u runs as %s\n", "", p->replayer_pid,
             ctl_printable(p->replayer_name, name, sizeof name));
    }
    for (size_t k = 0; k < p->n_failures; k++) {
      char hex[33] = "?";
      if (p->failures[k]->state_hash.len == PCACHE_HASH_SIZE)
        pcache__hex(p->failures[k]->state_hash.data, PCACHE_HASH_SIZE, hex);
      printf("%-12s   failed %s: %s\n", "", hex, p->failures[k]->reason);
    }
  }
}

static int stats(ctl *c, pcache__reply *reply) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Stats st = PCACHEPB__STATS__INIT;
  request.body_case = PCACHEPB__REQUEST__BODY_STATS;
  request.stats = &st;
  return ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_STATS, reply);
}

/* Follows the replays until none is pending: a bar redrawn in place on a
 * terminal, a line per change otherwise. */
static int wait_all(ctl *c) {
  int tty = isatty(STDERR_FILENO), r;
  char last[256] = "";
  for (;;) {
    pcache__reply reply = {0};
    const Pcachepb__StatsReply *s;
    int pending = 0;
    if ((r = stats(c, &reply)) != EXIT_OK)
      return r;
    s = reply.response->stats;
    for (size_t i = 0; i < s->n_replay; i++) {
      char line[256];
      FILE *m = fmemopen(line, sizeof line, "w");
      if (!s->replay[i]->finished)
        pending = 1;
      if (!m)
        continue;
      print_line(s->replay[i], tty, m);
      fclose(m);
      line[sizeof line - 1] = '\0';
      if (tty)
        fprintf(stderr, "\r%s\033[K", line);
      else if (strcmp(line, last) != 0)
        fprintf(stderr, "%s\n", line);
      snprintf(last, sizeof last, "%s", line);
    }
    pcache__reply_release(&reply);
    if (!pending)
      break;
    usleep(200000);
  }
  if (tty)
    fprintf(stderr, "\n");
  return EXIT_OK;
}

static int cmd_replay(ctl *c, int argc, char **argv) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplayStart start = PCACHEPB__REPLAY_START__INIT;
  pcache__reply reply = {0};
  replay_args a = {0};
  pcache__devkey *keys = NULL;
  size_t n = 0;
  uint32_t plans;
  ctl_json j;
  int r;
  if ((r = ctl_parse(c, &ctl_verb_replay, argc, argv, replay_option, &a)) <= 0)
    return -r;
  if (a.detect && (a.filter.have_dev || a.filter.app))
    return ctl_usage_error("replay", "--detect starts what a program on each driver found would "
                                     "start; leave out --device and --app (pcachectl replay "
                                     "--app NAME then puts an app first)");
  if (a.filter.have_dev && (r = ctl_resolve_devices(c, &a.filter.dev, &keys, &n)) != EXIT_OK)
    return r;
  request.body_case = PCACHEPB__REQUEST__BODY_REPLAY_START;
  request.replay_start = &start;
  start.app = (char *)(a.filter.app ? a.filter.app : "");
  start.detect = a.detect;
  /* One request per old key named; the last reply's count is the one. */
  for (size_t i = 0; i < (a.filter.have_dev ? n : 1); i++) {
    pcache__reply_release(&reply);
    if (a.filter.have_dev) {
      start.device_key.data = keys[i].bytes;
      start.device_key.len = PCACHE_DEVKEY_SIZE;
    }
    if ((r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_REPLAY_START, &reply)) != EXIT_OK) {
      pcache__free(keys);
      return r;
    }
  }
  pcache__free(keys);
  /* No reply when --device named no key the daemon has. */
  plans = reply.response ? reply.response->replay_start->plans : 0;
  if (c->json) {
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
  }
  if (a.detect)
    r = show_detected(reply.response->replay_start, c->json ? &j : NULL);
  if (c->json) {
    ctl_json_kv_uint(&j, "pending", plans);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else if (plans == 0) {
    printf("nothing to replay: no stored device key with entries is superseded by a newer\n"
           "driver of the same device ('pcachectl status' shows replays already done)\n");
  } else {
    printf("%u replay%s pending\n", plans, plans == 1 ? "" : "s");
  }
  pcache__reply_release(&reply);
  if (r != EXIT_OK)
    return r;
  /* Nothing pending: --wait has nothing to follow, and a replay finished
   * earlier, shown as "100% done", would read as this one. */
  return a.wait && plans ? wait_all(c) : EXIT_OK;
}

const ctl_command ctl_verb_replay = {
    .name = "replay",
    .run = cmd_replay,
    .synopsis = "replay [--device KEY|UUID] [--app NAME] [--detect] [--wait]",
    .summary = "rebuild a superseded driver's pipelines for the new one",
    .help = "Rebuild the pipelines of device keys an installed driver superseded (same\n"
            "vendor and device, another driver version or cache UUID) for the new one,\n"
            "in the background (pcache-replay). --device: only those old keys; --app:\n"
            "that app's pipelines first; --wait: follow the replay to its end with a\n"
            "progress bar. Finished replays named again run again. With nothing to\n"
            "replay it says so, and --wait returns at once. --detect: pcached lists\n"
            "the Vulkan drivers installed (pcache-replay --list-keys) and starts the\n"
            "replays a program on each would start, as it does when it starts;\n"
            "systemd's pcache-detect.path runs it when a driver's manifest changes.\n",
    .options = replay_options,
    .short_options = CTL_FILTER_SHORT,
};
