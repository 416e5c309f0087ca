#include "fleet_app.h"

#include <stdlib.h>

#include "client_util.h"
#include "test.h"
#include "vk.h"

void fleet_app_run(int cold) {
  util_app a;
  pcache_stats st;

  util_app_open(&a, 5000);
  ASSERT_TRUE(pcache_client_connected(a.client));
  util_build_set(a.device, &a.o, FLEET_APP_GRAPHICS, FLEET_APP_COMPUTE, NULL);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
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
  util_app_close(&a);
}
