/* What the daemon checks of a stored pipeline description: that it parses
 * as a PipelineDesc of a known format version and kind, that the state hash
 * is the hash of exactly these bytes, and which SPIR-V modules it names (so
 * their code can be required). Used by Put, Import and Verify. */
#ifndef PCACHE_COMMON_DESC_CHECK_H
#define PCACHE_COMMON_DESC_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"

/* The most shader stages a description may name: its own and those of the
 * libraries it embeds, together. */
#define PCACHE_DESC_MAX_MODULES 8
/* The most libraries one description embeds (a graphics pipeline has four
 * parts, and each library carries at least one), and how deep they may
 * nest: a linked pipeline's libraries are level 1, the libraries a library
 * was linked from level 2. */
#define PCACHE_DESC_MAX_LIBRARIES 4
#define PCACHE_DESC_MAX_LIBRARY_DEPTH 2

/*
 * pcache__desc_check - returns 0, PCACHE_EBAD_DESC (does not parse, unknown
 * format version, kind unset or not matching expected_kind when that is
 * nonzero, no stages outside a pipeline library or a linked pipeline,
 * libraries nested or counted past the limits above, more than
 * PCACHE_DESC_MAX_MODULES distinct modules) or PCACHE_EHASH_MISMATCH
 * (state_hash is not XXH3-128 of desc). On success *ret_n_modules hashes
 * are written to modules: the distinct modules of the description and of
 * every library it embeds.
 */
int pcache__desc_check(const uint8_t *desc, size_t size, const pcache__hash *state_hash,
                       uint32_t expected_kind, pcache__hash modules[PCACHE_DESC_MAX_MODULES],
                       size_t *ret_n_modules);

/*
 * pcache__desc_check_nesting - whether the libraries desc embeds (field 19,
 * themselves PipelineDescs) stay within PCACHE_DESC_MAX_LIBRARIES per level
 * and PCACHE_DESC_MAX_LIBRARY_DEPTH levels, read from the wire format
 * alone. protobuf-c unpacks nested messages by recursion with no bound, so
 * untrusted bytes pass this before they are unpacked. Returns 0 or
 * PCACHE_EBAD_DESC (also for bytes that do not parse on the way).
 */
int pcache__desc_check_nesting(const uint8_t *desc, size_t size);

#endif
