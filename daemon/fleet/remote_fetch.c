/* Asks: a Get's missing state hashes, or a Prefetch's (device, app), sent
 * to the fleet as MGETs (and SMEMBERS of the app's index, and GET of its
 * snapshot), each value checked as it arrives, and the ask answered when
 * every reply is in or its deadline passes, whichever comes first: a slow
 * Redis costs a client at most --remote-timeout, never its own timeout.
 *
 * The fetch is bounded in bytes, not only in keys: the STRLEN of every
 * hash comes first (one pipeline), then MGETs of at most MGET_BYTES of
 * values each (a larger value alone), with at most FLIGHT_BYTES asked and
 * not yet in, and no more in all than the ask can keep. 64 keys of 1 MiB
 * in one MGET made one 64 MiB reply that could not be read before the
 * deadline; all of it was lost, at every Prefetch (issue 30, A2). A value
 * that arrives after its ask was answered was asked for and paid for: it
 * is checked and stored all the same, by a job nothing waits for, so the
 * next Get or Prefetch finds it in the store; no new MGET is sent for an
 * answered ask.
 *
 * A value is accepted only from a writer this daemon trusts. Here it must
 * carry its magic and checksum (remote_pack.h), and the signature of a
 * trusted key over all its bytes and the key it was fetched under
 * (remote_trust.c), checked before anything in it is parsed; then unpack
 * within the limits a client's request has, pass pcd_request_validate,
 * and be exactly the Put (or PutSnapshot) of the key it was fetched
 * under; the writer then runs the upload's own checks on it (ops_put.c:
 * header and device, description hash, module code) before it is stored,
 * and only then is it served, from the store. */
#include "remote_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "proto/frame.h"
#include "validate.h"

/* Keys per MGET: big enough to batch, small enough that one slow value
 * does not hold up the rest of a Prefetch. */
#define MGET_KEYS 64
/* Values per MGET, in bytes: a reply this size is read in a few ms, so
 * each MGET's values are in (and counted as progress) long before a
 * deadline. */
#define MGET_BYTES (4u << 20)
/* Bytes an ask has asked for and not yet received: what Redis holds in
 * its output buffer for it, and what is still stored after the ask was
 * answered. */
#define FLIGHT_BYTES (16u << 20)

typedef enum { CMD_STRLEN, CMD_MGET, CMD_MEMBERS, CMD_SNAPSHOT } cmd_kind;

typedef struct fetch_cmd {
  pcd_ask *ask;
  cmd_kind kind;
  size_t start, count; /* MGET: ask->hashes[start, start + count); STRLEN: of start */
  uint64_t bytes;      /* MGET: the values' sizes by their STRLEN */
} fetch_cmd;

void pcd_remote_ask_free(pcd_ask *ask) {
  if (!ask)
    return;
  pcache__free(ask->hashes);
  pcache__free(ask->sizes);
  for (size_t i = 0; i < ask->n_values; i++)
    pcache__request_free(ask->values[i]);
  pcache__free(ask->values);
  pcache__request_free(ask->snapshot);
  pcache__free(ask);
}

/* What one ask can keep, in bytes: its Puts go to the writer together, as
 * one request, which must stay within what a client may send. */
static uint64_t ask_room(const pcd_remote *r) { return r->config->max_frame - 1024u; }

/* What this ask may fetch in all: its room, or less for a sync's slice,
 * which goes to the writer in one short transaction (remote_sync.c). */
static uint64_t ask_budget(const pcd_remote *r, const pcd_ask *ask) {
  return ask->budget && ask->budget < ask_room(r) ? ask->budget : ask_room(r);
}

/* Refusals that are not about trust, in remote->refusals. */
#define REFUSED_FORMAT (PCD_FLEET_BAD_SIGNATURE + 1)

