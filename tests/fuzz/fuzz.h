/* What every fuzz target shares: libFuzzer's entry points (replay_main.c
 * calls them in the plain builds), and CHECK, an assertion that stays in
 * release builds: a finding must crash. */
#ifndef PCACHE_TESTS_FUZZ_H
#define PCACHE_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (!(x))                                                                                      \
      abort();                                                                                     \
  } while (0)

#endif
