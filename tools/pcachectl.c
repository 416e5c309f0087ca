/* pcachectl: look at and manage what pcached holds.
 *
 * It speaks the daemon's protocol through the wire layer's connection and
 * RPC helper (proto/transport.h, proto/rpc.h), never a copy of them, and
 * does not link libpcache. Every verb is one or a few
 * requests; what comes back is printed as an aligned table for a person or
 * one JSON document (--json, docs/pcachectl.md) for a script. This file is
 * the verb table, the global options and help; each verb is its own file
 * (verb_*.c) over what tools/ctl.h shares. Exit codes: 0 ok, 1 failure,
 * 2 usage, 3 daemon unreachable; doctor's are its own (verb_doctor.c). */
#include <stdio.h>
#include <string.h>

#include <pcache/version.h>

#include "common/log.h"
#include "tools/ctl.h"

static int cmd_help(ctl *c, int argc, char **argv);

static const ctl_command verb_help = {
    .name = "help",
    .run = cmd_help,
    .synopsis = "help [COMMAND]",
    .summary = "this help, or one command's",
    .help = "Show help for pcachectl or one command.\n",
};

/* The verb table: one line per verb, each defined in its own verb_*.c. */
static const ctl_command *const verbs[] = {
    &ctl_verb_status, &ctl_verb_doctor, &ctl_verb_list,  &ctl_verb_purge, &ctl_verb_verify,
    &ctl_verb_export, &ctl_verb_import, &ctl_verb_layer, &ctl_verb_replay, &ctl_verb_fleet,
    &verb_help,
};

static const ctl_command *find_command(const char *name) {
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
    if (strcmp(verbs[i]->name, name) == 0)
      return verbs[i];
  return NULL;
}

static void print_usage(FILE *out) {
  fprintf(out, "Usage: pcachectl [OPTIONS] COMMAND [ARGS]\n\n"
               "Manage the pipeline cache kept by pcached.\n\nCommands:\n");
  /* Each command's synopsis, then what it does: beside it, or under it
   * when the synopsis is long (as the README lists them). */
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) {
    const ctl_command *v = verbs[i];
    if (!v->summary)
      fprintf(out, "  %s\n", v->synopsis);
    else if (strlen(v->synopsis) <= 28)
      fprintf(out, "  %-28s %s\n", v->synopsis, v->summary);
    else
      fprintf(out, "  %s\n  %-28s %s\n", v->synopsis, "", v->summary);
  }
  fprintf(out,
          "\n%s\nExit status: 0 ok, 1 failure, 2 usage error, 3 daemon unreachable\n"
          "(doctor: 0 nothing to fix, 1 warnings, 4 problems).\n"
          "'pcachectl help COMMAND' or 'pcachectl COMMAND --help' for more.\n",
          ctl_global_help);
}

static int cmd_help(ctl *c, int argc, char **argv) {
  const ctl_command *cmd;
  if (argc <= 1) {
    print_usage(stdout);
    return EXIT_OK;
  }
  if (argc > 2)
    return ctl_usage_error("help", "help wants at most one COMMAND");
  cmd = find_command(argv[1]);
  if (!cmd)
    return ctl_usage_error(NULL, "unknown command '%s'", argv[1]);
  ctl_print_command_help(cmd, stdout);
  return EXIT_OK;
}

int main(int argc, char **argv) {
  static const struct option options[] = {
      CTL_GLOBAL_OPTIONS, {"version", no_argument, NULL, CTL_OPT_VERSION}, {0}};
  ctl c = {.timeout_ms = CTL_DEFAULT_TIMEOUT_MS};
  const ctl_command *cmd;
  char prog[64];
  int opt, r;

  pcache__log_set_ident("pcachectl");
  /* "+": global options end at the verb, whose own parser takes the rest
   * (global options included). */
  while ((opt = getopt_long(argc, argv, "+" CTL_GLOBAL_SHORT, options, NULL)) != -1) {
    switch (opt) {
    case CTL_OPT_VERSION:
      printf("pcachectl %s (protocol %d)\n", PCACHE_VERSION_STRING, PCACHE_PROTOCOL_VERSION);
      return EXIT_OK;
    case 'h':
      print_usage(stdout);
      return EXIT_OK;
    case '?':
    case ':':
      fprintf(stderr, "Try 'pcachectl --help'.\n");
      return EXIT_USAGE;
    default:
      r = ctl_global_option(&c, NULL, opt, optarg);
      if (r < 0)
        return -r;
    }
  }
  if (optind >= argc) {
    print_usage(stderr);
    return EXIT_USAGE;
  }
  cmd = find_command(argv[optind]);
  if (!cmd)
    return ctl_usage_error(NULL, "unknown command '%s'", argv[optind]);

  argc -= optind;
  argv += optind;
  /* getopt names argv[0] in its messages: make that "pcachectl purge". */
  snprintf(prog, sizeof prog, "pcachectl %s", cmd->name);
  argv[0] = prog;
  optind = 0; /* glibc: 0 re-initialises getopt for the verb's options */
  r = cmd->run(&c, argc, argv);
  pcache__transport_close(c.transport);
  return r;
}