/* Counts a refusal of kind (a pcd_fleet_verdict, or REFUSED_FORMAT), and
 * logs the 1st, 2nd, 4th, 8th... of each kind: a fleet full of values
 * this daemon refuses, asked again at each miss, must not drown the
 * log. */
static void refuse(pcd_remote *r, const pcd_ask *ask, int kind, const char *why) {
  uint64_t n = ++r->refusals[kind];
  atomic_fetch_add(&r->stats->fleet_refused, 1);
  if (ask->sync)
    ask->sync->now.refused++;
  if (kind == PCD_FLEET_UNSIGNED)
    atomic_fetch_add(&r->stats->fleet_refused_unsigned, 1);
  else if (kind == PCD_FLEET_UNTRUSTED)
    atomic_fetch_add(&r->stats->fleet_refused_untrusted, 1);
  else if (kind == PCD_FLEET_BAD_SIGNATURE)
    atomic_fetch_add(&r->stats->fleet_refused_signature, 1);
  if ((n & (n - 1)) == 0)
    log_warn("remote: refused a fleet value for app '%s': %s (%llu such refusals so far; "
             "logged at the 1st, 2nd, 4th, 8th...)",
             ask->app, why, (unsigned long long)n);
}

/* Whether value, fetched under name (the key less the prefix), comes
 * whole from a writer trusted here: its payload then, else NULL after
 * refusing it. Nothing in the value is parsed before this holds. */
static const uint8_t *trusted_payload(pcd_remote *r, const pcd_ask *ask, const char *what,
                                      const char *name, size_t name_len, const uint8_t *value,
                                      size_t size, size_t *ret_size) {
  const uint8_t *payload = NULL;
  char why[256], id[2 * PCD_FLEET_KEY_ID_SIZE + 1];
  pcd_fleet_verdict v = pcd_fleet_unwrap(value, size, &payload, ret_size);
  if (v == PCD_FLEET_OK)
    v = pcd_trust_verify(&r->trust, name, name_len, value, size);
  if (v == PCD_FLEET_OK)
    return payload;
  if (v == PCD_FLEET_UNTRUSTED || v == PCD_FLEET_BAD_SIGNATURE)
    pcd_trust_key_id(value + PCD_FLEET_KEY_ID_AT, id);
  switch (v) {
  case PCD_FLEET_UNSIGNED:
    snprintf(why, sizeof why,
             "%s is unsigned (format 1, pushed by a pcached older than signatures; "
             "docs/fleet.md \"Upgrading\")",
             what);
    break;
  case PCD_FLEET_UNTRUSTED:
    snprintf(why, sizeof why,
             "%s is signed by key %s, which this daemon does not trust (--remote-trusted-keys)",
             what, id);
    break;
  case PCD_FLEET_BAD_SIGNATURE:
    snprintf(why, sizeof why,
             "%s names key %s, but its signature does not hold: changed after it was signed", what,
             id);
    break;
  default:
    snprintf(why, sizeof why, "%s is damaged (magic or checksum)", what);
    break;
  }
  refuse(r, ask, (int)v, why);
  return NULL;
}

/* Unpacks a value's payload as a request and checks it as dispatch checks
 * a client's. Returns the request (free with pcache__request_free) or
 * NULL after refusing it. */
static Pcachepb__Request *unpack_value(pcd_remote *r, const pcd_ask *ask, const uint8_t *payload,
                                       size_t size) {
  Pcachepb__Request *req = NULL;
  char msg[160];
  if (size > r->config->max_frame) {
    refuse(r, ask, REFUSED_FORMAT, "larger than --max-frame");
    return NULL;
  }
  if (pcache__request_decode(payload, size, pcd_config_max_allocations(r->config), &req) < 0) {
    refuse(r, ask, REFUSED_FORMAT, "not a request");
    return NULL;
  }
  if (pcd_request_validate(req, r->config, msg, sizeof msg) < 0) {
    refuse(r, ask, REFUSED_FORMAT, msg);
    pcache__request_free(req);
    return NULL;
  }
  return req;
}

