/* What pcachectl's verbs share: option parsing, the connection and the one
 * call helper, printing, and the --device/--app filters. */
#include "tools/ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/paths.h"
#include "tools/ctl_format.h"

const char ctl_global_help[] =
    "Global options (before or after the command):\n"
    "  -s, --socket PATH     daemon socket (default $PCACHE_SOCKET,\n"
    "                        else $XDG_RUNTIME_DIR/pcache/socket)\n"
    "  -j, --json            print one JSON document (docs/pcachectl.md)\n"
    "  -t, --timeout SECONDS longest wait for the daemon per request (default 30;\n"
    "                        30s, 2m... accepted)\n"
    "  -h, --help            show help\n"
    "      --version         show the version\n";

int ctl_usage_error(const char *command, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "pcachectl: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'pcachectl %s%s--help'.\n", command ? command : "", command ? " " : "");
  return EXIT_USAGE;
}

void ctl_print_command_help(const ctl_command *cmd, FILE *out) {
  fprintf(out, "Usage: pcachectl [OPTIONS] %s\n\n%s\n%s", cmd->synopsis, cmd->help,
          ctl_global_help);
}

/* ------------------------------------------------------------ options */

#define CTL_MAX_TIMEOUT_S (7u * 86400u)

int ctl_global_option(ctl *c, const char *command, int opt, const char *arg) {
  uint64_t seconds;
  switch (opt) {
  case 's':
    c->socket_arg = arg;
    return 1;
  case 'j':
    c->json = 1;
    return 1;
  case 't':
    if (pcache__parse_duration(arg, &seconds) < 0 || seconds == 0 || seconds > CTL_MAX_TIMEOUT_S)
      return -ctl_usage_error(command, "invalid --timeout '%s'", arg);
    c->timeout_ms = (uint32_t)(seconds * 1000u);
    return 1;
  default:
    return 0;
  }
}

/* Room for the global options, any verb's own and the terminator. */
#define CTL_MAX_OPTIONS 16

int ctl_parse(ctl *c, const ctl_command *cmd, int argc, char **argv, ctl_option_fn own,
              void *state) {
  static const struct option global[] = {CTL_GLOBAL_OPTIONS};
  struct option options[CTL_MAX_OPTIONS] = {0};
  char shorts[64];
  size_t n = 0;
  int opt, r;

  for (size_t i = 0; i < sizeof global / sizeof *global; i++)
    options[n++] = global[i];
  for (const struct option *o = cmd->options; o && o->name && n + 1 < CTL_MAX_OPTIONS; o++)
    options[n++] = *o;
  snprintf(shorts, sizeof shorts, "%s%s", CTL_GLOBAL_SHORT,
           cmd->short_options ? cmd->short_options : "");
  while ((opt = getopt_long(argc, argv, shorts, options, NULL)) != -1) {
    if (opt == 'h') {
      ctl_print_command_help(cmd, stdout);
      return 0;
    }
    if (opt == '?' || opt == ':') {
      /* getopt already said what was wrong. */
      fprintf(stderr, "Try 'pcachectl %s --help'.\n", cmd->name);
      return -EXIT_USAGE;
    }
    r = ctl_global_option(c, cmd->name, opt, optarg);
    if (r < 0)
      return r;
    if (r)
      continue;
    if (!own)
      return -ctl_usage_error(cmd->name, "unexpected option");
    r = own(c, cmd, opt, optarg, state);
    if (r < 0)
      return r;
  }
  if (!cmd->takes_arguments && optind < argc)
    return -ctl_usage_error(cmd->name, "unexpected argument '%s'", argv[optind]);
  return 1;
}

/* ---------------------------------------------------------- connection */

static void print_unreachable(const ctl *c, int err) {
  log_error("cannot reach pcached at %s: %s", c->socket_path, pcache_strerror(err));
  fprintf(stderr, "Is the daemon running? Start it with 'systemctl --user start pcached.socket',\n"
                  "or run 'pcached' (pcached --socket PATH for another socket).\n"
                  "'pcachectl doctor' says what is wrong and how to fix it.\n");
}

