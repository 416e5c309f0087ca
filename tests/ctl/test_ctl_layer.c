/* pcachectl layer: the layer's reports, sent through the wire as the layer
 * sends them (ClientReport), shown as a table and as JSON, newest first,
 * filtered by --app; sTypes the table knows by name, the others as
 * numbers; an app name with control characters shown harmlessly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "ctl_util.h"
#include "proto/rpc.h"
#include "test.h"

static test_env env;

/* Sends one report over a connection that said Hello as hello_app. */
static void send_report(const char *hello_app, Pcachepb__ClientReport *rep) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  pcache__reply reply;
  int fd = test_open(&env, hello_app, 5000);
  ASSERT_GE(fd, 0);
  req.body_case = PCACHEPB__REQUEST__BODY_CLIENT_REPORT;
  req.client_report = rep;
  ASSERT_OK(pcache__rpc(fd, &req, PCACHEPB__RESPONSE__BODY_CLIENT_REPORT, 1u << 20,
                        pcache__mono_ms() + 5000, &reply));
  pcache__reply_release(&reply);
  close(fd);
}

/* The table row of pid: its pid, app and six counters. */
static void expect_row(unsigned pid, const char *app, unsigned long long pipelines,
                       unsigned long long hashable, unsigned long long daemon_hits,
                       unsigned long long local_hits, unsigned long long compiles,
                       unsigned long long unhashable) {
  char needle[32], row_app[64];
  unsigned long long v[6];
  unsigned row_pid;
  const char *row;
  snprintf(needle, sizeof needle, " %u ", pid);
  row = strstr(ctl_out, needle);
  ASSERT_TRUE(row != NULL);
  ASSERT_EQ(sscanf(row, "%u %63s %llu %llu %llu %llu %llu %llu", &row_pid, row_app, &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5]),
            8);
  ASSERT_EQ(row_pid, pid);
  ASSERT_STREQ(row_app, app);
  ASSERT_EQ(v[0], pipelines);
  ASSERT_EQ(v[1], hashable);
  ASSERT_EQ(v[2], daemon_hits);
  ASSERT_EQ(v[3], local_hits);
  ASSERT_EQ(v[4], compiles);
  ASSERT_EQ(v[5], unhashable);
}