/* Whether info names the ask's device. */
static int same_device(const pcd_ask *ask, const Pcachepb__DeviceInfo *info) {
  return info && info->key.len == PCACHE_DEVKEY_SIZE &&
         memcmp(info->key.data, ask->device_key, PCACHE_DEVKEY_SIZE) == 0;
}

/* An entry's value for state hash: kept when it is the Put of exactly
 * that entry, for the app that fetches it. */
static void take_entry(pcd_remote *r, pcd_ask *ask, const uint8_t *value, size_t size,
                       const uint8_t *hash) {
  const uint8_t *payload;
  char name[PCD_FLEET_KEY_MAX];
  size_t n, name_len = pcd_fleet_key_entry(name, "", ask->device_key, hash);
  Pcachepb__Request *req;
  const Pcachepb__Put *put;
  Pcachepb__Request **grown;
  /* The Puts go to the writer together, as one request: it too must
   * stay within what a client may send. Checked first: a value that will
   * not be taken is not worth a signature check. */
  if (ask->values_size + size > ask_room(r) || ask->n_values >= r->config->max_hashes) {
    log_debug("remote: ask for app '%s' is full; the rest waits for another", ask->app);
    return;
  }
  if (!(payload = trusted_payload(r, ask, "entry", name, name_len, value, size, &n)))
    return;
  if (!(req = unpack_value(r, ask, payload, n)))
    return;
  put = req->body_case == PCACHEPB__REQUEST__BODY_PUT ? req->put : NULL;
  if (!put || !same_device(ask, put->device) || put->n_items != 1 || (put->app && *put->app) ||
      put->items[0]->state_hash.len != PCACHE_HASH_SIZE ||
      memcmp(put->items[0]->state_hash.data, hash, PCACHE_HASH_SIZE) != 0) {
    refuse(r, ask, REFUSED_FORMAT, "not the Put of the entry it is filed under");
    pcache__request_free(req);
    return;
  }
  if (!(grown = pcache__realloc(ask->values, (ask->n_values + 1) * sizeof *grown))) {
    pcache__request_free(req);
    return;
  }
  ask->values = grown;
  ask->values[ask->n_values++] = req;
  ask->values_size += n;
}

static void take_snapshot(pcd_remote *r, pcd_ask *ask, const uint8_t *value, size_t size) {
  const uint8_t *payload;
  char name[PCD_FLEET_KEY_MAX];
  size_t n, name_len = pcd_fleet_key_snapshot(name, "", ask->device_key, ask->app);
  Pcachepb__Request *req;
  if (!(payload = trusted_payload(r, ask, "snapshot", name, name_len, value, size, &n)))
    return;
  if (!(req = unpack_value(r, ask, payload, n)))
    return;
  if (req->body_case != PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT ||
      !same_device(ask, req->put_snapshot->device) ||
      (req->put_snapshot->app && *req->put_snapshot->app)) {
    refuse(r, ask, REFUSED_FORMAT, "not the snapshot it is filed under");
    pcache__request_free(req);
    return;
  }
  ask->snapshot = req;
}

/* The ask's Puts as one: the first, with the items of the others moved
 * into it (each unpacked piece is its own allocation, freed on its own).
 * NULL when none, or out of memory. */
static Pcachepb__Request *gathered(pcd_ask *ask) {
  Pcachepb__Request *first;
  Pcachepb__Put *put;
  Pcachepb__PutItem **items;
  if (!ask->n_values)
    return NULL;
  first = ask->values[0];
  put = first->put;
  /* A sync's values are built by the replayer, which fills the driver's
   * own disk cache as it builds them (docs/fleet.md "Sync"). */
  put->stage = ask->sync != NULL;
  items = pcache__realloc(put->items, ask->n_values * sizeof *items);
  if (!items)
    return NULL;
  put->items = items;
  for (size_t i = 1; i < ask->n_values; i++) {
    Pcachepb__Put *other = ask->values[i]->put;
    put->items[put->n_items++] = other->items[0];
    other->n_items = 0;
  }
  for (size_t i = 1; i < ask->n_values; i++)
    pcache__request_free(ask->values[i]);
  ask->n_values = 0;
  return first;
}

