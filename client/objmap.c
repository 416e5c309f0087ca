/* The object map: what each handle made through the wrappers was made
 * from (its description and, for shader modules, the SPIR-V kept for
 * uploads), read lock-free by the describer on every create-info hit. Also
 * the per-thread shards and the refcounted SPIR-V modules. One map per
 * device context. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "client/objmap.h"
#include "common/alloc.h"

typedef struct objnode {
  uint32_t type;
  uint64_t handle;
  pcache__desc_object *desc;
  pcache__module *module; /* shader modules only */
} objnode;

/*
 * The map is read on every create-info hit (the describer resolves each
 * handle the create info names), from many threads at once, so reading
 * writes nothing shared: no lock, not even a rwlock's read side (a write
 * to the lock word, one cache line bounced between every core).
 *
 * Open addressing, slots filled in place by writers (one at a time, under
 * the mutex): a slot's key is written before its node is published with a
 * release store, and never changes after; a removed entry becomes a
 * tombstone that is never refilled, so a reader that matched a key can
 * trust the node it loaded. When live entries plus tombstones pass half the
 * capacity, the live ones are copied into a new table that replaces the
 * old; the old one is freed once no reader can still be probing it.
 *
 * Readers announce themselves in their own shard (pcache__shard.readers,
 * by epoch parity), which is a write to a line no other thread writes: a
 * writer flips the epoch, so new readers count on the other side, and
 * waits for the side it left to drain. A reader checks, once counted,
 * that the epoch still names its side, and counts again if not (see
 * pcache__objmap_read_begin). Removed nodes are freed at once: a
 * reader only dereferences a node whose key it asked for, and Vulkan
 * already forbids destroying an object while a create info names it.
 */
#define OBJ_TOMB ((objnode *)(uintptr_t)1)

typedef struct objslot {
  uint64_t handle; /* key: written before node is first published */
  uint32_t type;
  _Atomic(objnode *) node; /* NULL: never used (ends a probe); OBJ_TOMB: removed */
  /* node->desc, written with the key: the describer's lookup reads the
   * slot and the description, not the node between them, which is one
   * cache miss less for each object a pipeline names (its every object is
   * cold after the driver's call for the pipeline before). */
  const pcache__desc_object *desc;
} objslot;

typedef struct objtable {
  size_t mask;       /* capacity - 1, a power of two */
  size_t used, live; /* used: live + tombstones */
  objslot slots[];
} objtable;

struct pcache__objmap {
  _Atomic(objtable *) table;
  atomic_uint epoch;    /* parity: which readers[] new read sections count in */
  pthread_mutex_t lock; /* writers */
  pcache__shard *shards;
};

static size_t obj_hash(uint32_t type, uint64_t handle) {
  uint64_t x = (handle ^ ((uint64_t)type << 59)) * 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 29);
}

static objtable *objtable_new(size_t capacity) {
  objtable *t = pcache__calloc(1, sizeof *t + capacity * sizeof(objslot));
  if (!t)
    return NULL;
  t->mask = capacity - 1;
  for (size_t i = 0; i < capacity; i++)
    atomic_init(&t->slots[i].node, NULL);
  return t;
}

pcache__objmap *pcache__objmap_new(pcache__shard *shards) {
  pcache__objmap *map = pcache__calloc(1, sizeof *map);
  objtable *t = objtable_new(64);
  if (!map || !t || pthread_mutex_init(&map->lock, NULL) != 0) {
    pcache__free(t);
    pcache__free(map);
    return NULL;
  }
  atomic_init(&map->table, t);
  atomic_init(&map->epoch, 0);
  map->shards = shards;
  return map;
}

static void objnode_free(objnode *n) {
  pcache__desc_object_free(n->desc);
  pcache__module_unref(n->module);
  pcache__free(n);
}

void pcache__objmap_free(pcache__objmap *map) {
  objtable *t;
  if (!map)
    return;
  t = atomic_load_explicit(&map->table, memory_order_relaxed);
  for (size_t i = 0; i <= t->mask; i++) {
    objnode *n = atomic_load_explicit(&t->slots[i].node, memory_order_relaxed);
    if (n && n != OBJ_TOMB)
      objnode_free(n);
  }
  pcache__free(t);
  pthread_mutex_destroy(&map->lock);
  pcache__free(map);
}

/* A read section: tables seen inside it stay allocated until it ends.
 * Returns the token for pcache__objmap_read_end. */
