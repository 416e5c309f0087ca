/* First version: parses and checks the hash and kind. The pipeline
 * description work extends it to list module hashes. */
#include "desc_check.h"

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/pcache.pb-c.h"

int pcache__desc_check(const uint8_t *desc, size_t size, const pcache_hash128 *state_hash,
                       uint32_t expected_kind, pcache_hash128 modules[PCACHE_DESC_MAX_MODULES],
                       size_t *ret_n_modules) {
  pcache_hash128 h;
  Pcachepb__PipelineDesc *d;
  int r = 0;
  (void)modules;
  d = pcachepb__pipeline_desc__unpack(&pcache__pb_allocator, size, desc);
  if (!d)
    return PCACHE_EBAD_DESC;
  if (d->format_version != 1 || d->kind == PCACHEPB__ENTRY_KIND__ENTRY_KIND_UNSPECIFIED ||
      (expected_kind && (uint32_t)d->kind != expected_kind))
    r = PCACHE_EBAD_DESC;
  pcachepb__pipeline_desc__free_unpacked(d, &pcache__pb_allocator);
  if (r < 0)
    return r;
  pcache__hash128(desc, size, &h);
  if (!pcache__hash_equal(&h, state_hash))
    return PCACHE_EHASH_MISMATCH;
  *ret_n_modules = 0;
  return 0;
}