/* The snapshot found, to the writer in a job of its own that nothing
 * waits for. */
static void store_snapshot(pcd_remote *r, pcd_ask *ask) {
  pcd_job *sj;
  if (!ask->snapshot || !(sj = pcd_job_new(PCD_JOB_SNAPSHOT)))
    return;
  sj->req = ask->snapshot;
  ask->snapshot = NULL;
  sj->fleet = 1;
  snprintf(sj->app, sizeof sj->app, "%s", ask->app);
  pcd_writer_submit(r->writer, sj);
}

/* What came in after the ask was answered, once its last reply is in:
 * stored as what came in time is, by jobs nothing waits for. */
static void store_late(pcd_remote *r, pcd_ask *ask) {
  pcd_job *job;
  store_snapshot(r, ask);
  if (!ask->n_values || !(job = pcd_remote_put_job(r)))
    return;
  snprintf(job->app, sizeof job->app, "%s", ask->app);
  if (!(job->req = gathered(ask))) {
    pcd_job_free(job);
    return;
  }
  log_debug("remote: storing %zu values for app '%s' that came after its ask was answered",
            job->req->put->n_items, ask->app);
  pcd_writer_submit(r->writer, job);
}

/* Hands the ask's job back: through the writer when anything was found
 * (the snapshot first, in a job of its own that nothing waits for), else
 * straight to done. The ask itself goes once no callback is due. */
static void answer(pcd_remote *r, pcd_ask *ask) {
  pcd_job *job = ask->job;
  pcd_ask **pp;
  if (!job)
    return;
  ask->job = NULL;
  for (pp = &r->pending; *pp; pp = &(*pp)->next)
    if (*pp == ask) {
      *pp = ask->next;
      break;
    }
  if (ask->sync) {
    ask->sync->slice_listed = ask->n_hashes;
    ask->sync->slice_asked = ask->next_hash;
    if (ask->next_hash)
      memcpy(ask->sync->slice_last, ask->hashes + (ask->next_hash - 1) * PCACHE_HASH_SIZE,
             PCACHE_HASH_SIZE);
  }
  store_snapshot(r, ask);
  job->req = gathered(ask);
  if (job->req)
    pcd_writer_submit(r->writer, job);
  else
    r->done(job);
  if (!ask->outstanding)
    pcd_remote_ask_free(ask);
}

static void on_fetch(pcd_remote *r, redisReply *reply, void *privdata);

/* Sends cmd (copied; its callback is on_fetch). 0, or -ENOMEM / -EIO. */
static int send_cmd(pcd_remote *r, fetch_cmd cmd, int argc, const char **argv, const size_t *len) {
  fetch_cmd *c = pcache__malloc(sizeof *c);
  if (!c)
    return -ENOMEM;
  *c = cmd;
  if (pcd_remote_command(r, on_fetch, c, argc, argv, len) < 0) {
    pcache__free(c);
    return -EIO;
  }
  cmd.ask->outstanding++;
  return 0;
}

/* Asks the size of each hash's value (STRLEN: 0 when absent), all in one
 * pipeline; the MGETs follow once the last is in. */
static void send_strlens(pcd_remote *r, pcd_ask *ask) {
  char key[PCD_FLEET_KEY_MAX];
  const char *argv[2] = {"STRLEN", key};
  size_t len[2] = {6, 0};
  if (!ask->n_hashes || !(ask->sizes = pcache__calloc(ask->n_hashes, sizeof *ask->sizes)))
    return;
  for (size_t i = 0; i < ask->n_hashes; i++) {
    len[1] = pcd_fleet_key_entry(key, r->config->remote_prefix, ask->device_key,
                                 ask->hashes + i * PCACHE_HASH_SIZE);
    if (send_cmd(r, (fetch_cmd){ask, CMD_STRLEN, i, 1, 0}, 2, argv, len) < 0)
      return;
    ask->sizing++;
  }
}

