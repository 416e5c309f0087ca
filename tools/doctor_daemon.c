/* pcachectl doctor: the daemon, and what it knows. Where the socket is
 * and why (--socket, PCACHE_SOCKET, the XDG_RUNTIME_DIR default), whether
 * pcached answers there, and if not, why and what starts it (the systemd
 * socket unit when there is a user manager, pcached by hand otherwise);
 * then the store's health and fullness, the devices and drivers seen, and
 * the replays pending or running. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pcache/version.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/devkey.h"
#include "common/parse.h"
#include "common/paths.h"
#include "tools/ctl_format.h"
#include "tools/doctor.h"

/* How long doctor waits for the daemon to answer its Hello: a daemon that
 * takes longer is itself a finding. */
#define DOCTOR_CONNECT_MS 5000u
/* A store this full evicts at almost every upload. */
#define DOCTOR_FULL_PERCENT 90

/* --------------------------------------------------- systemd's user units */

/* The first line systemctl --user prints for args, within 3 s; "" when it
 * cannot say (no systemctl, no user manager, no answer). */
static void systemctl(const char *verb, char *out, size_t size) {
  int p[2], status;
  pid_t pid;
  ssize_t n = 0;
  out[0] = '\0';
  if (pipe2(p, O_CLOEXEC) < 0)
    return;
  pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return;
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(p[1], STDOUT_FILENO);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDERR_FILENO);
    }
    execlp("systemctl", "systemctl", "--user", "--no-pager", verb, "pcached.socket", (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  for (uint64_t end = pcache__mono_ms() + 3000; (size_t)n + 1 < size;) {
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    uint64_t now = pcache__mono_ms();
    ssize_t got;
    if (now >= end || poll(&pfd, 1, (int)(end - now)) <= 0) {
      kill(pid, SIGKILL);
      n = 0;
      break;
    }
    got = read(p[0], out + n, size - 1 - (size_t)n);
    if (got <= 0)
      break;
    n += got;
  }
  close(p[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  out[n] = '\0';
  out[strcspn(out, "\n")] = '\0';
}

typedef struct units {
  int manager;      /* a systemd user manager runs for this user */
  char active[32];  /* systemctl --user is-active pcached.socket */
  char enabled[64]; /* is-enabled; "" when the unit is not installed */
} units;

static void probe_units(units *u) {
  const char *rt = getenv("XDG_RUNTIME_DIR");
  char path[4096];
  struct stat st;
  memset(u, 0, sizeof *u);
  /* The user manager's private socket: systemctl --user talks to it. */
  if (!rt || !*rt || snprintf(path, sizeof path, "%s/systemd/private", rt) >= (int)sizeof path ||
      stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
    return;
  u->manager = 1;
  systemctl("is-active", u->active, sizeof u->active);
  systemctl("is-enabled", u->enabled, sizeof u->enabled);
}

/* ------------------------------------------------------------ the daemon */

static void explain_unreachable(doctor *d, int err, const char *message) {
  const char *rt = getenv("XDG_RUNTIME_DIR");
  char dflt[200] = "", *detail, *fix;
  const char *cause, *how;
  struct stat st;
  units u;
  int default_path = 0, file = lstat(d->socket_path, &st) == 0;
  if (rt && *rt) {
    snprintf(dflt, sizeof dflt, "%s/pcache/socket", rt);
    default_path = strcmp(dflt, d->socket_path) == 0;
  }
  probe_units(&u);
  switch (err) {
  case PCACHE_EPEER:
    cause = "the process listening there is another user's; pcachectl, libpcache and the layer "
            "refuse to talk to it";
    break;
  case -EACCES:
  case -EPERM:
    cause = "you may not connect to that socket (its mode or its directory's)";
    break;
  case -ETIMEDOUT:
    cause = "something accepts connections there but did not answer in time (a stopped or "
            "overloaded daemon)";
    break;
  case PCACHE_EVERSION:
    cause = "the daemon speaks another protocol version (pcached and pcachectl are of different "
            "pcache versions)";
    break;
  case PCACHE_ETOO_MANY_CONNECTIONS:
    cause = "the daemon is at --max-connections and refused this one";
    break;
  default:
    if (!file)
      cause = "nothing listens there: there is no socket file";
    else if (!S_ISSOCK(st.st_mode))
      cause = "the path is not a socket";
    else
      cause = "a socket file is there but no daemon accepts on it (a daemon that was killed "
              "left it behind)";
  }
  /* What starts it: the socket unit where systemd runs the session and
   * listens on the default path; by hand anywhere else. */
  int installed = u.enabled[0] && strcmp(u.enabled, "not-found") != 0;
  char units_text[200], by_hand[600];
  if (!u.manager)
    snprintf(units_text, sizeof units_text,
             "No systemd user manager runs for you, so nothing starts pcached on demand.");
  else if (!default_path)
    snprintf(units_text, sizeof units_text,
             "pcached.socket listens on the default path only, not on this one.");
  else if (!installed)
    snprintf(units_text, sizeof units_text, "pcached.socket is not installed for systemd --user.");
  else
    snprintf(units_text, sizeof units_text, "pcached.socket is %s and %s.",
             u.active[0] ? u.active : "in an unknown state", u.enabled);
  snprintf(by_hand, sizeof by_hand,
           "start it by hand: %s%s%ssetsid -f pcached >>$HOME/.cache/pcached.log 2>&1 "
           "(docs/operations.md, \"Without a systemd user manager\")",
           default_path ? "" : "PCACHE_SOCKET=", default_path ? "" : d->socket_path,
           default_path ? "" : " ");
  if (u.manager && default_path && installed && strcmp(u.active, "active") != 0)
    how = "systemctl --user enable --now pcached.socket";
  else if (u.manager && default_path && installed)
    how = "systemctl --user restart pcached.socket pcached.service (journalctl --user -u "
          "pcached says why it did not answer)";
  else if (u.manager && default_path)
    how = "install pcache's user units (cmake --install puts pcached.socket in "
          "PREFIX/lib/systemd/user), then: systemctl --user daemon-reload; systemctl --user "
          "enable --now pcached.socket";
  else
    how = by_hand;
  detail = doctor_printf("The socket path comes from %s. Cause: %s%s%s%s. %s Until it answers, "
                         "libpcache apps build every pipeline locally and the layer says it is "
                         "inactive.",
                         d->socket_from ? d->socket_from : "nowhere", cause, message ? " (" : "",
                         message ? message : "", message ? ")" : "", units_text);
  if (err == PCACHE_EPEER)
    fix = doctor_printf("point PCACHE_SOCKET at a socket of your own pcached, or find out who "
                        "listens on %s",
                        d->socket_path);
  else if (err == PCACHE_EVERSION)
    fix = doctor_printf("restart pcached so that the installed version runs (systemctl --user "
                        "restart pcached, or stop and start it by hand)");
  else if (err == PCACHE_ETOO_MANY_CONNECTIONS)
    fix = doctor_printf("raise pcached's --max-connections");
  else
    fix = doctor_printf("%s", how);
  doctor_add(d, "daemon", DOCTOR_PROBLEM, detail, fix, "no pcached answers at %s (%s)",
             d->socket_path, pcache_strerror(err));
  pcache__free(detail);
  pcache__free(fix);
}

static int call(doctor *d, Pcachepb__Request *request, Pcachepb__Response__BodyCase expected,
                pcache__reply *reply) {
  int r = pcache__transport_rpc(d->c->transport, request, expected,
                                pcache__mono_ms() + d->c->timeout_ms, reply);
  if (r < 0 && reply->response)
    pcache__reply_release(reply);
  return r;
}

/* ------------------------------------------------------------- the store */

static void check_store(doctor *d, const Pcachepb__StatsReply *s) {
  uint64_t used = s->bytes_used + s->snapshot_bytes;
  char u[32], cap[32], free_text[32], *detail, *fix;
  unsigned percent = s->max_size ? (unsigned)(used * 100 / s->max_size) : 0;
  struct statvfs vfs;
  ctl_fmt_size(used, u, sizeof u);
  ctl_fmt_size(s->max_size, cap, sizeof cap);
  if (s->max_size && percent >= DOCTOR_FULL_PERCENT) {
    detail = doctor_printf(
        "The store holds %s of its %s cap (--max-size): each new pipeline evicts the least "
        "recently used ones, and one that does not fit is refused.",
        u, cap);
    doctor_add(d, "store", DOCTOR_WARNING, detail,
               "give pcached a larger --max-size (for the unit: systemctl --user edit "
               "pcached.service, ExecStart= with --max-size 4G), or purge what you no longer "
               "run (pcachectl purge --app NAME, --older-than 30d)",
               "the store is %u%% full (%s of %s)", percent, u, cap);
    pcache__free(detail);
  } else {
    doctor_add(d, "store", DOCTOR_OK, NULL, NULL,
               "the store in %s holds %" PRIu64 " entries, %s of %s (%u%%)", s->data_dir,
               s->entries, u, cap, percent);
  }
  /* The disk can fill before the cap does. */
  if (s->data_dir && statvfs(s->data_dir, &vfs) == 0 && s->max_size > used) {
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize, room = s->max_size - used;
    if (avail < room) {
      ctl_fmt_size(avail, free_text, sizeof free_text);
      ctl_fmt_size(room, cap, sizeof cap);
      detail = doctor_printf("The file system of %s has %s free, less than the %s the store "
                             "may still grow by: the disk fills before --max-size, and then "
                             "uploads fail.",
                             s->data_dir, free_text, cap);
      doctor_add(d, "store", avail < (64u << 20) ? DOCTOR_PROBLEM : DOCTOR_WARNING, detail,
                 "free space on that file system, or lower pcached's --max-size under what is "
                 "free",
                 "the disk has %s free, less than the store may still take", free_text);
      pcache__free(detail);
    }
  }
  if (s->put_rejected) {
    detail = doctor_printf("Since pcached started, %" PRIu64 " uploads were refused (and %" PRIu64
                           " stored): a blob that failed its checks, or no room for it. "
                           "pcached's log names each one and why.",
                           s->put_rejected, s->puts);
    doctor_add(d, "store", DOCTOR_WARNING, detail,
               "read the daemon's log (journalctl --user -u pcached, or its stderr)",
               "%" PRIu64 " uploads were refused since pcached started", s->put_rejected);
    pcache__free(detail);
  }
  if (s->checksum_failures) {
    doctor_add(d, "store", DOCTOR_WARNING,
               "A blob whose checksum does not match is never served; it stays stored until "
               "it is repaired.",
               "pcachectl verify --repair",
               "%" PRIu64 " stored blobs failed their checksum when read", s->checksum_failures);
  }
  if (!d->verify)
    return;
  {
    Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
    Pcachepb__Verify verify = PCACHEPB__VERIFY__INIT;
    pcache__reply reply = {0};
    int r;
    request.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
    request.verify = &verify;
    r = call(d, &request, PCACHEPB__RESPONSE__BODY_VERIFY, &reply);
    if (r < 0) {
      doctor_add(d, "store", DOCTOR_WARNING, NULL,
                 "run pcachectl verify with a longer --timeout, or doctor --no-verify",
                 "the store could not be verified: %s", pcache_strerror(r));
      return;
    }
    const Pcachepb__VerifyReply *v = reply.response->verify;
    if (v->n_problems) {
      fix = doctor_printf("pcachectl verify lists them; pcachectl verify --repair removes them");
      doctor_add(d, "store", DOCTOR_PROBLEM,
                 "Entries that fail their checks are never served: the programs that need "
                 "them compile again.",
                 fix, "%zu of %" PRIu64 " entries fail verification", v->n_problems, v->checked);
      pcache__free(fix);
    } else {
      doctor_add(d, "store", DOCTOR_OK, NULL, NULL,
                 "all %" PRIu64 " entries pass verification (checksums, headers, descriptions)",
                 v->checked);
    }
    pcache__reply_release(&reply);
  }
}

/* ---------------------------------------------------- devices and replays */

static void device_text(const Pcachepb__DeviceRecord *dr, char *out, size_t size) {
  pcache__devkey key;
  char vendor[16], version[32], name[128];
  const char *n = dr->info && dr->info->name && *dr->info->name ? dr->info->name : "?";
  if (!dr->info || ctl_key_from_bytes(&dr->info->key, &key) < 0) {
    snprintf(out, size, "?");
    return;
  }
  ctl_format_driver_version(pcache__devkey_vendor(&key), pcache__devkey_driver_version(&key),
                            version, sizeof version);
  snprintf(
      out, size, "%s (%s, driver %s%s%s): %" PRIu64 " entries", ctl_printable(n, name, sizeof name),
      ctl_vendor_name(pcache__devkey_vendor(&key), vendor, sizeof vendor), version,
      dr->info->driver_name && *dr->info->driver_name ? ", " : "",
      dr->info->driver_name && *dr->info->driver_name ? dr->info->driver_name : "", dr->entries);
}

/* Whether a is an older driver of b's device: same vendor and device, a
 * different key. */
static int superseded_by(const Pcachepb__DeviceRecord *a, const Pcachepb__DeviceRecord *b) {
  pcache__devkey ka, kb;
  if (!a->info || !b->info || ctl_key_from_bytes(&a->info->key, &ka) < 0 ||
      ctl_key_from_bytes(&b->info->key, &kb) < 0)
    return 0;
  return pcache__devkey_vendor(&ka) == pcache__devkey_vendor(&kb) &&
         pcache__devkey_device(&ka) == pcache__devkey_device(&kb) &&
         pcache__devkey_abi(&ka) == pcache__devkey_abi(&kb) &&
         memcmp(ka.bytes, kb.bytes, PCACHE_DEVKEY_SIZE) != 0 && a->last_seen < b->last_seen;
}

static int replay_of(const Pcachepb__StatsReply *s, const ProtobufCBinaryData *old_key) {
  for (size_t i = 0; i < s->n_replay; i++)
    if (s->replay[i]->old_key.len == old_key->len &&
        memcmp(s->replay[i]->old_key.data, old_key->data, old_key->len) == 0)
      return 1;
  return 0;
}

static void check_devices(doctor *d, const Pcachepb__StatsReply *s) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  pcache__reply reply = {0};
  const Pcachepb__ListReply *l;
  char text[2048] = "";
  int r;
  request.body_case = PCACHEPB__REQUEST__BODY_LIST;
  request.list = &list;
  list.entries = 0;
  if ((r = call(d, &request, PCACHEPB__RESPONSE__BODY_LIST, &reply)) < 0) {
    doctor_add(d, "devices", DOCTOR_WARNING, NULL, "pcachectl list",
               "the devices could not be listed: %s", pcache_strerror(r));
    return;
  }
  l = reply.response->list;
  if (l->n_devices == 0)
    doctor_add(d, "devices", DOCTOR_NOTE,
               "Nothing was stored yet. The first run of a program compiles and uploads; the "
               "next is served.",
               NULL, "no device has stored pipelines yet");
  for (size_t i = 0; i < l->n_devices; i++) {
    size_t n = strlen(text);
    char one[512];
    device_text(l->devices[i], one, sizeof one);
    snprintf(text + n, sizeof text - n, "%s%s", i ? "; " : "", one);
  }
  if (l->n_devices)
    doctor_add(d, "devices", DOCTOR_OK, NULL, NULL, "%zu device%s seen: %s", l->n_devices,
               l->n_devices == 1 ? "" : "s", text);
  /* An older driver's pipelines with no replay to carry them over. */
  for (size_t i = 0; i < l->n_devices; i++) {
    const Pcachepb__DeviceRecord *a = l->devices[i];
    for (size_t k = 0; k < l->n_devices; k++) {
      char old[512], now[512], *detail;
      if (k == i || !a->entries || !superseded_by(a, l->devices[k]) || replay_of(s, &a->info->key))
        continue;
      device_text(a, old, sizeof old);
      device_text(l->devices[k], now, sizeof now);
      detail = doctor_printf("%s was seen last with %s. A replay rebuilds the older "
                             "driver's pipelines for the new one, so the next run of each "
                             "program is served instead of compiling; pcached starts one "
                             "when a program names the new driver.",
                             old, now);
      doctor_add(d, "replay", DOCTOR_NOTE, detail, "pcachectl replay --wait",
                 "an older driver's pipelines are stored and no replay carries them over");
      pcache__free(detail);
      break;
    }
  }
  pcache__reply_release(&reply);
  for (size_t i = 0; i < s->n_replay; i++) {
    const Pcachepb__ReplayProgress *p = s->replay[i];
    if (p->finished && !p->failed)
      continue;
    if (p->finished) {
      doctor_add(d, "replay", DOCTOR_WARNING,
                 "Pipelines the replayer could not rebuild compile on their program's next run; "
                 "pcachectl status lists the first few and why.",
                 "pcachectl status; pcachectl replay rebuilds them again after a fix",
                 "a finished replay left %" PRIu64 " of %" PRIu64 " pipelines unbuilt", p->failed,
                 p->total);
      continue;
    }
    doctor_add(d, "replay", DOCTOR_NOTE, NULL, "pcachectl replay --wait follows it",
               "a replay is %s: %" PRIu64 " of %" PRIu64 " pipelines rebuilt for the new "
               "driver%s%s",
               p->running ? "running" : "pending", p->done, p->total,
               p->paused && *p->paused ? ", paused: " : "", p->paused ? p->paused : "");
  }
}

void doctor_check_daemon(doctor *d) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Stats stats = PCACHEPB__STATS__INIT;
  pcache__reply reply = {0};
  char *message = NULL;
  uint32_t timeout;
  int r;
  if (d->c->socket_arg && *d->c->socket_arg)
    d->socket_from = "--socket";
  else if (getenv("PCACHE_SOCKET") && *getenv("PCACHE_SOCKET"))
    d->socket_from = "PCACHE_SOCKET";
  else if (getenv("XDG_RUNTIME_DIR") && *getenv("XDG_RUNTIME_DIR"))
    d->socket_from = "XDG_RUNTIME_DIR";
  r = pcache__socket_path(d->c->socket_arg, d->socket_path, sizeof d->socket_path);
  if (r < 0) {
    d->socket_from = NULL;
    d->socket_path[0] = '\0';
    doctor_add(d, "daemon", DOCTOR_PROBLEM,
               r == -ENOENT ? "Neither PCACHE_SOCKET nor XDG_RUNTIME_DIR is set: there is no "
                              "socket to find pcached at, and the store cannot be looked at."
                            : "A Unix socket's path is at most 107 bytes.",
               r == -ENOENT ? "export PCACHE_SOCKET=$HOME/.cache/pcache/socket for pcached and "
                              "every program, or log in through a session that sets "
                              "XDG_RUNTIME_DIR (docs/operations.md, \"Without a systemd user "
                              "manager\")"
                            : "set a shorter PCACHE_SOCKET",
               "no socket path: %s",
               r == -ENOENT ? "XDG_RUNTIME_DIR is not set" : "the path is too long");
    return;
  }
  timeout = d->c->timeout_ms < DOCTOR_CONNECT_MS ? d->c->timeout_ms : DOCTOR_CONNECT_MS;
  r = pcache__transport_open(d->socket_path, "pcachectl", timeout, &d->c->transport, &message);
  if (r < 0) {
    explain_unreachable(d, r, message);
    pcache__free(message);
    return;
  }
  d->reachable = 1;
  request.body_case = PCACHEPB__REQUEST__BODY_STATS;
  request.stats = &stats;
  if ((r = call(d, &request, PCACHEPB__RESPONSE__BODY_STATS, &reply)) < 0) {
    doctor_add(d, "daemon", DOCTOR_PROBLEM, NULL,
               "read the daemon's log (journalctl --user -u pcached, or its stderr)",
               "pcached at %s answered Hello but not Stats: %s", d->socket_path,
               pcache_strerror(r));
    return;
  }
  const Pcachepb__StatsReply *s = reply.response->stats;
  snprintf(d->daemon_version, sizeof d->daemon_version, "%s", s->daemon_version);
  /* Who starts it next time: where a user manager runs, the socket unit
   * should listen on the default path. */
  {
    const char *rt = getenv("XDG_RUNTIME_DIR");
    char dflt[200];
    units u;
    probe_units(&u);
    if (u.manager && rt && *rt && snprintf(dflt, sizeof dflt, "%s/pcache/socket", rt) > 0 &&
        strcmp(dflt, d->socket_path) == 0 && strcmp(u.active, "active") != 0) {
      char *detail = doctor_printf(
          "A systemd user manager runs for you, but pcached.socket is %s (%s): the pcached "
          "that answers was started some other way, and once it exits nothing starts it "
          "again on demand.",
          u.active[0] ? u.active : "in an unknown state",
          u.enabled[0] ? u.enabled : "not installed");
      doctor_add(d, "daemon", DOCTOR_NOTE, detail,
                 "systemctl --user enable --now pcached.socket (after the running pcached stops)",
                 "pcached answers, but not through socket activation");
      pcache__free(detail);
    }
  }
  doctor_add(d, "daemon", DOCTOR_OK, NULL, NULL, "pcached %s answers at %s (from %s)",
             s->daemon_version, d->socket_path,
             !strcmp(d->socket_from, "XDG_RUNTIME_DIR") ? "the default, "
                                                          "$XDG_RUNTIME_DIR/pcache/socket"
                                                        : d->socket_from);
  if (strcmp(s->daemon_version, PCACHE_VERSION_STRING) != 0) {
    char *detail = doctor_printf("pcached is %s, pcachectl %s: after an upgrade the old daemon "
                                 "runs until it is restarted.",
                                 s->daemon_version, PCACHE_VERSION_STRING);
    doctor_add(d, "daemon", DOCTOR_WARNING, detail,
               "restart pcached (systemctl --user restart pcached, or by hand)",
               "pcached and pcachectl are of different versions");
    pcache__free(detail);
  }
  check_store(d, s);
  check_devices(d, s);
  pcache__reply_release(&reply);
}
