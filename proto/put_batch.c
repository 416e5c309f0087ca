/* The Put batcher (put_batch.h): the queue both uploaders keep, the
 * batches taken off it and the Put request a batch becomes. */
#include "proto/put_batch.h"

#include <errno.h>
#include <string.h>

void pcache__put_batcher_init(pcache__put_batcher *b, size_t max_len, uint64_t max_bytes,
                              int pass_other_puts) {
  memset(b, 0, sizeof *b);
  pcache_queue_init(&b->queue);
  b->max_len = max_len;
  b->max_bytes = max_bytes;
  b->pass_other_puts = pass_other_puts;
}

uint64_t pcache__put_item_bytes(const pcache__put_item *item) {
  return (uint64_t)item->blob_size + item->desc_size;
}

uint64_t pcache__put_item_put_bytes(const pcache__put_item *item) {
  return pcache__put_item_bytes(item) + PCACHE_PUT_ITEM_OVERHEAD + item->modules_bytes;
}

pcache__put_item *pcache__put_batcher_push(pcache__put_batcher *b, pcache__put_item *item) {
  pcache__put_item *oldest = NULL;
  uint64_t bytes = pcache__put_item_bytes(item);
  /* In bytes the one that would pass the bound goes (it may be the
   * largest); in items the oldest. */
  if (b->max_bytes && b->bytes + bytes > b->max_bytes)
    return item;
  if (b->max_len && b->len >= b->max_len)
    oldest = pcache__put_batcher_pop(b);
  pcache_queue_push(&b->queue, item);
  b->len++;
  b->bytes += bytes;
  return oldest;
}

pcache__put_item *pcache__put_batcher_pop(pcache__put_batcher *b) {
  pcache__put_item *item = pcache_queue_pop(&b->queue);
  if (item) {
    b->len--;
    b->bytes -= pcache__put_item_bytes(item);
  }
  return item;
}

/* Whether two items may share a Put: the request names one app and says
 * whether all its items are staged. */
static int same_put(const pcache__put_item *a, const pcache__put_item *b) {
  if (a->stage != b->stage)
    return 0;
  if (!a->app || !b->app)
    return a->app == b->app;
  return strcmp(a->app, b->app) == 0;
}

size_t pcache__put_batcher_take(pcache__put_batcher *b, pcache__put_queue *ret_batch,
                                size_t max_items, uint64_t max_bytes) {
  pcache__put_item **p = &b->queue.head, *first = b->queue.head;
  uint64_t bytes = 0;
  size_t n = 0;
  pcache_queue_init(ret_batch);
  while (*p && n < max_items) {
    pcache__put_item *item = *p;
    uint64_t put_bytes = pcache__put_item_put_bytes(item);
    if (n > 0 && !same_put(first, item)) {
      if (!b->pass_other_puts)
        break;
      p = &item->next;
      continue;
    }
    /* The first item goes whatever its size: alone, or not at all. */
    if (n > 0 && bytes + put_bytes > max_bytes)
      break;
    bytes += put_bytes;
    *p = item->next; /* unlinked where it is: it may be past others */
    b->len--;
    b->bytes -= pcache__put_item_bytes(item);
    pcache_queue_push(ret_batch, item);
    n++;
  }
  /* The queue's tail, after unlinking from anywhere in it. */
  b->queue.tail = &b->queue.head;
  while (*b->queue.tail)
    b->queue.tail = &(*b->queue.tail)->next;
  return n;
}

void pcache__put_batcher_requeue(pcache__put_batcher *b, pcache__put_queue *items) {
  for (pcache__put_item *item = items->head; item; item = item->next) {
    b->len++;
    b->bytes += pcache__put_item_bytes(item);
  }
  pcache_queue_prepend(&b->queue, items);
}

int pcache__put_request_build(pcache__put_request *r, const pcache__put_item *batch, size_t n,
                              const Pcachepb__DeviceInfo *device, const char *app,
                              pcache__put_modules_fn modules, void *ctx) {
  Pcachepb__PutItem *items, **ptrs;
  size_t i = 0;
  int ret;
  memset(r, 0, sizeof *r);
  pcachepb__request__init(&r->request);
  pcachepb__put__init(&r->put);
  if (!batch || n == 0)
    return -EINVAL;
  items = pcache__arena_array(&r->arena, n, sizeof *items);
  ptrs = pcache__arena_array(&r->arena, n, sizeof *ptrs);
  if (!items || !ptrs)
    return -ENOMEM;
  /* protobuf-c's messages take non-const pointers, and write none. */
  r->put.device = (Pcachepb__DeviceInfo *)device;
  r->put.app = (char *)(batch->app ? batch->app : app);
  r->put.stage = batch->stage;
  for (const pcache__put_item *u = batch; u && i < n; u = u->next, i++) {
    Pcachepb__PutItem *it = &items[i];
    pcachepb__put_item__init(it);
    it->state_hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, (uint8_t *)u->state_hash.bytes};
    it->kind = (Pcachepb__EntryKind)u->kind;
    it->blob = (ProtobufCBinaryData){u->blob_size, u->blob};
    it->desc = (ProtobufCBinaryData){u->desc_size, u->desc};
    it->compile_ns = u->compile_ns;
    if (modules && (ret = modules(ctx, u, it, &r->arena)) < 0)
      return ret;
    ptrs[i] = it;
  }
  r->put.items = ptrs;
  r->put.n_items = i;
  r->request.body_case = PCACHEPB__REQUEST__BODY_PUT;
  r->request.put = &r->put;
  return 0;
}

void pcache__put_request_free(pcache__put_request *r) { pcache__arena_free(&r->arena); }