/* Sends the next MGETs of an unanswered ask, in order of its hashes, as
 * long as its bytes in flight allow: each of at most MGET_KEYS keys and
 * MGET_BYTES of values (a larger value alone), by their STRLEN. It stops
 * at the first value the ask has no room left for: the rest waits for
 * the next ask, which no longer lists what this one stored. */
static void send_mgets(pcd_remote *r, pcd_ask *ask) {
  static char keys[MGET_KEYS][PCD_FLEET_KEY_MAX];
  const char *argv[MGET_KEYS + 1];
  size_t len[MGET_KEYS + 1];
  while (ask->job && ask->next_hash < ask->n_hashes && ask->flight_bytes < FLIGHT_BYTES) {
    size_t at = ask->next_hash, count = 0;
    uint64_t bytes = 0;
    for (; at + count < ask->n_hashes && count < MGET_KEYS; count++) {
      uint64_t size = ask->sizes[at + count];
      /* Past the budget, unless it is the ask's first value: one larger
       * than a slice's budget (not than the room) goes alone. */
      if (ask->asked_bytes + bytes + size > ask_budget(r, ask) &&
          (ask->asked_bytes + bytes > 0 || size > ask_room(r))) {
        ask->n_hashes = at + count; /* no room for more */
        break;
      }
      if (count && bytes + size > MGET_BYTES)
        break;
      bytes += size;
    }
    ask->next_hash = at + count;
    if (!bytes)
      continue; /* none of them is in the fleet */
    argv[0] = "MGET";
    len[0] = 4;
    for (size_t i = 0; i < count; i++) {
      len[i + 1] = pcd_fleet_key_entry(keys[i], r->config->remote_prefix, ask->device_key,
                                       ask->hashes + (at + i) * PCACHE_HASH_SIZE);
      argv[i + 1] = keys[i];
    }
    if (send_cmd(r, (fetch_cmd){ask, CMD_MGET, at, count, bytes}, (int)count + 1, argv, len) < 0)
      return;
    ask->asked_bytes += bytes;
    ask->flight_bytes += bytes;
  }
}

/* A STRLEN's answer: the size of hash index's value. A value the ask
 * could never keep is refused here, unfetched. */
static void take_size(pcd_remote *r, pcd_ask *ask, size_t index, const redisReply *reply) {
  uint64_t size =
      reply->type == REDIS_REPLY_INTEGER && reply->integer > 0 ? (uint64_t)reply->integer : 0;
  if (size > ask_room(r)) {
    refuse(r, ask, REFUSED_FORMAT, "larger than --max-frame (by its STRLEN; not fetched)");
    size = 0;
  }
  ask->sizes[index] = size;
}

static int hash_cmp(const void *a, const void *b) { return memcmp(a, b, PCACHE_HASH_SIZE); }

/* Whether the store holds hash for the ask's device: as an entry, or, for
 * a sync, also as a staged build still waiting for the replayer. */
static int have_entry(pcd_txn *txn, const pcd_ask *ask, const uint8_t *hash) {
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  pcd_entry e;
  pcache__devkey base, staged;
  memcpy(key, ask->device_key, PCACHE_DEVKEY_SIZE);
  memcpy(key + PCACHE_DEVKEY_SIZE, hash, PCACHE_HASH_SIZE);
  if (pcd_entry_get(txn, key, &e) == 0)
    return 1;
  if (!ask->sync)
    return 0;
  memcpy(base.bytes, ask->device_key, PCACHE_DEVKEY_SIZE);
  pcache__devkey_staged(&base, &staged);
  memcpy(key, staged.bytes, PCACHE_DEVKEY_SIZE);
  return pcd_entry_get(txn, key, &e) == 0;
}

