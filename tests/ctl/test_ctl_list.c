/* pcachectl list (issue 15, point 8): with --app, a device's totals are
 * that app's, not the device's; the UUID column says which UUID it is. */
#include <stdio.h>
#include <string.h>

#include "ctl_util.h"
#include "harness.h"
#include "test.h"

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
                 "d[\"devices\"][0][\"bytes\"] == sum(e[\"blob_size\"] + e[\"desc_size\"] "
                 "for e in d[\"entries\"])");
  ASSERT_EQ(ctl_run(&env, "list --app tool"), 0);
  ASSERT_TRUE(strstr(ctl_out, "PIPELINE CACHE UUID") != NULL);
  ASSERT_TRUE(strstr(ctl_out, "DEVICE UUID") == NULL);
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
  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
