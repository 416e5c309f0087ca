/* Export and Import: an exported device round-trips through purge and
 * import (in a bulk reply when large), and Import refuses each bad entry
 * with the same checks as Put. Program names (docs/archive.md) go with
 * the apps exported: pcached learnt this test's own executable name from
 * its Hello; an import records a name the store lacks, keeps the one it
 * has, and refuses one that could not be a file name. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "proto/archive.h"
#include "common/blob.h"
#include "test.h"
#include "wire.h"

static wire_reply import_bytes(int fd, const uint8_t *data, size_t size) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Import im = PCACHEPB__IMPORT__INIT;
  wire_reply rep;
  im.archive.data = (uint8_t *)data;
  im.archive.len = size;
  req.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  req.import = &im;
  wire_call(fd, &req, &rep);
  return rep;
}

/* it as an archive entry of app, filed under device key c. */
static void add_entry(pcache__archive_writer *w, const pcache__devkey *c, const wire_item *it,
                      const char *app) {
  pcache__archive_entry e;
  memset(&e, 0, sizeof e);
  e.device_key = *c;
  e.state_hash = it->hash;
  e.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS;
  e.app = app;
  e.blob = it->item.blob.data;
  e.blob_size = it->item.blob.len;
  e.checksum = pcache__checksum64(e.blob, e.blob_size);
  e.desc = it->item.desc.data;
  e.desc_size = it->item.desc.len;
  ASSERT_OK(pcache__archive_add_entry(w, &e));
}

/* The program records of an archive, "app=exe;" each, into out. */
static int on_program(void *ctx, const char *app, const char *exe) {
  char *out = ctx;
  size_t n = strlen(out);
  snprintf(out + n, 512 - n, "%s=%s;", app, exe);
  return 0;
}

static void programs_of(const uint8_t *data, size_t size, char out[512]) {
  pcache__archive_visitor v = {.program = on_program};
  out[0] = '\0';
  ASSERT_OK(pcache__archive_read(data, size, &v, out));
}

/* Exports app's entries and lists the archive's program records. */
static void export_programs(int fd, const char *app, char out[512]) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Export ex = PCACHEPB__EXPORT__INIT;
  const Pcachepb__ExportReply *er;
  wire_reply rep;
  ex.app = (char *)app;
  req.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
  req.export = &ex;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  er = rep.resp->export;
  if (rep.fd >= 0)
    programs_of(rep.map + er->archive_offset, er->archive_size, out);
  else
    programs_of(er->archive.data, er->archive.len, out);
  wire_reply_free(&rep);
}

/* app's export names exactly the program records want. */
static void expect_programs(int fd, const char *app, const char *want) {
  char progs[512];
  export_programs(fd, app, progs);
  ASSERT_STREQ(progs, want);
}

