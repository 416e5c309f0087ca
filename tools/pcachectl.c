/* pcachectl: look at and manage what pcached holds.
 *
 * It speaks the daemon's protocol through libpcache's transport
 * (client/transport.h), never a copy of it. Every command is one or a few
 * requests; what comes back is printed as an aligned table for a person or
 * one JSON document (--json, docs/pcachectl.md) for a script. Exit codes:
 * 0 ok, 1 failure, 2 usage, 3 daemon unreachable. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>
#include <pcache/version.h>

#include "client/transport.h"
#include "common/alloc.h"
#include "common/archive.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/paths.h"
#include "tools/ctl_format.h"
#include "tools/json.h"

enum {
  EXIT_OK = 0,
  EXIT_FAIL = 1,
  EXIT_USAGE = 2,
  EXIT_UNREACHABLE = 3,
};

/* Verify, Export and Import walk the whole store: a generous default. */
#define CTL_DEFAULT_TIMEOUT_MS 30000u
#define CTL_MAX_TIMEOUT_S (7u * 86400u)

typedef struct ctl {
  const char *socket_arg;
  int json;
  uint32_t timeout_ms;
  char socket_path[108];
  pcache_transport *transport;
} ctl;

/* ------------------------------------------------------------------ help */

typedef struct ctl_command {
  const char *name;
  int (*run)(ctl *c, int argc, char **argv);
  const char *synopsis;
  const char *help;
} ctl_command;

static const ctl_command *find_command(const char *name);
static void print_usage(FILE *out);

static const char global_help[] =
    "Global options (before or after the command):\n"
    "  -s, --socket PATH     daemon socket (default $PCACHE_SOCKET,\n"
    "                        else $XDG_RUNTIME_DIR/pcache/socket)\n"
    "  -j, --json            print one JSON document (docs/pcachectl.md)\n"
    "  -t, --timeout SECONDS longest wait for the daemon per request (default 30;\n"
    "                        30s, 2m... accepted)\n"
    "  -h, --help            show help\n"
    "      --version         show the version\n";

static int usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int usage_error(const char *command, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "pcachectl: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'pcachectl %s%s--help'.\n", command ? command : "", command ? " " : "");
  return EXIT_USAGE;
}

static void print_command_help(const ctl_command *cmd, FILE *out) {
  fprintf(out, "Usage: pcachectl [OPTIONS] %s\n\n%s\n%s", cmd->synopsis, cmd->help, global_help);
}

/* ------------------------------------------------------- option parsing */

enum { OPT_VERSION = 0x100, OPT_REPAIR, OPT_ALL, OPT_OLDER, OPT_ENTRY };

