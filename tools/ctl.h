/* What pcachectl's verbs share (ctl.c): the context, option parsing, the
 * one call helper, and the printing and filter helpers. Each verb lives in
 * its own file (verb_*.c) and is one entry of the verb table in
 * pcachectl.c; a new verb is a new file and one line there.
 *
 * Exit codes are the program's: 0 ok, 1 failure, 2 usage, 3 daemon
 * unreachable (doctor has its own: verb_doctor.c). */
#ifndef PCACHE_TOOLS_CTL_H
#define PCACHE_TOOLS_CTL_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <pcache/pcache.h>

#include "proto/transport.h"
#include "common/devkey.h"
#include "tools/json.h"

enum {
  EXIT_OK = 0,
  EXIT_FAIL = 1,
  EXIT_USAGE = 2,
  EXIT_UNREACHABLE = 3,
};

/* Verify, Export and Import walk the whole store: a generous default. */
#define CTL_DEFAULT_TIMEOUT_MS 30000u

typedef struct ctl {
  const char *socket_arg;
  int json;
  uint32_t timeout_ms;
  char socket_path[108];
  pcache__transport *transport;
} ctl;

typedef struct ctl_command {
  const char *name;
  int (*run)(ctl *c, int argc, char **argv); /* returns an exit code */
  const char *synopsis;
  const char *summary; /* one line for the command list of --help */
  const char *help;
  /* The verb's own options (getopt_long's, {0}-terminated; may be NULL)
   * and their short letters; the global ones are added by ctl_parse. */
  const struct option *options;
  const char *short_options;
  /* Takes arguments after the options (a FILE), which it checks itself;
   * otherwise ctl_parse refuses any. */
  int takes_arguments;
} ctl_command;

/* The verbs (verb_*.c). */
extern const ctl_command ctl_verb_status, ctl_verb_list, ctl_verb_purge, ctl_verb_verify,
    ctl_verb_export, ctl_verb_import, ctl_verb_layer, ctl_verb_replay, ctl_verb_fleet,
    ctl_verb_doctor;

/* Option values past the letters, for long-only options. */
enum { CTL_OPT_VERSION = 0x100, CTL_OPT_REPAIR, CTL_OPT_ALL, CTL_OPT_OLDER, CTL_OPT_ENTRY };

/* The global options, taken before or after the verb. */
#define CTL_GLOBAL_OPTIONS                                                                         \
  {"socket", required_argument, NULL, 's'}, {"json", no_argument, NULL, 'j'},                      \
      {"timeout", required_argument, NULL, 't'}, {                                                 \
    "help", no_argument, NULL, 'h'                                                                 \
  }
#define CTL_GLOBAL_SHORT "s:jt:h"

extern const char ctl_global_help[];

/* Prints "pcachectl: <message>" and where to get help; returns EXIT_USAGE. */
int ctl_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void ctl_print_command_help(const ctl_command *cmd, FILE *out);

/* Takes a global option (-s, -j, -t). Returns 1 when opt was one, 0 when
 * not, or -EXIT_USAGE after saying what was wrong. */
int ctl_global_option(ctl *c, const char *command, int opt, const char *arg);

/* Takes one of the verb's own options: 0, or -EXIT_USAGE (after
 * ctl_usage_error). */
typedef int (*ctl_option_fn)(ctl *c, const ctl_command *cmd, int opt, const char *arg, void *state);

/*
 * ctl_parse - the verb's command line: the global options and the verb's
 * own (cmd->options, each handed to own with state), and no arguments
 * after them unless cmd->takes_arguments. systemd's convention:
 * returns 1 to go on (optind is the first argument), 0 when the verb is
 * done and successful (--help was printed), or -exit code.
 */
int ctl_parse(ctl *c, const ctl_command *cmd, int argc, char **argv, ctl_option_fn own,
              void *state);

/* Connects on first use. Returns an exit code. */
int ctl_connect(ctl *c);

/*
 * ctl_call - one request; the reply must carry status 0 and the body
 * expected. Returns an exit code, having said what went wrong; on EXIT_OK
 * the caller releases *ret_reply. ctl_call_keep_refused also hands over a
 * refusal that still carries the expected body (Import of a damaged
 * archive reports what it kept).
 */
int ctl_call(ctl *c, const Pcachepb__Request *request, Pcachepb__Response__BodyCase expected,
             pcache__reply *ret_reply);
int ctl_call_keep_refused(ctl *c, const Pcachepb__Request *request,
                          Pcachepb__Response__BodyCase expected, pcache__reply *ret_reply);
/* "pcached refused <kind> (<status>): <why>" for a reply with a status. */
void ctl_print_refusal(const Pcachepb__Request *request, const pcache__reply *reply);

/* ------------------------------------------------------------- printing */

void ctl_fmt_size(uint64_t bytes, char *out, size_t out_size);
/* Text from drivers and apps, made safe for a terminal table: control
 * characters become '?'; NULL or empty becomes "-". */
const char *ctl_printable(const char *text, char *buf, size_t size);
int ctl_key_from_bytes(const ProtobufCBinaryData *b, pcache__devkey *ret_key);
void ctl_uuid_text(const ProtobufCBinaryData *key, char out[37]);
/* What a fleet sync did (verb_fleet.c), for `fleet sync` and status: the
 * fields of a JSON object into j, or one line after label. */
void ctl_fleet_sync_json(ctl_json *j, const Pcachepb__FleetSyncReply *s);
void ctl_fleet_sync_print(const char *label, const Pcachepb__FleetSyncReply *s);
/* The replays of a Stats reply (verb_replay.c): fields of j, or lines. */
void ctl_replay_show(const Pcachepb__StatsReply *s, ctl_json *j);

/* Problems (Verify, Import) as JSON (j non-NULL) or as a table. */
void ctl_print_problems(ctl_json *j, Pcachepb__Problem **problems, size_t n);

/* -------------------------------------------------------------- filters */

/* A --device argument: a whole 64-hex device key, or a UUID that may stand
 * for several keys (one per driver version or ABI). */
typedef struct ctl_device_arg {
  int whole_key;
  pcache__devkey key;
  uint8_t uuid[PCACHE_UUID_SIZE];
} ctl_device_arg;

int ctl_parse_device_arg(const char *text, ctl_device_arg *ret_arg);
int ctl_device_matches(const ctl_device_arg *arg, const ProtobufCBinaryData *key);
/* Every device key the daemon knows that arg names. Returns an exit code;
 * *ret_keys is pcache__malloc'ed (may be NULL when *ret_n is 0). */
int ctl_resolve_devices(ctl *c, const ctl_device_arg *arg, pcache__devkey **ret_keys,
                        size_t *ret_n);

/* The --device/--app filters of list and export. */
typedef struct ctl_entry_filter {
  ctl_device_arg dev;
  int have_dev;
  const char *app;
} ctl_entry_filter;

/* The options of a verb that takes only the filters. */
extern const struct option ctl_filter_options[];
#define CTL_FILTER_SHORT "d:a:"
/* A ctl_option_fn for them; state is a ctl_entry_filter. */
int ctl_filter_option(ctl *c, const ctl_command *cmd, int opt, const char *arg, void *state);

#endif