/* The app's index: the state hashes this store lacks, each once, become
 * the ask's hashes: for a Prefetch the first --max-hashes found; for a
 * sync's slice the `slice` smallest after the last slice's, so that a
 * sync walks the index once, in order, whatever a slice refused. A member
 * must be a hash as writers spell it (lowercase hex, pcache__hex): a
 * Redis set keeps "ab" and "AB" apart, and a hash that could be spelled
 * 2^32 ways would make one planted value be fetched that many times a
 * Prefetch. The few left are sorted, and repeats dropped, so each is
 * asked for once. A slice looks at no more than 16 times --max-hashes
 * members (what one app may have synced is --max-hashes): an index grown
 * by others costs each slice that much, not its whole size. */
static void take_members(pcd_remote *r, pcd_ask *ask, const redisReply *reply) {
  pcd_txn *txn;
  size_t n = 0, kept = 0, odd = 0,
         max = ask->sync ? 16 * (size_t)r->config->max_hashes : r->config->max_hashes;
  if (reply->type != REDIS_REPLY_ARRAY || !reply->elements)
    return;
  if (!(ask->hashes =
            pcache__malloc((reply->elements < max ? reply->elements : max) * PCACHE_HASH_SIZE)))
    return;
  if (pcd_txn_begin(r->store, 0, &txn) < 0)
    return;
  for (size_t i = 0; i < reply->elements && i < max && n < max; i++) {
    const redisReply *m = reply->element[i];
    uint8_t *hash = ask->hashes + n * PCACHE_HASH_SIZE;
    char canonical[2 * PCACHE_HASH_SIZE + 1];
    if (m->type != REDIS_REPLY_STRING || m->len != 2 * PCACHE_HASH_SIZE ||
        pcache__unhex(m->str, hash, PCACHE_HASH_SIZE) < 0) {
      odd++;
      continue;
    }
    pcache__hex(hash, PCACHE_HASH_SIZE, canonical);
    if (memcmp(canonical, m->str, 2 * PCACHE_HASH_SIZE) != 0) {
      odd++;
      continue;
    }
    if ((ask->has_after && hash_cmp(hash, ask->after) <= 0) || have_entry(txn, ask, hash))
      continue;
    n++;
  }
  pcd_txn_abort(txn);
  qsort(ask->hashes, n, PCACHE_HASH_SIZE, hash_cmp);
  for (size_t i = 0; i < n; i++)
    if (kept == 0 || hash_cmp(ask->hashes + i * PCACHE_HASH_SIZE,
                              ask->hashes + (kept - 1) * PCACHE_HASH_SIZE) != 0)
      memmove(ask->hashes + kept++ * PCACHE_HASH_SIZE, ask->hashes + i * PCACHE_HASH_SIZE,
              PCACHE_HASH_SIZE);
  ask->n_hashes = ask->slice && kept > ask->slice ? ask->slice : kept;
  /* A sync's later slices read the same index: its odd members were
   * refused at the first. */
  if (odd && !(ask->sync && ask->has_after)) {
    char why[200];
    snprintf(why, sizeof why,
             "its index holds %zu members that are not a state hash in lowercase hex (as "
             "writers file them); they were skipped",
             odd);
    refuse(r, ask, REFUSED_FORMAT, why);
  }
}