int ctl_connect(ctl *c) {
  char *message = NULL;
  int r;
  if (c->transport)
    return EXIT_OK;
  r = pcache__socket_path(c->socket_arg, c->socket_path, sizeof c->socket_path);
  if (r < 0) {
    log_error("no daemon socket: %s",
              r == -ENOENT ? "neither PCACHE_SOCKET nor XDG_RUNTIME_DIR is set (use --socket; "
                             "'pcachectl doctor' explains)"
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

void ctl_print_refusal(const Pcachepb__Request *request, const pcache__reply *reply) {
  int status = reply->response->status;
  log_error("pcached refused %s (%s): %s", pcache__request_kind_name(request),
            pcache_err_name(status), pcache__reply_why(reply, status));
}

static int call(ctl *c, const Pcachepb__Request *request, Pcachepb__Response__BodyCase expected,
                int keep_refused, pcache__reply *ret_reply) {
  pcache__reply reply;
  int r = ctl_connect(c);
  if (r != EXIT_OK)
    return r;
  r = pcache__transport_rpc(c->transport, request, expected, pcache__mono_ms() + c->timeout_ms,
                            &reply);
  if (r == 0 || (keep_refused && reply.response && reply.response->body_case == expected)) {
    *ret_reply = reply;
    return EXIT_OK;
  }
  if (!reply.response) {
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
  if (reply.response->status != 0)
    ctl_print_refusal(request, &reply);
  else
    log_error("pcached sent an unexpected reply to %s", pcache__request_kind_name(request));
  pcache__reply_release(&reply);
  return EXIT_FAIL;
}

int ctl_call(ctl *c, const Pcachepb__Request *request, Pcachepb__Response__BodyCase expected,
             pcache__reply *ret_reply) {
  return call(c, request, expected, 0, ret_reply);
}

int ctl_call_keep_refused(ctl *c, const Pcachepb__Request *request,
                          Pcachepb__Response__BodyCase expected, pcache__reply *ret_reply) {
  return call(c, request, expected, 1, ret_reply);
}

/* -------------------------------------------------------------- helpers */

void ctl_fmt_size(uint64_t bytes, char *out, size_t out_size) {
  pcache__format_size(bytes, out, out_size);
}

/* A newline would break the table. */
const char *ctl_printable(const char *text, char *buf, size_t size) {
  size_t i = 0;
  if (!text || !*text)
    return "-";
  for (; text[i] && i + 1 < size; i++)
    buf[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
  buf[i] = '\0';
  return buf;
}

int ctl_key_from_bytes(const ProtobufCBinaryData *b, pcache__devkey *ret_key) {
  if (b->len != PCACHE_DEVKEY_SIZE)
    return -EINVAL;
  memcpy(ret_key->bytes, b->data, PCACHE_DEVKEY_SIZE);
  return 0;
}

void ctl_uuid_text(const ProtobufCBinaryData *key, char out[37]) {
  if (key->len >= PCACHE_UUID_SIZE)
    pcache__uuid_format(key->data, out);
  else
    snprintf(out, 37, "?");
}

int ctl_parse_device_arg(const char *text, ctl_device_arg *ret_arg) {
  ctl_device_arg arg;
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

const struct option ctl_filter_options[] = {
    {"device", required_argument, NULL, 'd'}, {"app", required_argument, NULL, 'a'}, {0}};

int ctl_filter_option(ctl *c, const ctl_command *cmd, int opt, const char *arg, void *state) {
  ctl_entry_filter *f = state;
  if (opt == 'd') {
    if (ctl_parse_device_arg(arg, &f->dev) < 0)
      return -ctl_usage_error(cmd->name, "--device wants a UUID or a 64-hex device key, not '%s'",
                              arg);
    f->have_dev = 1;
  } else if (opt == 'a') {
    f->app = arg;
  }
  return 0;
}

int ctl_device_matches(const ctl_device_arg *arg, const ProtobufCBinaryData *key) {
  if (key->len != PCACHE_DEVKEY_SIZE)
    return 0;
  if (arg->whole_key)
    return memcmp(key->data, arg->key.bytes, PCACHE_DEVKEY_SIZE) == 0;
  return memcmp(key->data, arg->uuid, PCACHE_UUID_SIZE) == 0;
}

int ctl_resolve_devices(ctl *c, const ctl_device_arg *arg, pcache__devkey **ret_keys,
                        size_t *ret_n) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  pcache__reply reply = {0};
  pcache__devkey *keys = NULL;
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
    if (d->info && ctl_device_matches(arg, &d->info->key) &&
        ctl_key_from_bytes(&d->info->key, &keys[n]) == 0)
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

void ctl_print_problems(ctl_json *j, Pcachepb__Problem **problems, size_t n) {
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
  printf("%-36s  %-32s  %-16s  %s\n", "PIPELINE CACHE UUID", "STATE HASH", "PROBLEM", "DETAIL");
  for (size_t i = 0; i < n; i++) {
    const Pcachepb__Problem *p = problems[i];
    char uuid[37], hash[2 * PCACHE_HASH_SIZE + 1] = "-";
    ctl_uuid_text(&p->device_key, uuid);
    if (p->device_key.len == 0)
      snprintf(uuid, sizeof uuid, "-");
    if (p->state_hash.len == PCACHE_HASH_SIZE)
      pcache__hex(p->state_hash.data, PCACHE_HASH_SIZE, hash);
    printf("%-36s  %-32s  %-16s  %s\n", uuid, hash, err_name_short(p->status),
           p->message && *p->message ? p->message : pcache_strerror(p->status));
  }
}