#define CTL_COMMON_OPTIONS                                                                         \
  {"socket", required_argument, NULL, 's'}, {"json", no_argument, NULL, 'j'},                      \
      {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'}

#define CTL_COMMON_SHORT "s:jt:h"

/* Handles the options every command takes. Returns 1 when opt was one of
 * them, 0 when it is the command's own, or an exit code (as -code - 1)
 * when the command must stop now. */
static int common_option(ctl *c, const ctl_command *cmd, int opt) {
  uint64_t seconds;
  switch (opt) {
  case 's':
    c->socket_arg = optarg;
    return 1;
  case 'j':
    c->json = 1;
    return 1;
  case 't':
    if (pcache__parse_duration(optarg, &seconds) < 0 || seconds == 0 ||
        seconds > CTL_MAX_TIMEOUT_S)
      return -usage_error(cmd ? cmd->name : NULL, "invalid --timeout '%s'", optarg) - 1;
    c->timeout_ms = (uint32_t)(seconds * 1000u);
    return 1;
  case 'h':
    if (cmd)
      print_command_help(cmd, stdout);
    else
      print_usage(stdout);
    return -EXIT_OK - 1;
  case '?':
  case ':':
    /* getopt already said what was wrong. */
    fprintf(stderr, "Try 'pcachectl %s%s--help'.\n", cmd ? cmd->name : "", cmd ? " " : "");
    return -EXIT_USAGE - 1;
  default:
    return 0;
  }
}

/* ---------------------------------------------------------- connection */

static void print_unreachable(const ctl *c, int err) {
  log_error("cannot reach pcached at %s: %s", c->socket_path, pcache_strerror(err));
  fprintf(stderr, "Is the daemon running? Start it with 'systemctl --user start pcached.socket',\n"
                  "or run 'pcached' (pcached --socket PATH for another socket).\n");
}

/* Connects on first use. Returns an exit code. */
static int ctl_connect(ctl *c) {
  char *message = NULL;
  int r;
  if (c->transport)
    return EXIT_OK;
  r = pcache__socket_path(c->socket_arg, c->socket_path, sizeof c->socket_path);
  if (r < 0) {
    log_error("no daemon socket: %s", r == -ENOENT ? "XDG_RUNTIME_DIR is not set (use --socket)"
                                                   : pcache_strerror(r));
    return EXIT_UNREACHABLE;
  }
  r = pcache__transport_open(c->socket_path, "pcachectl", c->timeout_ms, &c->transport, &message);
  if (r == PCACHE_EUNAVAILABLE || r == -ETIMEDOUT || r == -ENOENT || r == -ECONNREFUSED ||
      r == -EACCES) {
    print_unreachable(c, r);
    pcache__free(message);
    return EXIT_UNREACHABLE;
  }
  if (r < 0) {
    log_error("pcached at %s: %s%s%s", c->socket_path, pcache_strerror(r), message ? ": " : "",
              message ? message : "");
    pcache__free(message);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* One request, its reply checked for the daemon's status and the expected
 * body. Returns an exit code; on EXIT_OK the caller releases ret_reply. */
static void print_refusal(const Pcachepb__Request *request, const Pcachepb__Response *response) {
  log_error("pcached refused %s (%s): %s", pcache__request_kind_name(request),
            pcache_err_name(response->status),
            response->message && *response->message ? response->message
                                                     : pcache_strerror(response->status));
}

/* keep_refused: a refusal that still carries the expected body (Import
 * of a damaged archive reports what it kept) is handed to the caller. */
static int ctl_call_ex(ctl *c, const Pcachepb__Request *request,
                       Pcachepb__Response__BodyCase expected, int keep_refused,
                       pcache_reply *ret_reply) {
  pcache_reply reply = {0};
  int r = ctl_connect(c);
  if (r != EXIT_OK)
    return r;
  r = pcache__transport_call(c->transport, request, c->timeout_ms, &reply);
  if (r < 0) {
    /* The daemon went away or stalled mid-request: the caller cannot know
     * whether it was done, so this is a failure, not "unreachable". */
    log_error("%s request to pcached failed: %s", pcache__request_kind_name(request),
              pcache_strerror(r));
    if (r == -ETIMEDOUT)
      fprintf(stderr, "The daemon may still be working; --timeout SECONDS waits longer.\n");
    pcache__transport_close(c->transport);
    c->transport = NULL;
    return EXIT_FAIL;
  }
  if (reply.response->status != 0 &&
      !(keep_refused && reply.response->body_case == expected)) {
    print_refusal(request, reply.response);
    pcache__reply_release(&reply);
    return EXIT_FAIL;
  }
  if (reply.response->body_case != expected) {
    log_error("pcached sent an unexpected reply to %s", pcache__request_kind_name(request));
    pcache__reply_release(&reply);
    return EXIT_FAIL;
  }
  *ret_reply = reply;
  return EXIT_OK;
}

static int ctl_call(ctl *c, const Pcachepb__Request *request,
                    Pcachepb__Response__BodyCase expected, pcache_reply *ret_reply) {
  return ctl_call_ex(c, request, expected, 0, ret_reply);
}

/* -------------------------------------------------------------- helpers */

static void fmt_size(uint64_t bytes, char *out, size_t out_size) {
  pcache__format_size(bytes, out, out_size);
}

/* Text from drivers and apps, made safe for a terminal table: control
 * characters (a newline would break the table) become '?'. */
static const char *printable(const char *text, char *buf, size_t size) {
  size_t i = 0;
  if (!text || !*text)
    return "-";
  for (; text[i] && i + 1 < size; i++)
    buf[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
  buf[i] = '\0';
  return buf;
}

static int key_from_bytes(const ProtobufCBinaryData *b, pcache_devkey *ret_key) {
  if (b->len != PCACHE_DEVKEY_SIZE)
    return -EINVAL;
  memcpy(ret_key->bytes, b->data, PCACHE_DEVKEY_SIZE);
  return 0;
}

static void uuid_text(const ProtobufCBinaryData *key, char out[37]) {
  if (key->len >= PCACHE_UUID_SIZE)
    pcache__uuid_format(key->data, out);
  else
    snprintf(out, 37, "?");
}

/* A --device argument: a whole 64-hex device key, or a UUID that may stand
 * for several keys (one per driver version or ABI). */
typedef struct device_arg {
  int whole_key;
  pcache_devkey key;
  uint8_t uuid[PCACHE_UUID_SIZE];
} device_arg;

static int parse_device_arg(const char *text, device_arg *ret_arg) {
  device_arg arg;
  memset(&arg, 0, sizeof arg);
  if (strlen(text) == 2 * PCACHE_DEVKEY_SIZE) {
    if (pcache__devkey_parse(text, &arg.key) < 0)
      return -EINVAL;
    arg.whole_key = 1;
  } else if (pcache__uuid_parse(text, arg.uuid) < 0) {
    return -EINVAL;
  }
  *ret_arg = arg;
  return 0;
}

/* The --device/--app filters that list and export share. */
typedef struct entry_filter {
  device_arg dev;
  int have_dev;
  const char *app;
} entry_filter;

/* Takes opt if it is a filter option: 1 when taken, 0 when not a filter
 * option, or a usage error's exit code (negated). */
static int filter_option(const char *cmd, int opt, entry_filter *f) {
  if (opt == 'd') {
    if (parse_device_arg(optarg, &f->dev) < 0)
      return -usage_error(cmd, "--device wants a UUID or a 64-hex device key, not '%s'", optarg);
    f->have_dev = 1;
    return 1;
  }
  if (opt == 'a') {
    f->app = optarg;
    return 1;
  }
  return 0;
}

/* The option loop of list and export: the common options and the filters.
 * Returns -1 when the options were good, else the exit code. */
static int parse_filter_command(ctl *c, const char *name, int argc, char **argv,
                                entry_filter *ret_filter) {
  static const struct option options[] = {CTL_COMMON_OPTIONS,
                                          {"device", required_argument, NULL, 'd'},
                                          {"app", required_argument, NULL, 'a'},
                                          {0}};
  const ctl_command *cmd = find_command(name);
  int opt, r;
  while ((opt = getopt_long(argc, argv, CTL_COMMON_SHORT "d:a:", options, NULL)) != -1) {
    r = common_option(c, cmd, opt);
    if (r < 0)
      return -r - 1;
    if (r)
      continue;
    r = filter_option(name, opt, ret_filter);
    if (r < 0)
      return -r;
  }
  return -1;
}

static int device_matches(const device_arg *arg, const ProtobufCBinaryData *key) {
  if (key->len != PCACHE_DEVKEY_SIZE)
    return 0;
  if (arg->whole_key)
    return memcmp(key->data, arg->key.bytes, PCACHE_DEVKEY_SIZE) == 0;
  return memcmp(key->data, arg->uuid, PCACHE_UUID_SIZE) == 0;
}

/* Every device key the daemon knows that arg names. Returns an exit code;
 * *ret_keys is malloc'ed (may be NULL when *ret_n is 0). */
static int resolve_devices(ctl *c, const device_arg *arg, pcache_devkey **ret_keys,
                           size_t *ret_n) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  pcache_reply reply = {0};
  pcache_devkey *keys = NULL;
  size_t n = 0;
  int r;

  if (arg->whole_key) {
    keys = pcache__malloc(sizeof *keys);
    if (!keys)
      return EXIT_FAIL;
    keys[0] = arg->key;
    *ret_keys = keys;
    *ret_n = 1;
    return EXIT_OK;
  }
  request.body_case = PCACHEPB__REQUEST__BODY_LIST;
  request.list = &list;
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_LIST, &reply);
  if (r != EXIT_OK)
    return r;
  if (reply.response->list->n_devices) {
    keys = pcache__calloc(reply.response->list->n_devices, sizeof *keys);
    if (!keys) {
      pcache__reply_release(&reply);
      return EXIT_FAIL;
    }
  }
  for (size_t i = 0; i < reply.response->list->n_devices; i++) {
    const Pcachepb__DeviceRecord *d = reply.response->list->devices[i];
    if (d->info && device_matches(arg, &d->info->key) && key_from_bytes(&d->info->key, &keys[n]) == 0)
      n++;
  }
  pcache__reply_release(&reply);
  *ret_keys = keys;
  *ret_n = n;
  return EXIT_OK;
}

static const char *err_name_short(int status) {
  const char *name = pcache_err_name(status);
  return strncmp(name, "PCACHE_E", 8) == 0 ? name + 8 : name;
}

/* Problems (Verify, Import) as JSON, or as a table. */
static void print_problems(ctl_json *j, Pcachepb__Problem **problems, size_t n) {
  if (j) {
    ctl_json_key(j, "problems");
    ctl_json_array_begin(j);
    for (size_t i = 0; i < n; i++) {
      const Pcachepb__Problem *p = problems[i];
      ctl_json_object_begin(j);
      ctl_json_kv_hex(j, "device_key", p->device_key.data, p->device_key.len);
      ctl_json_kv_hex(j, "state_hash", p->state_hash.data, p->state_hash.len);
      ctl_json_kv_int(j, "status", p->status);
      ctl_json_kv_string(j, "error", pcache_err_name(p->status));
      ctl_json_kv_string(j, "message", p->message ? p->message : "");
      ctl_json_object_end(j);
    }
    ctl_json_array_end(j);
    return;
  }
  if (n == 0)
    return;
  printf("%-36s  %-32s  %-16s  %s\n", "DEVICE UUID", "STATE HASH", "PROBLEM", "DETAIL");
  for (size_t i = 0; i < n; i++) {
    const Pcachepb__Problem *p = problems[i];
    char uuid[37], hash[2 * PCACHE_HASH_SIZE + 1] = "-";
    uuid_text(&p->device_key, uuid);
    if (p->device_key.len == 0)
      snprintf(uuid, sizeof uuid, "-");
    if (p->state_hash.len == PCACHE_HASH_SIZE)
      pcache__hex(p->state_hash.data, PCACHE_HASH_SIZE, hash);
    printf("%-36s  %-32s  %-16s  %s\n", uuid, hash, err_name_short(p->status),
           p->message && *p->message ? p->message : pcache_strerror(p->status));
  }
}

/* ---------------------------------------------------------------- status */

static int cmd_status(ctl *c, int argc, char **argv) {
  static const struct option options[] = {CTL_COMMON_OPTIONS, {0}};
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Stats stats_req = PCACHEPB__STATS__INIT;
  pcache_reply reply = {0};
  const Pcachepb__StatsReply *s;
  int opt, r;

  while ((opt = getopt_long(argc, argv, CTL_COMMON_SHORT, options, NULL)) != -1) {
    r = common_option(c, find_command("status"), opt);
    if (r < 0)
      return -r - 1;
    if (r == 0)
      return usage_error("status", "unexpected option");
  }
  if (optind < argc)
    return usage_error("status", "unexpected argument '%s'", argv[optind]);

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
    ctl_json_kv_string(&j, "socket_path", s->socket_path && *s->socket_path ? s->socket_path
                                                                             : c->socket_path);
    ctl_json_kv_uint(&j, "entries", s->entries);
    ctl_json_kv_uint(&j, "devices", s->devices);
    ctl_json_kv_uint(&j, "modules", s->modules);
    ctl_json_kv_uint(&j, "bytes_used", s->bytes_used);
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
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    char used[32], cap[32], map[32], up[32];
    uint64_t lookups = s->hits + s->misses;
    /* What the cap bounds: entries, modules, device records and snapshots. */
    uint64_t capped = s->bytes_used + s->snapshot_bytes;
    fmt_size(capped, used, sizeof used);
    fmt_size(s->max_size, cap, sizeof cap);
    fmt_size(s->map_size, map, sizeof map);
    pcache__format_duration(s->uptime_s, up, sizeof up);
    printf("%-12s pcached %s, protocol %" PRIu32 " (pcachectl %s)\n", "daemon:",
           s->daemon_version, s->protocol_version, PCACHE_VERSION_STRING);
    printf("%-12s %s\n", "socket:",
           s->socket_path && *s->socket_path ? s->socket_path : c->socket_path);
    printf("%-12s %s\n", "data dir:", s->data_dir);
    printf("%-12s %s\n", "uptime:", up);
    printf("%-12s %" PRIu64 " (%" PRIu64 " devices, %" PRIu64 " SPIR-V modules)\n", "entries:",
           s->entries, s->devices, s->modules);
    printf("%-12s %s of %s (%.1f%%), map %s\n", "size:", used, cap,
           s->max_size ? 100.0 * (double)capped / (double)s->max_size : 0.0, map);
    printf("%-12s %" PRIu64 " (%" PRIu64 " connections open)\n", "requests:", s->requests,
           s->connections);
    printf("%-12s %" PRIu64 " hits, %" PRIu64 " misses (%.1f%% hit rate), %" PRIu64 " gets\n",
           "lookups:", s->hits, s->misses,
           lookups ? 100.0 * (double)s->hits / (double)lookups : 0.0, s->gets);
    printf("%-12s %" PRIu64 " stored, %" PRIu64 " rejected, %" PRIu64 " commits\n", "puts:",
           s->puts, s->put_rejected, s->commits);
    printf("%-12s %" PRIu64 " evictions, %" PRIu64 " checksum failures, %" PRIu64 " reports\n",
           "dropped:", s->evictions, s->checksum_failures, s->reports);
    fmt_size(s->snapshot_bytes, used, sizeof used);
    printf("%-12s %" PRIu64 " (%s, counted in the size cap)\n", "snapshots:", s->snapshots,
           used);
  }
  pcache__reply_release(&reply);
  return EXIT_OK;
}

/* ------------------------------------------------------------------ list */

/* The list filters, as for entries: a UUID selects every key with it. */
static int snapshot_matches(const Pcachepb__SnapshotRecord *s, const device_arg *dev,
                            const char *app) {
  if (dev && !device_matches(dev, &s->device_key))
    return 0;
  return !app || strcmp(s->app ? s->app : "", app) == 0;
}

static int compare_entries(const void *a, const void *b) {
  const Pcachepb__EntryRecord *x = *(Pcachepb__EntryRecord *const *)a;
  const Pcachepb__EntryRecord *y = *(Pcachepb__EntryRecord *const *)b;
  size_t n = x->device_key.len < y->device_key.len ? x->device_key.len : y->device_key.len;
  int r = n ? memcmp(x->device_key.data, y->device_key.data, n) : 0;
  if (r == 0 && x->device_key.len != y->device_key.len)
    r = x->device_key.len < y->device_key.len ? -1 : 1;
  if (r == 0)
    r = strcmp(x->app ? x->app : "", y->app ? y->app : "");
  if (r == 0 && x->last_used != y->last_used)
    r = x->last_used > y->last_used ? -1 : 1; /* most recently used first */
  if (r == 0 && x->state_hash.len == y->state_hash.len && x->state_hash.len)
    r = memcmp(x->state_hash.data, y->state_hash.data, x->state_hash.len);
  return r;
}

static const Pcachepb__DeviceRecord *find_device(const Pcachepb__ListReply *l,
                                                 const ProtobufCBinaryData *key) {
  for (size_t i = 0; i < l->n_devices; i++) {
    const Pcachepb__DeviceInfo *info = l->devices[i]->info;
    if (info && info->key.len == key->len && memcmp(info->key.data, key->data, key->len) == 0)
      return l->devices[i];
  }
  return NULL;
}

static void json_device(ctl_json *j, const Pcachepb__DeviceRecord *d) {
  const Pcachepb__DeviceInfo *info = d->info;
  pcache_devkey key;
  char uuid[37];
  ctl_json_object_begin(j);
  if (info && key_from_bytes(&info->key, &key) == 0) {
    pcache__uuid_format(pcache__devkey_uuid(&key), uuid);
    ctl_json_kv_hex(j, "key", key.bytes, sizeof key.bytes);
    ctl_json_kv_string(j, "uuid", uuid);
    ctl_json_kv_uint(j, "vendor_id", pcache__devkey_vendor(&key));
    ctl_json_kv_uint(j, "device_id", pcache__devkey_device(&key));
    ctl_json_kv_uint(j, "driver_version", pcache__devkey_driver_version(&key));
    ctl_json_kv_uint(j, "driver_abi", pcache__devkey_abi(&key));
  }
  ctl_json_kv_string(j, "name", info ? info->name : "");
  ctl_json_kv_uint(j, "driver_id", info ? info->driver_id : 0);
  ctl_json_kv_string(j, "driver_name", info ? info->driver_name : "");
  ctl_json_kv_string(j, "driver_info", info ? info->driver_info : "");
  ctl_json_kv_uint(j, "api_version", info ? info->api_version : 0);
  ctl_json_kv_uint(j, "entries", d->entries);
  ctl_json_kv_uint(j, "bytes", d->bytes);
  ctl_json_kv_uint(j, "first_seen", d->first_seen);
  ctl_json_kv_uint(j, "last_seen", d->last_seen);
  ctl_json_object_end(j);
}

static void json_entry(ctl_json *j, const Pcachepb__EntryRecord *e) {
  char kind[16];
  ctl_json_object_begin(j);
  ctl_json_kv_hex(j, "device_key", e->device_key.data, e->device_key.len);
  ctl_json_kv_hex(j, "state_hash", e->state_hash.data, e->state_hash.len);
  ctl_json_kv_string(j, "app", e->app);
  ctl_json_kv_string(j, "kind", ctl_kind_name(e->kind, kind, sizeof kind));
  ctl_json_kv_uint(j, "blob_size", e->blob_size);
  ctl_json_kv_uint(j, "desc_size", e->desc_size);
  {
    /* 64-bit values lose precision as JSON numbers in many parsers. */
    char checksum[17];
    snprintf(checksum, sizeof checksum, "%016" PRIx64, e->checksum);
    ctl_json_kv_string(j, "checksum", checksum);
  }
  ctl_json_kv_uint(j, "created", e->created);
  ctl_json_kv_uint(j, "last_used", e->last_used);
  ctl_json_kv_uint(j, "hits", e->hits);
  ctl_json_kv_uint(j, "compile_ns", e->compile_ns);
  ctl_json_object_end(j);
}

static void print_device_row(const Pcachepb__DeviceRecord *d) {
  const Pcachepb__DeviceInfo *info = d->info;
  pcache_devkey key;
  char uuid[37] = "?", vendor_buf[16], version[32] = "?", size[32];
  const char *vendor = "?";
  uint32_t device_id = 0, abi = 0;
  if (info && key_from_bytes(&info->key, &key) == 0) {
    pcache__uuid_format(pcache__devkey_uuid(&key), uuid);
    vendor = ctl_vendor_name(pcache__devkey_vendor(&key), vendor_buf, sizeof vendor_buf);
    device_id = pcache__devkey_device(&key);
    ctl_format_driver_version(pcache__devkey_vendor(&key), pcache__devkey_driver_version(&key),
                              version, sizeof version);
    abi = pcache__devkey_abi(&key);
  }
  char name[256];
  fmt_size(d->bytes, size, sizeof size);
  printf("%-36s  %-8s  0x%04" PRIx32 "  %-12s  %2" PRIu32 "-bit  %7" PRIu64 "  %10s  %s\n", uuid,
         vendor, device_id, version, abi * 8, d->entries, size,
         printable(info ? info->name : NULL, name, sizeof name));
}

static int cmd_list(ctl *c, int argc, char **argv) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  pcache_reply reply = {0};
  const Pcachepb__ListReply *l;
  const Pcachepb__EntryRecord **entries = NULL;
  const Pcachepb__DeviceRecord **devices = NULL;
  size_t n_entries = 0, n_devices = 0;
  device_arg dev;
  int have_dev = 0, r;
  const char *app = NULL;
  entry_filter filter = {0};
  time_t now = time(NULL);

  if ((r = parse_filter_command(c, "list", argc, argv, &filter)) >= 0)
    return r;
  dev = filter.dev;
  have_dev = filter.have_dev;
  app = filter.app;
  if (optind < argc)
    return usage_error("list", "unexpected argument '%s'", argv[optind]);

  request.body_case = PCACHEPB__REQUEST__BODY_LIST;
  request.list = &list;
  list.entries = 1;
  if (have_dev && dev.whole_key) {
    list.device_key.data = dev.key.bytes;
    list.device_key.len = sizeof dev.key.bytes;
  }
  list.app = (char *)(app ? app : "");
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_LIST, &reply);
  if (r != EXIT_OK)
    return r;
  l = reply.response->list;

  /* Filters are applied here too: a UUID is not something the daemon can
   * filter on, and the daemon's device list is not filtered by app. */
  entries = pcache__calloc(l->n_entries + 1, sizeof *entries);
  devices = pcache__calloc(l->n_devices + 1, sizeof *devices);
  if (!entries || !devices) {
    r = EXIT_FAIL;
    goto out;
  }
  for (size_t i = 0; i < l->n_entries; i++) {
    const Pcachepb__EntryRecord *e = l->entries[i];
    if (have_dev && !device_matches(&dev, &e->device_key))
      continue;
    if (app && strcmp(e->app ? e->app : "", app) != 0)
      continue;
    entries[n_entries++] = e;
  }
  qsort(entries, n_entries, sizeof *entries, compare_entries);
  for (size_t i = 0; i < l->n_devices; i++) {
    const Pcachepb__DeviceRecord *d = l->devices[i];
    int used = 0;
    if (!d->info || (have_dev && !device_matches(&dev, &d->info->key)))
      continue;
    if (app) {
      for (size_t k = 0; k < n_entries && !used; k++)
        used = entries[k]->device_key.len == d->info->key.len &&
               memcmp(entries[k]->device_key.data, d->info->key.data, d->info->key.len) == 0;
      if (!used)
        continue;
    }
    devices[n_devices++] = d;
  }

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_key(&j, "devices");
    ctl_json_array_begin(&j);
    for (size_t i = 0; i < n_devices; i++)
      json_device(&j, devices[i]);
    ctl_json_array_end(&j);
    ctl_json_key(&j, "entries");
    ctl_json_array_begin(&j);
    for (size_t i = 0; i < n_entries; i++)
      json_entry(&j, entries[i]);
    ctl_json_array_end(&j);
    ctl_json_key(&j, "snapshots");
    ctl_json_array_begin(&j);
    for (size_t i = 0; i < l->n_snapshots; i++) {
      const Pcachepb__SnapshotRecord *s = l->snapshots[i];
      char keyhex[2 * PCACHE_DEVKEY_SIZE + 1] = "";
      if (!snapshot_matches(s, have_dev ? &dev : NULL, app))
        continue;
      if (s->device_key.len == PCACHE_DEVKEY_SIZE)
        pcache__hex(s->device_key.data, PCACHE_DEVKEY_SIZE, keyhex);
      ctl_json_object_begin(&j);
      ctl_json_kv_string(&j, "device_key", keyhex);
      ctl_json_kv_string(&j, "app", s->app);
      ctl_json_kv_uint(&j, "blob_size", s->blob_size);
      ctl_json_kv_uint(&j, "hashes", s->hashes);
      ctl_json_kv_uint(&j, "checksum", s->checksum);
      ctl_json_kv_uint(&j, "created", s->created);
      ctl_json_object_end(&j);
    }
    ctl_json_array_end(&j);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
    r = EXIT_OK;
    goto out;
  }

  if (n_devices == 0 && n_entries == 0) {
    printf("no entries%s\n", have_dev || app ? " match" : "");
    r = EXIT_OK;
    goto out;
  }
  printf("%-36s  %-8s  %-6s  %-12s  %-6s  %7s  %10s  %s\n", "DEVICE UUID", "VENDOR", "DEVICE",
         "DRIVER", "ABI", "ENTRIES", "SIZE", "NAME");
  for (size_t i = 0; i < n_devices; i++)
    print_device_row(devices[i]);

  for (size_t i = 0; i < n_entries; i++) {
    const Pcachepb__EntryRecord *e = entries[i];
    int new_device = i == 0 || entries[i - 1]->device_key.len != e->device_key.len ||
                     memcmp(entries[i - 1]->device_key.data, e->device_key.data,
                            e->device_key.len) != 0;
    int new_app = new_device || strcmp(entries[i - 1]->app, e->app) != 0;
    char hash[2 * PCACHE_HASH_SIZE + 1] = "?", kind[16], size[32], created[32], used[32];
    if (new_device) {
      const Pcachepb__DeviceRecord *d = find_device(l, &e->device_key);
      char uuid[37], keyhex[2 * PCACHE_DEVKEY_SIZE + 1] = "?", name[256];
      uuid_text(&e->device_key, uuid);
      if (e->device_key.len == PCACHE_DEVKEY_SIZE)
        pcache__hex(e->device_key.data, PCACHE_DEVKEY_SIZE, keyhex);
      printf("\ndevice %s  %s\n  key %s\n", uuid,
             printable(d && d->info ? d->info->name : NULL, name, sizeof name), keyhex);
    }
    if (new_app) {
      char app_text[256];
      printf("  app %s\n    %-32s  %-11s  %10s  %-16s  %-16s  %6s\n",
             *e->app ? printable(e->app, app_text, sizeof app_text) : "(none)", "STATE HASH",
             "KIND", "BLOB", "CREATED", "LAST USED", "HITS");
    }
    if (e->state_hash.len == PCACHE_HASH_SIZE)
      pcache__hex(e->state_hash.data, PCACHE_HASH_SIZE, hash);
    fmt_size(e->blob_size, size, sizeof size);
    ctl_format_time(e->created, now, created, sizeof created);
    ctl_format_time(e->last_used, now, used, sizeof used);
    printf("    %-32s  %-11s  %10s  %-16s  %-16s  %6" PRIu64 "\n", hash,
           ctl_kind_name(e->kind, kind, sizeof kind), size, created, used, e->hits);
  }
  for (size_t i = 0, shown = 0; i < l->n_snapshots; i++) {
    const Pcachepb__SnapshotRecord *s = l->snapshots[i];
    char uuid[37], size[32], created[32], app_text[256];
    if (!snapshot_matches(s, have_dev ? &dev : NULL, app))
      continue;
    if (shown++ == 0)
      printf("\nsnapshots\n  %-36s  %-24s  %10s  %7s  %s\n", "DEVICE UUID", "APP", "SIZE",
             "HASHES", "CREATED");
    uuid_text(&s->device_key, uuid);
    fmt_size(s->blob_size, size, sizeof size);
    ctl_format_time(s->created, now, created, sizeof created);
    printf("  %-36s  %-24s  %10s  %7" PRIu64 "  %s\n", uuid,
           *s->app ? printable(s->app, app_text, sizeof app_text) : "(none)", size, s->hashes,
           created);
  }
  r = EXIT_OK;

