/* The fleet tier's connection to Redis on the accepting loop: where it
 * points (--remote, --remote-auth), connecting, AUTH / SELECT / PING,
 * and going down and back up with a growing pause between tries, which
 * starts again from the first only once a connection did work. A
 * connection counts as up only once PING is answered: a stopped Redis
 * (SIGSTOP) still completes TCP connects from the kernel's backlog. */
#include "remote_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

#define BACKOFF_FIRST_MS 100u
#define BACKOFF_MAX_MS 5000u

const char *pcd_remote_url(const pcd_remote *r) { return r->config->remote_arg; }

uint64_t pcd_remote_stall_us(const pcd_remote *r) {
  uint64_t us = r->config->remote_timeout_ms * 10000u;
  return us < 250000u ? 250000u : us;
}

/* ------------------------------------------------------------- the options */

/* redis://HOST[:PORT][/DB], HOST a name, an IPv4 address or [IPv6]. */
static int parse_url(pcd_remote *r, const char *url) {
  const char *h = url + strlen("redis://"), *end;
  char *tail;
  size_t n;
  unsigned long v;
  if (*h == '[') {
    end = strchr(++h, ']');
    if (!end)
      return -EINVAL;
    n = (size_t)(end - h);
    end++;
  } else {
    end = h + strcspn(h, ":/");
    n = (size_t)(end - h);
  }
  if (n == 0 || n >= sizeof r->host)
    return -EINVAL;
  memcpy(r->host, h, n);
  r->host[n] = 0;
  r->port = 6379;
  if (*end == ':') {
    errno = 0;
    v = strtoul(end + 1, &tail, 10);
    if (errno || tail == end + 1 || v == 0 || v > 65535)
      return -EINVAL;
    r->port = (int)v;
    end = tail;
  }
  if (*end == '/' && end[1]) {
    errno = 0;
    v = strtoul(end + 1, &tail, 10);
    if (errno || tail == end + 1 || *tail || v > 1000000)
      return -EINVAL;
    r->db = (unsigned)v;
  } else if (*end && strcmp(end, "/") != 0) {
    return -EINVAL;
  }
  return 0;
}

/* Drops the line end of s in place. */
static void chomp(char *s) { s[strcspn(s, "\r\n")] = 0; }

/* The password (one line), or a user then the password (two lines), from
 * a file only its owner, this user, can read: it is a secret, and a file
 * others could write would let them point us at their own server's
 * account. Read without blocking (a FIFO is refused, not waited on). */
static int read_auth(pcd_remote *r, const char *path) {
  char buf[1024], *second;
  long n = pcd_trust_read_file("--remote-auth", path, PCD_FILE_SECRET, buf, sizeof buf);
  if (n < 0)
    return (int)n;
  second = strchr(buf, '\n');
  if (second && second[1]) {
    *second++ = 0;
    chomp(second);
  } else {
    second = NULL;
  }
  chomp(buf);
  const char *user = second ? buf : "", *password = second ? second : buf;
  if (!*password || strlen(user) >= sizeof r->user || strlen(password) >= sizeof r->password) {
    log_error("remote: --remote-auth %s must hold a password (one line), or a user and a "
              "password (two lines), each shorter than %zu bytes",
              path, sizeof r->user);
    return -EINVAL;
  }
  memcpy(r->user, user, strlen(user) + 1);
  memcpy(r->password, password, strlen(password) + 1);
  return 0;
}

int pcd_remote_parse(pcd_remote *r) {
  const char *url = r->config->remote_arg;
  int bad;
  if (strncmp(url, "redis://", 8) == 0) {
    bad = parse_url(r, url) < 0;
  } else {
    const char *path = strncmp(url, "unix:", 5) == 0 ? url + 5 : url;
    bad = path[0] != '/' || strlen(path) >= sizeof r->unix_path;
    if (!bad)
      snprintf(r->unix_path, sizeof r->unix_path, "%s", path);
  }
  if (bad) {
    log_error("remote: --remote '%s' is neither redis://HOST[:PORT][/DB] nor a Unix socket "
              "path (absolute, under %zu bytes)",
              url, sizeof r->unix_path);
    return -EINVAL;
  }
  return r->config->remote_auth_file ? read_auth(r, r->config->remote_auth_file) : 0;
}

/* ----------------------------------------------------------------- commands */

typedef struct command {
  pcd_remote *remote;
  pcd_remote_reply_fn fn;
  void *privdata;
} command;

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
  command *c = privdata;
  pcd_remote *r = c->remote;
  (void)ac;
  r->commands--;
  if (reply)
    r->last_progress_us = pcache__mono_us();
  c->fn(r, reply, c->privdata);
  pcache__free(c);
}

