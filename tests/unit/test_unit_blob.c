/* pcache__blob_check_header: a valid header passes, and each failure gives
 * its own code; nothing past size is read (ASan checks that). */
#include <stdlib.h>
#include <string.h>

#include "common/blob.h"
#include "common/devkey.h"
#include "test.h"

int main(void) {
  uint8_t uuid[16] = "val-0123456789ab", other_uuid[16] = "val-ffffffffffff";
  pcache__devkey key;
  uint8_t blob[64], *exact;

  pcache__devkey_make(uuid, 0x10005, 0x42, 7, 8, &key);
  pcache__blob_write_header(&key, blob);
  memset(blob + 32, 0xcc, 32);
  ASSERT_EQ(pcache__le32(blob), 32);
  ASSERT_EQ(pcache__le32(blob + 4), 1);
  ASSERT_OK(pcache__blob_check_header(blob, sizeof blob, &key));
  ASSERT_OK(pcache__blob_check_header(blob, 32, &key));

  /* Exactly 31 bytes on the heap: too short, and never read past. */
  exact = malloc(31);
  memcpy(exact, blob, 31);
  ASSERT_ERR(pcache__blob_check_header(exact, 31, &key), PCACHE_EBLOB_SHORT);
  free(exact);
  ASSERT_ERR(pcache__blob_check_header(NULL, 64, &key), PCACHE_EBLOB_SHORT);
  ASSERT_ERR(pcache__blob_check_header(blob, 0, &key), PCACHE_EBLOB_SHORT);

  pcache__put_le32(blob, 31);
  ASSERT_ERR(pcache__blob_check_header(blob, sizeof blob, &key), PCACHE_EHEADER_SIZE);
  pcache__put_le32(blob, 65); /* larger than the blob */
  ASSERT_ERR(pcache__blob_check_header(blob, sizeof blob, &key), PCACHE_EHEADER_SIZE);
  pcache__put_le32(blob, 48); /* a longer header is fine */
  ASSERT_OK(pcache__blob_check_header(blob, sizeof blob, &key));
  pcache__put_le32(blob, 32);

  pcache__put_le32(blob + 4, 2);
  ASSERT_ERR(pcache__blob_check_header(blob, sizeof blob, &key), PCACHE_EHEADER_VERSION);
  pcache__put_le32(blob + 4, 1);

  pcache__put_le32(blob + 8, 0x10de);
  ASSERT_ERR(pcache__blob_check_header(blob, sizeof blob, &key), PCACHE_EWRONG_VENDOR);
  pcache__put_le32(blob + 8, 0x10005);

  pcache__put_le32(blob + 12, 0x43);
  ASSERT_ERR(pcache__blob_check_header(blob, sizeof blob, &key), PCACHE_EWRONG_DEVICE);
  pcache__put_le32(blob + 12, 0x42);

  memcpy(blob + 16, other_uuid, 16);
  ASSERT_ERR(pcache__blob_check_header(blob, sizeof blob, &key), PCACHE_EWRONG_UUID);
  memcpy(blob + 16, uuid, 16);
  ASSERT_OK(pcache__blob_check_header(blob, sizeof blob, &key));

  /* The driver version and ABI are not in the header: not checked there. */
  {
    pcache__devkey newer;
    pcache__devkey_make(uuid, 0x10005, 0x42, 8, 4, &newer);
    ASSERT_OK(pcache__blob_check_header(blob, sizeof blob, &newer));
  }
  return 0;
}