out:
  pcache__free(entries);
  pcache__free(devices);
  pcache__reply_release(&reply);
  return r;
}

/* ----------------------------------------------------------------- purge */

static int purge_one(ctl *c, Pcachepb__Purge *purge, uint64_t *entries, uint64_t *bytes) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  pcache_reply reply = {0};
  int r;
  request.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  request.purge = purge;
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_PURGE, &reply);
  if (r != EXIT_OK)
    return r;
  *entries += reply.response->purge->entries;
  *bytes += reply.response->purge->bytes;
  pcache__reply_release(&reply);
  return EXIT_OK;
}

static int cmd_purge(ctl *c, int argc, char **argv) {
  static const struct option options[] = {CTL_COMMON_OPTIONS,
                                          {"all", no_argument, NULL, OPT_ALL},
                                          {"device", required_argument, NULL, 'd'},
                                          {"app", required_argument, NULL, 'a'},
                                          {"older-than", required_argument, NULL, OPT_OLDER},
                                          {"entry", required_argument, NULL, OPT_ENTRY},
                                          {0}};
  const ctl_command *cmd = find_command("purge");
  Pcachepb__Purge purge = PCACHEPB__PURGE__INIT;
  device_arg dev;
  pcache_hash128 hash;
  pcache_devkey *keys = NULL;
  size_t n_keys = 0;
  uint64_t entries = 0, bytes = 0, seconds = 0;
  const char *app = NULL, *device_text = NULL;
  int selectors = 0, opt, r;

  while ((opt = getopt_long(argc, argv, CTL_COMMON_SHORT "d:a:", options, NULL)) != -1) {
    r = common_option(c, cmd, opt);
    if (r < 0)
      return -r - 1;
    if (r)
      continue;
    selectors++;
    switch (opt) {
    case OPT_ALL:
      purge.selector_case = PCACHEPB__PURGE__SELECTOR_ALL;
      purge.all = 1;
      break;
    case 'd':
      if (parse_device_arg(optarg, &dev) < 0)
        return usage_error("purge", "--device wants a UUID or a 64-hex device key, not '%s'",
                           optarg);
      device_text = optarg;
      purge.selector_case = PCACHEPB__PURGE__SELECTOR_DEVICE_KEY;
      break;
    case 'a':
      if (!*optarg)
        return usage_error("purge", "--app wants a name");
      app = optarg;
      purge.selector_case = PCACHEPB__PURGE__SELECTOR_APP;
      break;
    case OPT_OLDER: {
      int pr = pcache__parse_duration(optarg, &seconds);
      if (pr == -ERANGE)
        return usage_error("purge", "--older-than '%s' is out of range (at most %llu days)",
                           optarg, (unsigned long long)(PCACHE_DURATION_MAX_S / 86400));
      if (pr < 0)
        return usage_error("purge", "--older-than wants a duration (30d, 12h), not '%s'", optarg);
    }
      purge.selector_case = PCACHEPB__PURGE__SELECTOR_OLDER_THAN_S;
      purge.older_than_s = seconds;
      break;
    case OPT_ENTRY:
      if (pcache__hash_parse(optarg, &hash) < 0)
        return usage_error("purge", "--entry wants a 32-hex state hash, not '%s'", optarg);
      purge.selector_case = PCACHEPB__PURGE__SELECTOR_STATE_HASH;
      purge.state_hash.data = hash.bytes;
      purge.state_hash.len = sizeof hash.bytes;
      break;
    default:
      return usage_error("purge", "unexpected option");
    }
  }
  if (optind < argc)
    return usage_error("purge", "unexpected argument '%s'", argv[optind]);
  /* Purging asks nothing, so it must be told exactly one thing to do. */
  if (selectors != 1)
    return usage_error("purge",
                       "purge wants exactly one of --all, --device, --app, --older-than, "
                       "--entry");

  if (purge.selector_case == PCACHEPB__PURGE__SELECTOR_DEVICE_KEY) {
    r = resolve_devices(c, &dev, &keys, &n_keys);
    if (r != EXIT_OK)
      return r;
    for (size_t i = 0; i < n_keys && r == EXIT_OK; i++) {
      purge.device_key.data = keys[i].bytes;
      purge.device_key.len = sizeof keys[i].bytes;
      r = purge_one(c, &purge, &entries, &bytes);
    }
    pcache__free(keys);
    if (r != EXIT_OK)
      return r;
    if (n_keys == 0 && !c->json)
      fprintf(stderr, "pcachectl: no device matches '%s'\n", device_text);
  } else {
    if (app)
      purge.app = (char *)app;
    r = purge_one(c, &purge, &entries, &bytes);
    if (r != EXIT_OK)
      return r;
  }

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_uint(&j, "entries", entries);
    ctl_json_kv_uint(&j, "bytes", bytes);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    char size[32];
    fmt_size(bytes, size, sizeof size);
    printf("purged %" PRIu64 " %s, %s\n", entries, entries == 1 ? "entry" : "entries", size);
  }
  return EXIT_OK;
}

