/* What the daemon checks of a stored pipeline description: that it parses
 * as a PipelineDesc of a known format version and kind, that the state hash
 * is the hash of exactly these bytes, and which SPIR-V modules it names (so
 * their code can be required). Used by Put, Import and Verify. */
#ifndef PCACHE_COMMON_DESC_CHECK_H
#define PCACHE_COMMON_DESC_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"

/* The most shader stages a description may name. */
#define PCACHE_DESC_MAX_MODULES 8

/*
 * pcache__desc_check - returns 0, PCACHE_EBAD_DESC (does not parse, unknown
 * format version, kind unset or not matching expected_kind when that is
 * nonzero, more than PCACHE_DESC_MAX_MODULES stages) or
 * PCACHE_EHASH_MISMATCH (state_hash is not XXH3-128 of desc).
 * On success *ret_n_modules hashes are written to modules.
 */
int pcache__desc_check(const uint8_t *desc, size_t size, const pcache__hash *state_hash,
                       uint32_t expected_kind, pcache__hash modules[PCACHE_DESC_MAX_MODULES],
                       size_t *ret_n_modules);

#endif
