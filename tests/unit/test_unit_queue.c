/* common/queue.h: FIFO order, push_front, pop to empty and reuse, append,
 * prepend and take_all in every empty/non-empty combination, count. */
#include <stddef.h>

#include "common/queue.h"
#include "test.h"

typedef struct item {
  struct item *next;
  int v;
} item;

typedef PCACHE_QUEUE(item) item_queue;

/* Pops everything, checking the values come out as want[0..n). */
static void expect(item_queue *q, const int *want, size_t n) {
  ASSERT_EQ(pcache_queue_count(q), n);
  for (size_t i = 0; i < n; i++) {
    item *it = pcache_queue_pop(q);
    ASSERT_TRUE(it != NULL);
    ASSERT_EQ(it->v, want[i]);
    ASSERT_TRUE(it->next == NULL);
  }
  ASSERT_TRUE(pcache_queue_pop(q) == NULL);
  ASSERT_TRUE(pcache_queue_empty(q));
  ASSERT_TRUE(q->tail == &q->head);
}

int main(void) {
  item it[8];
  item_queue q, other;
  for (int i = 0; i < 8; i++)
    it[i] = (item){.next = NULL, .v = i};

  pcache_queue_init(&q);
  ASSERT_TRUE(pcache_queue_empty(&q));
  ASSERT_EQ(pcache_queue_count(&q), 0);
  ASSERT_TRUE(pcache_queue_pop(&q) == NULL);

  /* FIFO, and a queue emptied by pop takes pushes again. */
  pcache_queue_push(&q, &it[0]);
  pcache_queue_push(&q, &it[1]);
  pcache_queue_push(&q, &it[2]);
  ASSERT_TRUE(q.head == &it[0]);
  expect(&q, (const int[]){0, 1, 2}, 3);
  pcache_queue_push(&q, &it[3]);
  expect(&q, (const int[]){3}, 1);

  /* push_front on an empty queue sets the tail; a push after it goes behind. */
  pcache_queue_push_front(&q, &it[1]);
  pcache_queue_push(&q, &it[2]);
  pcache_queue_push_front(&q, &it[0]);
  expect(&q, (const int[]){0, 1, 2}, 3);

  /* Each argument is evaluated once: pop inside push moves one item. */
  pcache_queue_init(&other);
  pcache_queue_push(&other, &it[4]);
  pcache_queue_push(&other, &it[5]);
  pcache_queue_push(&q, pcache_queue_pop(&other));
  ASSERT_EQ(pcache_queue_count(&q), 1);
  ASSERT_EQ(pcache_queue_count(&other), 1);
  expect(&other, (const int[]){5}, 1);
  expect(&q, (const int[]){4}, 1);

  /* append: empty onto empty, empty onto items, items onto empty, items onto items. */
  pcache_queue_append(&q, &other);
  ASSERT_TRUE(pcache_queue_empty(&q));
  pcache_queue_push(&q, &it[0]);
  pcache_queue_append(&q, &other);
  pcache_queue_push(&other, &it[1]);
  pcache_queue_push(&other, &it[2]);
  pcache_queue_append(&q, &other);
  ASSERT_TRUE(pcache_queue_empty(&other));
  ASSERT_TRUE(other.tail == &other.head);
  pcache_queue_push(&q, &it[3]); /* the tail moved to other's last item */
  expect(&q, (const int[]){0, 1, 2, 3}, 4);
  pcache_queue_push(&other, &it[4]);
  pcache_queue_append(&q, &other);
  pcache_queue_push(&q, &it[5]);
  expect(&q, (const int[]){4, 5}, 2);

  /* prepend: a batch going back in front, in order; onto empty keeps its tail. */
  pcache_queue_push(&q, &it[3]);
  pcache_queue_push(&q, &it[4]);
  pcache_queue_push(&other, &it[1]);
  pcache_queue_push(&other, &it[2]);
  pcache_queue_prepend(&q, &other);
  ASSERT_TRUE(pcache_queue_empty(&other));
  pcache_queue_push(&q, &it[5]);
  expect(&q, (const int[]){1, 2, 3, 4, 5}, 5);
  pcache_queue_push(&other, &it[6]);
  pcache_queue_prepend(&q, &other);
  pcache_queue_push(&q, &it[7]);
  expect(&q, (const int[]){6, 7}, 2);
  pcache_queue_push(&q, &it[0]);
  pcache_queue_prepend(&q, &other); /* empty: nothing changes */
  expect(&q, (const int[]){0}, 1);

  /* take_all: the consumer's swap under a lock, from full and from empty. */
  pcache_queue_push(&q, &it[0]);
  pcache_queue_push(&q, &it[1]);
  pcache_queue_take_all(&other, &q);
  ASSERT_TRUE(pcache_queue_empty(&q));
  ASSERT_TRUE(q.tail == &q.head);
  pcache_queue_push(&q, &it[2]);
  pcache_queue_push(&other, &it[3]);
  expect(&other, (const int[]){0, 1, 3}, 3);
  expect(&q, (const int[]){2}, 1);
  pcache_queue_take_all(&other, &q);
  ASSERT_TRUE(pcache_queue_empty(&other));
  ASSERT_TRUE(other.tail == &other.head);
  return 0;
}
