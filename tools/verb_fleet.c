/* pcachectl fleet: the fleet tier's own commands (docs/fleet.md).
 *
 * fleet keygen DIR: a key pair for the fleet tier's signatures ("Who can
 * do what"): DIR/fleet.key, the signing key a publishing pcached is given
 * with --remote-signing-key, and DIR/fleet.pub, the line every member
 * that should accept its values adds to its --remote-trusted-keys file.
 * Made here, with the daemon's own reader and writer of these files
 * (daemon/fleet/trust/remote_trust.c); no daemon is asked.
 *
 * fleet sync: asks pcached to pull what the fleet has for this machine's
 * devices now ("Sync": FleetSync), and prints what the sync did, as the
 * daemon's reply says. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "daemon/fleet/trust/remote_trust.h"
#include "tools/ctl.h"

void ctl_fleet_sync_json(ctl_json *j, const Pcachepb__FleetSyncReply *s) {
  ctl_json_kv_uint(j, "devices", s->devices);
  ctl_json_kv_uint(j, "apps", s->apps);
  ctl_json_kv_uint(j, "listed", s->listed);
  ctl_json_kv_uint(j, "fetched", s->fetched);
  ctl_json_kv_uint(j, "staged", s->staged);
  ctl_json_kv_uint(j, "refused", s->refused);
  ctl_json_kv_uint(j, "ms", s->ms);
}

void ctl_fleet_sync_print(const char *label, const Pcachepb__FleetSyncReply *s) {
  printf("%-12s %" PRIu32 " device%s, %" PRIu32 " app%s, %" PRIu64 " hashes listed, %" PRIu64
         " fetched, %" PRIu64 " staged, %" PRIu64 " refused, in %" PRIu64 " ms\n",
         label, s->devices, s->devices == 1 ? "" : "s", s->apps, s->apps == 1 ? "" : "s", s->listed,
         s->fetched, s->staged, s->refused, s->ms);
}

/* fleet sync: answered once the daemon's sync has ended. */
static int fleet_sync(ctl *c) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__FleetSync sync = PCACHEPB__FLEET_SYNC__INIT;
  pcache__reply reply = {0};
  const Pcachepb__FleetSyncReply *s;
  int r;
  request.body_case = PCACHEPB__REQUEST__BODY_FLEET_SYNC;
  request.fleet_sync = &sync;
  if ((r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_FLEET_SYNC, &reply)) != EXIT_OK)
    return r;
  s = reply.response->fleet_sync;
  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_fleet_sync_json(&j, s);
    ctl_json_kv_bool(&j, "joined", s->joined);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    if (s->joined)
      printf("a sync was under way; it did:\n");
    ctl_fleet_sync_print("fleet sync:", s);
    if (s->staged)
      printf("the replayer builds the staged pipelines in the background ('pcachectl status'\n"
             "shows its progress)\n");
  }
  pcache__reply_release(&reply);
  return EXIT_OK;
}

static int cmd_fleet(ctl *c, int argc, char **argv) {
  char id[2 * PCD_FLEET_KEY_ID_SIZE + 1], err[512], pub[4200];
  const char *dir;
  int r;
  if ((r = ctl_parse(c, &ctl_verb_fleet, argc, argv, NULL, NULL)) <= 0)
    return -r;
  if (optind >= argc)
    return ctl_usage_error("fleet", "fleet wants a subcommand: keygen DIR, or sync");
  if (strcmp(argv[optind], "sync") == 0) {
    if (argc - optind != 1)
      return ctl_usage_error("fleet", "fleet sync takes no argument");
    return fleet_sync(c);
  }
  if (strcmp(argv[optind], "keygen") != 0)
    return ctl_usage_error("fleet", "unknown fleet subcommand '%s' (keygen DIR, or sync)",
                           argv[optind]);
  if (argc - optind != 2)
    return ctl_usage_error("fleet", "fleet keygen wants one DIR");
  dir = argv[optind + 1];
  if (pcd_trust_keygen(dir, id, err, sizeof err) < 0) {
    fprintf(stderr, "pcachectl: fleet keygen: %s\n", err);
    return EXIT_FAIL;
  }
  snprintf(pub, sizeof pub, "%s/fleet.pub", dir);
  if (c->json) {
    ctl_json j;
    char key[4200];
    snprintf(key, sizeof key, "%s/fleet.key", dir);
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_string(&j, "key_id", id);
    ctl_json_kv_string(&j, "signing_key", key);
    ctl_json_kv_string(&j, "public_key", pub);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    printf("key id %s\n"
           "signing key  %s/fleet.key (secret, mode 0600): pcached --remote-signing-key\n"
           "public key   %s: add its line to the --remote-trusted-keys file of every\n"
           "             member that should accept what this key signs\n",
           id, dir, pub);
  }
  return EXIT_OK;
}

const ctl_command ctl_verb_fleet = {
    .name = "fleet",
    .run = cmd_fleet,
    .synopsis = "fleet keygen DIR | fleet sync",
    .summary = "make a key pair for signing the fleet's values; pull the fleet's entries now",
    .help = "fleet keygen DIR: make a key pair for the fleet tier's signatures\n"
            "(docs/fleet.md): DIR/fleet.key, the signing key of a publishing pcached\n"
            "(--remote-signing-key; mode 0600), and DIR/fleet.pub, its public key on one\n"
            "line, for the --remote-trusted-keys file of every member that accepts its\n"
            "values. DIR is made (0700) when missing; existing files are never replaced.\n"
            "No daemon is asked.\n"
            "\n"
            "fleet sync: have pcached pull what the fleet has for this machine's installed\n"
            "devices now and stage it for its replayer, which builds each pipeline into\n"
            "the store and the driver's own cache (docs/fleet.md \"Sync\"); pcached does\n"
            "this at its start too. Prints what the sync did once it has ended (one\n"
            "under way is not started twice: its result is printed). --timeout SECONDS\n"
            "waits longer for a large fleet.\n",
    .takes_arguments = 1,
};