void *pcache__objmap_read_begin(pcache__objmap *map) {
  pcache__shard *shard = &map->shards[pcache__shard_index()];
  for (;;) {
    unsigned e = atomic_load(&map->epoch) & 1u;
    atomic_uint *readers = &shard->readers[e];
    /* seq_cst, as are the epoch load after it and the table load after
     * that: against the writer's table store, epoch flip, then counter
     * loads, one of the two sides sees the other. */
    atomic_fetch_add(readers, 1);
    /* Counted on the side the epoch still names: a writer that flips
     * away from it from now on waits for this section. Otherwise a flip
     * came between the two loads and its writer may not have seen the
     * count: counted on a side it has already waited for, this section
     * could read a table a second writer frees while waiting only for
     * the other side. Count again on the current side. */
    if ((atomic_load(&map->epoch) & 1u) == e)
      return readers;
    atomic_fetch_sub_explicit(readers, 1, memory_order_release);
  }
}

void pcache__objmap_read_end(void *token) {
  atomic_fetch_sub_explicit((atomic_uint *)token, 1, memory_order_release);
}

/* Waits until no read section that may have seen the table before the last
 * swap is still running. Under the lock. */
static void objmap_synchronize(pcache__objmap *map) {
  unsigned old = atomic_fetch_xor(&map->epoch, 1u) & 1u;
  for (size_t s = 0; s < PCACHE__SHARDS; s++)
    while (atomic_load(&map->shards[s].readers[old]) != 0)
      sched_yield();
}

/* In a read section (or under the lock): the slot of (type, handle), with
 * its node in *ret_node, or NULL. */
static const objslot *objtable_find(const objtable *t, uint32_t type, uint64_t handle,
                                    objnode **ret_node) {
  for (size_t i = obj_hash(type, handle) & t->mask;; i = (i + 1) & t->mask) {
    const objslot *slot = &t->slots[i];
    objnode *n = atomic_load_explicit(&slot->node, memory_order_acquire);
    if (!n)
      return NULL;
    if (n != OBJ_TOMB && slot->handle == handle && slot->type == type) {
      *ret_node = n;
      return slot;
    }
  }
}

/* Under the lock, with a free slot guaranteed (used < capacity / 2). */
static void objtable_put(objtable *t, objnode *node) {
  size_t i = obj_hash(node->type, node->handle) & t->mask;
  while (atomic_load_explicit(&t->slots[i].node, memory_order_relaxed))
    i = (i + 1) & t->mask;
  t->slots[i].handle = node->handle;
  t->slots[i].type = node->type;
  t->slots[i].desc = node->desc;
  atomic_store_explicit(&t->slots[i].node, node, memory_order_release);
  t->used++;
  t->live++;
}

/* Under the lock: marks the entry for (type, handle) removed; returns its
 * node for the caller to free, or NULL. */
static objnode *objtable_remove(objtable *t, uint32_t type, uint64_t handle) {
  for (size_t i = obj_hash(type, handle) & t->mask;; i = (i + 1) & t->mask) {
    objslot *slot = &t->slots[i];
    objnode *n = atomic_load_explicit(&slot->node, memory_order_relaxed);
    if (!n)
      return NULL;
    if (n != OBJ_TOMB && slot->handle == handle && slot->type == type) {
      atomic_store_explicit(&slot->node, OBJ_TOMB, memory_order_release);
      t->live--;
      return n;
    }
  }
}

/* Under the lock: makes room for one more entry, dropping tombstones.
 * Returns the table to insert into, or NULL when out of memory. */
static objtable *objmap_room(pcache__objmap *map) {
  objtable *t = atomic_load_explicit(&map->table, memory_order_relaxed), *bigger;
  size_t capacity = 64;
  if ((t->used + 1) * 2 <= t->mask + 1)
    return t;
  while (capacity < (t->live + 1) * 4)
    capacity *= 2;
  bigger = objtable_new(capacity);
  if (!bigger)
    return NULL;
  for (size_t i = 0; i <= t->mask; i++) {
    objnode *n = atomic_load_explicit(&t->slots[i].node, memory_order_relaxed);
    if (n && n != OBJ_TOMB)
      objtable_put(bigger, n);
  }
  atomic_store(&map->table, bigger);
  objmap_synchronize(map);
  pcache__free(t);
  return bigger;
}

/* Takes ownership of desc and module (freed on failure). A handle that is
 * already present (the app destroyed it behind our back and the driver
 * reused the value) is replaced. */
void pcache__objmap_put(pcache__objmap *map, uint32_t type, uint64_t handle,
                        pcache__desc_object *desc, pcache__module *module) {
  objnode *node = pcache__calloc(1, sizeof *node), *old = NULL;
  objtable *t;
  if (!node) {
    pcache__desc_object_free(desc);
    pcache__module_unref(module);
    return;
  }
  node->type = type;
  node->handle = handle;
  node->desc = desc;
  node->module = module;
  pthread_mutex_lock(&map->lock);
  old = objtable_remove(atomic_load_explicit(&map->table, memory_order_relaxed), type, handle);
  t = objmap_room(map);
  if (t)
    objtable_put(t, node);
  pthread_mutex_unlock(&map->lock);
  if (!t)
    objnode_free(node); /* unrecorded: pipelines using it go unhashed */
  if (old)
    objnode_free(old);
}

