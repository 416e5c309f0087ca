#include "validate.h"

#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "client_reports.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "common/log.h"
#include "store.h"

/* A key with the staged mark (common/devkey.h) is the daemon's own filing
 * of staged items, never a device's: named by a client it would read,
 * fill or purge what only the replayer builds from (docs/replay.md
 * "Staged builds"). A key of another length is left to the caller. */
static int check_unstaged(const ProtobufCBinaryData *key, char *msg, size_t size) {
  pcache__devkey k;
  if (key->len != PCACHE_DEVKEY_SIZE)
    return 0;
  memcpy(k.bytes, key->data, PCACHE_DEVKEY_SIZE);
  if (!pcache__devkey_is_staged(&k))
    return 0;
  snprintf(msg, size,
           "device key has the staged mark (ABI 0x%x): no device has it; stage items "
           "with Put.stage on the device's own key",
           PCACHE_DEVKEY_ABI_STAGED);
  return PCACHE_EBAD_KEY;
}

static int check_key(const ProtobufCBinaryData *key, int optional, char *msg, size_t size) {
  if (key->len == PCACHE_DEVKEY_SIZE || (optional && key->len == 0))
    return check_unstaged(key, msg, size);
  snprintf(msg, size, "device key is not %d bytes", PCACHE_DEVKEY_SIZE);
  return PCACHE_EBAD_KEY;
}

static int check_app(const char *app, char *msg, size_t size) {
  if (!app || strnlen(app, PCD_MAX_APP + 1) <= PCD_MAX_APP)
    return 0;
  snprintf(msg, size, "app name longer than %d bytes", PCD_MAX_APP);
  return PCACHE_EBAD_SIZE;
}

/* Text a client sends for display only (a report's app and device name):
 * at most max bytes, and printable UTF-8 (pcache__utf8_printable), so
 * that what pcachectl shows can neither forge a line nor steer a
 * terminal. */
static int check_text(const char *text, size_t max, const char *what, char *msg, size_t size) {
  size_t n = text ? strnlen(text, max + 1) : 0;
  if (n > max) {
    snprintf(msg, size, "%s longer than %zu bytes", what, max);
    return PCACHE_EBAD_SIZE;
  }
  if (!pcache__utf8_printable(text, n)) {
    snprintf(msg, size, "%s is not printable UTF-8", what);
    return PCACHE_EPROTO;
  }
  return 0;
}

/* A reason is a word of the describer's ("pnext"): [a-z0-9_], 1 to
 * PCD_MAX_REASON_WORD bytes. */
static int check_reason_word(const char *word, char *msg, size_t size) {
  size_t n = word ? strnlen(word, PCD_MAX_REASON_WORD + 1) : 0;
  if (n > PCD_MAX_REASON_WORD) {
    snprintf(msg, size, "unhashable reason longer than %d bytes", PCD_MAX_REASON_WORD);
    return PCACHE_EBAD_SIZE;
  }
  if (n == 0 || strspn(word, "abcdefghijklmnopqrstuvwxyz0123456789_") != n) {
    snprintf(msg, size, "unhashable reason is not a word of [a-z0-9_]");
    return PCACHE_EPROTO;
  }
  return 0;
}

/* A ClientReport's key, text and reasons. Its counters are taken as they
 * come: any value is only a number to show. */
static int check_client_report(const Pcachepb__ClientReport *rep, char *msg, size_t size) {
  int r = check_key(&rep->device_key, 1, msg, size);
  if (r == 0)
    r = check_text(rep->app, PCD_MAX_APP, "app name", msg, size);
  if (r == 0)
    r = check_text(rep->device_name, PCD_MAX_DEVICE_STRING, "device name", msg, size);
  if (r == 0 && rep->n_reasons > PCD_MAX_CLIENT_REASONS) {
    snprintf(msg, size, "%zu unhashable reasons, the limit is %d", rep->n_reasons,
             PCD_MAX_CLIENT_REASONS);
    r = PCACHE_EBAD_SIZE;
  }
  for (size_t i = 0; r == 0 && i < rep->n_reasons; i++)
    r = check_reason_word(rep->reasons[i]->reason, msg, size);
  return r;
}

