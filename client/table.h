/* The in-process tables behind the tiers: 128-bit key -> nonzero 64-bit
 * value (a VkPipeline, or a pointer to a tier).
 *
 * Insert-only but for one operation: pcache__table_remove (a released
 * pipeline) sets a published slot's value to 0, which readers take as
 * absent; the key stays in its slot, and a later publish of the same key
 * fills that slot again, so probe chains never break.
 *
 * Hits must take no lock, so each table is two parts:
 *  - the published part, an open-addressing table that readers probe with
 *    acquire loads only. Only pcache__table_publish (end of frame) writes
 *    it, and only into empty slots, each filled before its `used` flag is
 *    set with a release store; when it would grow past half full, a copy
 *    twice the size is published instead and the old one is retired.
 *    Retired copies are freed with the table: their sizes halve going back,
 *    so together they never exceed the live one.
 *  - the pending part, under a mutex, that misses insert into. An entry is
 *    in flight while its builder works (without the lock); others wanting
 *    the same key wait on the table's condvar, so a key is built once,
 *    while misses of other keys go on. */
#ifndef PCACHE_CLIENT_TABLE_H
#define PCACHE_CLIENT_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pcache_slot {
  atomic_uint_fast32_t used;
  uint64_t k0, k1;
  atomic_uint_fast64_t value; /* 0: removed */
} pcache_slot;

typedef struct pcache_published {
  size_t mask; /* capacity - 1; capacity is a power of two */
  size_t count;
  struct pcache_published *retired_next;
  pcache_slot slots[];
} pcache_published;

typedef struct pcache_pending pcache_pending;

typedef struct pcache__table {
  _Atomic(pcache_published *) published; /* NULL while empty */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pcache_pending **buckets;
  size_t n_buckets, n_pending, n_ready;
  pcache_published *retired;
} pcache__table;

enum {
  PCACHE__TABLE_FOUND = 0,   /* *ret_value is the value */
  PCACHE__TABLE_CLAIMED = 1, /* caller builds, then calls pcache__table_complete */
  PCACHE__TABLE_FAILED = 2,  /* the build we waited for failed; *ret_value holds its
                                result as (uint64_t)(int64_t) */
};

int pcache__table_init(pcache__table *table);
/* Frees everything; not thread-safe. free_value (may be NULL) sees each
 * value once. */
void pcache__table_fini(pcache__table *table, void (*free_value)(uint64_t value, void *ctx),
                        void *ctx);

/* Lock-free probe of the published part. 0 when absent. */
uint64_t pcache__table_find(const pcache__table *table, uint64_t k0, uint64_t k1);

/* Never blocks: the published part, then the pending part only if its
 * lock is free at once. 0 when absent or not (yet) available. */
uint64_t pcache__table_peek(pcache__table *table, uint64_t k0, uint64_t k1);

/* A ready value under the key, published or pending, waiting for the
 * lock but never for an in-flight build; claims nothing. 0 when absent
 * or in flight. */
uint64_t pcache__table_get(pcache__table *table, uint64_t k0, uint64_t k1);

/* The full lookup: published part, then pending (waiting for an in-flight
 * build of the same key). Returns a PCACHE__TABLE_* value or -ENOMEM. */
int pcache__table_acquire(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t *ret_value,
                          pcache_pending **ret_claim);

/* Ends a claimed build: value nonzero on success, else result is what
 * waiters get. */
void pcache__table_complete(pcache__table *table, pcache_pending *claim, uint64_t value,
                            int result);

/* Inserts a ready value unless the key is present; returns the value now
 * under the key (the existing one if there was one), 0 on -ENOMEM. For
 * values made without waiting on anything (tiers, app-key records). */
uint64_t pcache__table_insert(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t value);

/* Lookup with a constructor run under the table lock (cheap ones only). */
uint64_t pcache__table_get_or_make(pcache__table *table, uint64_t k0, uint64_t k1,
                                   uint64_t (*make)(void *ctx), void *ctx);

/* Removes key's entry if its value is value (a ready pending entry, or
 * the published slot, in the live copy and the retired ones). A reader
 * probing at that moment may still return value: the caller's promise
 * that nobody asks for the key meanwhile is what makes destroying it safe.
 * Returns 1 when an entry was removed. */
int pcache__table_remove(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t value);

/* Replaces key's value old by new where it is old (a ready pending entry,
 * the published slot, in the live copy and the retired ones): a reader
 * probing meanwhile gets one or the other, both valid. Returns 1 when an
 * entry was changed. */
int pcache__table_replace(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t old_value,
                          uint64_t new_value);

/* Moves finished pending entries into the published part. Returns 0 or
 * -ENOMEM (entries then stay pending, still found under the lock). Called
 * from one thread at a time. */
int pcache__table_publish(pcache__table *table);

#endif
