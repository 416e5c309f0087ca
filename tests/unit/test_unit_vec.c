/* common/vec.h: growth, order, overflow refused without touching the
 * array, free and reuse. */
#include <stdint.h>

#include "common/vec.h"
#include "test.h"

int main(void) {
  PCACHE_VEC(uint64_t) v = {0};
  for (uint64_t i = 0; i < 10000; i++)
    ASSERT_OK(pcache_vec_push(&v, i * 3));
  ASSERT_EQ(v.n, 10000);
  ASSERT_GE(v.cap, v.n);
  for (size_t i = 0; i < v.n; i++)
    ASSERT_EQ(v.items[i], i * 3);

  /* A size that would overflow is refused and leaves the array alone. */
  uint64_t *before = v.items;
  size_t cap = v.cap;
  ASSERT_ERR(pcache_vec_reserve(&v, SIZE_MAX - v.n), -ENOMEM);
  ASSERT_ERR(pcache_vec_reserve(&v, SIZE_MAX / 4), -ENOMEM);
  ASSERT_TRUE(v.items == before);
  ASSERT_EQ(v.cap, cap);
  ASSERT_EQ(v.n, 10000);

  pcache_vec_free(&v);
  ASSERT_TRUE(v.items == NULL);
  ASSERT_EQ(v.n, 0);
  ASSERT_OK(pcache_vec_push(&v, 7));
  ASSERT_EQ(v.items[0], 7);
  pcache_vec_free(&v);
  return 0;
}
