/* The Put batcher (put_batch.c), the one both uploaders share: libpcache's
 * upload thread (client/upload.c) and the replayer's (replay/uploader.c).
 * It holds the queue of items waiting to go, bounded in items and in
 * bytes; takes a batch off its front under a bound in items and in bytes,
 * every item of one Put (Put.app and Put.stage are the request's, not an
 * item's); puts a batch that did not go back in front; and builds a
 * batch's Put request.
 *
 * What differs stays with each user, as parameters and a callback: the
 * bounds, whether an item of another Put ends a batch (libpcache: its
 * staged builds keep their place in line) or is passed over (the
 * replayer: its threads' apps interleave), which modules an item carries,
 * and the thread, its retries and what a result does.
 *
 * Not thread-safe: the user's lock. Items are neither allocated nor freed
 * here: a user's item type begins with a pcache__put_item, and the user
 * frees what comes back to it. */
#ifndef PCACHE_PROTO_PUT_BATCH_H
#define PCACHE_PROTO_PUT_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/hash.h"
#include "common/queue.h"
#include "proto/pcache.pb-c.h"

/* What a Put adds to its items' bytes: the request, the device (its
 * strings at most 255 bytes each), and each item's (and module's) own
 * fields. */
#define PCACHE_PUT_OVERHEAD 4096u
#define PCACHE_PUT_ITEM_OVERHEAD 256u

typedef struct pcache__put_item {
  struct pcache__put_item *next;
  pcache__hash state_hash;
  uint32_t kind; /* Pcachepb__EntryKind */
  uint8_t *blob;
  size_t blob_size;
  uint8_t *desc;
  size_t desc_size;
  uint64_t compile_ns;
  /* The Put's, the same for every item of a batch: */
  const char *app; /* NULL: the one the caller names (libpcache: its client's) */
  int stage;       /* Put.stage: a staged build, no blob (client/build.h "Staging") */
  /* What the item's modules add to a Put, their code included (set by
   * the user before pcache__put_batcher_push; 0 for none). */
  uint64_t modules_bytes;
} pcache__put_item;

typedef PCACHE_QUEUE(pcache__put_item) pcache__put_queue;

typedef struct pcache__put_batcher {
  pcache__put_queue queue;
  size_t len;     /* items queued */
  uint64_t bytes; /* what they own (blob and description) */
  /* Bounds on the queue (0: none): past max_len the oldest item goes;
   * an item that would take the queue past max_bytes is not queued. */
  size_t max_len;
  uint64_t max_bytes;
  /* pcache__put_batcher_take: an item of another Put is passed over (1)
   * rather than end the batch (0). */
  int pass_other_puts;
} pcache__put_batcher;

void pcache__put_batcher_init(pcache__put_batcher *b, size_t max_len, uint64_t max_bytes,
                              int pass_other_puts);

/* What item holds in the queue (max_bytes): its blob and description. */
uint64_t pcache__put_item_bytes(const pcache__put_item *item);
/* The most item adds to a Put: its bytes, its modules and its fields. */
uint64_t pcache__put_item_put_bytes(const pcache__put_item *item);

/* Queues item at the back, within the bounds. Returns NULL, or the item
 * the bounds left out: item itself (not queued: the bytes) or the oldest
 * (taken off: the count), for the caller to free and count as dropped. */
pcache__put_item *pcache__put_batcher_push(pcache__put_batcher *b, pcache__put_item *item);

/* Takes the first item off the queue, or NULL. */
pcache__put_item *pcache__put_batcher_pop(pcache__put_batcher *b);

/* Takes a batch off into *ret_batch (initialized here), in queue order:
 * the first item, then those of its Put (app and stage) while the batch
 * stays within max_items and, by pcache__put_item_put_bytes, max_bytes.
 * Returns the number taken (0: the queue was empty). */
size_t pcache__put_batcher_take(pcache__put_batcher *b, pcache__put_queue *ret_batch,
                                size_t max_items, uint64_t max_bytes);

/* Puts items back in front of the queue, in their order (a batch that did
 * not go, retries); items is left empty. Past the bounds: they were in
 * the queue before. */
void pcache__put_batcher_requeue(pcache__put_batcher *b, pcache__put_queue *items);

/* Sets out->modules and out->n_modules to the modules item carries (their
 * array allocated from a); returns 0 or -ENOMEM. */
typedef int (*pcache__put_modules_fn)(void *ctx, const pcache__put_item *item,
                                      Pcachepb__PutItem *out, pcache__arena *a);

/* A batch's Put request; everything it points into but the items' bytes
 * and device lives in arena. */
typedef struct pcache__put_request {
  Pcachepb__Request request;
  Pcachepb__Put put;
  pcache__arena arena;
} pcache__put_request;

/*
 * pcache__put_request_build - the Put of n items from batch on (linked by
 * next), for device, under the first item's app (app when it has none)
 * and stage. modules (NULL: none) adds each item's modules. The request
 * points into the items, device and app: they must outlive it. Returns 0
 * or -ENOMEM (or what modules returned); free with
 * pcache__put_request_free in every case.
 */
int pcache__put_request_build(pcache__put_request *r, const pcache__put_item *batch, size_t n,
                              const Pcachepb__DeviceInfo *device, const char *app,
                              pcache__put_modules_fn modules, void *ctx);
void pcache__put_request_free(pcache__put_request *r);

#endif
