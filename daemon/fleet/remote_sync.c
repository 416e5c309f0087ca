/* The fleet sync (docs/fleet.md "Sync"): before any program runs, pull
 * what the fleet has for the devices installed here and hand it to the
 * replayer, which builds each pipeline from its blob, so that this
 * machine's store and its driver's own disk cache are both warm at the
 * first launch. Without it, each pipeline of that launch is a local miss,
 * a Redis round trip, a signature check and a write of the driver's empty
 * disk cache (issue 29: 1.6x to 6x a warm launch).
 *
 * For each device key the probe of the installed drivers found
 * (replay_detect.c), the fleet's apps are listed (SCAN of the index keys,
 * at most SYNC_MAX_APPS), and each app's index is walked in slices: a
 * slice is a Prefetch's ask (remote_fetch.c, with every check a
 * read-through's value meets) for at most SLICE_ITEMS of the hashes this
 * store lacks, smallest first after the last slice's, SLICE_BYTES of
 * values at most, whose values go to the writer as one Put with stage
 * set. The next slice waits for the writer to finish the last, so that
 * the sync never holds the writer for long, and a client's write waits
 * behind one slice at most; clients' Gets never wait for it (their asks
 * have their own deadlines). Each app's program name (x:APP, written by
 * the member that pushed its entries) is read at its first slice and, when
 * it is a file name, recorded for the replayer, which then builds the
 * app's items under that name (replay_exe.c). One sync runs at a time: a FleetSync that
 * comes meanwhile is answered with its result. */
#include "remote_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "proto/frame.h"

/* Apps listed per device: a fleet's index keys of one device are its
 * programs; past this many the rest waits for the fleet's read-through. */
#define SYNC_MAX_APPS 256
/* SCAN calls a device's listing may take: 4096 of COUNT 256 walk a
 * keyspace of a million keys. A Redis (or something posing as one) that
 * never ends its cursor stops there, not never. */
#define SYNC_MAX_SCANS 4096u
/* Keys Redis looks at per SCAN: one short step of its work at a time. */
#define SCAN_COUNT "256"
/* A slice: what one Put of the sync holds at most (a value larger than
 * SLICE_BYTES goes alone). */
#define SLICE_ITEMS 64
#define SLICE_BYTES (4u << 20)
/* How long a slice waits for Redis, in --remote-timeouts: nothing waits
 * on a sync but its own next step, and a stopped Redis is dropped as
 * stalled well before. */
#define SLICE_TIMEOUT_FACTOR 100u

/* ---------------------------------------------------------- the answer */

void pcd_sync_counts_fill(Pcachepb__FleetSyncReply *reply, const pcd_sync_counts *counts,
                          uint64_t ms) {
  pcachepb__fleet_sync_reply__init(reply);
  reply->devices = counts->devices;
  reply->apps = counts->apps;
  reply->listed = counts->listed;
  reply->fetched = counts->fetched;
  reply->staged = counts->staged;
  reply->refused = counts->refused;
  reply->ms = ms;
}

/* Answers a FleetSync job with what the sync did (counts, NULL: failed
 * with why). */
static void answer_job(pcd_remote *r, pcd_job *job, const pcd_sync_counts *counts, uint64_t ms,
                       int joined, const char *why) {
  Pcachepb__FleetSyncReply *reply = pcache__arena_alloc(&job->arena, sizeof *reply);
  if (!counts || !reply) {
    pcd_reply_error(counts ? -ENOMEM : PCACHE_EUNAVAILABLE, why, &job->out);
    r->done(job);
    return;
  }
  pcd_sync_counts_fill(reply, counts, ms);
  reply->joined = joined;
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_FLEET_SYNC;
  job->resp.fleet_sync = reply;
  if (pcd_reply_encode(&job->resp, NULL, &job->out) < 0)
    pcd_reply_error(-ENOMEM, NULL, &job->out);
  r->done(job);
}

/* Ends the sync under way: its result for Stats and the log, and for the
 * FleetSync jobs that ride on it. why: NULL when it went through. */
