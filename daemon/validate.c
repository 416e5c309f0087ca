#include "validate.h"

#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "store.h"

static int check_key(const ProtobufCBinaryData *key, int optional, char *msg, size_t size) {
  if (key->len == PCACHE_DEVKEY_SIZE || (optional && key->len == 0))
    return 0;
  snprintf(msg, size, "device key is not %d bytes", PCACHE_DEVKEY_SIZE);
  return PCACHE_EBAD_KEY;
}

static int check_app(const char *app, char *msg, size_t size) {
  if (!app || strnlen(app, PCD_MAX_APP + 1) <= PCD_MAX_APP)
    return 0;
  snprintf(msg, size, "app name longer than %d bytes", PCD_MAX_APP);
  return PCACHE_EBAD_SIZE;
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

static int check_get(const Pcachepb__Get *g, const pcd_config *config, char *msg, size_t size) {
  int r = check_key(&g->device_key, 0, msg, size);
  if (r < 0)
    return r;
  if (g->n_state_hashes > config->max_hashes) {
    snprintf(msg, size, "%zu state hashes, the limit is %u", g->n_state_hashes, config->max_hashes);
    return PCACHE_ETOO_MANY_HASHES;
  }
  return check_hashes(g->state_hashes, g->n_state_hashes, msg, size);
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
  case PCACHEPB__REQUEST__BODY_LIST:
    r = check_key(&req->list->device_key, 1, msg, size);
    return r < 0 ? r : check_app(req->list->app, msg, size);
  case PCACHEPB__REQUEST__BODY_REPORT:
    r = check_key(&req->report->device_key, 0, msg, size);
    return r < 0 ? r : check_app(req->report->app, msg, size);
  case PCACHEPB__REQUEST__BODY_PURGE:
    return check_purge(req->purge, msg, size);
  case PCACHEPB__REQUEST__BODY_EXPORT:
    r = check_key(&req->export->device_key, 1, msg, size);
    return r < 0 ? r : check_app(req->export->app, msg, size);
  default:
    /* Put and PutSnapshot: per item, with their reply bodies (ops_put.c,
     * ops_snapshot.c). */
    return 0;
  }
}