void pcache__objmap_remove(pcache__objmap *map, uint32_t type, uint64_t handle) {
  objnode *old;
  pthread_mutex_lock(&map->lock);
  old = objtable_remove(atomic_load_explicit(&map->table, memory_order_relaxed), type, handle);
  pthread_mutex_unlock(&map->lock);
  if (old)
    objnode_free(old);
}

/* In a read section. The node stays valid while the app keeps the object
 * alive, which it must while a create info names it (Vulkan's own rule). */
static const objslot *objmap_get(pcache__objmap *map, uint32_t type, uint64_t handle,
                                 objnode **ret_node) {
  if (!handle)
    return NULL;
  return objtable_find(atomic_load(&map->table), type, handle, ret_node);
}

/* The describer's callbacks (ctx is the map): called only inside a read
 * section. */
static const pcache__desc_object *lookup_of(void *ctx, uint32_t type, uint64_t handle) {
  objnode *n;
  const objslot *slot = objmap_get(ctx, type, handle, &n);
  return slot ? slot->desc : NULL;
}
static const pcache__desc_object *lookup_shader(void *ctx, VkShaderModule h) {
  return lookup_of(ctx, PCACHE_OBJ_SHADER, PCACHE_HANDLE_U64(h));
}
static const pcache__desc_object *lookup_set_layout(void *ctx, VkDescriptorSetLayout h) {
  return lookup_of(ctx, PCACHE_OBJ_SET_LAYOUT, PCACHE_HANDLE_U64(h));
}
static const pcache__desc_object *lookup_pipeline_layout(void *ctx, VkPipelineLayout h) {
  return lookup_of(ctx, PCACHE_OBJ_PIPELINE_LAYOUT, PCACHE_HANDLE_U64(h));
}
static const pcache__desc_object *lookup_render_pass(void *ctx, VkRenderPass h) {
  return lookup_of(ctx, PCACHE_OBJ_RENDER_PASS, PCACHE_HANDLE_U64(h));
}
static const pcache__desc_object *lookup_sampler(void *ctx, VkSampler h) {
  return lookup_of(ctx, PCACHE_OBJ_SAMPLER, PCACHE_HANDLE_U64(h));
}
static const pcache__desc_object *lookup_pipeline_library(void *ctx, VkPipeline h) {
  return lookup_of(ctx, PCACHE_OBJ_PIPELINE_LIBRARY, PCACHE_HANDLE_U64(h));
}

pcache__desc_lookup pcache__objmap_lookup(pcache__objmap *map) {
  return (pcache__desc_lookup){.ctx = map,
                               .shader_module = lookup_shader,
                               .set_layout = lookup_set_layout,
                               .pipeline_layout = lookup_pipeline_layout,
                               .render_pass = lookup_render_pass,
                               .sampler = lookup_sampler,
                               .pipeline_library = lookup_pipeline_library};
}

pcache__module *pcache__objmap_module(pcache__objmap *map, VkShaderModule module) {
  void *token = pcache__objmap_read_begin(map);
  objnode *n;
  pcache__module *m = objmap_get(map, PCACHE_OBJ_SHADER, PCACHE_HANDLE_U64(module), &n)
                          ? pcache__module_ref(n->module)
                          : NULL;
  pcache__objmap_read_end(token);
  return m;
}

_Thread_local unsigned pcache__tls_shard;

unsigned pcache__shard_assign(void) {
  static atomic_uint next;
  unsigned s = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % PCACHE__SHARDS;
  pcache__tls_shard = s + 1;
  return s;
}

pcache__module *pcache__module_ref(pcache__module *module) {
  if (module)
    atomic_fetch_add_explicit(&module->refs, 1, memory_order_relaxed);
  return module;
}

void pcache__module_unref(pcache__module *module) {
  if (module && atomic_fetch_sub_explicit(&module->refs, 1, memory_order_acq_rel) == 1) {
    pcache__free(module->code);
    pcache__free(module);
  }
}

pcache__module *pcache__module_new(const pcache__hash *hash, const void *code, size_t size) {
  pcache__module *m = pcache__calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->code = pcache__malloc(size);
  if (!m->code) {
    pcache__free(m);
    return NULL;
  }
  memcpy(m->code, code, size);
  m->size = size;
  m->hash = *hash;
  atomic_init(&m->refs, 1);
  return m;
}
