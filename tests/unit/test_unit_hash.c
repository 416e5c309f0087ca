/* The blob checksum (common/hash.h): the build pcache__checksum64 picks
 * for this CPU (AVX2 where it has it) gives XXH3-64's value, the same as
 * the baseline build, for every length across XXH3's size classes and
 * every alignment; the empty input gives XXH3's published value; on an
 * x86-64 CPU with AVX2 the AVX2 build is the one picked. Each
 * input sits in an allocation of exactly its size, so ASan sees any read
 * past it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "test.h"

int main(void) {
  static const size_t sizes[] = {
      0,   1,    3,    4,    8,    9,    16,    17,    128,   129,    240,     241,           255,
      256, 1023, 1024, 1025, 4096, 4097, 20480, 20487, 65536, 106000, 1 << 20, (1 << 20) + 13};
  uint64_t x = 0x9e3779b97f4a7c15ull;
#if defined(__x86_64__)
  __builtin_cpu_init();
  ASSERT_STREQ(pcache__checksum64_build(), __builtin_cpu_supports("avx2") ? "avx2" : "baseline");
#endif
  printf("checksum build: %s\n", pcache__checksum64_build());
  ASSERT_EQ(pcache__checksum64("", 0), 0x2D06800538D394C2ull);
  ASSERT_EQ(pcache__checksum64_portable("", 0), 0x2D06800538D394C2ull);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    for (size_t shift = 0; shift < 8; shift += 3) {
      size_t n = sizes[i] + shift;
      uint8_t *p = malloc(n ? n : 1);
      ASSERT_TRUE(p);
      for (size_t k = 0; k < n; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[k] = (uint8_t)(x >> 56);
      }
      /* From an odd offset too: blobs sit anywhere in a map. */
      ASSERT_EQ(pcache__checksum64(p, n), pcache__checksum64_portable(p, n));
      if (n > 1)
        ASSERT_EQ(pcache__checksum64(p + 1, n - 1), pcache__checksum64_portable(p + 1, n - 1));
      /* A changed byte changes it. */
      if (n) {
        uint64_t before = pcache__checksum64(p, n);
        p[n / 2] ^= 1;
        ASSERT_TRUE(pcache__checksum64(p, n) != before);
      }
      free(p);
    }
  }
  return 0;
}
