/* The daemon's check of a stored description. It parses with protobuf-c:
 * the daemon only needs to know the bytes are a well-formed PipelineDesc of
 * a version it understands, that the hash is theirs, and which SPIR-V
 * modules they name. */
#include "desc_check.h"

#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/pcache.pb-c.h"

/* client/desc.h's PCACHE_DESC_FORMAT_VERSION; common/ does not include
 * client headers, so the value is repeated here and checked there. */
#define DESC_FORMAT_VERSION 1

int pcache__desc_check(const uint8_t *desc, size_t size, const pcache__hash *state_hash,
                       uint32_t expected_kind, pcache__hash modules[PCACHE_DESC_MAX_MODULES],
                       size_t *ret_n_modules) {
  pcache__hash h, found[PCACHE_DESC_MAX_MODULES];
  Pcachepb__PipelineDesc *d;
  size_t n = 0;
  int r = 0;
  d = pcachepb__pipeline_desc__unpack(&pcache__pb_allocator, size, desc);
  if (!d)
    return PCACHE_EBAD_DESC;
  if (d->format_version != DESC_FORMAT_VERSION ||
      (d->kind != PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS &&
       d->kind != PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE) ||
      (expected_kind && (uint32_t)d->kind != expected_kind) ||
      d->n_stages > PCACHE_DESC_MAX_MODULES || d->n_stages == 0 ||
      (d->kind == PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE && d->n_stages != 1)) {
    r = PCACHE_EBAD_DESC;
    goto out_free;
  }
  for (size_t i = 0; i < d->n_stages; i++) {
    const Pcachepb__ShaderModuleDesc *m = d->stages[i]->module;
    int seen = 0;
    if (!m || m->spirv_hash.len != PCACHE_HASH_SIZE) {
      r = PCACHE_EBAD_DESC;
      goto out_free;
    }
    /* Two stages may share a module: name it once. */
    for (size_t j = 0; j < n && !seen; j++)
      seen = memcmp(found[j].bytes, m->spirv_hash.data, PCACHE_HASH_SIZE) == 0;
    if (!seen)
      memcpy(found[n++].bytes, m->spirv_hash.data, PCACHE_HASH_SIZE);
  }
out_free:
  pcachepb__pipeline_desc__free_unpacked(d, &pcache__pb_allocator);
  if (r < 0)
    return r;
  pcache__hash128(desc, size, &h);
  if (!pcache__hash_equal(&h, state_hash))
    return PCACHE_EHASH_MISMATCH;
  memcpy(modules, found, n * sizeof(*found));
  *ret_n_modules = n;
  return 0;
}
