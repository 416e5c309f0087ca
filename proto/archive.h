/* The portable cache archive (docs/archive.md): what `pcachectl export`
 * writes and `pcachectl import` reads, built and parsed by the daemon's
 * Export and Import requests. Versioned and checksummed so a cache can ship
 * with a game or move between machines; a damaged record loses only itself. */
#ifndef PCACHE_COMMON_ARCHIVE_H
#define PCACHE_COMMON_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "proto/pcache.pb-c.h"

typedef struct pcache__archive_entry {
  pcache__devkey device_key;
  pcache__hash state_hash;
  uint32_t kind;                /* Pcachepb__EntryKind */
  const char *app;
  const uint8_t *blob;
  size_t blob_size;
  uint64_t checksum;            /* XXH3-64 of blob, as stored */
  const uint8_t *desc;          /* canonical packed PipelineDesc */
  size_t desc_size;
  uint64_t created, last_used, hits, compile_ns;
} pcache__archive_entry;

typedef struct pcache__archive_writer pcache__archive_writer;

/* Returns 0 or -ENOMEM. */
int pcache__archive_writer_new(pcache__archive_writer **ret_writer);
/* A writer that streams: the header and each record are written to fd
 * (from offset 0, with pwrite) as they are added, so the writer holds one
 * record at a time, never the archive. fd stays the caller's. Returns 0,
 * -ENOMEM or the write's -errno (as do the adds then). */
int pcache__archive_writer_new_fd(int fd, pcache__archive_writer **ret_writer);
void pcache__archive_writer_free(pcache__archive_writer *writer);

/* Add records. Devices should come before their entries, modules before the
 * entries that name them (the reader does not require it). The data is
 * copied. Return 0 or -ENOMEM. */
int pcache__archive_add_device(pcache__archive_writer *writer, const Pcachepb__DeviceInfo *info);
int pcache__archive_add_module(pcache__archive_writer *writer, const pcache__hash *hash,
                               const void *code, size_t size);
int pcache__archive_add_entry(pcache__archive_writer *writer, const pcache__archive_entry *entry);
/* A program record: app's pipelines were built by an executable named exe
 * (its basename). The writer does not judge the names; the importer does. */
int pcache__archive_add_program(pcache__archive_writer *writer, const char *app, const char *exe);

/* Ends the archive and hands its bytes (pcache__malloc'ed) to the caller;
 * a streaming writer gives NULL and the archive's size in its file.
 * The writer is spent afterwards; free it. Returns 0 or -ENOMEM. */
int pcache__archive_finish(pcache__archive_writer *writer, uint8_t **ret_data, size_t *ret_size);

/* Callbacks for pcache__archive_read. Pointers are valid during the call
 * only. A callback returning nonzero stops the read with that value. */
typedef struct pcache__archive_visitor {
  int (*device)(void *ctx, const Pcachepb__DeviceInfo *info);
  int (*module)(void *ctx, const pcache__hash *hash, const void *code, size_t size);
  int (*entry)(void *ctx, const pcache__archive_entry *entry);
  /* A record that failed its checksum or does not parse; err says how.
   * The reader skips it and goes on when it can find the next record. */
  int (*bad_record)(void *ctx, uint64_t index, int err);
  /* A program record (pcache__archive_add_program); app and exe are
   * NUL-terminated, possibly empty, and unchecked. NULL skips them. */
  int (*program)(void *ctx, const char *app, const char *exe);
} pcache__archive_visitor;

/*
 * pcache__archive_read - walks every record of an archive. Checks the
 * magic, the format version and each record's checksum; it does not
 * validate blobs against devices (the importer does, exactly as for Put).
 * Returns 0 when the whole archive was read (bad records reported through
 * bad_record), PCACHE_EARCHIVE when the file header is damaged or the
 * archive is truncated (records before the damage were visited),
 * PCACHE_EARCHIVE_VERSION for an unknown version, or a callback's value.
 */
int pcache__archive_read(const void *data, size_t size, const pcache__archive_visitor *visitor,
                         void *ctx);

/* Where a read stopped, for pcache__archive_read_from: zero it to start
 * at the first record. */
typedef struct pcache_archive_cursor {
  size_t off;                              /* the next record's offset */
  uint64_t index, devices, modules, entries; /* records read so far */
} pcache_archive_cursor;

/*
 * pcache__archive_read_from - pcache__archive_read from *cursor on, so
 * that a reader can take an archive in slices: when a callback returns
 * nonzero the read stops with that value and *cursor is on the record
 * after the one visited; calling again with it goes on from there. The
 * same checks and return values as pcache__archive_read.
 */
int pcache__archive_read_from(const void *data, size_t size, pcache_archive_cursor *cursor,
                              const pcache__archive_visitor *visitor, void *ctx);

#endif