/* ---------------------------------------------------------------- verify */

static int cmd_verify(ctl *c, int argc, char **argv) {
  static const struct option options[] = {CTL_COMMON_OPTIONS,
                                          {"repair", no_argument, NULL, OPT_REPAIR},
                                          {0}};
  const ctl_command *cmd = find_command("verify");
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Verify verify = PCACHEPB__VERIFY__INIT;
  pcache_reply reply = {0};
  const Pcachepb__VerifyReply *v;
  int opt, r, unrepaired;

  while ((opt = getopt_long(argc, argv, CTL_COMMON_SHORT, options, NULL)) != -1) {
    r = common_option(c, cmd, opt);
    if (r < 0)
      return -r - 1;
    if (r)
      continue;
    if (opt == OPT_REPAIR)
      verify.repair = 1;
  }
  if (optind < argc)
    return usage_error("verify", "unexpected argument '%s'", argv[optind]);

  request.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
  request.verify = &verify;
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_VERIFY, &reply);
  if (r != EXIT_OK)
    return r;
  v = reply.response->verify;
  unrepaired = v->n_problems > 0 && (!verify.repair || v->removed < v->n_problems);

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_uint(&j, "checked", v->checked);
    ctl_json_kv_bool(&j, "repair", verify.repair);
    ctl_json_kv_uint(&j, "removed", v->removed);
    ctl_json_kv_bool(&j, "ok", !unrepaired);
    print_problems(&j, v->problems, v->n_problems);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    print_problems(NULL, v->problems, v->n_problems);
    printf("checked %" PRIu64 " %s: %zu %s", v->checked, v->checked == 1 ? "entry" : "entries",
           v->n_problems, v->n_problems == 1 ? "problem" : "problems");
    if (verify.repair)
      printf(", %" PRIu64 " removed", v->removed);
    else if (v->n_problems)
      printf(" (run 'pcachectl verify --repair' to remove them)");
    printf("\n");
  }
  pcache__reply_release(&reply);
  return unrepaired ? EXIT_FAIL : EXIT_OK;
}