/* Whether ac can take another command (not on its way out). */
static int usable(const redisAsyncContext *ac) {
  return ac && !ac->err && !(ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING));
}

int pcd_remote_command(pcd_remote *r, pcd_remote_reply_fn fn, void *privdata, int argc,
                       const char **argv, const size_t *argv_len) {
  command *c;
  if (!usable(r->ac))
    return -EIO;
  if (!(c = pcache__malloc(sizeof *c)))
    return -ENOMEM;
  *c = (command){r, fn, privdata};
  if (redisAsyncCommandArgv(r->ac, on_reply, c, argc, argv, argv_len) != REDIS_OK) {
    pcache__free(c);
    return -EIO;
  }
  if (!r->commands++)
    r->last_progress_us = pcache__mono_us();
  return 0;
}

/* ------------------------------------------------------------------- states */

static void set_state(pcd_remote *r, pcd_remote_state s) {
  atomic_store(&r->state, s);
  r->state_since_us = pcache__mono_us();
}

static void on_retry(uv_timer_t *t) {
  pcd_remote *r = t->data;
  if (atomic_load(&r->state) == PCD_REMOTE_DOWN)
    pcd_remote_connect(r);
}

void pcd_remote_worked(pcd_remote *r) {
  if (r->worked)
    return;
  r->worked = 1;
  r->backoff_ms = BACKOFF_FIRST_MS;
  if (r->flapping)
    log_info("remote: %s works again; fleet tier up", pcd_remote_url(r));
  r->flapping = 0;
}

/* The connection is gone (ac already freed or being freed): say so the
 * first time, and try again later. A connection that did work, or stayed
 * up BACKOFF_MAX_MS, went down as a working Redis does (a restart): the
 * next try comes soon. One that answered PING and then failed before any
 * work (something that is not quite Redis, or a Redis that misbehaves)
 * must not make pcached reconnect at once, forever: the pause keeps
 * growing, and it is said once. */
static void went_down(pcd_remote *r, const char *why) {
  int was = atomic_load(&r->state);
  uint64_t up_us = pcache__mono_us() - r->state_since_us;
  if (was == PCD_REMOTE_STOPPED)
    return;
  atomic_fetch_add(&r->stats->fleet_reconnects, 1);
  pthread_mutex_lock(&r->lock);
  snprintf(r->last_error, sizeof r->last_error, "%s", why);
  pthread_mutex_unlock(&r->lock);
  set_state(r, PCD_REMOTE_DOWN);
  if (was == PCD_REMOTE_UP && (r->worked || up_us >= BACKOFF_MAX_MS * 1000ull)) {
    r->backoff_ms = BACKOFF_FIRST_MS;
    r->flapping = 0;
    log_warn("remote: %s: %s; serving from the local store alone, retrying every %u ms to %u s",
             pcd_remote_url(r), why, BACKOFF_FIRST_MS, BACKOFF_MAX_MS / 1000);
  } else if (was == PCD_REMOTE_UP && !r->flapping) {
    r->flapping = 1;
    log_warn("remote: %s: %s, before any fetch or write was answered; serving from the local "
             "store alone, retrying with a pause that doubles up to %u s (said once)",
             pcd_remote_url(r), why, BACKOFF_MAX_MS / 1000);
  } else if (was != PCD_REMOTE_UP && !r->warned_down) {
    log_warn("remote: %s: %s; serving from the local store alone, retrying every %u ms to %u s",
             pcd_remote_url(r), why, BACKOFF_FIRST_MS, BACKOFF_MAX_MS / 1000);
  } else {
    log_debug("remote: %s: %s; next try in %llu ms", pcd_remote_url(r), why,
              (unsigned long long)r->backoff_ms);
  }
  r->warned_down = 1;
  r->worked = 0;
  uv_timer_start(&r->retry_timer, on_retry, r->backoff_ms, 0);
  r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
}

void pcd_remote_drop(pcd_remote *r, const char *why) {
  redisAsyncContext *ac = r->ac;
  if (!ac)
    return;
  /* Cleared first: the disconnect callback this runs is then ours, not a
   * surprise (on_disconnect). */
  r->ac = NULL;
  redisAsyncFree(ac);
  went_down(r, why);
}

