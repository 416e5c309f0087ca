/* The device context: entry points, device key, the merged VkPipelineCache
 * seeded from the daemon, and the map from the handles the wrappers made
 * to the content they were made from. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/alloc.h"
#include "common/blob.h"

/* -------------------------------------------------------------- object map */

enum obj_type { OBJ_SHADER, OBJ_SET_LAYOUT, OBJ_PIPELINE_LAYOUT, OBJ_RENDER_PASS, OBJ_SAMPLER };

typedef struct objnode {
  uint32_t type;
  uint64_t handle;
  pcache_desc_object *desc;
  pcache_module *module; /* shader modules only */
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
 * Readers announce themselves in their own shard (pcache_shard.readers,
 * by epoch parity), which is a write to a line no other thread writes: a
 * writer flips the epoch, so new readers count on the other side, and
 * waits for the side it left to drain. Removed nodes are freed at once: a
 * reader only dereferences a node whose key it asked for, and Vulkan
 * already forbids destroying an object while a create info names it.
 */
#define OBJ_TOMB ((objnode *)(uintptr_t)1)

typedef struct objslot {
  uint64_t handle; /* key: written before node is first published */
  uint32_t type;
  _Atomic(objnode *) node; /* NULL: never used (ends a probe); OBJ_TOMB: removed */
} objslot;

typedef struct objtable {
  size_t mask;       /* capacity - 1, a power of two */
  size_t used, live; /* used: live + tombstones */
  objslot slots[];
} objtable;

struct pcache_objmap {
  _Atomic(objtable *) table;
  atomic_uint epoch;    /* parity: which readers[] new read sections count in */
  pthread_mutex_t lock; /* writers */
  pcache_shard *shards;
};

#define HANDLE_U64(h) handle_u64(&(h), sizeof(h))
static uint64_t handle_u64(const void *h, size_t size) {
  uint64_t v = 0;
  memcpy(&v, h, size < sizeof v ? size : sizeof v);
  return v;
}

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

static pcache_objmap *objmap_new(pcache_shard *shards) {
  pcache_objmap *map = pcache__calloc(1, sizeof *map);
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

void pcache__objmap_free(pcache_objmap *map) {
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
 * Returns the token for objmap_read_end. */
static atomic_uint *objmap_read_begin(pcache_objmap *map) {
  pcache_shard *shard = &map->shards[pcache__shard_index()];
  /* acquire: a writer's table swap happens before its epoch flip. */
  unsigned e = atomic_load_explicit(&map->epoch, memory_order_acquire) & 1u;
  atomic_uint *readers = &shard->readers[e];
  /* seq_cst, as is the table load after it: against the writer's table
   * store then counter loads, one of the two sides sees the other. */
  atomic_fetch_add(readers, 1);
  return readers;
}

static void objmap_read_end(atomic_uint *readers) {
  atomic_fetch_sub_explicit(readers, 1, memory_order_release);
}

/* Waits until no read section that may have seen the table before the last
 * swap is still running. Under the lock. */
static void objmap_synchronize(pcache_objmap *map) {
  unsigned old = atomic_fetch_xor(&map->epoch, 1u) & 1u;
  for (size_t s = 0; s < PCACHE__SHARDS; s++)
    while (atomic_load(&map->shards[s].readers[old]) != 0)
      sched_yield();
}

/* In a read section (or under the lock). */
static objnode *objtable_find(const objtable *t, uint32_t type, uint64_t handle) {
  for (size_t i = obj_hash(type, handle) & t->mask;; i = (i + 1) & t->mask) {
    const objslot *slot = &t->slots[i];
    objnode *n = atomic_load_explicit(&slot->node, memory_order_acquire);
    if (!n)
      return NULL;
    if (n != OBJ_TOMB && slot->handle == handle && slot->type == type)
      return n;
  }
}

/* Under the lock, with a free slot guaranteed (used < capacity / 2). */
static void objtable_put(objtable *t, objnode *node) {
  size_t i = obj_hash(node->type, node->handle) & t->mask;
  while (atomic_load_explicit(&t->slots[i].node, memory_order_relaxed))
    i = (i + 1) & t->mask;
  t->slots[i].handle = node->handle;
  t->slots[i].type = node->type;
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
static objtable *objmap_room(pcache_objmap *map) {
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
static void objmap_put(pcache_objmap *map, uint32_t type, uint64_t handle,
                       pcache_desc_object *desc, pcache_module *module) {
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

static void objmap_remove(pcache_objmap *map, uint32_t type, uint64_t handle) {
  objnode *old;
  pthread_mutex_lock(&map->lock);
  old = objtable_remove(atomic_load_explicit(&map->table, memory_order_relaxed), type, handle);
  pthread_mutex_unlock(&map->lock);
  if (old)
    objnode_free(old);
}

/* In a read section. The node stays valid while the app keeps the object
 * alive, which it must while a create info names it (Vulkan's own rule). */
static const objnode *objmap_get(pcache_objmap *map, uint32_t type, uint64_t handle) {
  if (!handle)
    return NULL;
  return objtable_find(atomic_load(&map->table), type, handle);
}

/* The describer's callbacks: called only inside a read section (see
 * describe_begin). */
static const pcache_desc_object *lookup_of(void *ctx, uint32_t type, uint64_t handle) {
  const objnode *n = objmap_get(((pcache_device *)ctx)->objects, type, handle);
  return n ? n->desc : NULL;
}
static const pcache_desc_object *lookup_shader(void *ctx, VkShaderModule h) {
  return lookup_of(ctx, OBJ_SHADER, HANDLE_U64(h));
}
static const pcache_desc_object *lookup_set_layout(void *ctx, VkDescriptorSetLayout h) {
  return lookup_of(ctx, OBJ_SET_LAYOUT, HANDLE_U64(h));
}
static const pcache_desc_object *lookup_pipeline_layout(void *ctx, VkPipelineLayout h) {
  return lookup_of(ctx, OBJ_PIPELINE_LAYOUT, HANDLE_U64(h));
}
static const pcache_desc_object *lookup_render_pass(void *ctx, VkRenderPass h) {
  return lookup_of(ctx, OBJ_RENDER_PASS, HANDLE_U64(h));
}
static const pcache_desc_object *lookup_sampler(void *ctx, VkSampler h) {
  return lookup_of(ctx, OBJ_SAMPLER, HANDLE_U64(h));
}

void *pcache__device_describe_begin(pcache_device *device) {
  return objmap_read_begin(device->objects);
}

void pcache__device_describe_end(void *token) { objmap_read_end(token); }

pcache_module *pcache__device_module_for(pcache_device *device, VkShaderModule module) {
  atomic_uint *token = objmap_read_begin(device->objects);
  const objnode *n = objmap_get(device->objects, OBJ_SHADER, HANDLE_U64(module));
  pcache_module *m = n ? pcache__module_ref(n->module) : NULL;
  objmap_read_end(token);
  return m;
}

_Thread_local unsigned pcache__tls_shard;

unsigned pcache__shard_assign(void) {
  static atomic_uint next;
  unsigned s = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % PCACHE__SHARDS;
  pcache__tls_shard = s + 1;
  return s;
}

pcache_module *pcache__module_ref(pcache_module *module) {
  if (module)
    atomic_fetch_add_explicit(&module->refs, 1, memory_order_relaxed);
  return module;
}

void pcache__module_unref(pcache_module *module) {
  if (module && atomic_fetch_sub_explicit(&module->refs, 1, memory_order_acq_rel) == 1) {
    pcache__free(module->code);
    pcache__free(module);
  }
}

static pcache_module *module_new(const pcache_hash128 *hash, const void *code, size_t size) {
  pcache_module *m = pcache__calloc(1, sizeof *m);
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

/* ----------------------------------------------------------------- wrappers */

PCACHE_API VkResult pcache_create_shader_module(pcache_device *device,
                                                const VkShaderModuleCreateInfo *info,
                                                const VkAllocationCallbacks *allocator,
                                                VkShaderModule *ret_module) {
  pcache_desc_object *desc;
  pcache_module *module;
  VkShaderModule handle;
  VkResult vr;
  if (!device || !info || !ret_module)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreateShaderModule(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  /* Unhashable (or out of memory): the module works, it is just not
   * recorded, and pipelines using it are built without a state hash. */
  if (pcache__desc_shader_module(info, &desc) == 0) {
    module = module_new(&desc->hash, info->pCode, info->codeSize);
    if (module)
      objmap_put(device->objects, OBJ_SHADER, HANDLE_U64(handle), desc, module);
    else
      pcache__desc_object_free(desc);
  }
  *ret_module = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_shader_module(pcache_device *device, VkShaderModule module,
                                             const VkAllocationCallbacks *allocator) {
  if (!device || module == VK_NULL_HANDLE)
    return;
  objmap_remove(device->objects, OBJ_SHADER, HANDLE_U64(module));
  device->DestroyShaderModule(device->vk_device, module, allocator);
}

PCACHE_API VkResult pcache_create_descriptor_set_layout(
    pcache_device *device, const VkDescriptorSetLayoutCreateInfo *info,
    const VkAllocationCallbacks *allocator, VkDescriptorSetLayout *ret_layout) {
  pcache_desc_object *desc;
  VkDescriptorSetLayout handle;
  VkResult vr;
  void *token;
  int r;
  if (!device || !info || !ret_layout)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreateDescriptorSetLayout(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  token = pcache__device_describe_begin(device);
  r = pcache__desc_set_layout(info, &device->lookup, &desc);
  pcache__device_describe_end(token);
  if (r == 0)
    objmap_put(device->objects, OBJ_SET_LAYOUT, HANDLE_U64(handle), desc, NULL);
  *ret_layout = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_descriptor_set_layout(pcache_device *device,
                                                     VkDescriptorSetLayout layout,
                                                     const VkAllocationCallbacks *allocator) {
  if (!device || layout == VK_NULL_HANDLE)
    return;
  objmap_remove(device->objects, OBJ_SET_LAYOUT, HANDLE_U64(layout));
  device->DestroyDescriptorSetLayout(device->vk_device, layout, allocator);
}

PCACHE_API VkResult pcache_create_pipeline_layout(pcache_device *device,
                                                  const VkPipelineLayoutCreateInfo *info,
                                                  const VkAllocationCallbacks *allocator,
                                                  VkPipelineLayout *ret_layout) {
  pcache_desc_object *desc;
  VkPipelineLayout handle;
  VkResult vr;
  void *token;
  int r;
  if (!device || !info || !ret_layout)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreatePipelineLayout(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  token = pcache__device_describe_begin(device);
  r = pcache__desc_pipeline_layout(info, &device->lookup, &desc);
  pcache__device_describe_end(token);
  if (r == 0)
    objmap_put(device->objects, OBJ_PIPELINE_LAYOUT, HANDLE_U64(handle), desc, NULL);
  *ret_layout = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_pipeline_layout(pcache_device *device, VkPipelineLayout layout,
                                               const VkAllocationCallbacks *allocator) {
  if (!device || layout == VK_NULL_HANDLE)
    return;
  objmap_remove(device->objects, OBJ_PIPELINE_LAYOUT, HANDLE_U64(layout));
  device->DestroyPipelineLayout(device->vk_device, layout, allocator);
}

PCACHE_API VkResult pcache_create_render_pass(pcache_device *device,
                                              const VkRenderPassCreateInfo *info,
                                              const VkAllocationCallbacks *allocator,
                                              VkRenderPass *ret_render_pass) {
  pcache_desc_object *desc;
  VkRenderPass handle;
  VkResult vr;
  if (!device || !info || !ret_render_pass)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreateRenderPass(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  if (pcache__desc_render_pass(info, &desc) == 0)
    objmap_put(device->objects, OBJ_RENDER_PASS, HANDLE_U64(handle), desc, NULL);
  *ret_render_pass = handle;
  return VK_SUCCESS;
}

PCACHE_API VkResult pcache_create_render_pass2(pcache_device *device,
                                               const VkRenderPassCreateInfo2 *info,
                                               const VkAllocationCallbacks *allocator,
                                               VkRenderPass *ret_render_pass) {
  pcache_desc_object *desc;
  VkRenderPass handle;
  VkResult vr;
  if (!device || !info || !ret_render_pass)
    return VK_ERROR_INITIALIZATION_FAILED;
  if (!device->CreateRenderPass2)
    return VK_ERROR_EXTENSION_NOT_PRESENT;
  vr = device->CreateRenderPass2(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  if (pcache__desc_render_pass2(info, &desc) == 0)
    objmap_put(device->objects, OBJ_RENDER_PASS, HANDLE_U64(handle), desc, NULL);
  *ret_render_pass = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_render_pass(pcache_device *device, VkRenderPass render_pass,
                                           const VkAllocationCallbacks *allocator) {
  if (!device || render_pass == VK_NULL_HANDLE)
    return;
  objmap_remove(device->objects, OBJ_RENDER_PASS, HANDLE_U64(render_pass));
  device->DestroyRenderPass(device->vk_device, render_pass, allocator);
}

PCACHE_API VkResult pcache_create_sampler(pcache_device *device,
                                          const VkSamplerCreateInfo *info,
                                          const VkAllocationCallbacks *allocator,
                                          VkSampler *ret_sampler) {
  pcache_desc_object *desc;
  VkSampler handle;
  VkResult vr;
  if (!device || !info || !ret_sampler)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreateSampler(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  if (pcache__desc_sampler(info, &desc) == 0)
    objmap_put(device->objects, OBJ_SAMPLER, HANDLE_U64(handle), desc, NULL);
  *ret_sampler = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_sampler(pcache_device *device, VkSampler sampler,
                                       const VkAllocationCallbacks *allocator) {
  if (!device || sampler == VK_NULL_HANDLE)
    return;
  objmap_remove(device->objects, OBJ_SAMPLER, HANDLE_U64(sampler));
  device->DestroySampler(device->vk_device, sampler, allocator);
}

/* ------------------------------------------------------------ device cache */

/* Checks a blob and loads it into a cache of its own. Returns 0 with
 * *ret_cache, or the Pcachepb__ReportReason it was refused for. */
static int load_blob(pcache_device *device, const uint8_t *blob, size_t size, uint64_t checksum,
                     VkPipelineCache *ret_cache) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  /* Nothing unverified reaches the driver: a corrupted body can make
   * vkCreatePipelineCache fail or worse, another device's data never hits. */
  if (!blob || pcache__checksum64(blob, size) != checksum)
    return PCACHEPB__REPORT_REASON__REPORT_REASON_CHECKSUM;
  if (pcache__blob_check_header(blob, size, &device->key) != 0)
    return PCACHEPB__REPORT_REASON__REPORT_REASON_HEADER;
  /* Each blob is loaded alone, so one the driver refuses loses only itself. */
  ci.initialDataSize = size;
  ci.pInitialData = blob;
  if (device->CreatePipelineCache(device->vk_device, &ci, device->allocator, ret_cache) !=
      VK_SUCCESS)
    return PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
  return 0;
}

/* Merges n loaded caches into the device cache and destroys them; ret_ok[i]
 * says whether caches[i] made it. One vkMergePipelineCaches for them all:
 * merging one at a time costs more per blob the bigger the device cache
 * grows (66 us a blob at 2048 on NVIDIA, against 28 at 256). Only when the
 * driver refuses the lot are they merged one by one, to find which. */
static void merge_loaded(pcache_device *device, const VkPipelineCache *caches, size_t n,
                         uint8_t *ret_ok) {
  VkResult vr;
  if (n == 0)
    return;
  pthread_rwlock_wrlock(&device->cache_lock);
  vr = device->MergePipelineCaches(device->vk_device, device->cache, (uint32_t)n, caches);
  if (vr == VK_SUCCESS) {
    memset(ret_ok, 1, n);
  } else {
    for (size_t i = 0; i < n; i++)
      ret_ok[i] = device->MergePipelineCaches(device->vk_device, device->cache, 1,
                                              &caches[i]) == VK_SUCCESS;
  }
  pthread_rwlock_unlock(&device->cache_lock);
  for (size_t i = 0; i < n; i++)
    device->DestroyPipelineCache(device->vk_device, caches[i], device->allocator);
}

void pcache__device_info_message(const pcache_device *d, Pcachepb__DeviceInfo *ret_info) {
  pcachepb__device_info__init(ret_info);
  ret_info->key.data = (uint8_t *)d->key.bytes;
  ret_info->key.len = PCACHE_DEVKEY_SIZE;
  ret_info->name = (char *)d->device_name;
  ret_info->driver_id = d->driver_id;
  ret_info->api_version = d->api_version;
  ret_info->driver_name = (char *)d->driver_name;
  ret_info->driver_info = (char *)d->driver_info;
}

int pcache__device_merge_blob(pcache_device *device, const uint8_t *blob, size_t size,
                              uint64_t checksum) {
  VkPipelineCache src;
  uint8_t ok = 0;
  int reason = load_blob(device, blob, size, checksum, &src);
  if (reason)
    return reason;
  merge_loaded(device, &src, 1, &ok);
  return ok ? 0 : PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
}

void pcache__device_report(pcache_device *device, const Pcachepb__ReportItem *const *items,
                           size_t n_items) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Report report = PCACHEPB__REPORT__INIT;
  pcache_reply reply = {0};
  if (n_items == 0 || !device->client)
    return;
  report.device_key.data = device->key.bytes;
  report.device_key.len = PCACHE_DEVKEY_SIZE;
  report.items = (Pcachepb__ReportItem **)items;
  report.n_items = n_items;
  request.body_case = PCACHEPB__REQUEST__BODY_REPORT;
  request.report = &report;
  /* Best effort: an unreported bad blob is refused again next time. */
  if (pcache__client_call(device->client, &request, device->client->timeout_ms, &reply) == 0)
    pcache__reply_release(&reply);
}

static void hash_keys(const uint8_t *bytes, uint64_t *ret_k0, uint64_t *ret_k1) {
  memcpy(ret_k0, bytes, 8);
  memcpy(ret_k1, bytes + 8, 8);
}

/* ---------------------------------------------------------------- snapshot */

void pcache__device_held(pcache_device *device, const uint8_t hash[PCACHE_HASH_SIZE], int dirty) {
  pthread_mutex_lock(&device->held_lock);
  if (device->n_held == device->cap_held) {
    size_t cap = device->cap_held ? device->cap_held * 2 : 64;
    pcache_hash128 *h = pcache__realloc(device->held, cap * sizeof *h);
    if (!h) {
      /* Left out of the next snapshot: a warm run compiles or fetches it
       * again, which marks the context dirty again. */
      device->held_dirty |= dirty;
      goto out_unlock;
    }
    device->held = h;
    device->cap_held = cap;
  }
  memcpy(device->held[device->n_held++].bytes, hash, PCACHE_HASH_SIZE);
  device->held_dirty |= dirty;
out_unlock:
  pthread_mutex_unlock(&device->held_lock);
}

static int hash_cmp(const void *a, const void *b) { return memcmp(a, b, PCACHE_HASH_SIZE); }

static void report_snapshot(pcache_device *device, int reason) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Report report = PCACHEPB__REPORT__INIT;
  pcache_reply reply = {0};
  report.device_key.data = device->key.bytes;
  report.device_key.len = PCACHE_DEVKEY_SIZE;
  report.snapshot = (Pcachepb__ReportReason)reason;
  report.app = device->client->app_name;
  request.body_case = PCACHEPB__REQUEST__BODY_REPORT;
  request.report = &report;
  /* Best effort, as for blobs: an unreported snapshot is refused again. */
  if (pcache__client_call(device->client, &request, device->client->timeout_ms, &reply) == 0)
    pcache__reply_release(&reply);
}

/*
 * Loads the first prefetch page's snapshot. At creation the (still empty)
 * device cache is replaced by one made straight from the snapshot: one
 * vkCreatePipelineCache, as an app loading its own cache file does. Later
 * (the first page came late, on the upload thread, and the app may hold
 * the cache handle) it is merged in. Its hashes join the prefetched set so
 * misses on them never ask the daemon. A snapshot that fails the checks or
 * that the driver refuses is reported, and its hashes are left to the
 * usual per-miss Gets.
 */
static void load_snapshot(pcache_device *device, const pcache_reply *reply,
                          const Pcachepb__GetReply *got) {
  const Pcachepb__Blob *b = got->snapshot;
  const uint8_t *bytes;
  VkPipelineCache cache, old = VK_NULL_HANDLE;
  size_t size, n = 0;
  uint8_t ok = 1;
  int reason;
  bytes = pcache__reply_bytes(reply, b->blob, b->blob_offset, b->blob_size, &size);
  reason = load_blob(device, bytes, size, b->checksum, &cache);
  if (reason == 0) {
    if (device->creating) {
      pthread_rwlock_wrlock(&device->cache_lock);
      old = device->cache;
      device->cache = cache;
      pthread_rwlock_unlock(&device->cache_lock);
      device->DestroyPipelineCache(device->vk_device, old, device->allocator);
    } else {
      merge_loaded(device, &cache, 1, &ok);
    }
    if (!ok)
      reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
  }
  if (reason) {
    atomic_fetch_add(&device->stats.rejected_blobs, 1);
    report_snapshot(device, reason);
    return;
  }
  for (size_t i = 0; i < got->n_snapshot_hashes; i++) {
    const ProtobufCBinaryData *h = &got->snapshot_hashes[i];
    uint64_t k0, k1;
    if (h->len != PCACHE_HASH_SIZE)
      continue;
    hash_keys(h->data, &k0, &k1);
    if (pcache__table_find(&device->prefetched, k0, k1))
      continue;
    pcache__table_insert(&device->prefetched, k0, k1, 1);
    pcache__device_held(device, h->data, 0);
    n++;
  }
  /* Only the upload thread and device creation publish, one at a time. */
  pcache__table_publish(&device->prefetched);
  atomic_fetch_add(&device->stats.prefetched, n);
  atomic_store(&device->stats.snapshot_loaded, n);
}

/* Room in a request frame for everything but the blob and the hashes. */
#define SNAPSHOT_FRAME_SLACK 4096u

int pcache__device_snapshot_upload(pcache_device *d) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__PutSnapshot ps = PCACHEPB__PUT_SNAPSHOT__INIT;
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  ProtobufCBinaryData *hashes = NULL;
  pcache_hash128 *list = NULL;
  pcache_reply reply = {0};
  uint8_t *data = NULL;
  size_t n = 0, size = 0, u = 0;
  VkResult vr = VK_SUCCESS;
  int r = 0;

  pthread_mutex_lock(&d->held_lock);
  r = d->held_dirty && !d->no_snapshot;
  pthread_mutex_unlock(&d->held_lock);
  if (!r)
    return 0; /* the daemon's snapshot already holds all of it */
  if (atomic_load(&d->client->connected) && d->client->max_snapshot == 0)
    return 0; /* a daemon without snapshots */
  /* The read side: no merge runs while the data is read, and every hash
   * listed was merged before it was listed. */
  pthread_rwlock_rdlock(&d->cache_lock);
  pthread_mutex_lock(&d->held_lock);
  list = d->n_held ? pcache__malloc(d->n_held * sizeof *list) : NULL;
  if (list || !d->n_held) {
    n = d->n_held;
    if (n)
      memcpy(list, d->held, n * sizeof *list);
    d->held_dirty = 0;
  }
  pthread_mutex_unlock(&d->held_lock);
  r = -ENOMEM;
  if (!list && n)
    goto out_unlock;
  /* Pipelines built meanwhile can grow the data between the two calls. */
  for (int tries = 0; tries < 4; tries++) {
    uint8_t *p;
    vr = d->GetPipelineCacheData(d->vk_device, d->cache, &size, NULL);
    if (vr != VK_SUCCESS || size == 0)
      break;
    p = pcache__realloc(data, size);
    if (!p)
      break;
    data = p;
    vr = d->GetPipelineCacheData(d->vk_device, d->cache, &size, data);
    if (vr != VK_INCOMPLETE)
      break;
  }
  r = vr == VK_SUCCESS && data ? 0 : -EIO;
out_unlock:
  pthread_rwlock_unlock(&d->cache_lock);
  if (r < 0)
    goto out_dirty;

  /* Unique hashes (a pipeline built again after a purge is listed twice). */
  if (n)
    qsort(list, n, sizeof *list, hash_cmp);
  for (size_t i = 0; i < n; i++)
    if (u == 0 || !pcache__hash_equal(&list[u - 1], &list[i]))
      list[u++] = list[i];
  r = 0;
  if ((d->client->max_snapshot && size > d->client->max_snapshot) ||
      (d->client->max_frame &&
       size + u * (PCACHE_HASH_SIZE + 2) + SNAPSHOT_FRAME_SLACK > d->client->max_frame))
    goto out; /* too big for this daemon: warm starts go blob by blob */
  hashes = pcache__calloc(u ? u : 1, sizeof *hashes);
  if (!hashes) {
    r = -ENOMEM;
    goto out_dirty;
  }
  for (size_t i = 0; i < u; i++) {
    hashes[i].data = list[i].bytes;
    hashes[i].len = PCACHE_HASH_SIZE;
  }
  pcache__device_info_message(d, &info);
  ps.device = &info;
  ps.app = d->client->app_name;
  ps.blob.data = data;
  ps.blob.len = size;
  ps.state_hashes = hashes;
  ps.n_state_hashes = u;
  request.body_case = PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT;
  request.put_snapshot = &ps;
  r = pcache__client_call(d->client, &request, d->client->timeout_ms, &reply);
  if (r < 0)
    goto out_dirty;
  /* Refused (limits, an old daemon): trying again would not help. */
  if (reply.response->status == 0 &&
      reply.response->body_case == PCACHEPB__RESPONSE__BODY_PUT_SNAPSHOT)
    atomic_fetch_add(&d->stats.snapshots_uploaded, 1);
  pcache__reply_release(&reply);
  goto out;

out_dirty:
  pthread_mutex_lock(&d->held_lock);
  d->held_dirty = 1; /* the next flush or destroy tries again */
  pthread_mutex_unlock(&d->held_lock);
out:
  pcache__free(hashes);
  pcache__free(data);
  pcache__free(list);
  return r;
}

int pcache__device_prefetched(const pcache_device *device, const pcache_hash128 *hash) {
  uint64_t k0, k1;
  hash_keys(hash->bytes, &k0, &k1);
  return pcache__table_find(&device->prefetched, k0, k1) != 0;
}

static int prefetch_disabled(const pcache_device_info *info) {
  const char *env = getenv("PCACHE_NO_PREFETCH");
  return info->no_prefetch || (env && env[0] == '1');
}

/* What one page's blobs became. */
typedef struct page_work {
  VkPipelineCache *caches;
  size_t *blob_of; /* caches[i] came from blobs[blob_of[i]] */
  uint8_t *ok;
  Pcachepb__ReportItem *items;
  Pcachepb__ReportItem **item_ptrs;
  size_t n_caches, n_items;
} page_work;

static void page_report(page_work *w, const ProtobufCBinaryData *hash, int reason) {
  pcachepb__report_item__init(&w->items[w->n_items]);
  w->items[w->n_items].state_hash = *hash;
  w->items[w->n_items].reason = (Pcachepb__ReportReason)reason;
  w->item_ptrs[w->n_items] = &w->items[w->n_items];
  w->n_items++;
}

int pcache__device_prefetch_page(pcache_device *device, uint32_t offset, uint32_t timeout_ms,
                                 uint32_t *ret_next, int *ret_more, uint64_t *ret_call_ns) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pre = PCACHEPB__PREFETCH__INIT;
  pcache_reply reply = {0};
  page_work w = {0};
  const Pcachepb__GetReply *got;
  uint64_t start = pcache__now_ns();
  size_t n, n_known = 0;
  int r;

  pre.device_key.data = device->key.bytes;
  pre.device_key.len = PCACHE_DEVKEY_SIZE;
  pre.app = device->client->app_name;
  pre.offset = offset;
  pre.snapshot = !device->no_snapshot;
  request.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  request.prefetch = &pre;
  r = pcache__client_call(device->client, &request, timeout_ms, &reply);
  if (ret_call_ns)
    *ret_call_ns = pcache__now_ns() - start;
  if (r != 0)
    return r;
  if (reply.response->status != 0 ||
      reply.response->body_case != PCACHEPB__RESPONSE__BODY_PREFETCH) {
    r = reply.response->status < 0 ? reply.response->status : PCACHE_EPROTO;
    goto out;
  }
  got = reply.response->prefetch;
  if (offset == 0 && got->snapshot && atomic_load(&device->stats.snapshot_loaded) == 0)
    load_snapshot(device, &reply, got);
  n = got->n_blobs;
  *ret_next = offset + (uint32_t)n + got->dropped;
  *ret_more = got->more && n + got->dropped > 0; /* an empty page cannot go on */
  if (n == 0)
    goto out;
  r = -ENOMEM;
  w.caches = pcache__calloc(n, sizeof *w.caches);
  w.blob_of = pcache__calloc(n, sizeof *w.blob_of);
  w.ok = pcache__calloc(n, sizeof *w.ok);
  w.items = pcache__calloc(n, sizeof *w.items);
  w.item_ptrs = pcache__calloc(n, sizeof *w.item_ptrs);
  if (!w.caches || !w.blob_of || !w.ok || !w.items || !w.item_ptrs)
    goto out;
  r = 0;
  for (size_t i = 0; i < n; i++) {
    const Pcachepb__Blob *b = got->blobs[i];
    const uint8_t *bytes;
    size_t size;
    int reason;
    uint64_t k0, k1;
    if (b->state_hash.len != PCACHE_HASH_SIZE)
      continue;
    /* Already merged (pages are sets of hashes; the order can shift
     * between them). */
    hash_keys(b->state_hash.data, &k0, &k1);
    if (pcache__table_find(&device->prefetched, k0, k1)) {
      n_known++;
      continue;
    }
    bytes = pcache__reply_bytes(&reply, b->blob, b->blob_offset, b->blob_size, &size);
    reason = load_blob(device, bytes, size, b->checksum, &w.caches[w.n_caches]);
    if (reason) {
      page_report(&w, &b->state_hash, reason);
      continue;
    }
    w.blob_of[w.n_caches++] = i;
  }
  /* A page with nothing new means a daemon that does not move on with the
   * offset: stop rather than ask for the same page forever. */
  if (n_known == n && got->dropped == 0)
    *ret_more = 0;
  merge_loaded(device, w.caches, w.n_caches, w.ok);
  for (size_t c = 0; c < w.n_caches; c++) {
    const Pcachepb__Blob *b = got->blobs[w.blob_of[c]];
    uint64_t k0, k1;
    if (!w.ok[c]) {
      page_report(&w, &b->state_hash, PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED);
      continue;
    }
    hash_keys(b->state_hash.data, &k0, &k1);
    /* Out of memory: a miss on it then asks the daemon again. */
    pcache__table_insert(&device->prefetched, k0, k1, 1);
    atomic_fetch_add(&device->stats.prefetched, 1);
    /* Not in the daemon's snapshot (or there is none): a new one is due. */
    pcache__device_held(device, b->state_hash.data, 1);
  }
  /* Only the upload thread and device creation publish, one at a time. */
  pcache__table_publish(&device->prefetched);
  atomic_fetch_add(&device->stats.rejected_blobs, w.n_items);
  /* The report points into the reply: send it before releasing it. */
  pcache__device_report(device, (const Pcachepb__ReportItem *const *)w.item_ptrs, w.n_items);
out:
  pcache__free(w.item_ptrs);
  pcache__free(w.items);
  pcache__free(w.ok);
  pcache__free(w.blob_of);
  pcache__free(w.caches);
  pcache__reply_release(&reply);
  return r;
}

/* Seeds the device cache with every blob the daemon has for (device, app),
 * page by page. The client's timeout bounds the time spent waiting on the
 * daemon across all pages (checks and merges are driver work and do not
 * count). Pages that do not fit go to the upload thread (upload.c). */
static void prefetch(pcache_device *device) {
  uint64_t budget_ns = (uint64_t)device->client->timeout_ms * 1000000u;
  uint32_t offset = 0;
  for (;;) {
    uint64_t call_ns = 0;
    uint32_t next = offset;
    int more = 0, r;
    if (budget_ns < 1000000u)
      break;
    r = pcache__device_prefetch_page(device, offset, (uint32_t)(budget_ns / 1000000u), &next,
                                     &more, &call_ns);
    if (r == -ETIMEDOUT)
      break; /* the daemon is slow, not absent: try again in the background */
    if (r < 0 || !more)
      return;
    offset = next;
    budget_ns = call_ns < budget_ns ? budget_ns - call_ns : 0;
  }
  /* From here the upload thread may fetch the first page: the app may
   * hold the cache by then, so a late snapshot is merged, not swapped in. */
  device->creating = 0;
  pcache__upload_prefetch_rest(device, offset);
}

/* ------------------------------------------------------------------ device */

static int resolve(pcache_device *d, PFN_vkGetInstanceProcAddr gipa) {
  PFN_vkGetDeviceProcAddr gdpa =
      (PFN_vkGetDeviceProcAddr)gipa(d->instance, "vkGetDeviceProcAddr");
  if (!gdpa)
    return -EINVAL;
#define DEV(name) d->name = (PFN_vk##name)gdpa(d->vk_device, "vk" #name)
  DEV(CreatePipelineCache);
  DEV(DestroyPipelineCache);
  DEV(GetPipelineCacheData);
  DEV(MergePipelineCaches);
  DEV(CreateGraphicsPipelines);
  DEV(CreateComputePipelines);
  DEV(DestroyPipeline);
  DEV(CreateShaderModule);
  DEV(DestroyShaderModule);
  DEV(CreateDescriptorSetLayout);
  DEV(DestroyDescriptorSetLayout);
  DEV(CreatePipelineLayout);
  DEV(DestroyPipelineLayout);
  DEV(CreateRenderPass);
  DEV(CreateRenderPass2);
  DEV(DestroyRenderPass);
  DEV(CreateSampler);
  DEV(DestroySampler);
#undef DEV
  if (!d->CreateRenderPass2)
    d->CreateRenderPass2 = (PFN_vkCreateRenderPass2)gdpa(d->vk_device, "vkCreateRenderPass2KHR");
  if (!d->CreatePipelineCache || !d->DestroyPipelineCache || !d->GetPipelineCacheData ||
      !d->MergePipelineCaches || !d->CreateGraphicsPipelines || !d->CreateComputePipelines ||
      !d->DestroyPipeline || !d->CreateShaderModule || !d->DestroyShaderModule ||
      !d->CreateDescriptorSetLayout || !d->DestroyDescriptorSetLayout ||
      !d->CreatePipelineLayout || !d->DestroyPipelineLayout || !d->CreateRenderPass ||
      !d->DestroyRenderPass || !d->CreateSampler || !d->DestroySampler)
    return -EINVAL;
  return 0;
}

static void identify(pcache_device *d, PFN_vkGetInstanceProcAddr gipa) {
  VkPhysicalDeviceProperties props;
  PFN_vkGetPhysicalDeviceProperties get_props =
      (PFN_vkGetPhysicalDeviceProperties)gipa(d->instance, "vkGetPhysicalDeviceProperties");
  PFN_vkGetPhysicalDeviceProperties2 get_props2 =
      (PFN_vkGetPhysicalDeviceProperties2)gipa(d->instance, "vkGetPhysicalDeviceProperties2");
  get_props(d->physical_device, &props);
  pcache__devkey_make(props.pipelineCacheUUID, props.vendorID, props.deviceID,
                      props.driverVersion, (uint32_t)sizeof(void *), &d->key);
  memcpy(d->device_name, props.deviceName, sizeof d->device_name);
  d->device_name[sizeof d->device_name - 1] = '\0';
  d->api_version = props.apiVersion;
  /* VkPhysicalDeviceDriverProperties is core in 1.2; the names are only
   * for display, so older devices go without. */
  if (get_props2 && props.apiVersion >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 props2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &driver};
    get_props2(d->physical_device, &props2);
    d->driver_id = (uint32_t)driver.driverID;
    memcpy(d->driver_name, driver.driverName, sizeof d->driver_name);
    d->driver_name[sizeof d->driver_name - 1] = '\0';
    memcpy(d->driver_info, driver.driverInfo, sizeof d->driver_info);
    d->driver_info[sizeof d->driver_info - 1] = '\0';
  }
}

void pcache__device_add_tier(pcache_device *device, pcache_tier *tier) {
  pthread_mutex_lock(&device->tiers_lock);
  if (device->n_tiers == device->cap_tiers) {
    size_t cap = device->cap_tiers ? device->cap_tiers * 2 : 16;
    pcache_tier **t = pcache__realloc(device->tiers, cap * sizeof *t);
    if (!t)
      goto out_unlock; /* this tier just never gets published: lookups lock */
    device->tiers = t;
    device->cap_tiers = cap;
  }
  device->tiers[device->n_tiers++] = tier;
out_unlock:
  pthread_mutex_unlock(&device->tiers_lock);
}

int pcache__device_own_pipeline(pcache_device *device, VkPipeline pipeline) {
  int r = 0;
  pthread_mutex_lock(&device->owned_lock);
  if (device->n_owned == device->cap_owned) {
    size_t cap = device->cap_owned ? device->cap_owned * 2 : 64;
    VkPipeline *p = pcache__realloc(device->owned, cap * sizeof *p);
    if (!p) {
      r = -ENOMEM;
      goto out_unlock;
    }
    device->owned = p;
    device->cap_owned = cap;
  }
  device->owned[device->n_owned++] = pipeline;
  atomic_fetch_add(&device->stats.pipelines, 1);
  atomic_fetch_add(&device->stats.pipelines_this_frame, 1);
out_unlock:
  pthread_mutex_unlock(&device->owned_lock);
  return r;
}

PCACHE_API int pcache_device_create(pcache_client *client, const pcache_device_info *info,
                                    pcache_device **ret_device) {
  VkPipelineCacheCreateInfo cache_ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  PFN_vkGetInstanceProcAddr gipa;
  pcache_device *d;
  pthread_rwlockattr_t rwattr;
  int r = -ENOMEM;

  if (!info || !info->instance || !info->physical_device || !info->device || !ret_device)
    return -EINVAL;
  gipa = info->get_instance_proc_addr ? info->get_instance_proc_addr : vkGetInstanceProcAddr;
  d = pcache__calloc(1, sizeof *d);
  if (!d)
    return -ENOMEM;
  d->client = client && !client->disabled && client->socket_path ? client : NULL;
  d->instance = info->instance;
  d->physical_device = info->physical_device;
  d->vk_device = info->device;
  if (info->allocator) {
    d->allocator_copy = *info->allocator;
    d->allocator = &d->allocator_copy;
  }
  d->creation_feedback = info->creation_feedback;
  d->lookup = (pcache_desc_lookup){.ctx = d,
                                   .shader_module = lookup_shader,
                                   .set_layout = lookup_set_layout,
                                   .pipeline_layout = lookup_pipeline_layout,
                                   .render_pass = lookup_render_pass,
                                   .sampler = lookup_sampler};
  if (resolve(d, gipa) < 0) {
    r = -EINVAL;
    goto out_free;
  }
  identify(d, gipa);

  d->shards_mem = pcache__calloc(1, PCACHE__SHARDS * sizeof(pcache_shard) + 127);
  if (!d->shards_mem)
    goto out_free;
  d->shards = (pcache_shard *)(((uintptr_t)d->shards_mem + 127) & ~(uintptr_t)127);
  d->objects = objmap_new(d->shards);
  if (!d->objects)
    goto out_shards;
  /* Writers (merges) are rare and short; do not let a stream of pipeline
   * creations starve them. */
  pthread_rwlockattr_init(&rwattr);
  pthread_rwlockattr_setkind_np(&rwattr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  r = pthread_rwlock_init(&d->cache_lock, &rwattr);
  pthread_rwlockattr_destroy(&rwattr);
  if (r != 0) {
    r = -ENOMEM;
    goto out_objects;
  }
  r = -ENOMEM;
  if (pthread_mutex_init(&d->tiers_lock, NULL) != 0)
    goto out_cache_lock;
  if (pthread_mutex_init(&d->owned_lock, NULL) != 0)
    goto out_tiers_lock;
  if (pcache__table_init(&d->hash_tiers) < 0)
    goto out_owned_lock;
  if (pcache__table_init(&d->app_tiers) < 0)
    goto out_hash_tiers;
  if (pcache__table_init(&d->prefetched) < 0)
    goto out_app_tiers;
  if (pthread_mutex_init(&d->held_lock, NULL) != 0) {
    pcache__table_fini(&d->prefetched, NULL, NULL);
    goto out_app_tiers;
  }
  if (d->CreatePipelineCache(d->vk_device, &cache_ci, d->allocator, &d->cache) != VK_SUCCESS) {
    r = -EIO;
    goto out_prefetched;
  }
  if (d->client) {
    r = pcache__upload_start(d);
    if (r < 0)
      goto out_cache;
    const char *env = getenv("PCACHE_NO_SNAPSHOT");
    d->no_snapshot = env && env[0] == '1';
    d->creating = 1;
    if (!prefetch_disabled(info))
      prefetch(d);
    d->creating = 0;
  }
  *ret_device = d;
  return 0;

out_cache:
  d->DestroyPipelineCache(d->vk_device, d->cache, d->allocator);
out_prefetched:
  pthread_mutex_destroy(&d->held_lock);
  pcache__table_fini(&d->prefetched, NULL, NULL);
out_app_tiers:
  pcache__table_fini(&d->app_tiers, NULL, NULL);
out_hash_tiers:
  pcache__table_fini(&d->hash_tiers, NULL, NULL);
out_owned_lock:
  pthread_mutex_destroy(&d->owned_lock);
out_tiers_lock:
  pthread_mutex_destroy(&d->tiers_lock);
out_cache_lock:
  pthread_rwlock_destroy(&d->cache_lock);
out_objects:
  pcache__objmap_free(d->objects);
out_shards:
  pcache__free(d->shards_mem);
out_free:
  pcache__free(d);
  return r;
}

PCACHE_API void pcache_device_destroy(pcache_device *device) {
  if (!device)
    return;
  if (device->client) {
    /* Within the one flush timeout: a snapshot that cannot make it is
     * skipped (the next run that changes the cache uploads one). */
    pcache__upload_want_snapshot(device);
    pcache__upload_flush(device, device->client->timeout_ms);
    pcache__upload_stop(device);
  }
  pcache__table_fini(&device->hash_tiers, pcache__pipeline_free_tier, device);
  pcache__table_fini(&device->app_tiers, pcache__pipeline_free_tier, device);
  for (size_t i = 0; i < device->n_owned; i++)
    device->DestroyPipeline(device->vk_device, device->owned[i], device->allocator);
  device->DestroyPipelineCache(device->vk_device, device->cache, device->allocator);
  pcache__free(device->owned);
  pcache__free(device->tiers);
  pcache__table_fini(&device->prefetched, NULL, NULL);
  pcache__free(device->held);
  pthread_mutex_destroy(&device->held_lock);
  pcache__objmap_free(device->objects);
  pcache__free(device->shards_mem);
  pthread_mutex_destroy(&device->owned_lock);
  pthread_mutex_destroy(&device->tiers_lock);
  pthread_rwlock_destroy(&device->cache_lock);
  pcache__free(device);
}

PCACHE_API VkPipelineCache pcache_device_pipeline_cache(const pcache_device *device) {
  return device ? device->cache : VK_NULL_HANDLE;
}

PCACHE_API int pcache_device_flush(pcache_device *device) {
  if (!device)
    return -EINVAL;
  if (!device->client)
    return 0;
  pcache__upload_want_snapshot(device);
  return pcache__upload_flush(device, device->client->timeout_ms);
}

PCACHE_API void pcache_device_end_frame(pcache_device *device) {
  if (!device)
    return;
  pcache__table_publish(&device->hash_tiers);
  pcache__table_publish(&device->app_tiers);
  pthread_mutex_lock(&device->tiers_lock);
  for (size_t i = 0; i < device->n_tiers; i++)
    pcache__table_publish(&device->tiers[i]->table);
  pthread_mutex_unlock(&device->tiers_lock);
  atomic_store(&device->stats.pipelines_this_frame, 0);
}

PCACHE_API int pcache_device_get_stats(const pcache_device *device, pcache_stats *ret_stats) {
  pcache_device *d = (pcache_device *)device;
  if (!device || !ret_stats)
    return -EINVAL;
  ret_stats->hits_app_key = 0;
  ret_stats->hits_create_info = 0;
  for (size_t s = 0; s < PCACHE__SHARDS; s++) {
    ret_stats->hits_app_key +=
        atomic_load_explicit(&d->shards[s].hits_app_key, memory_order_relaxed);
    ret_stats->hits_create_info +=
        atomic_load_explicit(&d->shards[s].hits_create_info, memory_order_relaxed);
  }
  ret_stats->misses = atomic_load(&d->stats.misses);
  ret_stats->daemon_hits = atomic_load(&d->stats.daemon_hits);
  ret_stats->driver_cache_hits = atomic_load(&d->stats.driver_cache_hits);
  ret_stats->compiles = atomic_load(&d->stats.compiles);
  ret_stats->unhashable = atomic_load(&d->stats.unhashable);
  ret_stats->upload_queue = d->client ? pcache__upload_queue_len(d) : 0;
  ret_stats->uploaded = atomic_load(&d->stats.uploaded);
  ret_stats->prefetched = atomic_load(&d->stats.prefetched);
  ret_stats->rejected_blobs = atomic_load(&d->stats.rejected_blobs);
  ret_stats->pipelines_this_frame = atomic_load(&d->stats.pipelines_this_frame);
  ret_stats->pipelines = atomic_load(&d->stats.pipelines);
  ret_stats->snapshot_loaded = atomic_load(&d->stats.snapshot_loaded);
  ret_stats->snapshots_uploaded = atomic_load(&d->stats.snapshots_uploaded);
  return 0;
}