int main(void) {
  Pcachepb__ClientReport game = PCACHEPB__CLIENT_REPORT__INIT;
  Pcachepb__ClientReport tool = PCACHEPB__CLIENT_REPORT__INIT;
  Pcachepb__ClientReport odd = PCACHEPB__CLIENT_REPORT__INIT;
  Pcachepb__UnhashableReason reasons[3] = {PCACHEPB__UNHASHABLE_REASON__INIT,
                                           PCACHEPB__UNHASHABLE_REASON__INIT,
                                           PCACHEPB__UNHASHABLE_REASON__INIT};
  Pcachepb__UnhashableReason *reason_ptrs[3] = {&reasons[0], &reasons[1], &reasons[2]};
  pcache__devkey key;
  char key_hex[2 * PCACHE_DEVKEY_SIZE + 1], expr[2048];

  test_env_init(&env, "ctl-layer");
  ctl_start(&env);

  /* Nothing reported yet. */
  ASSERT_EQ(ctl_run(&env, "layer"), 0);
  ASSERT_TRUE(strstr(ctl_out, "no layer reports\n"));
  ASSERT_EQ(ctl_run(&env, "layer --app game"), 0);
  ASSERT_TRUE(strstr(ctl_out, "no layer reports match"));
  ctl_json_check(&env, 0, "layer", "d == {\"capacity\": 64, \"reports\": []}");

  /* A game with three kinds of unhashable pipelines, then a tool. */
  ctl_key(0xa1, 100, &key);
  game.pid = 4242;
  game.app = (char *)"game";
  game.device_key.data = key.bytes;
  game.device_key.len = sizeof key.bytes;
  game.device_name = (char *)"llvmpipe (LLVM 15.0.6, 256 bits)";
  game.pipelines = 20;
  game.hashable = 14;
  game.daemon_hits = 9;
  game.local_hits = 2;
  game.compiles = 3;
  game.uploaded = 3;
  game.unhashable = 6;
  game.passed_through = 0;
  reasons[0].reason = (char *)"pnext";
  reasons[0].stype = 1000320002; /* VkGraphicsPipelineLibraryCreateInfoEXT */
  reasons[0].count = 3;
  reasons[1].reason = (char *)"pnext";
  reasons[1].stype = 1000999000; /* no struct pcachectl knows */
  reasons[1].count = 1;
  reasons[2].reason = (char *)"unrecorded_render_pass";
  reasons[2].count = 2;
  game.reasons = reason_ptrs;
  game.n_reasons = 3;
  send_report("game", &game);
  tool.pid = 4343;
  tool.app = (char *)"tool";
  tool.pipelines = 5;
  tool.hashable = 5;
  tool.daemon_hits = 5;
  send_report("tool", &tool);

  ASSERT_EQ(ctl_run(&env, "layer"), 0);
  ASSERT_TRUE(strstr(ctl_out, "DAEMON HITS"));
  ASSERT_TRUE(strstr(ctl_out, "LOCAL HITS"));
  expect_row(4242, "game", 20, 14, 9, 2, 3, 6);
  expect_row(4343, "tool", 5, 5, 5, 0, 0, 0);
  /* Newest first. */
  ASSERT_TRUE(strstr(ctl_out, " 4343 ") < strstr(ctl_out, " 4242 "));
  ASSERT_TRUE(strstr(ctl_out, "llvmpipe (LLVM 15.0.6, 256 bits)"));
  /* The reasons: the known sType by name, the unknown as a number. */
  ASSERT_TRUE(strstr(ctl_out, "\nunhashable pipelines\n"));
  ASSERT_TRUE(strstr(ctl_out, "STRUCTURE"));
  {
    const char *gpl = strstr(ctl_out, "1000320002");
    const char *unknown = strstr(ctl_out, "1000999000");
    const char *rp = strstr(ctl_out, "unrecorded_render_pass");
    ASSERT_TRUE(gpl && unknown && rp);
    ASSERT_TRUE(strstr(gpl, "VkGraphicsPipelineLibraryCreateInfoEXT\n") != NULL);
    ASSERT_TRUE(strncmp(strchr(unknown, '\n') - 2, " -", 2) == 0);
    ASSERT_TRUE(strncmp(strchr(rp, '\n') - 2, " -", 2) == 0);
  }
  /* The tool had none: only the game's three lines. */
  {
    const char *part = strstr(ctl_out, "\nunhashable pipelines\n");
    ASSERT_EQ(ctl_count(part, "  4242  game"), 3);
    ASSERT_EQ(ctl_count(part, "  4343  tool"), 0);
  }

  ASSERT_EQ(ctl_run(&env, "layer --app tool"), 0);
  ASSERT_EQ(ctl_count(ctl_out, " 4343 "), 1);
  ASSERT_EQ(ctl_count(ctl_out, " 4242 "), 0);
  ASSERT_TRUE(strstr(ctl_out, "unhashable pipelines") == NULL);

  /* JSON: every field, newest first. */
  ctl_json_check(&env, 0, "layer",
                 "d[\"capacity\"] == 64 and [r[\"pid\"] for r in d[\"reports\"]] == [4343, 4242]");
  pcache__devkey_format(&key, key_hex);
  snprintf(expr, sizeof expr,
           "(lambda r: r[\"app\"] == \"game\" and r[\"device_key\"] == \"%s\""
           " and r[\"device_name\"] == \"llvmpipe (LLVM 15.0.6, 256 bits)\""
           " and r[\"pipelines\"] == 20 and r[\"hashable\"] == 14 and r[\"daemon_hits\"] == 9"
           " and r[\"local_hits\"] == 2 and r[\"compiles\"] == 3 and r[\"uploaded\"] == 3"
           " and r[\"unhashable\"] == 6 and r[\"passed_through\"] == 0"
           " and abs(r[\"received\"] - __import__(\"time\").time()) < 60"
           " and r[\"reasons\"] == ["
           "{\"reason\": \"pnext\", \"stype\": 1000320002,"
           " \"stype_name\": \"VkGraphicsPipelineLibraryCreateInfoEXT\", \"count\": 3},"
           "{\"reason\": \"pnext\", \"stype\": 1000999000, \"stype_name\": None, \"count\": 1},"
           "{\"reason\": \"unrecorded_render_pass\", \"stype\": 0, \"stype_name\": None,"
           " \"count\": 2}])(d[\"reports\"][1])",
           key_hex);
  ctl_json_check(&env, 0, "layer", expr);
  ctl_json_check(&env, 0, "layer --app tool",
                 "[r[\"app\"] for r in d[\"reports\"]] == [\"tool\"]"
                 " and d[\"reports\"][0][\"reasons\"] == []"
                 " and d[\"reports\"][0][\"device_key\"] == \"\"");

  /* An app name the report left to Hello, with an escape sequence in it:
   * shown, but never as a control character. */
  odd.pid = 4444;
  odd.pipelines = 1;
  send_report("odd\x1b[2Japp", &odd);
  ASSERT_EQ(ctl_run(&env, "layer"), 0);
  ASSERT_TRUE(strstr(ctl_out, "odd?[2Japp"));
  ASSERT_TRUE(strchr(ctl_out, '\x1b') == NULL);
  ctl_json_check(&env, 0, "layer", "d[\"reports\"][0][\"app\"] == \"odd\\x1b[2Japp\"");

  /* Usage. */
  ASSERT_EQ(ctl_run(&env, "layer extra"), 2);
  ASSERT_EQ(ctl_run(&env, "layer --app"), 2);
  ASSERT_EQ(ctl_run(&env, "layer --help"), 0);
  ASSERT_TRUE(strstr(ctl_out, "--app NAME"));
  ASSERT_EQ(ctl_run(&env, "--help"), 0);
  ASSERT_TRUE(strstr(ctl_out, "layer [--app NAME]"));

  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
