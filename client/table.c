#include "table.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"

enum { PENDING_BUILDING, PENDING_READY, PENDING_FAILED };

struct pcache_pending {
  pcache_pending *next;
  uint64_t k0, k1, value;
  int state, result;
  unsigned waiters;
};

/* App keys are often small sequential integers: mix them so they spread. */
static uint64_t mix(uint64_t k0, uint64_t k1) {
  uint64_t x = k0 ^ (k1 * 0x9e3779b97f4a7c15ull);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

int pcache__table_init(pcache__table *table) {
  memset(table, 0, sizeof *table);
  atomic_init(&table->published, NULL);
  table->n_buckets = 16;
  table->buckets = pcache__calloc(table->n_buckets, sizeof *table->buckets);
  if (!table->buckets)
    return -ENOMEM;
  if (pthread_mutex_init(&table->lock, NULL) != 0)
    goto out_free;
  if (pthread_cond_init(&table->cond, NULL) != 0)
    goto out_mutex;
  return 0;
out_mutex:
  pthread_mutex_destroy(&table->lock);
out_free:
  pcache__free(table->buckets);
  table->buckets = NULL;
  return -ENOMEM;
}

void pcache__table_fini(pcache__table *table, void (*free_value)(uint64_t value, void *ctx),
                        void *ctx) {
  pcache_published *pub = atomic_load_explicit(&table->published, memory_order_relaxed);
  if (!table->buckets)
    return;
  if (pub) {
    for (size_t i = 0; i <= pub->mask; i++)
      if (atomic_load_explicit(&pub->slots[i].used, memory_order_relaxed) && free_value &&
          atomic_load_explicit(&pub->slots[i].value, memory_order_relaxed))
        free_value(atomic_load_explicit(&pub->slots[i].value, memory_order_relaxed), ctx);
    pcache__free(pub);
  }
  while (table->retired) {
    pcache_published *next = table->retired->retired_next;
    pcache__free(table->retired);
    table->retired = next;
  }
  for (size_t b = 0; b < table->n_buckets; b++) {
    pcache_pending *p = table->buckets[b];
    while (p) {
      pcache_pending *next = p->next;
      if (p->state == PENDING_READY && free_value)
        free_value(p->value, ctx);
      pcache__free(p);
      p = next;
    }
  }
  pcache__free(table->buckets);
  table->buckets = NULL;
  pthread_cond_destroy(&table->cond);
  pthread_mutex_destroy(&table->lock);
}

static uint64_t published_find(const pcache_published *pub, uint64_t k0, uint64_t k1) {
  size_t i = (size_t)mix(k0, k1) & pub->mask;
  for (;;) {
    const pcache_slot *s = &pub->slots[i];
    if (!atomic_load_explicit(&s->used, memory_order_acquire))
      return 0;
    if (s->k0 == k0 && s->k1 == k1)
      return atomic_load_explicit(&s->value, memory_order_acquire);
    i = (i + 1) & pub->mask;
  }
}

/* The slot holding key, or NULL. Under the table lock. */
static pcache_slot *published_slot(pcache_published *pub, uint64_t k0, uint64_t k1) {
  size_t i = (size_t)mix(k0, k1) & pub->mask;
  while (atomic_load_explicit(&pub->slots[i].used, memory_order_relaxed)) {
    if (pub->slots[i].k0 == k0 && pub->slots[i].k1 == k1)
      return &pub->slots[i];
    i = (i + 1) & pub->mask;
  }
  return NULL;
}

uint64_t pcache__table_find(const pcache__table *table, uint64_t k0, uint64_t k1) {
  const pcache_published *pub = atomic_load_explicit(&table->published, memory_order_acquire);
  return pub ? published_find(pub, k0, k1) : 0;
}

/* Under the lock. */
static pcache_pending **pending_slot(pcache__table *table, uint64_t k0, uint64_t k1);

/* peek's and get's one lookup: a ready value, published or pending, and
 * 0 when absent or in flight; without wait, also when another thread
 * holds the lock. Looked up again in the published part under the lock:
 * a publish since the first probe moved it there. */
static uint64_t ready_value(pcache__table *table, uint64_t k0, uint64_t k1, int wait) {
  uint64_t v = pcache__table_find(table, k0, k1);
  pcache_pending *p;
  if (v)
    return v;
  if (wait)
    pthread_mutex_lock(&table->lock);
  else if (pthread_mutex_trylock(&table->lock) != 0)
    return 0;
  p = *pending_slot(table, k0, k1);
  v = p && p->state == PENDING_READY ? p->value : pcache__table_find(table, k0, k1);
  pthread_mutex_unlock(&table->lock);
  return v;
}

uint64_t pcache__table_peek(pcache__table *table, uint64_t k0, uint64_t k1) {
  return ready_value(table, k0, k1, 0);
}

uint64_t pcache__table_get(pcache__table *table, uint64_t k0, uint64_t k1) {
  return ready_value(table, k0, k1, 1);
}

static pcache_pending **pending_slot(pcache__table *table, uint64_t k0, uint64_t k1) {
  pcache_pending **pp = &table->buckets[mix(k0, k1) & (table->n_buckets - 1)];
  while (*pp && !((*pp)->k0 == k0 && (*pp)->k1 == k1))
    pp = &(*pp)->next;
  return pp;
}

static void pending_grow(pcache__table *table) {
  size_t n = table->n_buckets * 2;
  pcache_pending **buckets = pcache__calloc(n, sizeof *buckets);
  if (!buckets)
    return; /* longer chains, still correct */
  for (size_t b = 0; b < table->n_buckets; b++) {
    pcache_pending *p = table->buckets[b];
    while (p) {
      pcache_pending *next = p->next;
      size_t nb = mix(p->k0, p->k1) & (n - 1);
      p->next = buckets[nb];
      buckets[nb] = p;
      p = next;
    }
  }
  pcache__free(table->buckets);
  table->buckets = buckets;
  table->n_buckets = n;
}

static pcache_pending *pending_new(pcache__table *table, uint64_t k0, uint64_t k1, int state,
                                   uint64_t value) {
  pcache_pending *p;
  if (table->n_pending >= table->n_buckets)
    pending_grow(table);
  p = pcache__calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->k0 = k0;
  p->k1 = k1;
  p->state = state;
  p->value = value;
  pcache_pending **pp = pending_slot(table, k0, k1);
  p->next = *pp;
  *pp = p;
  table->n_pending++;
  if (state == PENDING_READY)
    table->n_ready++;
  return p;
}

static void pending_remove(pcache__table *table, pcache_pending *p) {
  pcache_pending **pp = pending_slot(table, p->k0, p->k1);
  if (*pp == p) {
    *pp = p->next;
    table->n_pending--;
    if (p->state == PENDING_READY)
      table->n_ready--;
    pcache__free(p);
  }
}

int pcache__table_acquire(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t *ret_value,
                          pcache_pending **ret_claim) {
  uint64_t v = pcache__table_find(table, k0, k1);
  pcache_pending *p;
  int r;
  if (v) {
    *ret_value = v;
    return PCACHE__TABLE_FOUND;
  }
  pthread_mutex_lock(&table->lock);
  /* Published under the lock since our probe? publish holds the lock. */
  v = pcache__table_find(table, k0, k1);
  if (v) {
    *ret_value = v;
    r = PCACHE__TABLE_FOUND;
    goto out_unlock;
  }
  p = *pending_slot(table, k0, k1);
  if (!p) {
    p = pending_new(table, k0, k1, PENDING_BUILDING, 0);
    if (!p) {
      r = -ENOMEM;
      goto out_unlock;
    }
    *ret_claim = p;
    r = PCACHE__TABLE_CLAIMED;
    goto out_unlock;
  }
  if (p->state == PENDING_FAILED && p->waiters == 0) {
    /* Left behind by a failed build nobody waited for: try again. */
    p->state = PENDING_BUILDING;
    *ret_claim = p;
    r = PCACHE__TABLE_CLAIMED;
    goto out_unlock;
  }
  p->waiters++;
  while (p->state == PENDING_BUILDING)
    pthread_cond_wait(&table->cond, &table->lock);
  p->waiters--;
  if (p->state == PENDING_READY) {
    *ret_value = p->value;
    r = PCACHE__TABLE_FOUND;
  } else {
    *ret_value = (uint64_t)(int64_t)p->result;
    r = PCACHE__TABLE_FAILED;
    if (p->waiters == 0)
      pending_remove(table, p);
  }
out_unlock:
  pthread_mutex_unlock(&table->lock);
  return r;
}

void pcache__table_complete(pcache__table *table, pcache_pending *claim, uint64_t value,
                            int result) {
  pthread_mutex_lock(&table->lock);
  if (value) {
    claim->state = PENDING_READY;
    claim->value = value;
    table->n_ready++;
  } else {
    claim->state = PENDING_FAILED;
    claim->result = result;
  }
  if (claim->waiters)
    pthread_cond_broadcast(&table->cond);
  else if (!value)
    pending_remove(table, claim);
  pthread_mutex_unlock(&table->lock);
}

uint64_t pcache__table_get_or_make(pcache__table *table, uint64_t k0, uint64_t k1,
                                   uint64_t (*make)(void *ctx), void *ctx) {
  uint64_t v = pcache__table_find(table, k0, k1);
  pcache_pending *p;
  if (v)
    return v;
  pthread_mutex_lock(&table->lock);
  v = pcache__table_find(table, k0, k1);
  if (v)
    goto out_unlock;
  p = *pending_slot(table, k0, k1);
  if (p && p->state == PENDING_READY) {
    v = p->value;
    goto out_unlock;
  }
  if (p)
    goto out_unlock; /* in flight: only pcache__table_acquire users build */
  v = make(ctx);
  if (v && !pending_new(table, k0, k1, PENDING_READY, v))
    v = 0; /* make's value leaks to nobody: make must not own anything we drop */
out_unlock:
  pthread_mutex_unlock(&table->lock);
  return v;
}

static uint64_t make_value(void *ctx) { return *(uint64_t *)ctx; }

uint64_t pcache__table_insert(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t value) {
  return pcache__table_get_or_make(table, k0, k1, make_value, &value);
}

static void published_put(pcache_published *pub, uint64_t k0, uint64_t k1, uint64_t value) {
  size_t i = (size_t)mix(k0, k1) & pub->mask;
  pcache_slot *removed = published_slot(pub, k0, k1);
  if (removed) {
    /* The key was removed (a released pipeline) and is back. */
    atomic_store_explicit(&removed->value, value, memory_order_release);
    return;
  }
  while (atomic_load_explicit(&pub->slots[i].used, memory_order_relaxed))
    i = (i + 1) & pub->mask;
  pub->slots[i].k0 = k0;
  pub->slots[i].k1 = k1;
  atomic_store_explicit(&pub->slots[i].value, value, memory_order_relaxed);
  atomic_store_explicit(&pub->slots[i].used, 1, memory_order_release);
  pub->count++;
}

static pcache_published *published_new(size_t capacity) {
  pcache_published *pub =
      pcache__calloc(1, sizeof *pub + capacity * sizeof(pcache_slot));
  if (!pub)
    return NULL;
  pub->mask = capacity - 1;
  for (size_t i = 0; i < capacity; i++) {
    atomic_init(&pub->slots[i].used, 0);
    atomic_init(&pub->slots[i].value, 0);
  }
  return pub;
}

int pcache__table_publish(pcache__table *table) {
  pcache_published *pub, *target;
  size_t need;
  int r = 0;
  pthread_mutex_lock(&table->lock);
  if (table->n_ready == 0)
    goto out_unlock;
  pub = atomic_load_explicit(&table->published, memory_order_relaxed);
  need = (pub ? pub->count : 0) + table->n_ready;
  target = pub;
  if (!pub || need * 2 > pub->mask + 1) {
    size_t capacity = 16;
    while (capacity < need * 2)
      capacity *= 2;
    target = published_new(capacity);
    if (!target) {
      r = -ENOMEM;
      goto out_unlock;
    }
    if (pub)
      for (size_t i = 0; i <= pub->mask; i++)
        if (atomic_load_explicit(&pub->slots[i].used, memory_order_relaxed) &&
            atomic_load_explicit(&pub->slots[i].value, memory_order_relaxed))
          published_put(target, pub->slots[i].k0, pub->slots[i].k1,
                        atomic_load_explicit(&pub->slots[i].value, memory_order_relaxed));
  }
  for (size_t b = 0; b < table->n_buckets; b++) {
    pcache_pending **pp = &table->buckets[b];
    while (*pp) {
      pcache_pending *p = *pp;
      /* A waiter that has been woken but not yet run still points at p. */
      if (p->state != PENDING_READY || p->waiters) {
        pp = &p->next;
        continue;
      }
      published_put(target, p->k0, p->k1, p->value);
      *pp = p->next;
      table->n_pending--;
      table->n_ready--;
      pcache__free(p);
    }
  }
  if (target != pub) {
    atomic_store_explicit(&table->published, target, memory_order_release);
    if (pub) {
      /* Readers may still be probing it; it goes with the table. */
      pub->retired_next = table->retired;
      table->retired = pub;
    }
  }
out_unlock:
  pthread_mutex_unlock(&table->lock);
  return r;
}

/* Sets key's entries whose value is from to to (0: removes them). Returns
 * 1 when one changed. */
static int table_set(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t from, uint64_t to) {
  pcache_published *pub;
  pcache_pending *p;
  int changed = 0;
  pthread_mutex_lock(&table->lock);
  p = *pending_slot(table, k0, k1);
  if (p && p->state == PENDING_READY && p->value == from && (to || p->waiters == 0)) {
    if (to)
      p->value = to;
    else
      pending_remove(table, p);
    changed = 1;
  }
  pub = atomic_load_explicit(&table->published, memory_order_relaxed);
  for (int live = 1; pub; pub = live ? table->retired : pub->retired_next, live = 0) {
    pcache_slot *s = published_slot(pub, k0, k1);
    if (s && atomic_load_explicit(&s->value, memory_order_relaxed) == from) {
      atomic_store_explicit(&s->value, to, memory_order_release);
      changed = 1;
    }
  }
  pthread_mutex_unlock(&table->lock);
  return changed;
}

int pcache__table_remove(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t value) {
  return table_set(table, k0, k1, value, 0);
}

int pcache__table_replace(pcache__table *table, uint64_t k0, uint64_t k1, uint64_t old_value,
                          uint64_t new_value) {
  return new_value ? table_set(table, k0, k1, old_value, new_value) : 0;
}
