/* export -> purge -> import gives back the same entries; damaged, cut and
 * foreign archives lose their bad entries and keep the good ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/alloc.h"
#include "common/blob.h"
#include "ctl_util.h"
#include "test.h"

static test_env env;

/* The entries of `list --json` as sorted lines of the fields an import
 * must keep, into path. */
static void snapshot(const char *path) {
  char doc[400];
  ASSERT_EQ(ctl_run(&env, "--json list"), 0);
  snprintf(doc, sizeof doc, "%s/doc.json", env.root);
  ctl_write_file(doc, ctl_out, strlen(ctl_out));
  ASSERT_EQ(ctl_sh("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                   "[print(x) for x in sorted(\"%%s %%s %%s %%s %%d %%s %%d\" %% (e[\"device_key\"], "
                   "e[\"state_hash\"], e[\"app\"], e[\"kind\"], e[\"blob_size\"], e[\"checksum\"], "
                   "e[\"created\"]) for e in d[\"entries\"])]' '%s' > '%s'",
                   doc, path),
            0);
}

static size_t lines(const char *path) {
  size_t size, n;
  char *text = (char *)ctl_read_file(path, &size);
  n = ctl_count(text, "\n");
  free(text);
  return n;
}

static uint64_t list_count(void) {
  ASSERT_EQ(ctl_run(&env, "list"), 0);
  return ctl_count(ctl_out, "graphics") + ctl_count(ctl_out, "compute");
}

int main(void) {
  pcache__devkey a, b;
  char before[400], after[400], file[400], file2[400], cut[400], bad[400], foreign[400];
  uint8_t *data;
  size_t size;
  struct stat st;

  test_env_init(&env, "ctl-archive");
  ctl_start(&env);
  ctl_key(0xa1, 100, &a);
  ctl_key(0xb2, 7, &b);
  ctl_put(&env, &a, "A", "game", 1, 0, 4);
  ctl_put(&env, &a, "A", "tool", 2, 10, 2);
  ctl_put(&env, &b, "B", "game", 1, 20, 3);
  snprintf(before, sizeof before, "%s/before.txt", env.root);
  snprintf(after, sizeof after, "%s/after.txt", env.root);
  snprintf(file, sizeof file, "%s/all.pcar", env.root);
  snprintf(file2, sizeof file2, "%s/stdout.pcar", env.root);
  snapshot(before);
  ASSERT_EQ(lines(before), 9);

  /* Usage. */
  ASSERT_EQ(ctl_run(&env, "export"), 2);
  ASSERT_EQ(ctl_run(&env, "import"), 2);
  ASSERT_EQ(ctl_run(&env, "import a b"), 2);
  ASSERT_EQ(ctl_run(&env, "import '%s/missing'", env.root), 1);

  /* export -> purge --all -> import: the same entries. */
  ASSERT_EQ(ctl_run(&env, "export '%s'", file), 0);
  ASSERT_TRUE(strstr(ctl_out, "exported 9 entries"));
  ASSERT_EQ(stat(file, &st), 0);
  data = ctl_read_file(file, &size);
  ASSERT_TRUE(memcmp(data, "PCACHEAR", 8) == 0);
  free(data);
  /* No temp file left beside it. */
  ASSERT_EQ(ctl_sh("ls '%s' | grep -q tmp", env.root), 1);

  ASSERT_EQ(ctl_run(&env, "purge --all"), 0);
  ASSERT_EQ(list_count(), 0);
  ASSERT_EQ(ctl_run(&env, "import '%s'", file), 0);
  ASSERT_TRUE(strstr(ctl_out, "9 new entries imported, 0 already stored, 0 refused"));
  snapshot(after);
  ASSERT_EQ(ctl_sh("cmp -s '%s' '%s'", before, after), 0);
  /* The same archive again: nothing in it is new, and it says so. */
  ASSERT_EQ(ctl_run(&env, "import '%s'", file), 0);
  ASSERT_TRUE(strstr(ctl_out, "0 new entries imported, 9 already stored, 0 refused"));
  ASSERT_EQ(list_count(), 9);
  {
    char args[512];
    snprintf(args, sizeof args, "import '%s'", file);
    ctl_json_check(&env, 0, args,
                   "d[\"accepted\"] == 9 and d[\"new\"] == 0 and d[\"present\"] == 9");
  }

  /* Through a pipe: export - and import - (JSON summaries). */
  ASSERT_EQ(ctl_run(&env, "export - --app tool > '%s'", file2), 0);
  ASSERT_TRUE(strstr(ctl_err, "exported 2 entries"));
  ASSERT_EQ(ctl_run(&env, "purge --app tool"), 0);
  ASSERT_EQ(list_count(), 7);
  ASSERT_EQ(ctl_run(&env, "--json import - < '%s'", file2), 0);
  ASSERT_TRUE(strstr(ctl_out, "\"accepted\": 2"));
  ASSERT_EQ(list_count(), 9);

  /* --device filter on export. */
  {
    char uuid_b[37];
    ctl_uuid_text(0xb2, uuid_b);
    ASSERT_EQ(ctl_run(&env, "export '%s' --device %s", file2, uuid_b), 0);
    ASSERT_TRUE(strstr(ctl_out, "exported 3 entries"));
  }

  /* A damaged entry record: only it is refused. The archive written by
   * export holds records in an order we do not rely on: damage the last
   * entry record (program records may follow it) and expect exactly one
   * entry fewer. */
  data = ctl_read_file(file, &size);
  {
    size_t off, last_entry = 0;
    /* The framing of docs/archive.md: a 16-byte header, then u32 type |
     * u32 length | u64 checksum | payload per record. */
    for (off = 16; off < size; off += 16 + pcache__le32(data + off + 4))
      if (pcache__le32(data + off) == 3)
        last_entry = off;
    ASSERT_EQ(off, size);
    ASSERT_TRUE(last_entry > 0);
    off = last_entry;
    data[off + 16 + 3] ^= 0x20;
    snprintf(bad, sizeof bad, "%s/bad.pcar", env.root);
    ctl_write_file(bad, data, size);
    data[off + 16 + 3] ^= 0x20;

    /* Cut: keep everything before the last entry record, drop the rest. */
    snprintf(cut, sizeof cut, "%s/cut.pcar", env.root);
    ctl_write_file(cut, data, off + 20);
  }
  free(data);

  ASSERT_EQ(ctl_run(&env, "purge --all"), 0);
  ASSERT_EQ(ctl_run(&env, "import '%s'", bad), 1);
  ASSERT_EQ(list_count(), 8);
  ASSERT_EQ(ctl_run(&env, "purge --all"), 0);
  ASSERT_EQ(ctl_run(&env, "import '%s'", cut), 1);
  ASSERT_EQ(list_count(), 8);
  ASSERT_EQ(ctl_run(&env, "--json import '%s'", cut), 1);
  {
    char doc[400];
    snprintf(doc, sizeof doc, "%s/doc.json", env.root);
    ctl_write_file(doc, ctl_out, strlen(ctl_out));
    ASSERT_EQ(ctl_sh("python3 -m json.tool '%s' >/dev/null", doc), 0);
  }

  /* Foreign device: an entry filed under A whose blob was made for B is
   * refused; the good entry beside it is kept. */
  {
    pcache__archive_writer *w;
    Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
    uint8_t *archive;
    size_t archive_size;
    ASSERT_OK(pcache__archive_writer_new(&w));
    info.key.data = a.bytes;
    info.key.len = sizeof a.bytes;
    info.name = (char *)"A";
    ASSERT_OK(pcache__archive_add_device(w, &info));
    ctl_archive_add(w, &a, &a, 1, 500, "shipped", (uint64_t)time(NULL), (uint64_t)time(NULL));
    ctl_archive_add(w, &a, &b, 1, 501, "shipped", (uint64_t)time(NULL), (uint64_t)time(NULL));
    ASSERT_OK(pcache__archive_finish(w, &archive, &archive_size));
    pcache__archive_writer_free(w);
    snprintf(foreign, sizeof foreign, "%s/foreign.pcar", env.root);
    ctl_write_file(foreign, archive, archive_size);
    pcache__free(archive);
  }
  ASSERT_EQ(ctl_run(&env, "purge --all"), 0);
  ASSERT_EQ(ctl_run(&env, "import '%s'", foreign), 1);
  ASSERT_TRUE(strstr(ctl_out, "1 new entry imported, 0 already stored, 1 refused"));
  ASSERT_TRUE(strstr(ctl_out, "WRONG_"));
  ASSERT_EQ(list_count(), 1);
  ASSERT_EQ(ctl_run(&env, "list --app shipped"), 0);
  {
    pcache__hash h;
    char hash[33];
    ctl_state_hash(1, 500, &h);
    pcache__hash_format(&h, hash);
    ASSERT_TRUE(strstr(ctl_out, hash));
  }

  /* --device UUID naming two device keys: their exports are merged into
   * one archive. */
  {
    pcache__devkey a2;
    char uuid_a[37], merged[400];
    ctl_key(0xa1, 101, &a2);
    ctl_uuid_text(0xa1, uuid_a);
    ctl_put(&env, &a2, "A", "game", 1, 600, 2);
    snprintf(merged, sizeof merged, "%s/merged.pcar", env.root);
    ASSERT_EQ(ctl_run(&env, "export '%s' --device %s", merged, uuid_a), 0);
    ASSERT_TRUE(strstr(ctl_out, "exported 3 entries"));
    ASSERT_EQ(ctl_run(&env, "purge --all"), 0);
    ASSERT_EQ(ctl_run(&env, "import '%s'", merged), 0);
    ASSERT_TRUE(strstr(ctl_out, "3 new entries imported, 0 already stored, 0 refused"));
    ASSERT_EQ(list_count(), 3);
    ASSERT_EQ(ctl_run(&env, "purge --device %s", uuid_a), 0);
    ASSERT_TRUE(strstr(ctl_out, "purged 3 entries"));
    ctl_put(&env, &a, "A", "shipped", 1, 500, 1);
  }

  /* Not an archive at all. */
  ctl_write_file(foreign, "hello, world, this is not an archive", 36);
  ASSERT_EQ(ctl_run(&env, "import '%s'", foreign), 1);
  ASSERT_EQ(list_count(), 1);

  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