static void finish(pcd_remote *r, const char *why) {
  pcd_sync *s = &r->sync;
  uint64_t now = pcache__mono_us(), ms = (now - s->started_us) / 1000u;
  pcd_job *job;
  pthread_mutex_lock(&r->lock);
  s->running = 0;
  s->last = s->now;
  s->last_ms = ms;
  s->ended_us = now;
  s->ever = 1;
  s->failed = why != NULL;
  snprintf(s->error, sizeof s->error, "%s", why ? why : "");
  pthread_mutex_unlock(&r->lock);
  pcache__free(s->apps);
  s->apps = NULL;
  if (why)
    log_warn("remote: fleet sync stopped: %s", why);
  log_info("remote: fleet sync: %u devices, %u apps, %llu hashes listed, %llu fetched, %llu "
           "staged, %llu refused, in %llu ms",
           s->now.devices, s->now.apps, (unsigned long long)s->now.listed,
           (unsigned long long)s->now.fetched, (unsigned long long)s->now.staged,
           (unsigned long long)s->now.refused, (unsigned long long)ms);
  while ((job = pcache_queue_pop(&s->riding)) != NULL)
    answer_job(r, job, why ? NULL : &s->now, ms, 0, why);
  while ((job = pcache_queue_pop(&s->joining)) != NULL)
    answer_job(r, job, why ? NULL : &s->now, ms, 1, why);
}

/* The connection went down under the sync: it runs again from the start
 * once the connection is back (on_up). */
static void fail_down(pcd_remote *r) {
  char why[256];
  pthread_mutex_lock(&r->lock);
  r->sync.wanted = 1;
  pthread_mutex_unlock(&r->lock);
  snprintf(why, sizeof why,
           "the fleet tier went down (%.120s); pcached syncs again once it is back up, or run "
           "`pcachectl fleet sync` then",
           r->last_error[0] ? r->last_error : "no reply");
  finish(r, why);
}

/* ------------------------------------------------------------ the steps */

static void next_device(pcd_remote *r);
static void next_slice(pcd_remote *r);

/* SCAN's MATCH treats * ? [ ] and \ as pattern: the prefix is the user's
 * text, matched as it is. Returns the length written (out holds
 * 2 * PCD_FLEET_KEY_MAX). */
static size_t match_pattern(char *out, const char *prefix, const uint8_t *device_key) {
  char head[PCD_FLEET_KEY_MAX];
  size_t n = 0;
  for (const char *p = prefix; *p; p++) {
    if (strchr("*?[]\\", *p))
      out[n++] = '\\';
    out[n++] = *p;
  }
  size_t h = pcd_fleet_key_index(head, "", device_key, "");
  memcpy(out + n, head, h);
  n += h;
  out[n++] = '*';
  out[n] = '\0';
  return n;
}

static void on_scan(pcd_remote *r, redisReply *reply, void *privdata);

static void send_scan(pcd_remote *r) {
  pcd_sync *s = &r->sync;
  char pattern[2 * PCD_FLEET_KEY_MAX + 2];
  const char *argv[6] = {"SCAN", s->scan_cursor, "MATCH", pattern, "COUNT", SCAN_COUNT};
  size_t len[6] = {4, strlen(s->scan_cursor), 5, 0, 5, strlen(SCAN_COUNT)};
  len[3] = match_pattern(pattern, r->config->remote_prefix, s->key);
  if (pcd_remote_command(r, on_scan, NULL, 6, argv, len) < 0)
    fail_down(r);
}

/* An index key's app, when key is one of the device's: kept once. */
static void take_app(pcd_remote *r, const redisReply *key) {
  pcd_sync *s = &r->sync;
  char head[PCD_FLEET_KEY_MAX];
  size_t n = pcd_fleet_key_index(head, r->config->remote_prefix, s->key, ""), len;
  const char *app;
  if (key->type != REDIS_REPLY_STRING || key->len <= n || memcmp(key->str, head, n) != 0)
    return;
  app = key->str + n;
  len = key->len - n;
  /* An app name a client could not have sent is no index a writer made. */
  if (len > PCD_MAX_APP || memchr(app, '\0', len)) {
    log_debug("remote: fleet sync: skipped an index key whose app name is not one");
    return;
  }
  for (size_t i = 0; i < s->n_apps; i++)
    if (strlen(s->apps[i]) == len && memcmp(s->apps[i], app, len) == 0)
      return; /* SCAN may return a key twice */
  memcpy(s->apps[s->n_apps], app, len);
  s->apps[s->n_apps++][len] = '\0';
}