/* ---------------------------------------------------------------- export */

/* Several exports (one per device key a UUID names) joined into one
 * archive through the archive reader and writer. */
static int merge_device(void *ctx, const Pcachepb__DeviceInfo *info) {
  return pcache__archive_add_device(ctx, info);
}
static int merge_module(void *ctx, const pcache_hash128 *hash, const void *code, size_t size) {
  return pcache__archive_add_module(ctx, hash, code, size);
}
static int merge_entry(void *ctx, const pcache_archive_entry *entry) {
  return pcache__archive_add_entry(ctx, entry);
}
static int merge_bad(void *ctx, uint64_t index, int err) {
  return err; /* the daemon just made it: damage means something is badly wrong */
}

static int write_all(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    data += n;
    size -= (size_t)n;
  }
  return 0;
}

/* Writes data to path atomically: a temp file beside it, fsync, rename. */
static int write_file_atomic(const char *path, const uint8_t *data, size_t size) {
  char tmp[4096];
  mode_t mask;
  int fd, r;
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
    return -ENAMETOOLONG;
  fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return -errno;
  /* An archive is meant to be shipped: the usual file mode, not mkstemp's
   * 0600. */
  mask = umask(0);
  umask(mask);
  if (fchmod(fd, 0666 & ~mask) < 0)
    goto out_errno;
  r = write_all(fd, data, size);
  if (r < 0)
    goto out_unlink;
  if (fsync(fd) < 0)
    goto out_errno;
  if (close(fd) < 0) {
    fd = -1;
    goto out_errno;
  }
  fd = -1;
  if (rename(tmp, path) < 0)
    goto out_errno;
  return 0;

out_errno:
  r = -errno;
out_unlink:
  if (fd >= 0)
    close(fd);
  unlink(tmp);
  return r;
}

