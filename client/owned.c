/* The owned pipelines of a context: see owned.h. A chained hash map from
 * handle to the table keys that point at it; one entry per pipeline, a
 * few keys each (its state hash, the app's draw keys). */
#include <errno.h>
#include <string.h>

#include "client/owned.h"
#include "client/record.h"
#include "common/alloc.h"

typedef struct owned_ref {
  pcache__table *table;
  uint64_t k0, k1;
} owned_ref;

/* Most pipelines are found under one or two keys (their state hash, a
 * draw key): those live in the entry, so owning one costs one allocation
 * on the hit path's first build. */
#define INLINE_REFS 2

struct pcache__owned_entry {
  pcache__owned_entry *next;
  VkPipeline pipeline;
  size_t n_refs, cap_refs;
  owned_ref *refs; /* inline_refs, or a heap array past INLINE_REFS */
  owned_ref inline_refs[INLINE_REFS];
};

static pcache__owned_entry *entry_new(VkPipeline pipeline) {
  pcache__owned_entry *e = pcache__calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->pipeline = pipeline;
  e->refs = e->inline_refs;
  e->cap_refs = INLINE_REFS;
  return e;
}

static void refs_free(pcache__owned_entry *e) {
  if (e->refs != e->inline_refs)
    pcache__free(e->refs);
  e->refs = e->inline_refs;
  e->n_refs = 0;
  e->cap_refs = INLINE_REFS;
}

/* Room for one more key in e's list. 0, or -ENOMEM. */
static int refs_room(pcache__owned_entry *e) {
  size_t cap = e->cap_refs * 2;
  owned_ref *refs;
  if (e->n_refs < e->cap_refs)
    return 0;
  refs = e->refs == e->inline_refs ? pcache__malloc(cap * sizeof *refs)
                                   : pcache__realloc(e->refs, cap * sizeof *refs);
  if (!refs)
    return -ENOMEM;
  if (e->refs == e->inline_refs)
    memcpy(refs, e->inline_refs, e->n_refs * sizeof *refs);
  e->refs = refs;
  e->cap_refs = cap;
  return 0;
}

/* Records that table maps (k0, k1) to e's pipeline; without memory, the
 * entry is removed from table again, so that no table outlives it. */
static void refs_add(pcache__owned_entry *e, pcache__table *table, uint64_t k0, uint64_t k1) {
  if (refs_room(e) < 0) {
    pcache__table_remove(table, k0, k1, pcache__pipeline_to_u64(e->pipeline));
    return;
  }
  e->refs[e->n_refs++] = (owned_ref){.table = table, .k0 = k0, .k1 = k1};
}

static size_t bucket_of(const pcache__owned *o, VkPipeline p) {
  uint64_t x = pcache__pipeline_to_u64(p) * 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 32) & (o->n_buckets - 1);
}

int pcache__owned_init(pcache__owned *o, pcache__core *core) {
  o->core = core;
  o->n_buckets = 64;
  o->count = 0;
  o->buckets = pcache__calloc(o->n_buckets, sizeof *o->buckets);
  return o->buckets ? 0 : -ENOMEM;
}

static pcache__owned_entry **find(pcache__owned *o, VkPipeline p) {
  pcache__owned_entry **pp = &o->buckets[bucket_of(o, p)];
  while (*pp && (*pp)->pipeline != p)
    pp = &(*pp)->next;
  return pp;
}

static void grow(pcache__owned *o) {
  pcache__owned old = *o;
  pcache__owned_entry **buckets = pcache__calloc(old.n_buckets * 2, sizeof *buckets);
  if (!buckets)
    return; /* longer chains, still correct */
  o->buckets = buckets;
  o->n_buckets = old.n_buckets * 2;
  for (size_t b = 0; b < old.n_buckets; b++)
    while (old.buckets[b]) {
      pcache__owned_entry *e = old.buckets[b];
      size_t nb = bucket_of(o, e->pipeline);
      old.buckets[b] = e->next;
      e->next = o->buckets[nb];
      o->buckets[nb] = e;
    }
  pcache__free(old.buckets);
}

/* Every table forgets e's pipeline; e keeps no references. */
static void forget_refs(pcache__owned_entry *e) {
  for (size_t i = 0; i < e->n_refs; i++)
    pcache__table_remove(e->refs[i].table, e->refs[i].k0, e->refs[i].k1,
                         pcache__pipeline_to_u64(e->pipeline));
  e->n_refs = 0;
}

