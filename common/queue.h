/* An intrusive FIFO, the one the tree uses wherever items wait in line
 * (the client's uploads, the writer's jobs, the I/O threads' hand-offs
 * and finished jobs, a connection's unsent replies): items are linked
 * through their own `next` member, so queueing allocates nothing and
 * cannot fail.
 *
 *   typedef struct job { struct job *next; ... } job;
 *   PCACHE_QUEUE(job) q;
 *   pcache_queue_init(&q);
 *   pcache_queue_push(&q, j);
 *   while ((j = pcache_queue_pop(&q)) != NULL) run(j);
 *
 * head is the first item (NULL when empty) and may be read to peek or to
 * walk the queue (`for (job *j = q.head; j; j = j->next)`); tail points at
 * the last item's next field, or at head when the queue is empty, which is
 * what makes appending O(1). A zeroed queue is not a valid one: init it.
 *
 * Every operation is O(1) but pcache_queue_count. Not thread-safe: a queue
 * shared between threads is used under its owner's lock, and how the
 * consumer is woken (a condition variable, a uv_async) is the owner's
 * business too. An item is in at most one queue at a time; items are
 * neither allocated nor freed here.
 *
 * The macros evaluate q and other more than once (pass a plain pointer, as
 * to vec.h's); item is evaluated once. */
#ifndef PCACHE_COMMON_QUEUE_H
#define PCACHE_COMMON_QUEUE_H

#include <stddef.h>

#define PCACHE_QUEUE(type)                                                                         \
  struct {                                                                                         \
    type *head;                                                                                    \
    type **tail;                                                                                   \
  }

/* Makes q empty; whatever it held is forgotten, not freed. */
#define pcache_queue_init(q) ((q)->head = NULL, (q)->tail = &(q)->head)

#define pcache_queue_empty(q) ((q)->head == NULL)

/* Appends item at the back. */
#define pcache_queue_push(q, item)                                                                 \
  do {                                                                                             \
    __typeof__((q)->head) pcache_q_push_ = (item);                                                 \
    pcache_q_push_->next = NULL;                                                                   \
    *(q)->tail = pcache_q_push_;                                                                   \
    (q)->tail = &pcache_q_push_->next;                                                             \
  } while (0)

/* Puts item in front, to come out next. */
#define pcache_queue_push_front(q, item)                                                           \
  do {                                                                                             \
    __typeof__((q)->head) pcache_q_front_ = (item);                                                \
    if ((pcache_q_front_->next = (q)->head) == NULL)                                               \
      (q)->tail = &pcache_q_front_->next;                                                          \
    (q)->head = pcache_q_front_;                                                                   \
  } while (0)

/* Takes the first item off (its next set to NULL) and returns it, or NULL
 * when q is empty. */
#define pcache_queue_pop(q)                                                                        \
  __extension__({                                                                                  \
    __typeof__((q)->head) pcache_q_pop_ = (q)->head;                                               \
    if (pcache_q_pop_) {                                                                           \
      if (((q)->head = pcache_q_pop_->next) == NULL)                                               \
        (q)->tail = &(q)->head;                                                                    \
      pcache_q_pop_->next = NULL;                                                                  \
    }                                                                                              \
    pcache_q_pop_;                                                                                 \
  })

/* Moves every item of other, in order, behind q's; other is left empty. */
#define pcache_queue_append(q, other)                                                              \
  do {                                                                                             \
    if ((other)->head) {                                                                           \
      *(q)->tail = (other)->head;                                                                  \
      (q)->tail = (other)->tail;                                                                   \
      pcache_queue_init(other);                                                                    \
    }                                                                                              \
  } while (0)

/* Moves every item of other, in order, in front of q's (a chain that goes
 * back where it came from); other is left empty. */
#define pcache_queue_prepend(q, other)                                                             \
  do {                                                                                             \
    if ((other)->head) {                                                                           \
      *(other)->tail = (q)->head;                                                                  \
      if ((q)->head == NULL)                                                                       \
        (q)->tail = (other)->tail;                                                                 \
      (q)->head = (other)->head;                                                                   \
      pcache_queue_init(other);                                                                    \
    }                                                                                              \
  } while (0)

/* Takes every item of src into dst (whose own items are forgotten: pass a
 * new queue), leaving src empty: how a consumer empties a shared queue
 * under its lock and works through the items after unlocking. */
#define pcache_queue_take_all(dst, src)                                                            \
  do {                                                                                             \
    pcache_queue_init(dst);                                                                        \
    pcache_queue_append(dst, src);                                                                 \
  } while (0)

/* The number of items: O(n), for short queues (a batch's retries). A
 * queue whose length is asked for often keeps its own count beside it. */
#define pcache_queue_count(q)                                                                      \
  __extension__({                                                                                  \
    size_t pcache_q_n_ = 0;                                                                        \
    for (__typeof__((q)->head) pcache_q_it_ = (q)->head; pcache_q_it_;                             \
         pcache_q_it_ = pcache_q_it_->next)                                                        \
      pcache_q_n_++;                                                                               \
    pcache_q_n_;                                                                                   \
  })

#endif
