/* Table-driven sensitivity checks over fx_pipeline (fields.c): a field named
 * by its offset is changed, the fixture described again, and the hash
 * compared. Shared by test_desc_sensitivity and test_desc_gpl. */
#ifndef PCACHE_TESTS_DESC_FIELDS_H
#define PCACHE_TESTS_DESC_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "fixtures.h"

/* How a field changes: flipped (U32: bit 0; B32: truth; U16: bit 0),
 * incremented (I32; F32 by 0.5), decremented (DEC), or a bit set (ORBIT). */
enum { U32, F32, B32, I32, U16, DEC, ORBIT };

typedef struct field {
  const char *name;
  size_t off;
  int type;
  uint32_t arg; /* ORBIT: the bit to set */
} field;

#define F(member, type)                                                                            \
  { #member, offsetof(fx_pipeline, member), type, 0 }
#define FB(member, bit)                                                                            \
  { #member "|" #bit, offsetof(fx_pipeline, member), ORBIT, bit }
#define N(a) (sizeof(a) / sizeof((a)[0]))

void fx_mutate(fx_pipeline *p, const field *f);
/* The state hash of p; fails the test when p does not describe. */
pcache__hash fx_hash_of(const fx_pipeline *p, const fx_world *w);
/* Changes each of the n fields of fixture (one at a time) and fails unless
 * the hash changes (expect_change) or stays. Returns n. */
int fx_run(const fx_world *w, int fixture, const field *fields, size_t n, int expect_change);

#endif
