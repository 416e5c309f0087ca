/* The daemon's check of a stored description. It parses with protobuf-c:
 * the daemon only needs to know the bytes are a well-formed PipelineDesc of
 * a version it understands, that the hash is theirs, and which SPIR-V
 * modules they name, in the description and in the libraries it embeds.
 * Embedded libraries make the message recursive, so their nesting is
 * checked on the wire before protobuf-c unpacks (and recurses). */
#include "desc_check.h"

#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/pcache.pb-c.h"
#include "proto/pbread.h"

/* client/desc.h's PCACHE_DESC_FORMAT_VERSION; common/ does not include
 * client headers, so the value is repeated here and checked there. */
#define DESC_FORMAT_VERSION 1

/* PipelineDesc.libraries, as a tag on the wire. */
#define LIBRARIES_TAG (19u << 3 | PCACHE_WIRE_LEN)

static int nesting(const uint8_t *p, const uint8_t *end, int depth) {
  int n = 0;
  while (p < end) {
    uint64_t tag, len;
    const uint8_t *body = NULL;
    if (pcache__wire_field(&p, end, &tag, &len, &body) < 0)
      return PCACHE_EBAD_DESC;
    if (tag != LIBRARIES_TAG)
      continue;
    if (depth == PCACHE_DESC_MAX_LIBRARY_DEPTH || ++n > PCACHE_DESC_MAX_LIBRARIES ||
        nesting(body, body + len, depth + 1) < 0)
      return PCACHE_EBAD_DESC;
  }
  return 0;
}

int pcache__desc_check_nesting(const uint8_t *desc, size_t size) {
  return nesting(desc, desc + size, 0);
}

/* The distinct module hashes found so far. */
typedef struct module_set {
  pcache__hash hashes[PCACHE_DESC_MAX_MODULES];
  size_t n;
} module_set;

/* One description (depth 0) or an embedded library (depth 1, 2): its
 * fields, its modules into set, then its libraries'. */
static int check_one(const Pcachepb__PipelineDesc *d, int depth, uint32_t expected_kind,
                     module_set *set) {
  /* A library, or a pipeline linked from libraries, may carry no stage of
   * its own (its parts are fixed-function state, or in its libraries). */
  int gpl = d->library_parts != 0 || d->n_libraries != 0;
  if (d->format_version != DESC_FORMAT_VERSION ||
      (d->kind != PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS &&
       d->kind != PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE) ||
      (expected_kind && (uint32_t)d->kind != expected_kind) ||
      d->n_stages > PCACHE_DESC_MAX_MODULES || (d->n_stages == 0 && !gpl) ||
      (d->kind == PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE && (d->n_stages != 1 || gpl)) ||
      d->n_libraries > PCACHE_DESC_MAX_LIBRARIES ||
      (d->n_libraries && depth == PCACHE_DESC_MAX_LIBRARY_DEPTH))
    return PCACHE_EBAD_DESC;
  for (size_t i = 0; i < d->n_stages; i++) {
    const Pcachepb__ShaderModuleDesc *m = d->stages[i]->module;
    int seen = 0;
    if (!m || m->spirv_hash.len != PCACHE_HASH_SIZE)
      return PCACHE_EBAD_DESC;
    /* Two stages may share a module: name it once. */
    for (size_t j = 0; j < set->n && !seen; j++)
      seen = memcmp(set->hashes[j].bytes, m->spirv_hash.data, PCACHE_HASH_SIZE) == 0;
    if (seen)
      continue;
    if (set->n == PCACHE_DESC_MAX_MODULES)
      return PCACHE_EBAD_DESC;
    memcpy(set->hashes[set->n++].bytes, m->spirv_hash.data, PCACHE_HASH_SIZE);
  }
  for (size_t i = 0; i < d->n_libraries; i++) {
    int r = check_one(d->libraries[i], depth + 1, PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, set);
    if (r < 0)
      return r;
  }
  return 0;
}

int pcache__desc_check(const uint8_t *desc, size_t size, const pcache__hash *state_hash,
                       uint32_t expected_kind, pcache__hash modules[PCACHE_DESC_MAX_MODULES],
                       size_t *ret_n_modules) {
  Pcachepb__PipelineDesc *d;
  module_set set = {.n = 0};
  pcache__hash h;
  int r;
  if (pcache__desc_check_nesting(desc, size) < 0)
    return PCACHE_EBAD_DESC;
  d = pcachepb__pipeline_desc__unpack(&pcache__pb_allocator, size, desc);
  if (!d)
    return PCACHE_EBAD_DESC;
  r = check_one(d, 0, expected_kind, &set);
  pcachepb__pipeline_desc__free_unpacked(d, &pcache__pb_allocator);
  if (r < 0)
    return r;
  pcache__hash128(desc, size, &h);
  if (!pcache__hash_equal(&h, state_hash))
    return PCACHE_EHASH_MISMATCH;
  memcpy(modules, set.hashes, set.n * sizeof(*set.hashes));
  *ret_n_modules = set.n;
  return 0;
}
