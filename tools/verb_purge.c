/* pcachectl purge: remove entries by one selector. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "common/parse.h"
#include "tools/ctl.h"

/* What purges removed, summed over the devices a UUID names. */
typedef struct purged {
  uint64_t entries, bytes, snapshots, snapshot_bytes, other_bytes;
} purged;

static int purge_one(ctl *c, Pcachepb__Purge *purge, purged *sum) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  pcache__reply reply = {0};
  int r;
  request.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  request.purge = purge;
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_PURGE, &reply);
  if (r != EXIT_OK)
    return r;
  sum->entries += reply.response->purge->entries;
  sum->bytes += reply.response->purge->bytes;
  sum->snapshots += reply.response->purge->snapshots;
  sum->snapshot_bytes += reply.response->purge->snapshot_bytes;
  sum->other_bytes += reply.response->purge->other_bytes;
  pcache__reply_release(&reply);
  return EXIT_OK;
}

/* What the options chose: exactly one selector. */
typedef struct purge_args {
  Pcachepb__Purge purge;
  ctl_device_arg dev;
  pcache__hash hash;
  const char *app, *device_text;
  int selectors;
} purge_args;

static int purge_option(ctl *c, const ctl_command *cmd, int opt, const char *arg, void *state) {
  purge_args *a = state;
  uint64_t seconds = 0;
  a->selectors++;
  switch (opt) {
  case CTL_OPT_ALL:
    a->purge.selector_case = PCACHEPB__PURGE__SELECTOR_ALL;
    a->purge.all = 1;
    return 0;
  case 'd':
    if (ctl_parse_device_arg(arg, &a->dev) < 0)
      return -ctl_usage_error("purge", "--device wants a UUID or a 64-hex device key, not '%s'",
                              arg);
    a->device_text = arg;
    a->purge.selector_case = PCACHEPB__PURGE__SELECTOR_DEVICE_KEY;
    return 0;
  case 'a':
    if (!*arg)
      return -ctl_usage_error("purge", "--app wants a name");
    a->app = arg;
    a->purge.selector_case = PCACHEPB__PURGE__SELECTOR_APP;
    return 0;
  case CTL_OPT_OLDER: {
    int pr = pcache__parse_duration(arg, &seconds);
    if (pr == -ERANGE)
      return -ctl_usage_error("purge", "--older-than '%s' is out of range (at most %llu days)", arg,
                              (unsigned long long)(PCACHE_DURATION_MAX_S / 86400));
    if (pr < 0)
      return -ctl_usage_error("purge", "--older-than wants a duration (30d, 12h), not '%s'", arg);
  }
    a->purge.selector_case = PCACHEPB__PURGE__SELECTOR_OLDER_THAN_S;
    a->purge.older_than_s = seconds;
    return 0;
  case CTL_OPT_ENTRY:
    if (pcache__hash_parse(arg, &a->hash) < 0)
      return -ctl_usage_error("purge", "--entry wants a 32-hex state hash, not '%s'", arg);
    a->purge.selector_case = PCACHEPB__PURGE__SELECTOR_STATE_HASH;
    a->purge.state_hash.data = a->hash.bytes;
    a->purge.state_hash.len = sizeof a->hash.bytes;
    return 0;
  default:
    return -ctl_usage_error("purge", "unexpected option");
  }
}

static const struct option purge_options[] = {
    {"all", no_argument, NULL, CTL_OPT_ALL},
    {"device", required_argument, NULL, 'd'},
    {"app", required_argument, NULL, 'a'},
    {"older-than", required_argument, NULL, CTL_OPT_OLDER},
    {"entry", required_argument, NULL, CTL_OPT_ENTRY},
    {0}};

static int cmd_purge(ctl *c, int argc, char **argv) {
  purge_args a = {.purge = PCACHEPB__PURGE__INIT};
  Pcachepb__Purge *purge = &a.purge;
  pcache__devkey *keys = NULL;
  size_t n_keys = 0;
  purged sum = {0};
  int r;

  if ((r = ctl_parse(c, &ctl_verb_purge, argc, argv, purge_option, &a)) <= 0)
    return -r;
  /* Purging asks nothing, so it must be told exactly one thing to do. */
  if (a.selectors != 1)
    return ctl_usage_error("purge",
                           "purge wants exactly one of --all, --device, --app, --older-than, "
                           "--entry");

  if (purge->selector_case == PCACHEPB__PURGE__SELECTOR_DEVICE_KEY) {
    r = ctl_resolve_devices(c, &a.dev, &keys, &n_keys);
    if (r != EXIT_OK)
      return r;
    for (size_t i = 0; i < n_keys && r == EXIT_OK; i++) {
      purge->device_key.data = keys[i].bytes;
      purge->device_key.len = sizeof keys[i].bytes;
      r = purge_one(c, purge, &sum);
    }
    pcache__free(keys);
    if (r != EXIT_OK)
      return r;
    if (n_keys == 0 && !c->json)
      fprintf(stderr, "pcachectl: no device matches '%s'\n", a.device_text);
  } else {
    if (a.app)
      purge->app = (char *)a.app;
    r = purge_one(c, purge, &sum);
    if (r != EXIT_OK)
      return r;
  }

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_uint(&j, "entries", sum.entries);
    ctl_json_kv_uint(&j, "bytes", sum.bytes);
    ctl_json_kv_uint(&j, "snapshots", sum.snapshots);
    ctl_json_kv_uint(&j, "snapshot_bytes", sum.snapshot_bytes);
    ctl_json_kv_uint(&j, "other_bytes", sum.other_bytes);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    char size[32];
    /* The entries' sizes as list shows them (docs/storage.md "Sizes");
     * what else went is said apart. */
    ctl_fmt_size(sum.bytes, size, sizeof size);
    printf("purged %" PRIu64 " %s, %s (each entry's blob, description and index records)\n",
           sum.entries, sum.entries == 1 ? "entry" : "entries", size);
    if (sum.snapshots) {
      ctl_fmt_size(sum.snapshot_bytes, size, sizeof size);
      printf("and %" PRIu64 " %s, %s\n", sum.snapshots,
             sum.snapshots == 1 ? "snapshot" : "snapshots", size);
    }
    if (sum.other_bytes) {
      ctl_fmt_size(sum.other_bytes, size, sizeof size);
      printf("and %s of SPIR-V modules and device records no entry uses any more\n", size);
    }
  }
  return EXIT_OK;
}

const ctl_command ctl_verb_purge = {
    .name = "purge",
    .run = cmd_purge,
    .synopsis =
        "purge --all | --device UUID|KEY | --app NAME | --older-than DURATION | --entry HASH",
    .summary = "remove entries: all, by device, app, age or hash",
    .help = "Remove entries and say how many entries and bytes went. Asks nothing.\n"
            "  --all                every entry\n"
            "  --device UUID|KEY    a device key (64 hex), or every key with that UUID\n"
            "  --app NAME           every entry filed under NAME\n"
            "  --older-than DURATION  entries last used longer ago than DURATION\n"
            "                       (90s, 15m, 12h, 30d, 2w)\n"
            "  --entry HASH         the entry with this state hash (32 hex), on every device\n",
    .options = purge_options,
    .short_options = "d:a:",
};