static int export_one(ctl *c, const pcache_devkey *key, const char *app,
                      pcache_archive_writer *merge, pcache_reply *ret_reply, const uint8_t **ret_data,
                      size_t *ret_size, uint64_t *entries) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Export export = PCACHEPB__EXPORT__INIT;
  pcache_reply reply = {0};
  const Pcachepb__ExportReply *e;
  const uint8_t *data;
  size_t size;
  int r;

  request.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
  request.export = &export;
  if (key) {
    export.device_key.data = (uint8_t *)key->bytes;
    export.device_key.len = sizeof key->bytes;
  }
  export.app = (char *)(app ? app : "");
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_EXPORT, &reply);
  if (r != EXIT_OK)
    return r;
  e = reply.response->export;
  data = pcache__reply_bytes(&reply, e->archive, e->archive_offset, e->archive_size, &size);
  if (!data || size == 0) {
    log_error("pcached sent an export that does not fit its reply");
    pcache__reply_release(&reply);
    return EXIT_FAIL;
  }
  *entries += e->entries;
  if (merge) {
    static const pcache_archive_visitor visitor = {merge_device, merge_module, merge_entry,
                                                   merge_bad};
    r = pcache__archive_read(data, size, &visitor, merge);
    pcache__reply_release(&reply);
    if (r != 0) {
      log_error("cannot merge exports: %s", pcache_strerror(r));
      return EXIT_FAIL;
    }
    return EXIT_OK;
  }
  *ret_reply = reply;
  *ret_data = data;
  *ret_size = size;
  return EXIT_OK;
}