VkResult pcache__owned_add(pcache__owned *own, VkPipeline pipeline, pcache__table *table,
                           uint64_t k0, uint64_t k1) {
  pcache__owned *o = own;
  pcache__owned_entry **pp, *e;
  VkResult vr = VK_SUCCESS;
  pthread_mutex_lock(&own->lock);
  pp = find(o, pipeline);
  e = *pp;
  if (e) {
    /* The table entries name a pipeline of other state that no longer
     * exists: keeping them would hand this one out for that state. */
    forget_refs(e);
    atomic_fetch_add(&own->core->stats.reused_handles, 1);
  } else {
    e = entry_new(pipeline);
    if (!e) {
      vr = VK_ERROR_OUT_OF_HOST_MEMORY;
      goto out_unlock;
    }
    e->next = *pp;
    *pp = e;
    if (++o->count > o->n_buckets)
      grow(o);
    atomic_fetch_add(&own->core->stats.pipelines, 1);
  }
  if (table)
    refs_add(e, table, k0, k1);
  atomic_fetch_add(&own->core->stats.pipelines_this_frame, 1);
out_unlock:
  pthread_mutex_unlock(&own->lock);
  return vr;
}

void pcache__owned_note(pcache__owned *own, VkPipeline pipeline, pcache__table *table, uint64_t k0,
                        uint64_t k1) {
  pcache__owned_entry *e;
  pthread_mutex_lock(&own->lock);
  e = *find(own, pipeline);
  if (e)
    refs_add(e, table, k0, k1);
  pthread_mutex_unlock(&own->lock);
}

int pcache__owned_swap(pcache__owned *own, VkPipeline old_pipeline, VkPipeline new_pipeline) {
  pcache__owned_entry *old, **pp, *e;
  int r = 0;
  pthread_mutex_lock(&own->lock);
  old = *find(own, old_pipeline);
  if (!old) {
    r = PCACHE_ENOT_FOUND;
    goto out_unlock;
  }
  pp = find(own, new_pipeline);
  if (*pp) {
    /* A handle the app destroyed itself and the driver gave out again. */
    forget_refs(*pp);
    atomic_fetch_add(&own->core->stats.reused_handles, 1);
    e = *pp;
    refs_free(e);
  } else {
    e = entry_new(new_pipeline);
    if (!e) {
      r = -ENOMEM;
      goto out_unlock;
    }
    e->next = *pp;
    *pp = e;
    if (++own->count > own->n_buckets)
      grow(own);
    atomic_fetch_add(&own->core->stats.pipelines, 1);
  }
  /* The keys move with their entries: a key whose entry is gone (its
   * pipeline released) matches nothing at a later release either. */
  for (size_t i = 0; i < old->n_refs; i++)
    pcache__table_replace(old->refs[i].table, old->refs[i].k0, old->refs[i].k1,
                          pcache__pipeline_to_u64(old_pipeline),
                          pcache__pipeline_to_u64(new_pipeline));
  if (old->refs == old->inline_refs) {
    memcpy(e->inline_refs, old->inline_refs, sizeof e->inline_refs);
  } else {
    e->refs = old->refs;
    e->cap_refs = old->cap_refs;
  }
  e->n_refs = old->n_refs;
  old->refs = old->inline_refs;
  old->n_refs = 0;
  old->cap_refs = INLINE_REFS;
out_unlock:
  pthread_mutex_unlock(&own->lock);
  return r;
}

int pcache__owned_release(pcache__owned *own, VkPipeline pipeline) {
  pcache__owned_entry **pp, *e;
  pthread_mutex_lock(&own->lock);
  pp = find(own, pipeline);
  e = *pp;
  if (e) {
    *pp = e->next;
    own->count--;
    forget_refs(e);
  }
  pthread_mutex_unlock(&own->lock);
  if (!e)
    return PCACHE_ENOT_FOUND;
  /* A library is known by its handle to describe pipelines linking it. */
  pcache__record_forget(own->core, PCACHE_OBJ_PIPELINE_LIBRARY, pcache__pipeline_to_u64(pipeline));
  own->core->DestroyPipeline(own->core->vk_device, pipeline, own->core->allocator);
  atomic_fetch_sub(&own->core->stats.pipelines, 1);
  atomic_fetch_add(&own->core->stats.released, 1);
  refs_free(e);
  pcache__free(e);
  return 0;
}

void pcache__owned_fini(pcache__owned *own) {
  pcache__owned *o = own;
  for (size_t b = 0; o->buckets && b < o->n_buckets; b++)
    while (o->buckets[b]) {
      pcache__owned_entry *e = o->buckets[b];
      o->buckets[b] = e->next;
      own->core->DestroyPipeline(own->core->vk_device, e->pipeline, own->core->allocator);
      refs_free(e);
      pcache__free(e);
    }
  pcache__free(o->buckets);
  o->buckets = NULL;
}