static void on_scan(pcd_remote *r, redisReply *reply, void *privdata) {
  pcd_sync *s = &r->sync;
  const redisReply *keys;
  (void)privdata;
  if (!s->running)
    return;
  if (!reply) {
    fail_down(r);
    return;
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_STRING ||
      reply->element[0]->len >= sizeof s->scan_cursor ||
      reply->element[1]->type != REDIS_REPLY_ARRAY) {
    char why[200];
    snprintf(why, sizeof why, "Redis answered SCAN with %s; is %s a Redis server (2.8 or later)?",
             reply->type == REDIS_REPLY_ERROR ? reply->str : "something else", pcd_remote_url(r));
    finish(r, why);
    return;
  }
  pcd_remote_worked(r);
  keys = reply->element[1];
  for (size_t i = 0; i < keys->elements && s->n_apps < SYNC_MAX_APPS; i++)
    take_app(r, keys->element[i]);
  memcpy(s->scan_cursor, reply->element[0]->str, reply->element[0]->len);
  s->scan_cursor[reply->element[0]->len] = '\0';
  if (strcmp(s->scan_cursor, "0") != 0 && s->n_apps < SYNC_MAX_APPS &&
      ++s->scans < SYNC_MAX_SCANS) {
    send_scan(r);
    return;
  }
  if (s->scans >= SYNC_MAX_SCANS)
    log_warn("remote: fleet sync: the listing of a device's apps did not end after %u SCANs; "
             "synced the %zu apps found (check the Redis at %s)",
             SYNC_MAX_SCANS, s->n_apps, pcd_remote_url(r));
  if (s->n_apps >= SYNC_MAX_APPS)
    log_info("remote: fleet sync: the fleet has more than %d apps for a device; synced the "
             "first %d found, the others come through read-through when they run",
             SYNC_MAX_APPS, SYNC_MAX_APPS);
  s->now.apps += (uint32_t)s->n_apps;
  s->app_at = 0;
  s->has_after = 0;
  s->app_listed = 0;
  next_slice(r);
}

/* Lists the next device's apps, or ends the sync after the last. */
static void next_device(pcd_remote *r) {
  pcd_sync *s = &r->sync;
  if (s->key_at >= s->now.devices) {
    finish(r, NULL);
    return;
  }
  memcpy(s->key, s->run_keys[s->key_at++], PCACHE_DEVKEY_SIZE);
  snprintf(s->scan_cursor, sizeof s->scan_cursor, "0");
  s->scans = 0;
  s->n_apps = 0;
  send_scan(r);
}

/* x:APP's answer (privdata: the app, owned). Not signed: anyone with
 * Redis access could have written it, and it becomes a file name here, so
 * only a name that passes pcd_exe_name_ok is recorded; the worst a
 * recorded one does is make the replayer build into another program's
 * driver cache file (docs/fleet.md "Who can do what"). */
static void on_exe(pcd_remote *r, redisReply *reply, void *privdata) {
  char *app = privdata, exe[PCD_EXE_NAME_MAX + 1];
  if (reply && reply->type == REDIS_REPLY_STRING) {
    if (pcd_exe_name_ok(reply->str, reply->len)) {
      memcpy(exe, reply->str, reply->len);
      exe[reply->len] = '\0';
      if (r->on_exe)
        r->on_exe(r->put_ctx, app, exe);
    } else {
      log_warn("remote: fleet sync: the program name of app '%s' in Redis (x:%s) is not a file "
               "name (1 to %d of A-Z a-z 0-9 . _ + -); not used: its pipelines are built as "
               "pcache-replay. Only pcached writes that key: check who else can write to %s",
               app, app, PCD_EXE_NAME_MAX, pcd_remote_url(r));
    }
  }
  pcache__free(app);
}

/* Asks for app's program name (on_exe); the answer comes before the
 * slice's, on the same connection. */
static void ask_exe(pcd_remote *r, const char *app) {
  char key[PCD_FLEET_KEY_MAX];
  const char *argv[2] = {"GET", key};
  size_t len[2] = {3, pcd_fleet_key_exe(key, r->config->remote_prefix, app)};
  char *copy = pcache__strdup(app);
  if (copy && pcd_remote_command(r, on_exe, copy, 2, argv, len) < 0)
    pcache__free(copy);
}

/* Any thread (the writer's, or the loop's when nothing was found): a
 * slice's Put is done; the loop takes it up (pcd_remote_sync_run). */
