/* A prefetch too large to travel inline (over 64 KiB) comes in a sealed
 * memfd: the transport maps it, and the client checks and merges every blob
 * straight from the mapping. The entries are stored through Put (described
 * by the real describer, not compiled, to stay quick). */
#include <stdlib.h>
#include <string.h>

#include "client/device.h"
#include "client_util.h"
#include "common/blob.h"
#include "common/clock.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define N_ENTRIES 2000
#define PER_PUT 250

static void put_entries(pcache_device *device, const test_objects *o) {
  pcache__transport *t;
  size_t vsize, fsize;
  const uint32_t *vcode = test_vk_shader_code("tri.vert", &vsize);
  const uint32_t *fcode = test_vk_shader_code("tri.frag", &fsize);
  pcache__hash vhash, fhash;
  uint8_t header[PCACHE_BLOB_HEADER_SIZE];
  Pcachepb__Module mods[2] = {PCACHEPB__MODULE__INIT, PCACHEPB__MODULE__INIT};
  Pcachepb__Module *mod_ptrs[2] = {&mods[0], &mods[1]};
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;

  pcache__hash128(vcode, vsize, &vhash);
  pcache__hash128(fcode, fsize, &fhash);
  mods[0].hash = (ProtobufCBinaryData){16, vhash.bytes};
  mods[0].code = (ProtobufCBinaryData){vsize, (uint8_t *)vcode};
  mods[1].hash = (ProtobufCBinaryData){16, fhash.bytes};
  mods[1].code = (ProtobufCBinaryData){fsize, (uint8_t *)fcode};
  pcache__blob_write_header(&device->core.key, header);
  info.key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, device->core.key.bytes};
  info.name = (char *)"lavapipe";
  ASSERT_OK(pcache__transport_open(getenv("PCACHE_SOCKET"), "pcache-client-test", 5000, &t, NULL));
  for (uint32_t base = 0; base < N_ENTRIES; base += PER_PUT) {
    static Pcachepb__PutItem items[PER_PUT];
    static Pcachepb__PutItem *item_ptrs[PER_PUT];
    static pcache__desc_buf bufs[PER_PUT];
    static pcache__desc_keys keys[PER_PUT];
    Pcachepb__Put put = PCACHEPB__PUT__INIT;
    Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
    pcache__reply reply = {0};
    for (uint32_t i = 0; i < PER_PUT; i++) {
      test_graphics g;
      test_graphics_info(&g, o, base + i);
      pcache__desc_buf_init(&bufs[i]);
      ASSERT_OK(pcache__desc_graphics(&g.info, &device->core.lookup, &bufs[i], &keys[i]));
      pcachepb__put_item__init(&items[i]);
      items[i].state_hash = (ProtobufCBinaryData){16, keys[i].state_hash.bytes};
      items[i].kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS;
      items[i].blob = (ProtobufCBinaryData){sizeof header, header};
      items[i].desc = (ProtobufCBinaryData){bufs[i].size, bufs[i].data};
      items[i].modules = mod_ptrs;
      items[i].n_modules = 2;
      item_ptrs[i] = &items[i];
    }
    put.device = &info;
    put.items = item_ptrs;
    put.n_items = PER_PUT;
    put.app = (char *)"pcache-client-test";
    request.body_case = PCACHEPB__REQUEST__BODY_PUT;
    request.put = &put;
    ASSERT_OK(pcache__transport_rpc(t, &request, PCACHEPB__RESPONSE__BODY_PUT,
                                    pcache__mono_ms() + 10000, &reply));
    ASSERT_EQ(reply.response->put->stored, PER_PUT);
    pcache__reply_release(&reply);
    for (uint32_t i = 0; i < PER_PUT; i++)
      pcache__desc_buf_release(&bufs[i]);
  }

  /* The raw reply: bulk, and every blob's range inside the mapping. */
  {
    Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
    Pcachepb__Prefetch pre = PCACHEPB__PREFETCH__INIT;
    pcache__reply reply = {0};
    pre.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, device->core.key.bytes};
    request.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
    request.prefetch = &pre;
    ASSERT_OK(pcache__transport_rpc(t, &request, PCACHEPB__RESPONSE__BODY_PREFETCH,
                                    pcache__mono_ms() + 10000, &reply));
    ASSERT_TRUE(reply.bulk != NULL);
    ASSERT_EQ(reply.response->prefetch->n_blobs, N_ENTRIES);
    for (size_t i = 0; i < N_ENTRIES; i++) {
      const Pcachepb__Blob *b = reply.response->prefetch->blobs[i];
      size_t size;
      const uint8_t *bytes =
          pcache__reply_bytes(&reply, b->blob, b->blob_offset, b->blob_size, &size);
      ASSERT_TRUE(bytes != NULL);
      ASSERT_EQ(size, sizeof header);
      ASSERT_MEMEQ(bytes, header, sizeof header);
    }
    /* A range outside the mapping is refused. */
    {
      size_t size = 1;
      ProtobufCBinaryData none = {0, NULL};
      ASSERT_TRUE(pcache__reply_bytes(&reply, none, reply.bulk_size - 1, 2, &size) == NULL);
      ASSERT_EQ(size, 0);
    }
    pcache__reply_release(&reply);
  }
  pcache__transport_close(t);
}

int main(void) {
  test_env env;
  util_app a;
  pcache_device *warm;
  test_objects wo;
  pcache_stats st;

  test_env_init(&env, "client-bulk");
  test_daemon_start(&env, NULL);
  util_app_open(&a, 5000);
  put_entries(a.device, &a.o);

  ASSERT_OK(pcache_device_create(a.client, &a.info, &warm));
  ASSERT_OK(pcache_device_get_stats(warm, &st));
  ASSERT_EQ(st.prefetched, N_ENTRIES);
  ASSERT_EQ(st.rejected_blobs, 0);
  test_objects_create(&wo, warm);
  for (uint32_t i = 0; i < 4; i++) {
    test_graphics g;
    VkPipeline p;
    test_graphics_info(&g, &wo, i * 97);
    ASSERT_VK(pcache_get_graphics_pipeline(warm, &g.info, &p));
  }
  ASSERT_OK(pcache_device_get_stats(warm, &st));
  ASSERT_EQ(st.daemon_hits, 4);
  ASSERT_EQ(st.compiles, 0);
  test_objects_destroy(&wo);
  pcache_device_destroy(warm);
  util_app_close(&a);
  test_env_cleanup(&env);
  return 0;
}
