/* Crafted store entries for the daemon benchmarks (delivery, ingest, RSS):
 * blobs with a valid pipeline-cache header for a made-up device, and
 * minimal valid pipeline descriptions that differ per index, so the
 * daemon's validation runs exactly as for real entries. */
#ifndef PCACHE_BENCH_ENTRY_H
#define PCACHE_BENCH_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include <pcache/pcache.h>

#include "proto/transport.h"
#include "common/devkey.h"
#include "common/hash.h"

/* The made-up device every crafted entry belongs to. */
void bench_entry_devkey(pcache__devkey *ret_key);

#define BENCH_DESC_MAX 128

/* The packed PipelineDesc of entry index (format_version 1, graphics, one
 * stage, one field set from index) into buf; returns its size. */
size_t bench_entry_desc(uint64_t index, uint8_t buf[BENCH_DESC_MAX]);

/* A blob of size bytes (>= 32) for key: header, then bytes derived from
 * index so no two entries are alike. */
void bench_entry_blob(const pcache__devkey *key, uint64_t index, uint8_t *blob, size_t size);

/* One Put item's storage. */
typedef struct bench_put_item {
  Pcachepb__PutItem item;
  uint8_t desc[BENCH_DESC_MAX];
  pcache__hash hash;
  Pcachepb__Module module;
  Pcachepb__Module *module_ptr;
  uint8_t *blob;
} bench_put_item;

/* Fills item for index with a blob of blob_size (malloc'ed; free item->blob). */
void bench_put_item_make(bench_put_item *item, const pcache__devkey *key, uint64_t index,
                         size_t blob_size);

/* The state hash of entry index. */
void bench_entry_hash(uint64_t index, pcache__hash *ret_hash);

/* Sends one Put of n items (device = key) and checks every item was
 * stored. Returns 0 or a negative code (transport failure or the daemon's
 * status, or the first item status that is not 0). */
int bench_put(pcache__transport *t, const pcache__devkey *key, bench_put_item *items, size_t n,
              uint32_t timeout_ms);

/* Socket path from --socket or the environment; dies when none. */
const char *bench_socket_path(const char *explicit_path);

/* Opens a transport (Hello as app), dying on failure. */
pcache__transport *bench_connect(const char *socket_path, const char *app);

#endif