static void slice_landed(pcd_job *job) {
  pcd_remote *r = job->owner;
  int stopped;
  pthread_mutex_lock(&r->lock);
  stopped = r->stopped;
  if (!stopped)
    pcache_queue_push(&r->sync.landed, job);
  pthread_mutex_unlock(&r->lock);
  if (stopped)
    pcd_job_free(job);
  else
    uv_async_send(&r->wake);
}

/* Asks the fleet for the current app's next slice, or moves on to the
 * next app, or device. */
static void next_slice(pcd_remote *r) {
  pcd_sync *s = &r->sync;
  pcd_ask *ask;
  pcd_job *job;
  if (s->app_at >= s->n_apps) {
    next_device(r);
    return;
  }
  if (atomic_load(&r->state) != PCD_REMOTE_UP) {
    fail_down(r);
    return;
  }
  ask = pcache__calloc(1, sizeof *ask);
  job = pcd_remote_put_job(r);
  if (!ask || !job) {
    pcache__free(ask);
    pcd_job_free(job);
    finish(r, "out of memory; run `pcachectl fleet sync` again later");
    return;
  }
  job->owner = r;
  job->finish = slice_landed;
  snprintf(job->app, sizeof job->app, "%s", s->apps[s->app_at]);
  ask->remote = r;
  ask->job = job;
  ask->prefetch = 1;
  ask->sync = s;
  ask->slice = SLICE_ITEMS;
  ask->budget = SLICE_BYTES;
  ask->has_after = s->has_after;
  memcpy(ask->after, s->after, PCACHE_HASH_SIZE);
  memcpy(ask->device_key, s->key, PCACHE_DEVKEY_SIZE);
  snprintf(ask->app, sizeof ask->app, "%s", job->app);
  ask->deadline_us =
      pcache__mono_us() + r->config->remote_timeout_ms * SLICE_TIMEOUT_FACTOR * 1000u;
  s->slice_listed = s->slice_asked = 0;
  s->at_writer = 1;
  if (!s->has_after)
    ask_exe(r, s->apps[s->app_at]);
  pcd_remote_fetch_start(r, ask);
}

/* A slice is done (its Put committed, or it found nothing): counted, and
 * the next one asked for. An app is done when a slice lists nothing more,
 * or its sync has asked for --max-hashes, as a Prefetch would at most. */
static void slice_done(pcd_remote *r, pcd_job *job) {
  pcd_sync *s = &r->sync;
  int app_done = 0;
  s->at_writer = 0;
  if (job->req) {
    s->now.staged += job->stored;
    s->now.refused += job->rejected;
  }
  pcd_job_free(job);
  if (!s->running)
    return;
  s->now.listed += s->slice_asked;
  if (!s->slice_listed) {
    app_done = 1;
  } else if (!s->slice_asked) {
    /* Nothing asked: Redis went away, or its sizes did not come before
     * the slice's deadline. Another try would do the same. */
    if (atomic_load(&r->state) != PCD_REMOTE_UP) {
      fail_down(r);
      return;
    }
    log_warn("remote: fleet sync: app '%s' gave no answer in time; skipped it (`pcachectl "
             "fleet sync` tries again)",
             s->apps[s->app_at]);
    app_done = 1;
  } else {
    memcpy(s->after, s->slice_last, PCACHE_HASH_SIZE);
    s->has_after = 1;
    s->app_listed += s->slice_asked;
    app_done = s->app_listed >= r->config->max_hashes;
  }
  if (app_done) {
    s->app_at++;
    s->has_after = 0;
    s->app_listed = 0;
  }
  next_slice(r);
}

/* Starts a sync of the keys the probe found, or says why it cannot. */
static const char *start(pcd_remote *r) {
  pcd_sync *s = &r->sync;
  unsigned n;
  if (!r->trust.n_keys)
    return "no writer is trusted, so every fleet value would be refused; pass "
           "--remote-trusted-keys FILE (docs/fleet.md)";
  if (atomic_load(&r->state) != PCD_REMOTE_UP)
    return "the fleet tier is not up (`pcachectl status` says why); pcached syncs once it "
           "is, or run `pcachectl fleet sync` then";
  pthread_mutex_lock(&r->lock);
  n = s->n_keys;
  memcpy(s->run_keys, s->keys, sizeof s->keys);
  if (n)
    s->running = 1;
  pthread_mutex_unlock(&r->lock);
  if (!n)
    return "no installed Vulkan device is known: the probe of the drivers (pcache-replay "
           "--list-keys) has not run, found none, or is off (PCACHE_REPLAY=off or "
           "PCACHE_REPLAY_DETECT=off); run `pcachectl replay --detect`, which syncs after it";
  if (!(s->apps = pcache__calloc(SYNC_MAX_APPS, sizeof *s->apps))) {
    pthread_mutex_lock(&r->lock);
    s->running = 0;
    pthread_mutex_unlock(&r->lock);
    return "out of memory; run `pcachectl fleet sync` again later";
  }
  memset(&s->now, 0, sizeof s->now);
  s->now.devices = n;
  s->key_at = 0;
  s->started_us = pcache__mono_us();
  log_info("remote: fleet sync of %u device%s started", n, n == 1 ? "" : "s");
  next_device(r);
  return NULL;
}

