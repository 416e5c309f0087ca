/* bench_rekey - a simulated driver update for the replay benchmark
 * (bench/run-replay.sh, docs/replay.md): copies a pcache archive
 * (`pcachectl export`) with the driver version in every device key moved
 * by -DELTA (default 1, so the copy looks made by the previous driver).
 * Imported into an empty store, the copy is what a driver update leaves:
 * every entry under a key the installed driver supersedes.
 *
 *   bench_rekey [--delta N] IN OUT
 *
 * Only the key changes: blobs, descriptions and modules are copied as they
 * are, so the replay works from exactly what the app stored. Prints
 * key=value lines (devices, modules, entries, programs). The input is mapped and
 * the output streamed, so an archive of any size takes little memory. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/bytes.h"
#include "proto/archive.h"

typedef struct rekey {
  pcache__archive_writer *w;
  int32_t delta;
  uint64_t devices, modules, entries, programs, bad;
} rekey;

static void move_version(const rekey *rk, uint8_t key[PCACHE_DEVKEY_SIZE]) {
  pcache__devkey k;
  memcpy(k.bytes, key, PCACHE_DEVKEY_SIZE);
  pcache__put_le32(key + 24, pcache__devkey_driver_version(&k) - (uint32_t)rk->delta);
}

static int on_device(void *ctx, const Pcachepb__DeviceInfo *info) {
  rekey *rk = ctx;
  Pcachepb__DeviceInfo copy = *info;
  uint8_t key[PCACHE_DEVKEY_SIZE];
  if (info->key.len != PCACHE_DEVKEY_SIZE)
    return PCACHE_EARCHIVE;
  memcpy(key, info->key.data, PCACHE_DEVKEY_SIZE);
  move_version(rk, key);
  copy.key.data = key;
  rk->devices++;
  return pcache__archive_add_device(rk->w, &copy);
}

static int on_module(void *ctx, const pcache__hash *h, const void *code, size_t size) {
  rekey *rk = ctx;
  rk->modules++;
  return pcache__archive_add_module(rk->w, h, code, size);
}

static int on_entry(void *ctx, const pcache__archive_entry *e) {
  rekey *rk = ctx;
  pcache__archive_entry copy = *e;
  move_version(rk, copy.device_key.bytes);
  rk->entries++;
  return pcache__archive_add_entry(rk->w, &copy);
}

/* Program names are not per device: copied as they are. */
static int on_program(void *ctx, const char *app, const char *exe) {
  rekey *rk = ctx;
  rk->programs++;
  return pcache__archive_add_program(rk->w, app, exe);
}

static int on_bad(void *ctx, uint64_t index, int err) {
  rekey *rk = ctx;
  fprintf(stderr, "<4>bench_rekey: record %" PRIu64 " skipped: %s\n", index, pcache_strerror(err));
  rk->bad++;
  return 0;
}

static int usage(FILE *f, int code) {
  fprintf(f, "usage: bench_rekey [--delta N] IN OUT\n"
             "Copies the pcache archive IN to OUT with every device key's driver version\n"
             "lowered by N (default 1): a simulated driver update (docs/replay.md).\n");
  return code;
}

int main(int argc, char **argv) {
  rekey rk = {.delta = 1};
  pcache__archive_visitor v = {on_device, on_module, on_entry, on_bad, on_program};
  const char *in_path = NULL, *out_path = NULL;
  struct stat st;
  uint8_t *no_data;
  size_t out_size = 0;
  void *in = MAP_FAILED;
  int in_fd = -1, out_fd = -1, r, code = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0)
      return usage(stdout, 0);
    if (strcmp(argv[i], "--delta") == 0 && i + 1 < argc) {
      char *end;
      long d = strtol(argv[++i], &end, 10);
      if (*end || d < -1000000 || d > 1000000 || d == 0)
        return usage(stderr, 2);
      rk.delta = (int32_t)d;
    } else if (!in_path) {
      in_path = argv[i];
    } else if (!out_path) {
      out_path = argv[i];
    } else {
      return usage(stderr, 2);
    }
  }
  if (!in_path || !out_path)
    return usage(stderr, 2);
  if ((in_fd = open(in_path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(in_fd, &st) < 0) {
    fprintf(stderr, "<3>bench_rekey: %s: %s\n", in_path, strerror(errno));
    goto out;
  }
  if (st.st_size == 0 ||
      (in = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, in_fd, 0)) == MAP_FAILED) {
    fprintf(stderr, "<3>bench_rekey: %s: %s\n", in_path,
            st.st_size ? strerror(errno) : "empty file");
    goto out;
  }
  if ((out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
    fprintf(stderr, "<3>bench_rekey: %s: %s\n", out_path, strerror(errno));
    goto out;
  }
  if ((r = pcache__archive_writer_new_fd(out_fd, &rk.w)) < 0 ||
      (r = pcache__archive_read(in, (size_t)st.st_size, &v, &rk)) < 0 ||
      (r = pcache__archive_finish(rk.w, &no_data, &out_size)) < 0) {
    fprintf(stderr, "<3>bench_rekey: %s -> %s: %s\n", in_path, out_path, pcache_strerror(r));
    goto out;
  }
  printf("rekey_devices=%" PRIu64 "\nrekey_modules=%" PRIu64 "\nrekey_entries=%" PRIu64
         "\nrekey_programs=%" PRIu64 "\nrekey_bad_records=%" PRIu64 "\nrekey_bytes=%zu\n",
         rk.devices, rk.modules, rk.entries, rk.programs, rk.bad, out_size);
  code = rk.entries ? 0 : 1;
  if (!rk.entries)
    fprintf(stderr, "<3>bench_rekey: %s has no entries\n", in_path);
out:
  pcache__archive_writer_free(rk.w);
  if (in != MAP_FAILED)
    munmap(in, (size_t)st.st_size);
  if (in_fd >= 0)
    close(in_fd);
  if (out_fd >= 0 && close(out_fd) < 0 && code == 0) {
    fprintf(stderr, "<3>bench_rekey: %s: %s\n", out_path, strerror(errno));
    code = 1;
  }
  return code;
}
