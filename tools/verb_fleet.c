/* pcachectl fleet keygen DIR: a key pair for the fleet tier's signatures
 * (docs/fleet.md "Who can do what"): DIR/fleet.key, the signing key a
 * publishing pcached is given with --remote-signing-key, and
 * DIR/fleet.pub, the line every member that should accept its values adds
 * to its --remote-trusted-keys file. Made here, with the daemon's own
 * reader and writer of these files (daemon/remote_trust.c); no daemon is
 * asked. */
#include <stdio.h>
#include <string.h>

#include "daemon/remote_trust.h"
#include "tools/ctl.h"

static int cmd_fleet(ctl *c, int argc, char **argv) {
  char id[2 * PCD_FLEET_KEY_ID_SIZE + 1], err[512], pub[4200];
  const char *dir;
  int r;
  if ((r = ctl_parse(c, &ctl_verb_fleet, argc, argv, NULL, NULL)) <= 0)
    return -r;
  if (optind >= argc)
    return ctl_usage_error("fleet", "fleet wants a subcommand: keygen DIR");
  if (strcmp(argv[optind], "keygen") != 0)
    return ctl_usage_error("fleet", "unknown fleet subcommand '%s' (keygen DIR)", argv[optind]);
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
    .synopsis = "fleet keygen DIR",
    .summary = "make a key pair for signing the fleet's values",
    .help = "Make a key pair for the fleet tier's signatures (docs/fleet.md): DIR/fleet.key,\n"
            "the signing key of a publishing pcached (--remote-signing-key; mode 0600),\n"
            "and DIR/fleet.pub, its public key on one line, for the --remote-trusted-keys\n"
            "file of every member that accepts its values. DIR is made (0700) when\n"
            "missing; existing files are never replaced. No daemon is asked.\n",
    .takes_arguments = 1,
};