static int cmd_export(ctl *c, int argc, char **argv) {
  pcache_reply reply = {0};
  pcache_archive_writer *merge = NULL;
  pcache_devkey *keys = NULL;
  size_t n_keys = 0, size = 0;
  const uint8_t *data = NULL;
  uint8_t *merged = NULL;
  uint64_t entries = 0;
  device_arg dev;
  const char *app = NULL, *file;
  int have_dev = 0, r, to_stdout;
  entry_filter filter = {0};

  if ((r = parse_filter_command(c, "export", argc, argv, &filter)) >= 0)
    return r;
  dev = filter.dev;
  have_dev = filter.have_dev;
  app = filter.app;
  if (argc - optind != 1)
    return usage_error("export", "export wants one FILE (or - for stdout)");
  file = argv[optind];
  to_stdout = strcmp(file, "-") == 0;
  if (to_stdout && isatty(STDOUT_FILENO)) {
    log_error("refusing to write an archive to a terminal");
    return EXIT_FAIL;
  }

  if (!have_dev) {
    r = export_one(c, NULL, app, NULL, &reply, &data, &size, &entries);
  } else {
    r = resolve_devices(c, &dev, &keys, &n_keys);
    if (r != EXIT_OK)
      return r;
    if (n_keys == 1) {
      r = export_one(c, &keys[0], app, NULL, &reply, &data, &size, &entries);
    } else if (n_keys == 0) {
      log_error("no device matches the --device given");
      r = EXIT_FAIL;
    } else {
      r = pcache__archive_writer_new(&merge) < 0 ? EXIT_FAIL : EXIT_OK;
      for (size_t i = 0; i < n_keys && r == EXIT_OK; i++)
        r = export_one(c, &keys[i], app, merge, NULL, NULL, NULL, &entries);
      if (r == EXIT_OK && pcache__archive_finish(merge, &merged, &size) < 0)
        r = EXIT_FAIL;
      data = merged;
    }
    pcache__free(keys);
  }
  if (r != EXIT_OK)
    goto out;

  if (to_stdout) {
    int w = write_all(STDOUT_FILENO, data, size);
    if (w < 0) {
      log_error("writing the archive to stdout: %s", pcache_strerror(w));
      r = EXIT_FAIL;
      goto out;
    }
  } else {
    int w = write_file_atomic(file, data, size);
    if (w < 0) {
      log_error("writing %s: %s", file, pcache_strerror(w));
      r = EXIT_FAIL;
      goto out;
    }
  }

  /* With "-" the archive owns stdout, so the summary goes to stderr. */
  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, to_stdout ? stderr : stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_string(&j, "file", file);
    ctl_json_kv_uint(&j, "entries", entries);
    ctl_json_kv_uint(&j, "bytes", size);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    char human[32];
    fmt_size(size, human, sizeof human);
    fprintf(to_stdout ? stderr : stdout, "exported %" PRIu64 " %s (%s) to %s\n", entries,
            entries == 1 ? "entry" : "entries", human, to_stdout ? "stdout" : file);
  }
  r = EXIT_OK;

out:
  pcache__free(merged);
  pcache__archive_writer_free(merge);
  pcache__reply_release(&reply);
  return r;
}

/* ---------------------------------------------------------------- import */

static int read_all(int fd, uint8_t **ret_data, size_t *ret_size, size_t limit) {
  uint8_t *data = NULL, *bigger;
  size_t size = 0, cap = 0;
  for (;;) {
    ssize_t n;
    if (size == cap) {
      if (cap >= limit) {
        pcache__free(data);
        return -EFBIG;
      }
      cap = cap ? cap * 2 : 65536;
      bigger = pcache__realloc(data, cap);
      if (!bigger) {
        pcache__free(data);
        return -ENOMEM;
      }
      data = bigger;
    }
    n = read(fd, data + size, cap - size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      n = -errno;
      pcache__free(data);
      return (int)n;
    }
    if (n == 0)
      break;
    size += (size_t)n;
  }
  if (size > limit) {
    pcache__free(data);
    return -EFBIG;
  }
  *ret_data = data;
  *ret_size = size;
  return 0;
}