/* ------------------------------------------------------------ the doors */

void pcd_remote_sync_run(pcd_remote *r) {
  pcd_sync *s = &r->sync;
  PCACHE_QUEUE(pcd_job) landed, waiters;
  pcd_job *job;
  int wanted;
  pthread_mutex_lock(&r->lock);
  pcache_queue_take_all(&landed, &s->landed);
  pcache_queue_take_all(&waiters, &s->waiters);
  wanted = s->wanted;
  pthread_mutex_unlock(&r->lock);
  while ((job = pcache_queue_pop(&landed)) != NULL)
    slice_done(r, job);
  if (s->running) {
    /* Not started twice: they hear what this one did. */
    pcache_queue_append(&s->joining, &waiters);
    return;
  }
  if (!wanted && pcache_queue_empty(&waiters))
    return;
  pcache_queue_append(&s->riding, &waiters);
  {
    const char *why = start(r);
    if (!why) {
      pthread_mutex_lock(&r->lock);
      s->wanted = 0;
      pthread_mutex_unlock(&r->lock);
      return;
    }
    /* A sync the probe wanted waits for the connection (on_up runs this
     * again); one asked for hears why now. */
    while ((job = pcache_queue_pop(&s->riding)) != NULL)
      answer_job(r, job, NULL, 0, 0, why);
  }
}

void pcd_remote_sync_stop(pcd_remote *r) {
  pcd_sync *s = &r->sync;
  PCACHE_QUEUE(pcd_job) landed, waiters;
  pcd_job *job;
  const char *why = "pcached is stopping; run `pcachectl fleet sync` once it has started again";
  pthread_mutex_lock(&r->lock);
  pcache_queue_take_all(&landed, &s->landed);
  pcache_queue_take_all(&waiters, &s->waiters);
  pthread_mutex_unlock(&r->lock);
  while ((job = pcache_queue_pop(&landed)) != NULL)
    pcd_job_free(job);
  pcache_queue_append(&s->riding, &waiters);
  if (s->running)
    finish(r, why);
  pcache_queue_append(&s->riding, &s->joining);
  while ((job = pcache_queue_pop(&s->riding)) != NULL)
    answer_job(r, job, NULL, 0, 0, why);
}

void pcd_remote_sync_devices(pcd_remote *r, const uint8_t *keys, unsigned n) {
  pcd_sync *s;
  int stopped;
  if (!r)
    return;
  s = &r->sync;
  pthread_mutex_lock(&r->lock);
  stopped = r->stopped;
  if (!stopped) {
    s->n_keys = n < PCD_SYNC_MAX_DEVICES ? n : PCD_SYNC_MAX_DEVICES;
    memcpy(s->keys, keys, (size_t)s->n_keys * PCACHE_DEVKEY_SIZE);
    s->wanted = s->n_keys > 0;
  }
  pthread_mutex_unlock(&r->lock);
  if (!stopped && n)
    uv_async_send(&r->wake);
}

void pcd_remote_sync_ask(pcd_remote *r, pcd_job *job) {
  int stopped;
  pthread_mutex_lock(&r->lock);
  stopped = r->stopped;
  if (!stopped)
    pcache_queue_push(&r->sync.waiters, job);
  pthread_mutex_unlock(&r->lock);
  if (!stopped) {
    uv_async_send(&r->wake);
    return;
  }
  pcd_reply_error(PCACHE_EUNAVAILABLE,
                  "pcached is stopping; run `pcachectl fleet sync` once it has started again",
                  &job->out);
  r->done(job);
}
