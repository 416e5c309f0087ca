/* The client: two connections to pcached per process (lanes: the app's
 * calls and the upload threads'), shared by every device context, each
 * behind its own mutex. The daemon is optional: any failure closes that
 * lane's connection and marks the client disconnected (the last exchange
 * failed), and the next call on that lane reconnects, at most once a
 * second, so an absent daemon costs a failed connect() a second, not one
 * a call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/abi.h"
#include "client/client.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/parse.h"
#include "common/paths.h"
#include "proto/rpc.h"

#define DEFAULT_TIMEOUT_MS 50u
#define RECONNECT_INTERVAL_MS 1000u
/* How often a call waiting for its lane's lock looks at its cancel fd. */
#define LOCK_SLICE_MS 10u

static uint32_t env_timeout_ms(void) {
  return pcache__env_ms("PCACHE_TIMEOUT_MS", DEFAULT_TIMEOUT_MS, 1, 600000);
}

static int env_flag(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

static int env_disabled(void) { return env_flag("PCACHE_DISABLE"); }

/* /proc/self/comm, without its newline; "app" if unreadable. */
static char *program_name(void) {
  char buf[64] = "";
  FILE *f = fopen("/proc/self/comm", "re");
  if (f) {
    if (!fgets(buf, sizeof buf, f))
      buf[0] = '\0';
    fclose(f);
  }
  buf[strcspn(buf, "\n")] = '\0';
  return pcache__strdup(buf[0] ? buf : "app");
}

/* The app name, first set wins: $PCACHE_APP_NAME (the same override the
 * Vulkan layer documents, so a user can split or join buckets without
 * rebuilding), app_name, the deprecated application_name. NULL: none,
 * the program name then. */
static const char *choose_app_name(const pcache_client_options *options) {
  const char *env = getenv("PCACHE_APP_NAME");
  if (env && *env)
    return env;
  if (options->app_name && *options->app_name)
    return options->app_name;
  if (options->application_name && *options->application_name)
    return options->application_name;
  return NULL;
}

/* Whether this process has said that the cache is inactive (the layer's
 * clients, PCACHE__CLIENT_SAY_INACTIVE): said once, whichever of its
 * instances finds it first. */
static atomic_int inactive_told;

/* Whether err says that no daemon listens (any more). */
static int err_no_daemon(int err) {
  return err == PCACHE_EUNAVAILABLE || err == -ENOENT || err == -ECONNREFUSED || err == -EPIPE ||
         err == -ECONNRESET;
}

/* What to do about a daemon that cannot be used, in words, for the error
 * the connection gave. NULL: nothing the user must do, or nothing known
 * to say (a slow daemon: the client tries again). */
static const char *inactive_fix(int err) {
  if (err_no_daemon(err))
    return "start pcached ('systemctl --user enable --now pcached.socket', or run 'pcached')";
  switch (err) {
  case PCACHE_EPEER:
    return "the process listening there is another user's: point PCACHE_SOCKET at your own "
           "pcached";
  case PCACHE_EVERSION:
    return "pcached and this program's pcache are of different versions: restart pcached "
           "after an upgrade ('systemctl --user restart pcached')";
  case PCACHE_ETOO_MANY_CONNECTIONS:
    return "it serves --max-connections clients already: raise that";
  case -EACCES:
  case -EPERM:
    return "this user may not use that socket: check its owner and mode, and PCACHE_SOCKET";
  default:
    return NULL;
  }
}

/* Says once a process, at warning level even with no $PCACHE_LOG, that
 * the layer caches nothing and why (docs/layer.md "When it is off"). */
static void say_inactive(pcache_client *client, const char *why, const char *fix) {
  if (!client->say_inactive || atomic_exchange(&inactive_told, 1))
    return;
  pcache__log_notice(&client->log, PCACHE_SEVERITY_WARNING,
                     "the Vulkan layer is inactive: %s; the driver compiles every pipeline as it "
                     "would without pcache. Fix: %s. PCACHE_LAYER_DISABLE=1 turns the layer off; "
                     "'pcachectl doctor' checks the whole set-up",
                     why, fix);
}

static void drop_transport_locked(pcache_client *client, pcache__lane_id id) {
  pcache__lane *lane = &client->lanes[id];
  pcache__transport_close(lane->transport);
  lane->transport = NULL;
  lane->last_attempt_ms = pcache__mono_ms();
  lane->attempted = 1;
  if (id == PCACHE__LANE_APP)
    atomic_store(&client->app_pending, 0);
  atomic_store(&client->connected, 0);
}

/* A call its own thread cancelled (an upload thread stopped by
 * pcache_device_destroy, maybe in the middle of the Hello's answer) leaves
 * the stream out of step, but says nothing of the daemon: the connection
 * goes, with nothing said, and the next may be made at once, once a
 * second: a program that makes and destroys devices while the daemon is
 * stopped must not pile connections into its backlog. 1 when the next
 * may be made now. */
static int drop_cancelled_locked(pcache_client *client, pcache__lane_id id) {
  pcache__lane *lane = &client->lanes[id];
  uint64_t now = pcache__mono_ms();
  int again = !lane->cancelled_ms || now - lane->cancelled_ms >= RECONNECT_INTERVAL_MS;
  pcache__transport_close(lane->transport);
  lane->transport = NULL;
  lane->cancelled_ms = now;
  lane->attempted = !again;
  lane->last_attempt_ms = now;
  return again;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Says when the daemon comes or goes, as each lane sees it, not each
 * failed retry. Under that lane's lock (each lane has its own flag). */
static void tell_state_locked(pcache_client *client, pcache__lane_id id, int up, int err) {
  int *told = id == PCACHE__LANE_APP ? &client->told_connected : &client->told_background;
  int before = *told;
  if (before == up)
    return;
  *told = up;
  if (id == PCACHE__LANE_BACKGROUND) {
    /* Its first connect says nothing new; a failure is worth a line: the
     * uploads wait (a daemon at --max-connections refuses this lane). */
    if (!up)
      pcache__log(&client->log, PCACHE_SEVERITY_INFO,
                  "uploads: no answer from pcached at %s (%s): they stay queued; retrying at "
                  "most once a second",
                  client->socket_path, pcache_strerror(err));
    else if (before == 0)
      pcache__log(&client->log, PCACHE_SEVERITY_INFO, "uploads: pcached at %s answers again",
                  client->socket_path);
    return;
  }
  if (up) {
    pcache__log(&client->log, PCACHE_SEVERITY_INFO, "connected to pcached at %s as app '%s'",
                client->socket_path, client->app_name);
    return;
  }
  if (client->say_inactive && inactive_fix(err) && !atomic_load(&inactive_told)) {
    char why[256];
    if (err_no_daemon(err))
      snprintf(why, sizeof why, "no pcached %s at %s (%s)", before == 1 ? "any more" : "answers",
               client->socket_path, pcache_strerror(err));
    else
      snprintf(why, sizeof why, "pcached at %s refused it (%s)", client->socket_path,
               pcache_strerror(err));
    say_inactive(client, why, inactive_fix(err));
    return;
  }
  pcache__log(&client->log, PCACHE_SEVERITY_INFO,
              "no pcached at %s (%s): pipelines are built locally; retrying at most once a second",
              client->socket_path, pcache_strerror(err));
}

static int start_locked(pcache_client *client, pcache__lane_id id, uint64_t deadline_ms);

/* Reads the answers to the lane's Hello (and window request), and takes
 * the daemon's limits from them. Under the lane's lock. */
static int finish_locked(pcache_client *client, pcache__lane_id id, uint64_t deadline_ms) {
  pcache__lane *lane = &client->lanes[id];
  const Pcachepb__HelloReply *hello;
  int r = pcache__transport_finish(lane->transport, deadline_ms, NULL);
  if (r == -ECANCELED) {
    /* The app's lane as open left it: started, its answer to come
     * (pcache__client_reachable, pcache_client_connected). */
    if (drop_cancelled_locked(client, id) && id == PCACHE__LANE_APP)
      (void)start_locked(client, id, pcache__mono_ms() + client->timeout_ms); /* still pending */
    else if (id == PCACHE__LANE_APP)
      atomic_store(&client->app_pending, 0);
    return r;
  }
  if (r < 0) {
    /* Closes the transport when only the window failed. */
    drop_transport_locked(client, id);
    tell_state_locked(client, id, 0, r);
    return r;
  }
  hello = pcache__transport_hello(lane->transport);
  atomic_store(&client->max_hashes,
               hello && hello->max_hashes ? hello->max_hashes : PCACHE_DEFAULT_MAX_HASHES);
  /* What we take from any daemon stays ours (frame.h): a daemon whose
   * limits are larger still serves what fits them, and hears of it once
   * a connection, the first time its lane comes up. */
  atomic_store(&client->max_blob, hello ? min_u64(hello->max_blob, PCACHE_CLIENT_MAX_BLOB) : 0);
  atomic_store(&client->max_snapshot,
               hello ? min_u64(hello->max_snapshot, PCACHE_CLIENT_MAX_SNAPSHOT) : 0);
  if (hello && id == PCACHE__LANE_APP && !client->told_connected &&
      (hello->max_blob > PCACHE_CLIENT_MAX_BLOB ||
       hello->max_snapshot > PCACHE_CLIENT_MAX_SNAPSHOT))
    pcache__log(&client->log, PCACHE_SEVERITY_WARNING,
                "pcached at %s stores blobs up to %llu MiB and snapshots up to %llu MiB, more "
                "than libpcache takes from any daemon (%llu and %llu MiB): pipelines with "
                "larger ones are built locally each time; run pcached with --max-blob %lluM "
                "--max-snapshot %lluM so that it stops storing what it cannot serve",
                client->socket_path, (unsigned long long)(hello->max_blob >> 20),
                (unsigned long long)(hello->max_snapshot >> 20),
                (unsigned long long)(PCACHE_CLIENT_MAX_BLOB >> 20),
                (unsigned long long)(PCACHE_CLIENT_MAX_SNAPSHOT >> 20),
                (unsigned long long)(PCACHE_CLIENT_MAX_BLOB >> 20),
                (unsigned long long)(PCACHE_CLIENT_MAX_SNAPSHOT >> 20));
  atomic_store(&client->max_frame, hello ? hello->max_frame : 0);
  atomic_store(&client->stages, hello ? hello->stages : 0);
  /* connected before pending clears: pcache__client_reachable is never 0
   * in between. */
  atomic_store(&client->connected, 1);
  if (id == PCACHE__LANE_APP)
    atomic_store(&client->app_pending, 0);
  tell_state_locked(client, id, 1, 0);
  return 0;
}

/* Connects the lane and sends its Hello, the answers left for
 * finish_locked. Under the lane's lock. */
static int start_locked(pcache_client *client, pcache__lane_id id, uint64_t deadline_ms) {
  pcache__lane *lane = &client->lanes[id];
  uint64_t now = pcache__mono_ms();
  int r;
  if (now >= deadline_ms)
    return -ETIMEDOUT;
  /* The app's misses fetch blobs on this lane: through a reply window,
   * unless PCACHE_NO_WINDOW=1 (bench_delivery compares the two). An
   * older daemon gives none, and that is fine. */
  r = pcache__transport_start(client->socket_path, client->app_name, (uint32_t)(deadline_ms - now),
                              id == PCACHE__LANE_APP && !env_flag("PCACHE_NO_WINDOW"),
                              &lane->transport, NULL);
  if (r < 0) {
    lane->transport = NULL;
    drop_transport_locked(client, id);
    tell_state_locked(client, id, 0, r);
    return r;
  }
  if (id == PCACHE__LANE_APP)
    atomic_store(&client->app_pending, 1);
  return 0;
}

/* Under the lane's lock. */
static int connect_locked(pcache_client *client, pcache__lane_id id, uint64_t deadline_ms) {
  pcache__lane *lane = &client->lanes[id];
  uint64_t now;
  int r;
  /* Started at open (pcache__client_open_flags): its answers first, within
   * the client's timeout even for a background call, whose own is ten
   * times that: an app thread may be waiting for this lane. */
  if (pcache__transport_pending(lane->transport) &&
      (r = finish_locked(client, id,
                         min_u64(deadline_ms, pcache__mono_ms() + client->timeout_ms))) < 0)
    return r;
  now = pcache__mono_ms();
  if (lane->transport && pcache__transport_closed_idle(lane->transport, now)) {
    /* The daemon closed it for a newcomer while it was idle: that is no
     * failure, so a new one now, without the pause after a failure. */
    pcache__transport_close(lane->transport);
    lane->transport = NULL;
    lane->attempted = 0;
  }
  if (lane->transport)
    return 0;
  if (lane->attempted && now - lane->last_attempt_ms < RECONNECT_INTERVAL_MS)
    return PCACHE_EUNAVAILABLE;
  if ((r = start_locked(client, id, deadline_ms)) < 0)
    return r;
  return finish_locked(client, id, deadline_ms);
}

/* Another thread's request holds the connection: wait for it no longer
 * than our own budget, and no longer than a cancel (an upload thread's
 * stop) allows: in short slices, the cancel fd checked between them.
 * (timedlock's realtime clock rather than pthread_mutex_clocklock:
 * sanitizers do not know the latter; each slice is short enough that a
 * clock step costs little.) 0 with the lane's lock held. */
static int lock_lane(pcache__lane *lane, uint64_t deadline_ms) {
  for (;;) {
    struct timespec slice;
    uint64_t now = pcache__mono_ms();
    int r;
    if (pcache__rpc_cancelled())
      return -ECANCELED;
    if (now >= deadline_ms)
      return -ETIMEDOUT;
    pcache__timespec_in(CLOCK_REALTIME,
                        deadline_ms - now < LOCK_SLICE_MS ? deadline_ms - now : LOCK_SLICE_MS,
                        &slice);
    r = pthread_mutex_timedlock(&lane->lock, &slice);
    if (r == 0)
      return 0;
    if (r != ETIMEDOUT)
      return -r;
  }
}

void pcache__client_settle(pcache_client *client) {
  pcache__lane *lane;
  uint64_t deadline_ms;
  /* A call in flight on the lane is waited for no longer than the timeout
   * either (it reads the answer itself). */
  if (!pcache__client_usable(client) || !atomic_load(&client->app_pending))
    return;
  lane = &client->lanes[PCACHE__LANE_APP];
  deadline_ms = pcache__mono_ms() + client->timeout_ms;
  if (lock_lane(lane, deadline_ms) < 0)
    return;
  if (pcache__transport_pending(lane->transport))
    (void)finish_locked(client, PCACHE__LANE_APP, deadline_ms);
  pthread_mutex_unlock(&lane->lock);
}

int pcache__client_rpc(pcache_client *client, pcache__lane_id id, const Pcachepb__Request *request,
                       Pcachepb__Response__BodyCase expect, uint32_t timeout_ms,
                       pcache__reply *ret_reply) {
  uint64_t deadline_ms = pcache__mono_ms() + timeout_ms;
  pcache__lane *lane;
  int r;
  *ret_reply = (pcache__reply){0};
  /* A forked child shares the parent's sockets: a word of its own there
   * would put the parent's stream out of step (docs/client.md). */
  if (!pcache__client_usable(client))
    return PCACHE_EDISABLED;
  if ((unsigned)id >= PCACHE__LANE_COUNT)
    return -EINVAL;
  lane = &client->lanes[id];
  if ((r = lock_lane(lane, deadline_ms)) < 0)
    return r;
  r = connect_locked(client, id, deadline_ms);
  if (r < 0)
    goto out_unlock;
  if (pcache__mono_ms() >= deadline_ms) {
    r = -ETIMEDOUT;
    goto out_unlock; /* connected, just out of time: keep the connection */
  }
  r = pcache__transport_rpc(lane->transport, request, expect, deadline_ms, ret_reply);
  /* No Response: a late one would put the stream out of step. A Response
   * the daemon did not refuse with (status >= 0) but that rpc.c still
   * calls PCACHE_EPROTO is of another kind or has a status that is not
   * ours: one meant for an earlier request, or sent unasked, and every
   * later reply would be one behind. Either way the connection goes, and
   * the next call makes a fresh one. (A refusal, status < 0, keeps it.) */
  if (r == -ECANCELED && !ret_reply->response) {
    drop_cancelled_locked(client, id);
  } else if (r < 0 && (!ret_reply->response || pcache__reply_out_of_step(r, ret_reply))) {
    drop_transport_locked(client, id);
    tell_state_locked(client, id, 0, r);
  } else
    atomic_store(&client->connected, 1);
out_unlock:
  pthread_mutex_unlock(&lane->lock);
  return r;
}

uint32_t pcache__client_max_hashes(pcache_client *client) {
  uint32_t n = atomic_load(&client->max_hashes);
  return n ? n : PCACHE_DEFAULT_MAX_HASHES;
}

PCACHE_API int pcache_client_open(const pcache_client_options *caller_options,
                                  pcache_client **ret_client) {
  return pcache__client_open_flags(caller_options, 0, ret_client);
}

/* Why there is no socket path, and what to do, for pcache__socket_path's
 * error. */
static void no_socket_path(pcache_client *client, int r) {
  const char *why, *fix;
  if (r == -ENAMETOOLONG) {
    why = "the socket path that PCACHE_SOCKET or XDG_RUNTIME_DIR gives is longer than a Unix "
          "socket's path may be (107 bytes)";
    fix = "set PCACHE_SOCKET to a shorter path, the one pcached listens on";
  } else {
    why = "neither XDG_RUNTIME_DIR nor PCACHE_SOCKET is set (no socket to find pcached at)";
    fix = "run the program in a login session (which sets XDG_RUNTIME_DIR), or set "
          "PCACHE_SOCKET to the socket pcached listens on";
  }
  if (client->say_inactive && !atomic_load(&inactive_told)) {
    say_inactive(client, why, fix);
    return;
  }
  pcache__log(&client->log, PCACHE_SEVERITY_INFO, "not using pcached: %s (%s)", why, fix);
}

int pcache__client_open_flags(const pcache_client_options *caller_options, unsigned flags,
                              pcache_client **ret_client) {
  pcache_client_options opts;
  const pcache_client_options *options = &opts;
  char path[108];
  pcache_client *client;
  const char *app;
  int r;
  if (!ret_client || pcache__struct_in(&opts, sizeof opts, caller_options,
                                       PCACHE__V1_SIZE(pcache_client_options, disable_daemon)) < 0)
    return -EINVAL;
  client = pcache__calloc(1, sizeof *client);
  if (!client)
    return -ENOMEM;
  if (pcache__logger_init(&client->log, options->log_func, options->log_user_data,
                          (int)options->log_level) < 0) {
    pcache__free(client);
    return -ENOMEM;
  }
  client->pid = getpid();
  client->told_connected = -1;
  client->told_background = -1;
  client->say_inactive = (flags & PCACHE__CLIENT_SAY_INACTIVE) != 0;
  atomic_init(&client->connected, 0);
  atomic_init(&client->app_pending, 0);
  client->timeout_ms = options->timeout_ms ? options->timeout_ms : env_timeout_ms();
  client->disabled = options->disable_daemon || env_disabled();
  atomic_init(&client->max_hashes, PCACHE_DEFAULT_MAX_HASHES);
  client->app_name = (app = choose_app_name(options)) ? pcache__strdup(app) : program_name();
  if (!client->app_name)
    goto out_free;
  /* No path (no XDG_RUNTIME_DIR, too long) is like an absent daemon, and
   * said as one: nothing else would ever say it. Turned off on purpose,
   * it is said only when asked. */
  if (client->disabled) {
    pcache__log(&client->log, PCACHE_SEVERITY_INFO, "not using pcached: %s",
                options->disable_daemon ? "the program disabled it" : "PCACHE_DISABLE is set");
  } else if ((r = pcache__socket_path(options->socket_path, path, sizeof path)) < 0) {
    no_socket_path(client, r);
  } else {
    client->socket_path = pcache__strdup(path);
    if (!client->socket_path)
      goto out_free;
  }
  for (int i = 0; i < PCACHE__LANE_COUNT; i++)
    if (pthread_mutex_init(&client->lanes[i].lock, NULL) != 0) {
      while (i-- > 0)
        pthread_mutex_destroy(&client->lanes[i].lock);
      goto out_free;
    }
  /* Start the app's lane now: connect (a Unix socket answers at once,
   * so an absent daemon is known here) and send the Hello, whose answer
   * is read by the first call that needs the daemon. A warm start that
   * the driver's own caches serve never waits for a round trip (on the
   * H200 the whole exchange cost 0.3-0.7 ms of a 10 ms start). A failure
   * only delays the next try. The background lane connects on its first
   * call: a process that only reads never opens it. */
  if (!client->disabled && client->socket_path) {
    pcache__lane *lane = &client->lanes[PCACHE__LANE_APP];
    pthread_mutex_lock(&lane->lock);
    (void)start_locked(client, PCACHE__LANE_APP, pcache__mono_ms() + client->timeout_ms);
    pthread_mutex_unlock(&lane->lock);
  }
  *ret_client = client;
  return 0;
out_free:
  pcache__logger_fini(&client->log);
  pcache__free(client->socket_path);
  pcache__free(client->app_name);
  pcache__free(client);
  return -ENOMEM;
}

PCACHE_API void pcache_client_close(pcache_client *client) {
  if (!client)
    return;
  for (int i = 0; i < PCACHE__LANE_COUNT; i++) {
    pcache__transport_close(client->lanes[i].transport);
    pthread_mutex_destroy(&client->lanes[i].lock);
  }
  pcache__logger_fini(&client->log);
  pcache__free(client->socket_path);
  pcache__free(client->app_name);
  pcache__free(client);
}

PCACHE_API int pcache_client_connected(const pcache_client *client) {
  pcache_client *c = (pcache_client *)client;
  if (!c || c->pid != getpid())
    return 0;
  /* The Hello sent at open is the last exchange: its answer decides. */
  pcache__client_settle(c);
  return atomic_load(&c->connected);
}

int pcache__client_usable(const pcache_client *client) {
  return client && !client->disabled && client->socket_path && client->pid == getpid();
}

int pcache__client_reachable(pcache_client *client) {
  /* app_pending first: finish_locked sets connected before it clears it. */
  return atomic_load(&client->app_pending) || atomic_load(&client->connected);
}

PCACHE_API const char *pcache_client_app_name(const pcache_client *client) {
  return client ? client->app_name : NULL;
}
