/* proto/put_batch.h: the queue's bounds (the oldest goes past the count,
 * the newcomer past the bytes), batches in order under the item and byte
 * bounds, an item of another Put ending a batch or passed over, requeue,
 * and the request a batch becomes. */
#include <stddef.h>
#include <string.h>

#include "proto/put_batch.h"
#include "test.h"

static pcache__put_item items[8];

static pcache__put_item *item(int i, const char *app, int stage, size_t blob_size) {
  pcache__put_item *it = &items[i];
  memset(it, 0, sizeof *it);
  it->state_hash.bytes[0] = (uint8_t)i;
  it->app = app;
  it->stage = stage;
  it->blob_size = blob_size;
  return it;
}

static int index_of(const pcache__put_item *it) { return (int)(it - items); }

int main(void) {
  pcache__put_batcher b;
  pcache__put_queue batch;
  pcache__put_request r;

  /* Bounds: past 2 items the oldest comes back; past 100 bytes the new one. */
  pcache__put_batcher_init(&b, 2, 100, 0);
  ASSERT_TRUE(pcache__put_batcher_push(&b, item(0, NULL, 0, 10)) == NULL);
  ASSERT_TRUE(pcache__put_batcher_push(&b, item(1, NULL, 0, 10)) == NULL);
  ASSERT_EQ(index_of(pcache__put_batcher_push(&b, item(2, NULL, 0, 10))), 0);
  ASSERT_EQ(index_of(pcache__put_batcher_push(&b, item(3, NULL, 0, 90))), 3);
  ASSERT_EQ(b.len, 2);
  ASSERT_EQ(b.bytes, 20);

  /* In order, a staged item ends the batch; the byte bound too. */
  pcache__put_batcher_init(&b, 0, 0, 0);
  pcache__put_batcher_push(&b, item(0, NULL, 0, 10));
  pcache__put_batcher_push(&b, item(1, NULL, 0, 10));
  pcache__put_batcher_push(&b, item(2, NULL, 1, 10));
  pcache__put_batcher_push(&b, item(3, NULL, 0, 10));
  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, UINT64_MAX), 2);
  ASSERT_EQ(index_of(batch.head), 0);
  ASSERT_EQ(b.len, 2);
  pcache__put_batcher_requeue(&b, &batch);
  ASSERT_EQ(b.len, 4);
  ASSERT_EQ(b.bytes, 40);
  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, 10 + PCACHE_PUT_ITEM_OVERHEAD), 1);
  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, UINT64_MAX), 1);
  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, UINT64_MAX), 1);
  ASSERT_EQ(index_of(batch.head), 2);
  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, UINT64_MAX), 1);
  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, UINT64_MAX), 0);
  ASSERT_TRUE(b.queue.tail == &b.queue.head);

  /* Passing over: the first app's items, then the other's. */
  pcache__put_batcher_init(&b, 0, 0, 1);
  pcache__put_batcher_push(&b, item(0, "a", 0, 1));
  pcache__put_batcher_push(&b, item(1, "b", 0, 1));
  pcache__put_batcher_push(&b, item(2, "a", 0, 1));
  pcache__put_batcher_push(&b, item(3, "b", 0, 1));
  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, UINT64_MAX), 2);
  ASSERT_EQ(index_of(batch.head), 0);
  ASSERT_EQ(index_of(batch.head->next), 2);
  ASSERT_TRUE(batch.head->next->next == NULL);

  /* The request: the first item's app and stage, every item in order. */
  ASSERT_EQ(pcache__put_request_build(&r, batch.head, 2, NULL, "x", NULL, NULL), 0);
  ASSERT_STREQ(r.put.app, "a");
  ASSERT_EQ(r.put.n_items, 2);
  ASSERT_EQ(r.put.items[1]->state_hash.data[0], 2);
  ASSERT_EQ(r.request.body_case, PCACHEPB__REQUEST__BODY_PUT);
  pcache__put_request_free(&r);

  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, UINT64_MAX), 2);
  ASSERT_EQ(index_of(batch.head), 1);
  ASSERT_EQ(index_of(batch.head->next), 3);
  ASSERT_EQ(pcache__put_batcher_take(&b, &batch, 8, UINT64_MAX), 0);
  ASSERT_TRUE(b.queue.tail == &b.queue.head);
  return 0;
}
