/* pcachectl status, list (and its filters), verify and --json against a
 * real pcached holding crafted entries. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"
#include "test.h"

static test_env env;

static int json_status; /* the exit code the next --json run must give */

static void assert_json_expr(const char *args, const char *expr) {
  ctl_json_check(&env, json_status, args, expr);
}

int main(void) {
  pcache__devkey a1, a2, b;
  char uuid_a[37], uuid_b[37], key_a1[65], hash[33];
  pcache__hash h;

  test_env_init(&env, "ctl-basic");
  ctl_start(&env);

  /* Device A in two driver versions (one UUID, two keys), device B. */
  ctl_key(0xa1, 100, &a1);
  ctl_key(0xa1, 101, &a2);
  ctl_key(0xb2, 7, &b);
  ctl_uuid_text(0xa1, uuid_a);
  ctl_uuid_text(0xb2, uuid_b);
  pcache__devkey_format(&a1, key_a1);
  ctl_put(&env, &a1, "Device A", "game", 1, 0, 3);
  ctl_put(&env, &a2, "Device A", "game", 1, 10, 2);
  ctl_put(&env, &b, "Device \"B\"\n", "tool", 2, 20, 4);
  ctl_put(&env, &b, "Device \"B\"\n", "game", 1, 30, 1);

  /* status */
  ASSERT_EQ(ctl_run(&env, "status"), 0);
  ASSERT_TRUE(strstr(ctl_out, "protocol 1"));
  ASSERT_TRUE(strstr(ctl_out, env.data_dir));
  ASSERT_TRUE(strstr(ctl_out, "entries:"));
  assert_json_expr("status", "d[\"entries\"] == 10 and d[\"protocol_version\"] == 1 and "
                             "d[\"data_dir\"] != \"\" and d[\"max_size\"] > 0");
  /* Global options may also follow the command. */
  ASSERT_EQ(ctl_run(&env, "status --json"), 0);
  ASSERT_EQ(ctl_out[0], '{');

  /* list: every device and entry */
  ASSERT_EQ(ctl_run(&env, "list"), 0);
  ASSERT_EQ(ctl_count(ctl_out, uuid_a), 2 + 2);   /* two device rows, two groups */
  ASSERT_EQ(ctl_count(ctl_out, uuid_b), 1 + 1);
  ASSERT_EQ(ctl_count(ctl_out, "  app game\n"), 3);
  ASSERT_EQ(ctl_count(ctl_out, "  app tool\n"), 1);
  ASSERT_EQ(ctl_count(ctl_out, "graphics"), 6);
  ASSERT_EQ(ctl_count(ctl_out, "compute"), 4);
  ASSERT_TRUE(strstr(ctl_out, "Mesa"));
  ASSERT_TRUE(strstr(ctl_out, "just now"));
  ctl_state_hash(2, 21, &h);
  pcache__hash_format(&h, hash);
  ASSERT_TRUE(strstr(ctl_out, hash));
  assert_json_expr("list", "len(d[\"devices\"]) == 3 and len(d[\"entries\"]) == 10");
  /* A device name with quotes and a newline stays one valid JSON string. */
  assert_json_expr("list", "any(x[\"name\"] == \"Device \\\"B\\\"\\n\" for x in d[\"devices\"])");

  /* --app */
  ASSERT_EQ(ctl_run(&env, "list --app tool"), 0);
  ASSERT_EQ(ctl_count(ctl_out, "compute"), 4);
  ASSERT_EQ(ctl_count(ctl_out, "graphics"), 0);
  ASSERT_EQ(ctl_count(ctl_out, uuid_a), 0);
  assert_json_expr("list --app game",
                   "len(d[\"entries\"]) == 6 and all(e[\"app\"] == \"game\" for e in d[\"entries\"])");

  /* --device UUID: both keys of A; --device KEY: only that one. */
  {
    char expr[256], args[128];
    snprintf(args, sizeof args, "list --device %s", uuid_a);
    assert_json_expr(args, "len(d[\"entries\"]) == 5 and len(d[\"devices\"]) == 2");
    snprintf(args, sizeof args, "list --device %s", key_a1);
    snprintf(expr, sizeof expr,
             "len(d[\"entries\"]) == 3 and all(e[\"device_key\"] == \"%s\" for e in "
             "d[\"entries\"])",
             key_a1);
    assert_json_expr(args, expr);
    snprintf(args, sizeof args, "list --device %s --app game", uuid_b);
    assert_json_expr(args, "len(d[\"entries\"]) == 1");
  }
  ASSERT_EQ(ctl_run(&env, "list --app nobody"), 0);
  ASSERT_TRUE(strstr(ctl_out, "no entries match"));

  /* verify: all good */
  ASSERT_EQ(ctl_run(&env, "verify"), 0);
  ASSERT_TRUE(strstr(ctl_out, "checked 10 entries: 0 problems"));
  assert_json_expr("verify", "d[\"checked\"] == 10 and d[\"problems\"] == [] and d[\"ok\"]");
  ASSERT_EQ(ctl_run(&env, "verify --repair"), 0);

  /* A blob damaged on disk: verify finds it and exits 1, --repair removes
   * it. The daemon is stopped while its file is edited. */
  {
    uint8_t blob[96];
    char mdb[400];
    size_t size, hits = 0;
    uint8_t *data;
    ctl_blob(&b, 21, blob, sizeof blob);
    test_daemon_stop(&env, SIGTERM);
    snprintf(mdb, sizeof mdb, "%s/data.mdb", env.data_dir);
    data = ctl_read_file(mdb, &size);
    for (size_t i = 0; i + sizeof blob <= size; i++) {
      if (memcmp(data + i, blob, sizeof blob) == 0) {
        data[i + 60] ^= 0xff;
        hits++;
      }
    }
    ASSERT_GE(hits, 1); /* copy-on-write leaves stale copies too */
    ctl_write_file(mdb, data, size);
    free(data);
    ctl_start(&env);
  }
  ASSERT_EQ(ctl_run(&env, "verify"), 1);
  ctl_state_hash(2, 21, &h);
  pcache__hash_format(&h, hash);
  ASSERT_TRUE(strstr(ctl_out, hash));
  ASSERT_TRUE(strstr(ctl_out, "1 problem"));
  json_status = 1;
  assert_json_expr("verify", "len(d[\"problems\"]) == 1 and not d[\"ok\"]");
  json_status = 0;
  ASSERT_EQ(ctl_run(&env, "verify --repair"), 0);
  ASSERT_TRUE(strstr(ctl_out, "1 removed"));
  ASSERT_EQ(ctl_run(&env, "verify"), 0);
  assert_json_expr("list", "len(d[\"entries\"]) == 9");

  /* Usage errors exit 2, with the daemon up. */
  ASSERT_EQ(ctl_run(&env, "list --device nonsense"), 2);
  ASSERT_EQ(ctl_run(&env, "list extra"), 2);
  ASSERT_EQ(ctl_run(&env, "status --bogus"), 2);

  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
