/* pcachectl purge by every selector against a real pcached. Old entries
 * for --older-than come in through an imported archive with old
 * timestamps, the only way a client can set last_used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "ctl_util.h"
#include "test.h"

static test_env env;

static uint64_t json_count(const char *args, const char *field) {
  char path[400];
  FILE *p;
  char cmd[1024];
  unsigned long long v = 0;
  ASSERT_EQ(ctl_run(&env, "--json %s", args), 0);
  snprintf(path, sizeof path, "%s/doc.json", env.root);
  ctl_write_file(path, ctl_out, strlen(ctl_out));
  /* field is a python expression over d, the document */
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(%s)' '%s'", field,
           path);
  p = popen(cmd, "r");
  ASSERT_TRUE(p != NULL);
  ASSERT_EQ(fscanf(p, "%llu", &v), 1);
  ASSERT_EQ(pclose(p), 0);
  return v;
}

static uint64_t entries_now(void) { return json_count("list", "len(d[\"entries\"])"); }

/* An archive of `count` entries for key whose last use was `age` seconds
 * ago. */
static void old_archive(const char *path, const pcache__devkey *key, const char *app,
                        uint32_t first, uint32_t count, uint64_t age) {
  pcache__archive_writer *w;
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  uint8_t *data;
  size_t size;
  uint64_t now = (uint64_t)time(NULL);
  ASSERT_OK(pcache__archive_writer_new(&w));
  info.key.data = (uint8_t *)key->bytes;
  info.key.len = PCACHE_DEVKEY_SIZE;
  info.name = (char *)"Old device";
  ASSERT_OK(pcache__archive_add_device(w, &info));
  for (uint32_t i = first; i < first + count; i++)
    ctl_archive_add(w, key, key, 1, i, app, now - age - 100, now - age);
  ASSERT_OK(pcache__archive_finish(w, &data, &size));
  pcache__archive_writer_free(w);
  ctl_write_file(path, data, size);
  pcache__free(data);
}

/* One size an entry (docs/storage.md "Sizes"): list's sum over an app's
 * entries, export's figure for them and purge's freed bytes agree, and
 * status's entries part is list's sum over the whole store. */
static void sizes_agree(void) {
  pcache__devkey k;
  char path[400], args[600];
  uint64_t listed, listed_all, exported, purged, status_entries, status_total, parts;
  ctl_key(0xc3, 5, &k);
  ctl_put(&env, &k, "C", "sized", 1, 300, 3);
  ctl_put(&env, &k, "C", "other-app", 2, 400, 2);
  listed = json_count("list --app sized", "sum(e[\"size\"] for e in d[\"entries\"])");
  /* More than the blobs and descriptions: the index records count too. */
  ASSERT_GT(listed, json_count("list --app sized",
                               "sum(e[\"blob_size\"] + e[\"desc_size\"] for e in d[\"entries\"])"));
  listed_all = json_count("list", "sum(e[\"size\"] for e in d[\"entries\"])");
  status_entries = json_count("status", "d[\"entry_bytes\"]");
  ASSERT_EQ(status_entries, listed_all);
  /* The parts add up to what the cap counts. */
  status_total = json_count("status", "d[\"bytes_used\"] + d[\"snapshot_bytes\"]");
  parts = json_count("status", "d[\"entry_bytes\"] + d[\"snapshot_part_bytes\"] + "
                               "d[\"module_bytes\"] + d[\"device_bytes\"]");
  ASSERT_EQ(parts, status_total);
  snprintf(path, sizeof path, "%s/sized.pcache", env.root);
  snprintf(args, sizeof args, "export --app sized %s", path);
  exported = json_count(args, "d[\"entry_bytes\"]");
  ASSERT_EQ(exported, listed);
  purged = json_count("purge --app sized", "d[\"bytes\"]");
  ASSERT_EQ(purged, listed);
  /* The texts say what they count. */
  ASSERT_EQ(ctl_run(&env, "list"), 0);
  ASSERT_TRUE(strstr(ctl_out, "each entry's blob, description and index records"));
  ASSERT_EQ(ctl_run(&env, "status"), 0);
  ASSERT_TRUE(strstr(ctl_out, "(as list counts them)"));
  ASSERT_EQ(ctl_run(&env, "purge --app other-app"), 0);
  ASSERT_TRUE(strstr(ctl_out, "each entry's blob, description and index records"));
  ASSERT_EQ(json_count("status", "d[\"entry_bytes\"]"), 0);
}