static int cmd_import(ctl *c, int argc, char **argv) {
  static const struct option options[] = {CTL_COMMON_OPTIONS, {0}};
  const ctl_command *cmd = find_command("import");
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Import import = PCACHEPB__IMPORT__INIT;
  pcache_reply reply = {0};
  const Pcachepb__ImportReply *im;
  const Pcachepb__HelloReply *hello;
  uint8_t *data = NULL;
  size_t size = 0, limit;
  const char *file;
  int fd, opt, r;

  while ((opt = getopt_long(argc, argv, CTL_COMMON_SHORT, options, NULL)) != -1) {
    r = common_option(c, cmd, opt);
    if (r < 0)
      return -r - 1;
    if (r == 0)
      return usage_error("import", "unexpected option");
  }
  if (argc - optind != 1)
    return usage_error("import", "import wants one FILE (or - for stdin)");
  file = argv[optind];

  r = ctl_connect(c);
  if (r != EXIT_OK)
    return r;
  /* The archive travels in one request frame: the daemon's frame limit,
   * less room for the framing around it. */
  hello = pcache__transport_hello(c->transport);
  limit = hello && hello->max_frame ? (size_t)hello->max_frame : PCACHE_DEFAULT_MAX_FRAME;
  limit = limit > 4096 ? limit - 4096 : limit;

  if (strcmp(file, "-") == 0) {
    fd = STDIN_FILENO;
  } else {
    fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      log_error("cannot open %s: %s", file, strerror(errno));
      return EXIT_FAIL;
    }
  }
  r = read_all(fd, &data, &size, limit);
  if (fd != STDIN_FILENO)
    close(fd);
  if (r < 0) {
    if (r == -EFBIG)
      log_error("%s is larger than the daemon accepts in one request (%zu bytes); export it in "
                "parts (--device, --app)",
                file, limit);
    else
      log_error("reading %s: %s", file, pcache_strerror(r));
    return EXIT_FAIL;
  }

  request.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  request.import = &import;
  import.archive.data = data;
  import.archive.len = size;
  r = ctl_call_ex(c, &request, PCACHEPB__RESPONSE__BODY_IMPORT, 1, &reply);
  pcache__free(data);
  if (r != EXIT_OK)
    return r;
  im = reply.response->import;
  /* A damaged archive is refused as a whole, yet what came before the
   * damage was kept: say both. */
  if (reply.response->status != 0)
    print_refusal(&request, reply.response);

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_string(&j, "file", file);
    ctl_json_kv_uint(&j, "accepted", im->accepted);
    ctl_json_kv_uint(&j, "refused", im->refused);
    print_problems(&j, im->problems, im->n_problems);
    if (reply.response->status != 0) {
      ctl_json_key(&j, "error");
      ctl_json_object_begin(&j);
      ctl_json_kv_int(&j, "status", reply.response->status);
      ctl_json_kv_string(&j, "error", pcache_err_name(reply.response->status));
      ctl_json_kv_string(&j, "message", reply.response->message ? reply.response->message : "");
      ctl_json_object_end(&j);
    }
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    print_problems(NULL, im->problems, im->n_problems);
    printf("imported %" PRIu64 " %s, refused %" PRIu64 "%s\n", im->accepted,
           im->accepted == 1 ? "entry" : "entries", im->refused,
           reply.response->status ? " (the archive is damaged)" : "");
  }
  r = im->refused || im->n_problems || reply.response->status ? EXIT_FAIL : EXIT_OK;
  pcache__reply_release(&reply);
  return r;
}

/* ------------------------------------------------------------------ main */

static int cmd_help(ctl *c, int argc, char **argv);

static const ctl_command commands[] = {
    {"status", cmd_status, "status",
     "Show the daemon's version, data directory, size, uptime and counters.\n"},
    {"list", cmd_list, "list [--device UUID|KEY] [--app NAME]",
     "List devices, then entries grouped by device and app (most recently used\n"
     "first). --device takes a UUID (every driver build with it) or a whole\n"
     "64-hex device key; --app an application name.\n"},
    {"purge", cmd_purge,
     "purge --all | --device UUID|KEY | --app NAME | --older-than DURATION | --entry HASH",
     "Remove entries and say how many entries and bytes went. Asks nothing.\n"
     "  --all                every entry\n"
     "  --device UUID|KEY    a device key (64 hex), or every key with that UUID\n"
     "  --app NAME           every entry filed under NAME\n"
     "  --older-than DURATION  entries last used longer ago than DURATION\n"
     "                       (90s, 15m, 12h, 30d, 2w)\n"
     "  --entry HASH         the entry with this state hash (32 hex), on every device\n"},
    {"verify", cmd_verify, "verify [--repair]",
     "Check every blob's checksum and header and every description. Problems are\n"
     "listed; --repair removes the entries that have them. Exits 1 when problems\n"
     "were found and not repaired.\n"},
    {"export", cmd_export, "export FILE [--device UUID|KEY] [--app NAME]",
     "Write entries, their descriptions and SPIR-V to a portable, checksummed\n"
     "archive (docs/archive.md). FILE is replaced atomically; - writes to stdout\n"
     "(the summary then goes to stderr).\n"},
    {"import", cmd_import, "import FILE",
     "Load an archive (- reads stdin). The daemon checks every entry exactly as\n"
     "for a Put; refused entries are listed and the rest are kept. Exits 1 when\n"
     "anything was refused.\n"},
    {"help", cmd_help, "help [COMMAND]", "Show help for pcachectl or one command.\n"},
};

static const ctl_command *find_command(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
  return NULL;
}

static void print_usage(FILE *out) {
  fprintf(out, "Usage: pcachectl [OPTIONS] COMMAND [ARGS]\n\n"
               "Manage the pipeline cache kept by pcached.\n\nCommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(out, "  %s\n", commands[i].synopsis);
  fprintf(out, "\n%s\nExit status: 0 ok, 1 failure, 2 usage error, 3 daemon unreachable.\n"
               "'pcachectl help COMMAND' or 'pcachectl COMMAND --help' for more.\n",
          global_help);
}

static int cmd_help(ctl *c, int argc, char **argv) {
  const ctl_command *cmd;
  if (argc <= 1) {
    print_usage(stdout);
    return EXIT_OK;
  }
  if (argc > 2)
    return usage_error("help", "help wants at most one COMMAND");
  cmd = find_command(argv[1]);
  if (!cmd)
    return usage_error(NULL, "unknown command '%s'", argv[1]);
  print_command_help(cmd, stdout);
  return EXIT_OK;
}

int main(int argc, char **argv) {
  static const struct option options[] = {CTL_COMMON_OPTIONS,
                                          {"version", no_argument, NULL, OPT_VERSION},
                                          {0}};
  ctl c = {.timeout_ms = CTL_DEFAULT_TIMEOUT_MS};
  const ctl_command *cmd;
  char prog[64];
  int opt, r;

  pcache_log_set_ident("pcachectl");
  /* "+": global options end at the command, whose own parser takes the
   * rest. */
  while ((opt = getopt_long(argc, argv, "+" CTL_COMMON_SHORT, options, NULL)) != -1) {
    if (opt == OPT_VERSION) {
      printf("pcachectl %s (protocol %d)\n", PCACHE_VERSION_STRING, PCACHE_PROTOCOL_VERSION);
      return EXIT_OK;
    }
    r = common_option(&c, NULL, opt);
    if (r < 0)
      return -r - 1;
  }
  if (optind >= argc) {
    print_usage(stderr);
    return EXIT_USAGE;
  }
  cmd = find_command(argv[optind]);
  if (!cmd)
    return usage_error(NULL, "unknown command '%s'", argv[optind]);

  argc -= optind;
  argv += optind;
  /* getopt names argv[0] in its messages: make that "pcachectl purge". */
  snprintf(prog, sizeof prog, "pcachectl %s", cmd->name);
  argv[0] = prog;
  optind = 0; /* glibc: 0 re-initialises getopt for the command's options */
  r = cmd->run(&c, argc, argv);
  pcache__transport_close(c.transport);
  return r;
}