int main(void) {
  enum { N = 3 };
  test_env env;
  pcache__devkey a, b;
  wire_item items[N], other;
  wire_reply rep;
  uint8_t *archive;
  size_t archive_size;
  int fd;

  test_env_init(&env, "archive");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  fd = wire_open(&env, "exporter");
  wire_devkey(10, &a);
  wire_devkey(11, &b);
  for (int i = 0; i < N; i++)
    wire_item_make(&items[i], &a, 1000 + (uint64_t)i, 30000);
  wire_put(fd, &a, items, N, &rep);
  ASSERT_EQ(rep.resp->put->stored, N);
  wire_reply_free(&rep);
  wire_item_make(&other, &b, 2000, 100);
  wire_put(fd, &b, &other, 1, &rep);
  ASSERT_EQ(rep.resp->put->stored, 1);
  wire_reply_free(&rep);

  /* Export device a: 90 KB, so the archive comes in the memfd. */
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Export ex = PCACHEPB__EXPORT__INIT;
    const Pcachepb__ExportReply *er;
    ex.device_key.data = a.bytes;
    ex.device_key.len = 32;
    req.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
    req.export = &ex;
    wire_call(fd, &req, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    er = rep.resp->export;
    ASSERT_EQ(er->entries, N);
    ASSERT_GE(rep.fd, 0);
    ASSERT_EQ(er->archive.len, 0);
    ASSERT_TRUE(er->archive_offset + er->archive_size <= rep.map_size);
    archive_size = er->archive_size;
    archive = malloc(archive_size);
    memcpy(archive, rep.map + er->archive_offset, archive_size);
    wire_reply_free(&rep);
    {
      char progs[512];
      programs_of(archive, archive_size, progs);
      ASSERT_STREQ(progs, "exporter=test_daemon_archive;");
    }
  }

  /* Purge everything, import it back. */
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Purge p = PCACHEPB__PURGE__INIT;
    p.selector_case = PCACHEPB__PURGE__SELECTOR_ALL;
    p.all = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
    req.purge = &p;
    wire_call(fd, &req, &rep);
    ASSERT_EQ(rep.resp->purge->entries, N + 1);
    wire_reply_free(&rep);
  }
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->modules, 0); /* unreferenced modules go too */
  wire_reply_free(&rep);
  rep = import_bytes(fd, archive, archive_size);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->import->accepted, N);
  ASSERT_EQ(rep.resp->import->refused, 0);
  wire_reply_free(&rep);
  {
    pcache__hash hs[N];
    for (int i = 0; i < N; i++)
      hs[i] = items[i].hash;
    wire_get(fd, &a, hs, N, &rep);
    ASSERT_EQ(rep.resp->get->n_blobs, N);
    wire_reply_free(&rep);
  }
  free(archive);

  /* An archive with one good entry and two bad ones. */
  {
    pcache__archive_writer *w;
    wire_item bad_uuid, no_module, good; /* bad_uuid: a header of device a */
    pcache__devkey c;
    uint8_t *data;
    size_t size;
    wire_devkey(12, &c);
    wire_item_make(&good, &c, 3000, 64);
    wire_item_make(&bad_uuid, &c, 3001, 64);
    wire_item_make(&no_module, &c, 3002, 64);
    pcache__blob_write_header(&a, bad_uuid.item.blob.data);
    {
      /* no_module names SPIR-V 5, which nobody has. */
      pcache__hash m5;
      size_t n;
      wire_spirv(5, &n, &m5);
      free(no_module.item.desc.data);
      wire_desc(PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, 3002, &m5, &no_module.item.desc.data,
                &no_module.item.desc.len, &no_module.hash);
    }
    ASSERT_OK(pcache__archive_writer_new(&w));
    ASSERT_OK(pcache__archive_add_module(w, &good.module_hash, good.module.code.data,
                                         good.module.code.len));
    wire_item *list[3] = {&good, &bad_uuid, &no_module};
    for (int i = 0; i < 3; i++)
      add_entry(w, &c, list[i], "imported");
    /* Program names: one new, one the store knows otherwise, and two that
     * could not be file names. */
    ASSERT_OK(pcache__archive_add_program(w, "imported", "game.x86_64"));
    ASSERT_OK(pcache__archive_add_program(w, "exporter", "impostor"));
    ASSERT_OK(pcache__archive_add_program(w, "other", "../../bin/sh"));
    ASSERT_OK(pcache__archive_add_program(w, "", "empty-app"));
    ASSERT_OK(pcache__archive_finish(w, &data, &size));
    pcache__archive_writer_free(w);
    rep = import_bytes(fd, data, size);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->import->accepted, 1);
    ASSERT_EQ(rep.resp->import->refused, 4);
    ASSERT_EQ(rep.resp->import->n_problems, 4);
    ASSERT_ERR(rep.resp->import->problems[0]->status, PCACHE_EWRONG_DEVICE);
    ASSERT_ERR(rep.resp->import->problems[1]->status, PCACHE_EMISSING_MODULE);
    ASSERT_ERR(rep.resp->import->problems[2]->status, PCACHE_EBAD_SIZE);
    ASSERT_ERR(rep.resp->import->problems[3]->status, PCACHE_EBAD_SIZE);
    wire_reply_free(&rep);
    expect_programs(fd, "imported", "imported=game.x86_64;");
    expect_programs(fd, "exporter", "exporter=test_daemon_archive;");
    {
      char progs[512];
      export_programs(fd, "", progs); /* the whole store: both apps */
      ASSERT_TRUE(strstr(progs, "imported=game.x86_64;") &&
                  strstr(progs, "exporter=test_daemon_archive;"));
      ASSERT_EQ(strlen(progs), strlen("imported=game.x86_64;exporter=test_daemon_archive;"));
    }
    /* A name before its app's entries (as a hand-made archive may put it)
     * is kept once they are stored; a name for an app the archive stores
     * nothing of is not kept, so a later entry of that app finds none. */
    {
      const char *apps[2] = {"later", "nobody"};
      for (int k = 0; k < 2; k++) {
        pcache__archive_writer *w2;
        wire_item late;
        uint8_t *d2;
        size_t s2;
        wire_item_make(&late, &c, 3010 + (uint64_t)k, 64);
        ASSERT_OK(pcache__archive_writer_new(&w2));
        ASSERT_OK(pcache__archive_add_program(w2, apps[k], k == 0 ? "late.bin" : "ghost"));
        ASSERT_OK(pcache__archive_add_module(w2, &late.module_hash, late.module.code.data,
                                             late.module.code.len));
        if (k == 0)
          add_entry(w2, &c, &late, apps[k]);
        ASSERT_OK(pcache__archive_finish(w2, &d2, &s2));
        pcache__archive_writer_free(w2);
        rep = import_bytes(fd, d2, s2);
        ASSERT_EQ(rep.resp->status, 0);
        ASSERT_EQ(rep.resp->import->refused, 0);
        ASSERT_EQ(rep.resp->import->accepted, k == 0 ? 1 : 0);
        wire_reply_free(&rep);
        pcache__free(d2);
        if (k == 1) {
          /* nobody's entry, with no program record */
          wire_put_msg m;
          wire_put_msg_init(&m, &c, "test device", &late, 1);
          m.put.app = (char *)"nobody";
          wire_call(fd, &m.req, &rep);
          wire_put_msg_free(&m);
          ASSERT_EQ(rep.resp->put->stored, 1);
          wire_reply_free(&rep);
        }
        wire_item_free(&late);
      }
      expect_programs(fd, "later", "later=late.bin;");
      expect_programs(fd, "nobody", "");
    }
    /* A damaged archive is refused as a whole or record by record. */
    data[size / 2] ^= 0xff;
    rep = import_bytes(fd, data, size);
    ASSERT_TRUE(rep.resp->status != 0 || rep.resp->import->refused > 0);
    wire_reply_free(&rep);
    pcache__free(data);
    wire_item_free(&good);
    wire_item_free(&bad_uuid);
    wire_item_free(&no_module);
  }
  for (int i = 0; i < N; i++)
    wire_item_free(&items[i]);
  wire_item_free(&other);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
