/* A replayer thread's shader modules across items: see module_pool.h. */
#include "replay/module_pool.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"

typedef struct pool_entry {
  pcache__hash hash;
  size_t code_size;
  VkShaderModule module;
  uint64_t used; /* the lend that last used it */
} pool_entry;

struct pcache__module_pool {
  VkDevice device;
  unsigned max, n;
  size_t max_bytes, bytes;
  uint64_t lend; /* lends so far: this item's is entries.used == lend */
  uint64_t made, lent;
  pool_entry *entries;
};

int pcache__module_pool_new(VkDevice device, unsigned max_modules, size_t max_bytes,
                            pcache__module_pool **ret_pool) {
  pcache__module_pool *p = pcache__calloc(1, sizeof *p);
  if (!p || !(p->entries = pcache__calloc(max_modules ? max_modules : 1, sizeof *p->entries))) {
    pcache__free(p);
    return -ENOMEM;
  }
  p->device = device;
  p->max = max_modules;
  p->max_bytes = max_bytes;
  *ret_pool = p;
  return 0;
}

static void drop(pcache__module_pool *p, unsigned i) {
  vkDestroyShaderModule(p->device, p->entries[i].module, NULL);
  p->bytes -= p->entries[i].code_size;
  p->entries[i] = p->entries[--p->n];
}

void pcache__module_pool_free(pcache__module_pool *p) {
  if (!p)
    return;
  while (p->n)
    drop(p, p->n - 1);
  pcache__free(p->entries);
  pcache__free(p);
}

/* Room for size more bytes and one more module, by dropping the least
 * recently used modules this item does not use. 0 when there is none. */
static int make_room(pcache__module_pool *p, size_t size) {
  if (size > p->max_bytes || !p->max)
    return 0;
  while (p->n == p->max || p->bytes + size > p->max_bytes) {
    unsigned oldest = p->n;
    for (unsigned i = 0; i < p->n; i++)
      if (p->entries[i].used != p->lend &&
          (oldest == p->n || p->entries[i].used < p->entries[oldest].used))
        oldest = i;
    if (oldest == p->n)
      return 0;
    drop(p, oldest);
  }
  return 1;
}

static int lend_one(pcache__module_pool *p, pcache__desc_decoded *d, uint32_t i) {
  const VkShaderModuleCreateInfo *info = &d->module_infos[i];
  pool_entry *e = NULL;
  for (unsigned k = 0; k < p->n && !e; k++)
    if (p->entries[k].code_size == info->codeSize &&
        memcmp(p->entries[k].hash.bytes, d->module_hashes[i].bytes, PCACHE_HASH_SIZE) == 0)
      e = &p->entries[k];
  if (!e) {
    VkShaderModule m;
    VkResult v;
    /* Flags or a pNext would make a module the hash alone does not name. */
    if (info->flags || info->pNext || !info->codeSize || !make_room(p, info->codeSize))
      return 0;
    v = vkCreateShaderModule(p->device, info, NULL, &m);
    if (v != VK_SUCCESS)
      return v == VK_ERROR_OUT_OF_HOST_MEMORY || v == VK_ERROR_OUT_OF_DEVICE_MEMORY ? -ENOMEM
                                                                                    : -EIO;
    e = &p->entries[p->n++];
    *e = (pool_entry){.hash = d->module_hashes[i], .code_size = info->codeSize, .module = m};
    p->bytes += info->codeSize;
    p->made++;
  }
  e->used = p->lend;
  d->modules[i] = e->module;
  d->modules_lent |= 1u << i;
  p->lent++;
  return 0;
}

static void unlend(pcache__desc_decoded *d) {
  for (uint32_t i = 0; i < d->n_modules; i++)
    if (d->modules_lent & (1u << i))
      d->modules[i] = VK_NULL_HANDLE;
  d->modules_lent = 0;
  for (uint32_t i = 0; i < d->n_libraries; i++)
    unlend(&d->libraries[i]);
}

static int lend_all(pcache__module_pool *p, pcache__desc_decoded *d) {
  int r;
  for (uint32_t i = 0; i < d->n_libraries; i++)
    if ((r = lend_all(p, &d->libraries[i])) < 0)
      return r;
  for (uint32_t i = 0; i < d->n_modules && i < 32; i++)
    if ((r = lend_one(p, d, i)) < 0)
      return r;
  return 0;
}

int pcache__module_pool_lend(pcache__module_pool *p, pcache__desc_decoded *d) {
  int r;
  p->lend++;
  if ((r = lend_all(p, d)) < 0)
    unlend(d);
  return r;
}

void pcache__module_pool_counts(const pcache__module_pool *p, uint64_t *ret_made,
                                uint64_t *ret_lent) {
  *ret_made = p ? p->made : 0;
  *ret_lent = p ? p->lent : 0;
}
