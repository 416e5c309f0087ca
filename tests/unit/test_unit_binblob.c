/* Pipeline-binary containers (common/binblob.c), the binary device key
 * (pcache__devkey_binary) and the guarded driver call (common/guarded_call.c). */
#include <string.h>

#include <pcache/pcache.h>

#include "common/binblob.h"
#include "common/blob.h"
#include "common/devkey.h"
#include "common/guarded_call.h"
#include "test.h"

#if defined(__x86_64__) && defined(__ELF__)
/* A driver function that breaks the calling convention as NVIDIA's
 * vkGetPipelineKeyKHR was found to: rbx and r12 changed, not restored. */
__asm__(".text\n"
        ".type clobbering_fn, @function\n"
        "clobbering_fn:\n"
        "  movq $0x1234, %rbx\n"
        "  movq $0x5678, %r12\n"
        "  movl $7, %eax\n"
        "  retq\n"
        ".size clobbering_fn, .-clobbering_fn\n");
int32_t clobbering_fn(void *a, void *b, void *c);
#endif

static int32_t polite_fn(void *a, void *b, void *c) {
  *(int *)a = 1;
  return (int32_t)((char *)c - (char *)b);
}

static void *fn_ptr(int32_t (*f)(void *, void *, void *)) {
  void *p;
  memcpy(&p, &f, sizeof p);
  return p;
}

int main(void) {
  uint8_t uuid[16], gk1[20], gk2[20], blob[512];
  pcache__devkey key, bk1, bk1b, bk2, other;
  pcache__binblob b = {0}, got;
  static const uint8_t k0[32] = {1, 2, 3}, k1[5] = {9, 9, 9, 9, 9};
  static const uint8_t d0[7] = "binary", d1[3] = {0xaa, 0xbb, 0xcc};
  size_t size;

  /* The binary key: the base key with another UUID, one per global key. */
  memset(uuid, 0x11, sizeof uuid);
  memset(gk1, 0x21, sizeof gk1);
  memcpy(gk2, gk1, sizeof gk2);
  gk2[19] ^= 1;
  pcache__devkey_make(uuid, 0x10de, 0x2330, 580, 8, &key);
  pcache__devkey_binary(&key, gk1, sizeof gk1, &bk1);
  pcache__devkey_binary(&key, gk1, sizeof gk1, &bk1b);
  pcache__devkey_binary(&key, gk2, sizeof gk2, &bk2);
  ASSERT_MEMEQ(bk1.bytes, bk1b.bytes, 32);
  ASSERT_TRUE(memcmp(bk1.bytes, key.bytes, 16) != 0);
  ASSERT_TRUE(memcmp(bk1.bytes, bk2.bytes, 16) != 0);
  ASSERT_MEMEQ(bk1.bytes + 16, key.bytes + 16, 12); /* vendor, device, version */
  ASSERT_EQ(pcache__devkey_abi(&bk1), 8u | PCACHE_DEVKEY_ABI_BINARY);

  /* A container round trip. */
  b.count = 2;
  b.items[0] = (pcache__binblob_item){32, k0, sizeof d0, d0};
  b.items[1] = (pcache__binblob_item){sizeof k1, k1, sizeof d1, d1};
  size = pcache__binblob_size(&b);
  ASSERT_EQ(size, 48u + 4 + 32 + 8 + 7 + 4 + 5 + 8 + 3);
  pcache__binblob_pack(&bk1, &b, blob);
  ASSERT_OK(pcache__blob_check_header(blob, size, &bk1)); /* the daemon's Put check */
  ASSERT_ERR(pcache__blob_check_header(blob, size, &key), PCACHE_EWRONG_UUID);
  ASSERT_OK(pcache__binblob_parse(blob, size, &bk1, &got));
  ASSERT_EQ(got.count, 2u);
  ASSERT_EQ(got.items[1].key_size, 5u);
  ASSERT_MEMEQ(got.items[1].key, k1, 5);
  ASSERT_EQ(got.items[0].data_size, 7u);
  ASSERT_MEMEQ(got.items[0].data, d0, 7);

  /* Refused: another key, truncation, trailing bytes, bad fields. */
  ASSERT_ERR(pcache__binblob_parse(blob, size, &bk2, &got), PCACHE_EWRONG_UUID);
  for (size_t cut = 0; cut < size; cut++)
    ASSERT_TRUE(pcache__binblob_parse(blob, cut, &bk1, &got) != 0);
  blob[size] = 0;
  ASSERT_ERR(pcache__binblob_parse(blob, size + 1, &bk1, &got), PCACHE_EBINARY);
  {
    uint8_t bad[512];
    struct {
      size_t at;
      uint8_t value;
    } cases[] = {
        {32, 'X'},            /* magic */
        {40, 2},              /* version */
        {44, 0},              /* count 0 */
        {44, 17},             /* count over the bound */
        {44, 3},              /* count more than there are */
        {48, 33},             /* key size over 32 */
        {48, 0},              /* key size 0 */
        {48 + 4 + 32, 200},   /* data size past the end */
        {48 + 4 + 32 + 4, 1}, /* data size's high bytes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      memcpy(bad, blob, size);
      bad[cases[i].at] = cases[i].value;
      ASSERT_ERR(pcache__binblob_parse(bad, size, &bk1, &got), PCACHE_EBINARY);
    }
  }
  b.items[0].key_size = 33;
  ASSERT_EQ(pcache__binblob_size(&b), 0u);
  b.items[0].key_size = 32;
  b.count = PCACHE_BINBLOB_MAX_BINARIES + 1;
  ASSERT_EQ(pcache__binblob_size(&b), 0u);
  pcache__devkey_make(uuid, 0x1002, 0x2330, 580, 8, &other);
  ASSERT_ERR(pcache__binblob_parse(blob, size, &other, &got), PCACHE_EWRONG_VENDOR);

  /* The guarded call: arguments through, result back. */
  {
    int touched = 0, changed = -1;
    char buf[8];
    ASSERT_EQ(pcache__guarded_call3(fn_ptr(polite_fn), &touched, buf, buf + 5, &changed), 5);
    ASSERT_EQ(touched, 1);
    ASSERT_EQ(changed, 0);
#if defined(__x86_64__) && defined(__ELF__)
    /* A clobbering callee: seen, and the registers put back (the values
     * this function keeps across the call are still right). */
    volatile int keep = 41;
    ASSERT_EQ(pcache__guarded_call_checks(), 1);
    ASSERT_EQ(pcache__guarded_call3(fn_ptr(clobbering_fn), NULL, NULL, NULL, &changed), 7);
    ASSERT_EQ(changed, 1);
    ASSERT_EQ(keep + 1, 42);
#endif
  }
  return 0;
}