static int check_hashes(const ProtobufCBinaryData *h, size_t n, char *msg, size_t size) {
  for (size_t i = 0; i < n; i++) {
    if (h[i].len != PCACHE_HASH_SIZE) {
      snprintf(msg, size, "state hash is not %d bytes", PCACHE_HASH_SIZE);
      return PCACHE_EBAD_KEY;
    }
  }
  return 0;
}

/* A request's list of state hashes: at most max_hashes, each whole. */
static int check_hash_list(const ProtobufCBinaryData *h, size_t n, const pcd_config *config,
                           char *msg, size_t size) {
  if (n > config->max_hashes) {
    snprintf(msg, size, "%zu state hashes, the limit is %u", n, config->max_hashes);
    return PCACHE_ETOO_MANY_HASHES;
  }
  return check_hashes(h, n, msg, size);
}

static int check_get(const Pcachepb__Get *g, const pcd_config *config, char *msg, size_t size) {
  int r = check_key(&g->device_key, 0, msg, size);
  return r < 0 ? r : check_hash_list(g->state_hashes, g->n_state_hashes, config, msg, size);
}

static int check_purge(const Pcachepb__Purge *p, char *msg, size_t size) {
  switch (p->selector_case) {
  case PCACHEPB__PURGE__SELECTOR_DEVICE_KEY:
    return check_key(&p->device_key, 0, msg, size);
  case PCACHEPB__PURGE__SELECTOR_APP:
    return check_app(p->app, msg, size);
  case PCACHEPB__PURGE__SELECTOR_STATE_HASH:
    return check_hashes(&p->state_hash, 1, msg, size);
  default:
    return 0; /* no selector: the writer answers PCACHE_EPROTO */
  }
}

int pcd_request_validate(const Pcachepb__Request *req, const pcd_config *config, char *msg,
                         size_t size) {
  int r;
  switch (req->body_case) {
  case PCACHEPB__REQUEST__BODY_HELLO:
    return check_app(req->hello->app, msg, size);
  case PCACHEPB__REQUEST__BODY_GET:
    return check_get(req->get, config, msg, size);
  case PCACHEPB__REQUEST__BODY_PREFETCH:
    r = check_key(&req->prefetch->device_key, 0, msg, size);
    return r < 0 ? r : check_app(req->prefetch->app, msg, size);
  case PCACHEPB__REQUEST__BODY_SEGMENT:
    r = check_key(&req->segment->device_key, 0, msg, size);
    return r < 0 ? r : check_app(req->segment->app, msg, size);
  case PCACHEPB__REQUEST__BODY_LIST:
    r = check_key(&req->list->device_key, 1, msg, size);
    return r < 0 ? r : check_app(req->list->app, msg, size);
  case PCACHEPB__REQUEST__BODY_REPORT:
    r = check_key(&req->report->device_key, 0, msg, size);
    if (r == 0)
      r = check_hash_list(req->report->used, req->report->n_used, config, msg, size);
    return r < 0 ? r : check_app(req->report->app, msg, size);
  case PCACHEPB__REQUEST__BODY_PURGE:
    return check_purge(req->purge, msg, size);
  case PCACHEPB__REQUEST__BODY_EXPORT:
    r = check_key(&req->export->device_key, 1, msg, size);
    return r < 0 ? r : check_app(req->export->app, msg, size);
  case PCACHEPB__REQUEST__BODY_CLIENT_REPORT:
    return check_client_report(req->client_report, msg, size);
  case PCACHEPB__REQUEST__BODY_LIST_CLIENT_REPORTS:
    return check_app(req->list_client_reports->app, msg, size);
  case PCACHEPB__REQUEST__BODY_REPLAY_START:
    r = check_key(&req->replay_start->device_key, 1, msg, size);
    return r < 0 ? r : check_app(req->replay_start->app, msg, size);
  case PCACHEPB__REQUEST__BODY_REPLAY_CLAIM:
    return check_key(&req->replay_claim->new_key, 0, msg, size);
  case PCACHEPB__REQUEST__BODY_PUT:
    /* The key's length and the items are judged per item, with the
     * reply's body (ops_put.c); a staged key refuses the whole request. */
    return req->put->device ? check_unstaged(&req->put->device->key, msg, size) : 0;
  case PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT:
    return req->put_snapshot->device ? check_unstaged(&req->put_snapshot->device->key, msg, size)
                                     : 0;
  default:
    return 0;
  }
}
