#include "fleet_app.h"

#include <stdlib.h>

#include "client_util.h"
#include "test.h"
#include "vk.h"

void fleet_app_run(int cold) {
  test_vk vk;
  pcache_client *client = util_client(5000);
  pcache_device *device;
  pcache_device_info info;
  test_objects o;
  pcache_stats st;

  test_vk_init(&vk);
  info = test_vk_device_info(&vk);
  ASSERT_TRUE(pcache_client_connected(client));
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects_create(&o, device);
  util_build_set(device, &o, FLEET_APP_GRAPHICS, FLEET_APP_COMPUTE, NULL);
  ASSERT_OK(pcache_device_flush(device));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.misses, FLEET_APP_PIPELINES);
  ASSERT_EQ(st.rejected_blobs, 0);
  if (cold) {
    ASSERT_EQ(st.compiles, FLEET_APP_PIPELINES);
    ASSERT_EQ(st.uploaded, FLEET_APP_PIPELINES);
  } else {
    ASSERT_EQ(st.daemon_hits, FLEET_APP_PIPELINES);
    ASSERT_EQ(st.compiles, 0);
    ASSERT_EQ(st.uploaded, 0);
    if (getenv("PCACHE_NO_PREFETCH"))
      ASSERT_EQ(st.prefetched, 0);
    else
      ASSERT_EQ(st.prefetched, FLEET_APP_PIPELINES);
  }
  test_objects_destroy(&o);
  pcache_device_destroy(device);
  pcache_client_close(client);
  test_vk_fini(&vk);
}
