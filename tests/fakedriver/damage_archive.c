/* damage_archive IN OUT count|data: a copy of a pcache archive whose
 * entries' blobs (pipeline-binary containers, common/binblob.h) are
 * damaged, with their checksums made right again, so that only the
 * client's own checks (count) or the driver (data) can catch them:
 *   count  the binary count set to one past the bound
 *   data   the last byte of the last binary's data flipped
 * Test-only (tests/fakedriver/binary_test.sh). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/binblob.h"
#include "common/hash.h"
#include "proto/archive.h"

typedef struct ctx {
  pcache__archive_writer *w;
  int count_mode;
  int damaged;
} ctx;

static int on_device(void *c, const Pcachepb__DeviceInfo *info) {
  return pcache__archive_add_device(((ctx *)c)->w, info);
}
static int on_module(void *c, const pcache__hash *hash, const void *code, size_t size) {
  return pcache__archive_add_module(((ctx *)c)->w, hash, code, size);
}
static int on_entry(void *c, const pcache__archive_entry *entry) {
  ctx *x = c;
  pcache__archive_entry e = *entry;
  uint8_t *blob = malloc(e.blob_size ? e.blob_size : 1);
  int r;
  if (!blob)
    return -ENOMEM;
  memcpy(blob, e.blob, e.blob_size);
  if (x->count_mode && e.blob_size >= PCACHE_BINBLOB_FIXED)
    blob[44] = PCACHE_BINBLOB_MAX_BINARIES + 1;
  else if (e.blob_size > 0)
    blob[e.blob_size - 1] ^= 0xff;
  e.blob = blob;
  e.checksum = pcache__checksum64(blob, e.blob_size);
  r = pcache__archive_add_entry(x->w, &e);
  free(blob);
  x->damaged++;
  return r;
}

int main(int argc, char **argv) {
  pcache__archive_visitor v = {.device = on_device, .module = on_module, .entry = on_entry};
  ctx x = {0};
  uint8_t *in, *out;
  size_t n, out_size;
  long len;
  FILE *f;
  if (argc != 4 || (strcmp(argv[3], "count") && strcmp(argv[3], "data"))) {
    fprintf(stderr, "usage: damage_archive IN OUT count|data\n");
    return 2;
  }
  x.count_mode = !strcmp(argv[3], "count");
  if (!(f = fopen(argv[1], "rb")) || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) <= 0 ||
      fseek(f, 0, SEEK_SET) != 0 || !(in = malloc((size_t)len)) ||
      (n = fread(in, 1, (size_t)len, f)) != (size_t)len) {
    fprintf(stderr, "damage_archive: cannot read %s\n", argv[1]);
    return 1;
  }
  fclose(f);
  if (pcache__archive_writer_new(&x.w) != 0 || pcache__archive_read(in, n, &v, &x) != 0 ||
      pcache__archive_finish(x.w, &out, &out_size) != 0 || !(f = fopen(argv[2], "wb")) ||
      fwrite(out, 1, out_size, f) != out_size || fclose(f) != 0) {
    fprintf(stderr, "damage_archive: cannot rewrite %s\n", argv[1]);
    return 1;
  }
  pcache__archive_writer_free(x.w);
  pcache__free(out);
  free(in);
  printf("damaged=%d\n", x.damaged);
  return 0;
}