int main(void) {
  pcache__devkey a1, a2, b;
  char uuid_a[37], key_b[65], hash[33], path[400];
  pcache__hash h;

  test_env_init(&env, "ctl-purge");
  ctl_start(&env);
  ctl_key(0xa1, 100, &a1);
  ctl_key(0xa1, 101, &a2);
  ctl_key(0xb2, 7, &b);
  ctl_uuid_text(0xa1, uuid_a);
  pcache__devkey_format(&b, key_b);

  sizes_agree();

  /* Usage: exactly one selector, valid arguments. */
  ASSERT_EQ(ctl_run(&env, "purge"), 2);
  ASSERT_EQ(ctl_run(&env, "purge --all --app x"), 2);
  ASSERT_EQ(ctl_run(&env, "purge --older-than soon"), 2);
  ASSERT_EQ(ctl_run(&env, "purge --entry 1234"), 2);
  ASSERT_EQ(ctl_run(&env, "purge --device 12"), 2);

  /* --entry: that state hash, on every device that has it. */
  ctl_put(&env, &a1, "A", "game", 1, 0, 3);
  ctl_put(&env, &b, "B", "game", 1, 0, 2);
  ASSERT_EQ(entries_now(), 5);
  ctl_state_hash(1, 1, &h);
  pcache__hash_format(&h, hash);
  ASSERT_EQ(ctl_run(&env, "purge --entry %s", hash), 0);
  ASSERT_TRUE(strstr(ctl_out, "purged 2 entries"));
  ASSERT_EQ(entries_now(), 3);

  /* --all */
  ASSERT_EQ(json_count("purge --all", "d[\"entries\"]"), 3);
  ASSERT_EQ(entries_now(), 0);

  /* --device UUID: every key with that UUID; --device KEY: that key. */
  ctl_put(&env, &a1, "A", "game", 1, 0, 3);
  ctl_put(&env, &a2, "A", "game", 1, 10, 2);
  ctl_put(&env, &b, "B", "game", 1, 20, 4);
  ASSERT_EQ(json_count("purge --device " "00000000-0000-0000-0000-000000000000",
                       "d[\"entries\"]"), 0);
  {
    char args[128];
    snprintf(args, sizeof args, "purge --device %s", uuid_a);
    ASSERT_EQ(json_count(args, "d[\"entries\"]"), 5);
    ASSERT_EQ(entries_now(), 4);
    ASSERT_EQ(json_count(args, "d[\"bytes\"]"), 0);
  }
  ASSERT_EQ(ctl_run(&env, "purge --device %s", key_b), 0);
  ASSERT_TRUE(strstr(ctl_out, "purged 4 entries"));
  ASSERT_EQ(entries_now(), 0);

  /* --app */
  ctl_put(&env, &a1, "A", "game", 1, 0, 3);
  ctl_put(&env, &a1, "A", "tool", 2, 10, 2);
  ASSERT_EQ(ctl_run(&env, "purge --app tool"), 0);
  ASSERT_TRUE(strstr(ctl_out, "purged 2 entries"));
  ASSERT_EQ(json_count("list --app game", "len(d[\"entries\"])"), 3);
  ASSERT_EQ(json_count("list --app tool", "len(d[\"entries\"])"), 0);

  /* --older-than: 2 entries last used 40 days ago, 3 used just now. */
  snprintf(path, sizeof path, "%s/old.pcar", env.root);
  old_archive(path, &b, "old", 100, 2, 40 * 86400);
  ASSERT_EQ(ctl_run(&env, "import '%s'", path), 0);
  ASSERT_EQ(entries_now(), 5);
  ASSERT_EQ(json_count("list --app old", "min(e[\"last_used\"] for e in d[\"entries\"])") + 39 * 86400 <
                (uint64_t)time(NULL),
            1);
  ASSERT_EQ(ctl_run(&env, "purge --older-than 30d"), 0);
  ASSERT_TRUE(strstr(ctl_out, "purged 2 entries"));
  ASSERT_EQ(entries_now(), 3);
  ASSERT_EQ(json_count("purge --older-than 12h", "d[\"entries\"]"), 0);
  ASSERT_EQ(entries_now(), 3);

  /* Ages that do not fit in microseconds are refused, never wrapped into
   * a few hours that would purge fresh entries (issue 12). */
  ASSERT_EQ(ctl_run(&env, "purge --older-than 18446744073710"), 2);
  ASSERT_TRUE(strstr(ctl_err, "out of range"));
  ASSERT_EQ(ctl_run(&env, "purge --older-than 213503983d"), 2);
  ASSERT_EQ(entries_now(), 3);
  ASSERT_EQ(json_count("purge --older-than 18446744073709", "d[\"entries\"]"), 0);
  ASSERT_EQ(entries_now(), 3);

  /* An archive dated in 2500 is imported as used now: it cannot pin its
   * entries ahead of every fresh one. */
  {
    pcache__archive_writer *w;
    uint8_t *data;
    size_t size;
    const uint64_t y2500 = 16725225600ull;
    ASSERT_OK(pcache__archive_writer_new(&w));
    ctl_archive_add(w, &b, &b, 1, 200, "future", y2500, y2500);
    ASSERT_OK(pcache__archive_finish(w, &data, &size));
    pcache__archive_writer_free(w);
    snprintf(path, sizeof path, "%s/future.pcar", env.root);
    ctl_write_file(path, data, size);
    pcache__free(data);
    ASSERT_EQ(ctl_run(&env, "import '%s'", path), 0);
    ASSERT_LE(json_count("list --app future", "max(e[\"last_used\"] for e in d[\"entries\"])"),
              (uint64_t)time(NULL) + 1);
    ASSERT_LE(json_count("list --app future", "max(e[\"created\"] for e in d[\"entries\"])"),
              (uint64_t)time(NULL) + 1);
  }

  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
