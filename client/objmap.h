/* The object map (objmap.c): handle -> what the object was made from, read
 * without locks; the per-thread shards its readers and the hit counters
 * use; and the refcounted SPIR-V modules kept for uploads. */
#ifndef PCACHE_CLIENT_OBJMAP_H
#define PCACHE_CLIENT_OBJMAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "client/desc.h"
#include "common/hash.h"

/* What a handle names; part of the map's key. */
enum pcache__obj_type {
  PCACHE_OBJ_SHADER,
  PCACHE_OBJ_SET_LAYOUT,
  PCACHE_OBJ_PIPELINE_LAYOUT,
  PCACHE_OBJ_RENDER_PASS,
  PCACHE_OBJ_SAMPLER,
  PCACHE_OBJ_PIPELINE_LIBRARY /* a graphics pipeline library, by its description */
};

/* A Vulkan handle as the map's 64-bit key (dispatchable handles are
 * pointers, non-dispatchable ones 64-bit values on every platform we run). */
#define PCACHE_HANDLE_U64(h) pcache__handle_u64(&(h), sizeof(h))
static inline uint64_t pcache__handle_u64(const void *h, size_t size) {
  uint64_t v = 0;
  memcpy(&v, h, size < sizeof v ? size : sizeof v);
  return v;
}

/* SPIR-V code kept for uploads: Put items carry the code of modules the
 * daemon may lack. Shared by the object map and queued uploads. */
typedef struct pcache__module {
  atomic_uint refs;
  pcache__hash hash;
  size_t size;
  uint8_t *code;
} pcache__module;

/* A copy of code with one reference, or NULL when out of memory. */
pcache__module *pcache__module_new(const pcache__hash *hash, const void *code, size_t size);
pcache__module *pcache__module_ref(pcache__module *module);
void pcache__module_unref(pcache__module *module);

/* Per-thread shards of what the hit paths write, so hits on different
 * cores never write the same cache line: each thread takes a shard once
 * (round robin), pcache_device_get_stats sums them. 128 bytes apart, since
 * x86 prefetches cache lines in pairs. More threads than shards share one,
 * which is still correct (the increments are atomic), just slower. */
#define PCACHE__SHARDS 64u
typedef struct pcache__shard {
  _Alignas(128) atomic_uint_fast64_t hits_app_key;
  atomic_uint_fast64_t hits_create_info;
  atomic_uint readers[2]; /* object map read sections, by epoch parity */
} pcache__shard;

/* The calling thread's shard index, 0..PCACHE__SHARDS-1. Initial-exec TLS
 * keeps the tier hit one load, for libpcache, which programs link; the
 * layer, which the loader dlopens, is built with PCACHE_DLOPENED, since
 * static TLS in a dlopen'ed library can make the dlopen fail in a process
 * that has used up its reserve (the layer would then silently be absent). */
#if defined(__GNUC__) && !defined(PCACHE_DLOPENED)
extern _Thread_local unsigned pcache__tls_shard __attribute__((tls_model("initial-exec")));
#else
extern _Thread_local unsigned pcache__tls_shard;
#endif
unsigned pcache__shard_assign(void);
static inline unsigned pcache__shard_index(void) {
  unsigned s = pcache__tls_shard;
  return s ? s - 1 : pcache__shard_assign();
}

typedef struct pcache__objmap pcache__objmap;

/* A map whose readers announce themselves in shards[PCACHE__SHARDS] (which
 * must outlive it). NULL when out of memory. */
pcache__objmap *pcache__objmap_new(pcache__shard *shards);
void pcache__objmap_free(pcache__objmap *map);

/* Records (type, handle); takes ownership of desc and module (freed on
 * failure, which leaves the object unrecorded: pipelines naming it are
 * then unhashable). A handle already present is replaced (the app
 * destroyed it behind our back and the driver reused the value). Waits for
 * read sections when the table grows: never call inside one. */
void pcache__objmap_put(pcache__objmap *map, uint32_t type, uint64_t handle,
                        pcache__desc_object *desc, pcache__module *module);
void pcache__objmap_remove(pcache__objmap *map, uint32_t type, uint64_t handle);

/* A read section, around every call that hands the map's lookup to the
 * describer. Lock-free; never call put or remove inside one. Returns the
 * token for read_end. */
void *pcache__objmap_read_begin(pcache__objmap *map);
void pcache__objmap_read_end(void *token);

/* The describer's view of the map (valid inside read sections). */
pcache__desc_lookup pcache__objmap_lookup(pcache__objmap *map);

/* The module recorded for a shader module handle, with a reference, or
 * NULL. Takes its own read section. */
pcache__module *pcache__objmap_module(pcache__objmap *map, VkShaderModule module);

#endif