static void on_ping(pcd_remote *r, redisReply *reply, void *privdata) {
  char why[300];
  (void)privdata;
  if (!reply)
    return; /* dropped meanwhile: said then */
  if (reply->type != REDIS_REPLY_STATUS || strcmp(reply->str, "PONG") != 0) {
    snprintf(why, sizeof why, "PING answered %s",
             reply->type == REDIS_REPLY_ERROR ? reply->str : "something else");
    pcd_remote_drop(r, why);
    return;
  }
  /* Up, but the backoff stays as it is until the connection does work
   * (pcd_remote_worked): a server that answers PING and then misbehaves
   * would otherwise be reconnected to every 100 ms. */
  if (r->flapping)
    log_debug("remote: %s answers PING again", pcd_remote_url(r));
  else if (r->ever_up)
    log_info("remote: %s is back after %.1f s; fleet tier up", pcd_remote_url(r),
             (double)(pcache__mono_us() - r->state_since_us) / 1e6);
  else
    log_info("remote: connected to %s; fleet tier up", pcd_remote_url(r));
  r->ever_up = 1;
  r->warned_down = 0;
  r->worked = 0;
  set_state(r, PCD_REMOTE_UP);
  r->on_up(r);
}

/* AUTH and SELECT: an error ends the try (a wrong password, a database
 * the server does not have). */
static void on_setup(pcd_remote *r, redisReply *reply, void *privdata) {
  char why[300];
  if (!reply || reply->type != REDIS_REPLY_ERROR)
    return;
  snprintf(why, sizeof why, "%s refused: %s", (const char *)privdata, reply->str);
  pcd_remote_drop(r, why);
}

static void on_connect(const redisAsyncContext *ac, int status) {
  pcd_remote *r = ac->data;
  char db[16];
  const char *argv[3];
  size_t len[3];
  int bad = 0;
  if (r->ac != ac)
    return;
  if (status != REDIS_OK) {
    char why[300];
    /* hiredis frees the context after this callback. */
    snprintf(why, sizeof why, "cannot connect: %s", ac->errstr);
    r->ac = NULL;
    went_down(r, why);
    return;
  }
  if (r->password[0]) {
    int n = 1;
    argv[0] = "AUTH";
    if (r->user[0])
      argv[n++] = r->user;
    argv[n++] = r->password;
    for (int i = 0; i < n; i++)
      len[i] = strlen(argv[i]);
    bad |= pcd_remote_command(r, on_setup, (void *)"AUTH", n, argv, len) < 0;
  }
  if (r->db) {
    snprintf(db, sizeof db, "%u", r->db);
    argv[0] = "SELECT";
    argv[1] = db;
    len[0] = 6;
    len[1] = strlen(db);
    bad |= pcd_remote_command(r, on_setup, (void *)"SELECT", 2, argv, len) < 0;
  }
  argv[0] = "PING";
  len[0] = 4;
  bad |= pcd_remote_command(r, on_ping, NULL, 1, argv, len) < 0;
  if (bad)
    pcd_remote_drop(r, "cannot send the handshake");
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
  pcd_remote *r = ac->data;
  char why[300];
  (void)status;
  if (r->ac != ac)
    return; /* ours: pcd_remote_drop said why */
  r->ac = NULL;
  snprintf(why, sizeof why, "connection lost: %s", ac->err ? ac->errstr : "closed by the server");
  went_down(r, why);
}

/* ------------------------------------------------- the connection's events
 *
 * hiredis's own libuv adapter would do, but a reply it reads has no
 * bound: a Redis that sends one huge value, or a bulk length it never
 * fills, would have pcached hold all of it. So the connection's events are
 * ours: after each read (hiredis takes at most 16 KiB a read) the bytes a
 * reply holds, parsed (counted as hiredis makes its objects) and not yet
 * parsed (its buffer), are weighed, and a connection whose reply passes
 * the bound is dropped. The bound is what the largest answer pcached can
 * ask for may need: values the asker keeps under --max-frame, or the
 * app's list and a snapshot, each under --max-frame. */

typedef struct watch {
  redisAsyncContext *ac; /* NULL once hiredis let go of it */
  pcd_remote *r;
  uv_poll_t poll;
  int events;
  redisReplyObjectFunctions fn; /* hiredis's, counting */
  const redisReplyObjectFunctions *orig;
  uint64_t held; /* bytes of objects made for the reply in progress */
  uint64_t made; /* objects made, ever: a read that made one made progress */
} watch;

uint64_t pcd_remote_reply_bound(const pcd_remote *r) {
  return 2 * (uint64_t)r->config->max_frame + (1u << 20);
}

/* The reader hands its privdata (the watch, set below) to each task. */
static watch *watch_of(const redisReadTask *task) { return task->privdata; }

static void count(const redisReadTask *task, uint64_t bytes) {
  watch *w = watch_of(task);
  if (!w)
    return;
  /* A reply's first object starts its count afresh. */
  w->held = task->parent ? w->held + bytes : bytes;
  w->made++;
}

