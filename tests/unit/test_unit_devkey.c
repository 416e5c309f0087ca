/* Device key layout, accessors and text forms. */
#include <errno.h>
#include <string.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "test.h"

int main(void) {
  uint8_t uuid[16], back[16];
  pcache__devkey key, parsed;
  char text[65], utext[37];

  for (int i = 0; i < 16; i++)
    uuid[i] = (uint8_t)(0xa0 + i);
  pcache__devkey_make(uuid, 0x10de, 0x2330, 0x91234567, 8, &key);
  ASSERT_MEMEQ(key.bytes, uuid, 16);
  ASSERT_EQ(key.bytes[16], 0xde); /* little-endian */
  ASSERT_EQ(key.bytes[17], 0x10);
  ASSERT_EQ(pcache__devkey_vendor(&key), 0x10de);
  ASSERT_EQ(pcache__devkey_device(&key), 0x2330);
  ASSERT_EQ(pcache__devkey_driver_version(&key), 0x91234567);
  ASSERT_EQ(pcache__devkey_abi(&key), 8);
  ASSERT_MEMEQ(pcache__devkey_uuid(&key), uuid, 16);

  pcache__devkey_format(&key, text);
  ASSERT_EQ(strlen(text), 64);
  ASSERT_EQ(strncmp(text, "a0a1a2a3", 8), 0);
  ASSERT_OK(pcache__devkey_parse(text, &parsed));
  ASSERT_MEMEQ(parsed.bytes, key.bytes, 32);
  ASSERT_ERR(pcache__devkey_parse("a0a1", &parsed), -EINVAL);
  text[10] = 'x';
  ASSERT_ERR(pcache__devkey_parse(text, &parsed), -EINVAL);

  pcache__uuid_format(uuid, utext);
  ASSERT_STREQ(utext, "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  ASSERT_OK(pcache__uuid_parse(utext, back));
  ASSERT_MEMEQ(back, uuid, 16);
  ASSERT_OK(pcache__uuid_parse("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf", back));
  ASSERT_MEMEQ(back, uuid, 16);
  ASSERT_ERR(pcache__uuid_parse("a0a1a2a3-a4a5", back), -EINVAL);

  /* Different ABIs are different keys (32- and 64-bit drivers). */
  {
    pcache__devkey k32;
    pcache__devkey_make(uuid, 0x10de, 0x2330, 0x91234567, 4, &k32);
    ASSERT_TRUE(memcmp(k32.bytes, key.bytes, 32) != 0);
  }
  /* A staged key differs from its base only in the ABI mark, and comes
   * back to it. */
  {
    pcache__devkey staged, back_key;
    ASSERT_EQ(pcache__devkey_is_staged(&key), 0);
    pcache__devkey_staged(&key, &staged);
    ASSERT_TRUE(pcache__devkey_is_staged(&staged));
    ASSERT_EQ(pcache__devkey_abi(&staged), 8u | PCACHE_DEVKEY_ABI_STAGED);
    ASSERT_MEMEQ(staged.bytes, key.bytes, 28);
    pcache__devkey_unstaged(&staged, &back_key);
    ASSERT_MEMEQ(back_key.bytes, key.bytes, 32);
  }
  return 0;
}
