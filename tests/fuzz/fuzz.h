/* What every fuzz target shares: libFuzzer's entry points (replay_main.c
 * calls them in the plain builds), and CHECK, an assertion that stays in
 * release builds: a finding must crash. */
#ifndef PCACHE_TESTS_FUZZ_H
#define PCACHE_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/blob.h"
#include "common/bytes.h"
#include "common/devkey.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (!(x))                                                                                      \
      abort();                                                                                     \
  } while (0)

/* The input of the targets that check a blob against a device key
 * (fuzz_blob, fuzz_binblob): byte 0 picks the key, made from uuid when
 * even, else from the blob's own header (so that matching bytes reach the
 * deeper checks); the rest is copied into exactly *ret_size bytes, so
 * ASan flags any read past it. NULL (nothing to run) when data is empty
 * or out of memory; free the copy. */
static inline uint8_t *fuzz_blob_input(const uint8_t *data, size_t size,
                                       const uint8_t uuid[PCACHE_UUID_SIZE],
                                       pcache__devkey *ret_key, size_t *ret_size) {
  const uint8_t *blob = data + 1;
  uint8_t *copy;
  if (size < 1)
    return NULL;
  size -= 1;
  if ((data[0] & 1) && size >= PCACHE_BLOB_HEADER_SIZE)
    pcache__devkey_make(blob + 16, pcache__le32(blob + 8), pcache__le32(blob + 12), 1, 8, ret_key);
  else
    pcache__devkey_make(uuid, 0x10005, 0, 1, 8, ret_key);
  copy = malloc(size ? size : 1);
  if (copy)
    memcpy(copy, blob, size);
  *ret_size = size;
  return copy;
}

#endif