static void *count_string(const redisReadTask *task, char *str, size_t len) {
  watch *w = watch_of(task);
  count(task, len + 64);
  return w->orig->createString(task, str, len);
}

static void *count_array(const redisReadTask *task, int elements) {
  watch *w = watch_of(task);
  count(task, (uint64_t)(elements > 0 ? elements : 0) * sizeof(void *) + 64);
  return w->orig->createArray(task, elements);
}

static void on_events(uv_poll_t *handle, int status, int events) {
  watch *w = handle->data;
  pcd_remote *r = w->r;
  if (status < 0 && w->ac) {
    /* The socket failed: hiredis finds out on its next read. */
    events = UV_READABLE;
  }
  if (w->ac && (events & UV_READABLE)) {
    redisAsyncContext *ac = w->ac;
    const redisReader *rd = ac->c.reader;
    uint64_t made = w->made, was = rd->len > rd->pos ? rd->len - rd->pos : 0;
    redisAsyncHandleRead(ac);
    if (w->ac == ac && r->ac == ac) {
      uint64_t buffered = rd->len > rd->pos ? rd->len - rd->pos : 0;
      char why[160];
      /* Bytes came in (buffered, or parsed into objects): a long reply
       * that keeps arriving is progress, not a stall, though no reply
       * is whole yet (the sweep's stall limit, remote.c). */
      if (buffered != was || w->made != made)
        r->last_progress_us = pcache__mono_us();
      if (rd->ridx < 0)
        w->held = 0; /* no reply in progress */
      if (w->held + buffered > pcd_remote_reply_bound(r)) {
        snprintf(why, sizeof why, "a reply holding over %llu bytes (the bound)",
                 (unsigned long long)pcd_remote_reply_bound(r));
        pcd_remote_drop(r, why);
        return;
      }
    }
  }
  if (w->ac && (events & UV_WRITABLE))
    redisAsyncHandleWrite(w->ac);
}

static void watch_set(watch *w, int events) {
  w->events = events;
  if (events)
    uv_poll_start(&w->poll, events, on_events);
  else
    uv_poll_stop(&w->poll);
}

static void add_read(void *data) { watch_set(data, ((watch *)data)->events | UV_READABLE); }
static void del_read(void *data) { watch_set(data, ((watch *)data)->events & ~UV_READABLE); }
static void add_write(void *data) { watch_set(data, ((watch *)data)->events | UV_WRITABLE); }
static void del_write(void *data) { watch_set(data, ((watch *)data)->events & ~UV_WRITABLE); }

static void watch_closed(uv_handle_t *handle) { pcache__free(handle->data); }

/* hiredis is done with the connection (freed or disconnected). */
static void cleanup(void *data) {
  watch *w = data;
  w->ac = NULL;
  uv_poll_stop(&w->poll);
  uv_close((uv_handle_t *)&w->poll, watch_closed);
}

/* Watches ac on the remote's loop. 0, or -ENOMEM / a libuv error. */
static int watch_connection(pcd_remote *r, redisAsyncContext *ac) {
  watch *w;
  int rc;
  if (ac->ev.data)
    return -EBUSY;
  w = pcache__calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  if ((rc = uv_poll_init_socket(r->loop, &w->poll, ac->c.fd)) < 0) {
    pcache__free(w);
    return rc;
  }
  w->poll.data = w;
  w->ac = ac;
  w->r = r;
  w->orig = ac->c.reader->fn;
  w->fn = *w->orig;
  w->fn.createString = count_string;
  w->fn.createArray = count_array;
  ac->c.reader->fn = &w->fn;
  ac->c.reader->privdata = w;
  ac->ev.addRead = add_read;
  ac->ev.delRead = del_read;
  ac->ev.addWrite = add_write;
  ac->ev.delWrite = del_write;
  ac->ev.cleanup = cleanup;
  ac->ev.data = w;
  return 0;
}

void pcd_remote_connect(pcd_remote *r) {
  redisAsyncContext *ac =
      r->unix_path[0] ? redisAsyncConnectUnix(r->unix_path) : redisAsyncConnect(r->host, r->port);
  char why[300];
  set_state(r, PCD_REMOTE_CONNECTING);
  if (!ac || ac->err) {
    snprintf(why, sizeof why, "cannot connect: %s", ac ? ac->errstr : "out of memory");
    if (ac)
      redisAsyncFree(ac);
    went_down(r, why);
    return;
  }
  ac->data = r;
  if (watch_connection(r, ac) < 0) {
    redisAsyncFree(ac);
    went_down(r, "cannot watch the connection");
    return;
  }
  r->ac = ac;
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  r->last_progress_us = pcache__mono_us();
}