static void on_fetch(pcd_remote *r, redisReply *reply, void *privdata) {
  fetch_cmd *c = privdata;
  pcd_ask *ask = c->ask;
  ask->outstanding--;
  ask->flight_bytes -= c->bytes;
  /* A reply of the kind asked for: the connection works (its backoff
   * starts again from the first pause). */
  if (reply &&
      (c->kind == CMD_SNAPSHOT ? reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_NIL
       : c->kind == CMD_STRLEN ? reply->type == REDIS_REPLY_INTEGER
                               : reply->type == REDIS_REPLY_ARRAY))
    pcd_remote_worked(r);
  /* Values are taken even after the ask was answered (store_late);
   * nothing new is asked for then. */
  if (reply && (ask->job || c->kind == CMD_MGET || c->kind == CMD_SNAPSHOT)) {
    if (reply->type == REDIS_REPLY_ERROR && c->kind != CMD_STRLEN)
      log_warn("remote: %s: %s", pcd_remote_url(r), reply->str);
    switch (c->kind) {
    case CMD_STRLEN:
      take_size(r, ask, c->start, reply);
      if (!--ask->sizing)
        send_mgets(r, ask);
      break;
    case CMD_MGET:
      for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements && i < c->count;
           i++) {
        const redisReply *v = reply->element[i];
        if (v->type != REDIS_REPLY_STRING)
          continue;
        atomic_fetch_add(&r->stats->fleet_fetched, 1);
        if (ask->sync)
          ask->sync->now.fetched++;
        take_entry(r, ask, (const uint8_t *)v->str, v->len,
                   ask->hashes + (c->start + i) * PCACHE_HASH_SIZE);
      }
      send_mgets(r, ask);
      break;
    case CMD_MEMBERS:
      take_members(r, ask, reply);
      send_strlens(r, ask);
      break;
    case CMD_SNAPSHOT:
      if (reply->type == REDIS_REPLY_STRING) {
        atomic_fetch_add(&r->stats->fleet_fetched, 1);
        take_snapshot(r, ask, (const uint8_t *)reply->str, reply->len);
      }
      break;
    }
  }
  pcache__free(c);
  if (ask->outstanding)
    return;
  if (ask->job) {
    answer(r, ask);
  } else {
    store_late(r, ask);
    pcd_remote_ask_free(ask);
  }
}

/* Sends one GET-like command of kind for key. */
static void send_one(pcd_remote *r, pcd_ask *ask, cmd_kind kind, const char *verb, const char *key,
                     size_t key_len) {
  const char *argv[2] = {verb, key};
  size_t len[2] = {strlen(verb), key_len};
  send_cmd(r, (fetch_cmd){ask, kind, 0, 0, 0}, 2, argv, len);
}

void pcd_remote_fetch_start(pcd_remote *r, pcd_ask *ask) {
  char key[PCD_FLEET_KEY_MAX];
  size_t n;
  ask->next = r->pending;
  r->pending = ask;
  if (atomic_load(&r->state) != PCD_REMOTE_UP) {
    atomic_fetch_add(&r->stats->fleet_skipped, 1);
    answer(r, ask);
    return;
  }
  atomic_fetch_add(&r->stats->fleet_asks, 1);
  if (!ask->prefetch) {
    send_strlens(r, ask);
  } else {
    n = pcd_fleet_key_index(key, r->config->remote_prefix, ask->device_key, ask->app);
    send_one(r, ask, CMD_MEMBERS, "SMEMBERS", key, n);
    if (ask->want_snapshot) {
      n = pcd_fleet_key_snapshot(key, r->config->remote_prefix, ask->device_key, ask->app);
      send_one(r, ask, CMD_SNAPSHOT, "GET", key, n);
    }
  }
  if (!ask->outstanding)
    answer(r, ask);
}

void pcd_remote_fetch_expire(pcd_remote *r, uint64_t now_us) {
  pcd_ask *ask = r->pending, *next;
  for (; ask; ask = next) {
    next = ask->next;
    if (ask->deadline_us > now_us)
      continue;
    atomic_fetch_add(&r->stats->fleet_timeouts, 1);
    log_debug("remote: an ask for app '%s' timed out with %zu values in", ask->app, ask->n_values);
    answer(r, ask);
  }
}
