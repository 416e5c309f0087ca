/* Every way a Put item can be refused, one case each, and that nothing
 * refused is stored. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/blob.h"
#include "test.h"
#include "wire.h"

static int fd;
static pcache__devkey key;
static unsigned refused;

/* Puts one item and checks its verdict. */
static void expect(wire_item *it, int status, const char *what) {
  wire_reply rep;
  wire_put(fd, &key, it, 1, &rep);
  if (rep.resp->put->n_results != 1 || rep.resp->put->results[0]->status != status)
    TEST_FAIL_("%s: status %d (%s), expected %s", what,
               rep.resp->put->n_results ? rep.resp->put->results[0]->status : 0,
               rep.resp->put->n_results ? rep.resp->put->results[0]->message : "no result",
               pcache_err_name(status));
  ASSERT_EQ(rep.resp->put->stored, 0);
  ASSERT_TRUE(rep.resp->put->results[0]->message && *rep.resp->put->results[0]->message);
  wire_reply_free(&rep);
  refused++;
}

int main(void) {
  const char *args[] = {"--max-blob", "4K", "--max-hashes", "4", NULL};
  test_env env;
  wire_item it;
  wire_reply rep;
  pcache__devkey other;
  uint8_t *saved;
  size_t saved_len;

  test_env_init(&env, "validation");
  wire_guard(&env);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "validation");
  wire_devkey(7, &key);

  /* Device key of the wrong length: every item refused. */
  wire_item_make(&it, &key, 1, 100);
  {
    pcache__devkey short_key = key;
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Put put = PCACHEPB__PUT__INIT;
    Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
    Pcachepb__PutItem *items[1] = {&it.item};
    dev.key.data = short_key.bytes;
    dev.key.len = 31;
    put.device = &dev;
    put.items = items;
    put.n_items = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_PUT;
    req.put = &put;
    wire_call(fd, &req, &rep);
    ASSERT_ERR(rep.resp->status, PCACHE_EBAD_KEY);
    ASSERT_ERR(rep.resp->put->results[0]->status, PCACHE_EBAD_KEY);
    wire_reply_free(&rep);
    refused++;
  }

  it.item.state_hash.len = 15;
  expect(&it, PCACHE_EBAD_KEY, "short state hash");
  it.item.state_hash.len = 16;

  saved = it.item.blob.data;
  saved_len = it.item.blob.len;
  it.item.blob.data = wire_blob(&key, 5000, 1);
  it.item.blob.len = 5000;
  expect(&it, PCACHE_EBLOB_TOO_LARGE, "blob over --max-blob");
  it.item.blob.len = 16;
  expect(&it, PCACHE_EBLOB_SHORT, "blob shorter than a header");
  free(it.item.blob.data);
  it.item.blob.data = saved;
  it.item.blob.len = saved_len;

  pcache__put_le32(it.item.blob.data, 8);
  expect(&it, PCACHE_EHEADER_SIZE, "header size 8");
  pcache__put_le32(it.item.blob.data, 32);
  pcache__put_le32(it.item.blob.data + 4, 2);
  expect(&it, PCACHE_EHEADER_VERSION, "header version 2");
  pcache__put_le32(it.item.blob.data + 4, 1);

  pcache__devkey_make(pcache__devkey_uuid(&key), 0x8086, pcache__devkey_device(&key), 1, 8,
                      &other);
  pcache__blob_write_header(&other, it.item.blob.data);
  expect(&it, PCACHE_EWRONG_VENDOR, "another vendor");
  pcache__devkey_make(pcache__devkey_uuid(&key), pcache__devkey_vendor(&key), 0x999, 1, 8, &other);
  pcache__blob_write_header(&other, it.item.blob.data);
  expect(&it, PCACHE_EWRONG_DEVICE, "another device");
  wire_devkey(8, &other);
  pcache__devkey_make(pcache__devkey_uuid(&other), pcache__devkey_vendor(&key),
                      pcache__devkey_device(&key), 1, 8, &other);
  pcache__blob_write_header(&other, it.item.blob.data);
  expect(&it, PCACHE_EWRONG_UUID, "another UUID");
  pcache__blob_write_header(&key, it.item.blob.data);

  saved_len = it.item.desc.len;
  it.item.desc.len = 0;
  expect(&it, PCACHE_EBAD_DESC, "empty description");
  it.item.desc.len = saved_len;
  it.item.desc.data[0] ^= 0xff;
  expect(&it, PCACHE_EBAD_DESC, "garbage description");
  it.item.desc.data[0] ^= 0xff;
  it.item.state_hash.data[0] ^= 1;
  expect(&it, PCACHE_EHASH_MISMATCH, "state hash of other bytes");
  it.item.state_hash.data[0] ^= 1;

  /* Module code that does not hash to its name. */
  {
    size_t n;
    const uint8_t *wrong = wire_spirv(3, &n, &(pcache__hash){{0}});
    it.module.code.data = (uint8_t *)wrong;
    expect(&it, PCACHE_ECHECKSUM, "module code of another hash");
  }
  /* The description names a module the store lacks and the item does not
   * carry. */
  it.item.n_modules = 0;
  expect(&it, PCACHE_EMISSING_MODULE, "missing module");
  wire_item_free(&it);

  /* Too many items in one request: the whole request is refused. */
  {
    wire_item many[5];
    for (int i = 0; i < 5; i++)
      wire_item_make(&many[i], &key, 10 + (uint64_t)i, 64);
    wire_put(fd, &key, many, 5, &rep);
    ASSERT_ERR(rep.resp->status, PCACHE_ETOO_MANY_HASHES);
    wire_reply_free(&rep);
    pcache__hash hs[5];
    for (int i = 0; i < 5; i++)
      hs[i] = many[i].hash;
    wire_get(fd, &key, hs, 5, &rep);
    ASSERT_ERR(rep.resp->status, PCACHE_ETOO_MANY_HASHES);
    wire_reply_free(&rep);
    for (int i = 0; i < 5; i++)
      wire_item_free(&many[i]);
    refused += 5;
  }

  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->entries, 0);
  ASSERT_EQ(rep.resp->stats->puts, 0);
  ASSERT_EQ(rep.resp->stats->modules, 0);
  ASSERT_EQ(rep.resp->stats->put_rejected, refused);
  wire_reply_free(&rep);

  /* And the same item, fixed, is accepted: the failures were the cases. */
  wire_item_make(&it, &key, 1, 100);
  wire_put(fd, &key, &it, 1, &rep);
  ASSERT_EQ(rep.resp->put->stored, 1);
  wire_reply_free(&rep);
  wire_item_free(&it);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
