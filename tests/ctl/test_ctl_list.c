/* pcachectl list (issue 15, point 8): with --app, a device's totals are
 * that app's, not the device's; each UUID column says which UUID it is:
 * the pipelineCacheUUID of the key, and the deviceUUID a client reported
 * ("-" until one does; kept when a later client sends none). */
#include <stdio.h>
#include <string.h>

#include "ctl_util.h"
#include "harness.h"
#include "test.h"

/* The pipelineCacheUUID (seed 3) then the device UUID column of the first
 * device row must read pc and dev. */
static void check_row(const char *pc, const char *dev) {
  const char *row = strstr(ctl_out, "\n") + 1;
  char want[96];
  snprintf(want, sizeof want, "%-36s  %-36s  ", pc, dev);
  if (strncmp(row, want, strlen(want)) != 0)
    TEST_FAIL_("the device row is \"%.80s\", expected it to start \"%s\"", row, want);
}

static void device_uuid_checks(const test_env *env, const pcache__devkey *key) {
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  uint8_t uuid[PCACHE_UUID_SIZE], odd[5] = {1, 2, 3, 4, 5};
  char pc[37], dev[37];
  ctl_uuid_text(3, pc);
  for (int i = 0; i < PCACHE_UUID_SIZE; i++)
    uuid[i] = (uint8_t)(0xa0 + i);
  pcache__uuid_format(uuid, dev);

  /* No client has reported one. */
  ctl_json_check(env, 0, "list", "d[\"devices\"][0][\"device_uuid\"] is None");
  ASSERT_EQ(ctl_run(env, "list"), 0);
  check_row(pc, "-");

  /* A client reports it; it is not the pipelineCacheUUID. */
  info.name = (char *)"GPU";
  info.driver_id = 13;
  info.driver_name = (char *)"llvmpipe";
  info.driver_info = (char *)"Mesa 99";
  info.device_uuid.data = uuid;
  info.device_uuid.len = sizeof uuid;
  ctl_put_info(env, key, &info, "game", 1, 200, 1);
  {
    char expr[400];
    snprintf(expr, sizeof expr,
             "d[\"devices\"][0][\"device_uuid\"] == \"%s\" != d[\"devices\"][0][\"uuid\"] "
             "and d[\"devices\"][0][\"driver_id\"] == 13 and "
             "d[\"devices\"][0][\"driver_name\"] == \"llvmpipe\" and "
             "d[\"devices\"][0][\"driver_info\"] == \"Mesa 99\"",
             dev);
    ctl_json_check(env, 0, "list", expr);
    /* An older client (no UUID, no driver identity: a Vulkan 1.0
     * instance) and a bad one (5 bytes) change nothing. */
    ctl_put(env, key, "GPU", "game", 1, 201, 1);
    ctl_json_check(env, 0, "list", expr);
    info.device_uuid.data = odd;
    info.device_uuid.len = sizeof odd;
    ctl_put_info(env, key, &info, "game", 1, 202, 1);
    ctl_json_check(env, 0, "list", expr);
  }
  ASSERT_EQ(ctl_run(env, "list"), 0);
  check_row(pc, dev);
}

int main(void) {
  test_env env;
  pcache__devkey key;
  /* Without it the env is whatever the stack held: pcached would start on
   * the user's own socket and store. */
  test_env_init(&env, "ctl-list");
  ctl_start(&env);
  ctl_key(3, 1, &key);
  ctl_put(&env, &key, "GPU", "game", 1, 0, 7);
  ctl_put(&env, &key, "GPU", "tool", 1, 100, 2);

  /* The device holds 9; the app 2. */
  ctl_json_check(&env, 0, "list", "d[\"devices\"][0][\"entries\"] == 9");
  ctl_json_check(&env, 0, "list --app tool",
                 "d[\"devices\"][0][\"entries\"] == 2 and len(d[\"entries\"]) == 2 and "
                 "d[\"devices\"][0][\"bytes\"] == sum(e[\"size\"] "
                 "for e in d[\"entries\"])");
  ASSERT_EQ(ctl_run(&env, "list --app tool"), 0);
  {
    char head[96];
    snprintf(head, sizeof head, "%-36s  %-36s  VENDOR", "PIPELINE CACHE UUID", "DEVICE UUID");
    ASSERT_EQ(strncmp(ctl_out, head, strlen(head)), 0);
  }
  ASSERT_TRUE(strstr(ctl_out, "APP'S") != NULL);
  /* The row says 2, not 9. */
  {
    const char *row = strstr(ctl_out, "\n") + 1;
    char n9[16], n2[16];
    snprintf(n9, sizeof n9, " %7d ", 9);
    snprintf(n2, sizeof n2, " %7d ", 2);
    ASSERT_TRUE(strstr(row, n2) != NULL);
    ASSERT_TRUE(strstr(row, n9) == NULL);
  }
  device_uuid_checks(&env, &key);
  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
