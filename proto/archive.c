/* The portable cache archive (docs/archive.md has the format).
 *
 * The framing is binary and fixed so a reader can skip what it cannot
 * trust: every record states its type and length and carries a checksum
 * over both and its payload, so one damaged record costs only itself. The
 * payloads are protobuf, so fields can grow without a new archive version. */
#include "common/bytes.h"
#include "archive.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/archive.pb-c.h"

#define ARCHIVE_MAGIC "PCACHEAR"
#define ARCHIVE_VERSION 1u
#define ARCHIVE_FILE_HEADER_SIZE 16
#define ARCHIVE_RECORD_HEADER_SIZE 16

enum archive_record_type {
  ARCHIVE_RECORD_DEVICE = 1,
  ARCHIVE_RECORD_MODULE = 2,
  ARCHIVE_RECORD_ENTRY = 3,
  ARCHIVE_RECORD_END = 4,
  ARCHIVE_RECORD_PROGRAM = 5, /* added within version 1: older readers skip it */
};

struct pcache__archive_writer {
  uint8_t *data;
  size_t size, capacity;
  uint64_t records, devices, modules, entries;
  int failed; /* an earlier add ran out of memory: the archive is unusable */
  int fd;     /* streaming: each record goes to fd at `written`, data holds one */
  uint64_t written;
};

/* Streaming: what data holds goes to the file, and data is reused. */
static int writer_flush(pcache__archive_writer *writer) {
  size_t done = 0;
  if (writer->fd < 0)
    return 0;
  while (done < writer->size) {
    ssize_t n = pwrite(writer->fd, writer->data + done, writer->size - done,
                       (off_t)(writer->written + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      writer->failed = 1;
      return n < 0 ? -errno : -EIO;
    }
    done += (size_t)n;
  }
  writer->written += writer->size;
  writer->size = 0;
  return 0;
}

/* The checksum covers type and length too, so a flipped type byte cannot
 * turn an entry into something else unnoticed. */
static uint64_t record_checksum(const uint8_t header[8], const uint8_t *payload, size_t size) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, header, 8);
  XXH3_64bits_update(&state, payload, size);
  return XXH3_64bits_digest(&state);
}

static int writer_reserve(pcache__archive_writer *writer, size_t more) {
  size_t need, cap;
  uint8_t *data;
  if (writer->failed)
    return -ENOMEM;
  if (more > SIZE_MAX - writer->size)
    goto out_fail;
  need = writer->size + more;
  if (need <= writer->capacity)
    return 0;
  cap = writer->capacity ? writer->capacity : 4096;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  data = pcache__realloc(writer->data, cap);
  if (!data)
    goto out_fail;
  writer->data = data;
  writer->capacity = cap;
  return 0;

out_fail:
  writer->failed = 1;
  return -ENOMEM;
}

/* Appends one record whose payload is message, packed in place. */
static int writer_add(pcache__archive_writer *writer, uint32_t type,
                      const ProtobufCMessage *message) {
  size_t size = protobuf_c_message_get_packed_size(message);
  uint8_t *header, *payload;
  int r;
  if (size > UINT32_MAX) {
    writer->failed = 1;
    return PCACHE_EBAD_SIZE;
  }
  r = writer_reserve(writer, ARCHIVE_RECORD_HEADER_SIZE + size);
  if (r < 0)
    return r;
  header = writer->data + writer->size;
  payload = header + ARCHIVE_RECORD_HEADER_SIZE;
  pcache__put_le32(header, type);
  pcache__put_le32(header + 4, (uint32_t)size);
  protobuf_c_message_pack(message, payload);
  pcache__put_le64(header + 8, record_checksum(header, payload, size));
  writer->size += ARCHIVE_RECORD_HEADER_SIZE + size;
  writer->records++;
  return writer_flush(writer);
}

int pcache__archive_writer_new(pcache__archive_writer **ret_writer) {
  return pcache__archive_writer_new_fd(-1, ret_writer);
}

int pcache__archive_writer_new_fd(int fd, pcache__archive_writer **ret_writer) {
  pcache__archive_writer *writer = pcache__calloc(1, sizeof *writer);
  int r;
  if (!writer)
    return -ENOMEM;
  writer->fd = fd;
  if (writer_reserve(writer, ARCHIVE_FILE_HEADER_SIZE) < 0) {
    pcache__free(writer);
    return -ENOMEM;
  }
  memcpy(writer->data, ARCHIVE_MAGIC, 8);
  pcache__put_le32(writer->data + 8, ARCHIVE_VERSION);
  pcache__put_le32(writer->data + 12, 0); /* flags: none defined */
  writer->size = ARCHIVE_FILE_HEADER_SIZE;
  if ((r = writer_flush(writer)) < 0) {
    pcache__archive_writer_free(writer);
    return r;
  }
  *ret_writer = writer;
  return 0;
}

void pcache__archive_writer_free(pcache__archive_writer *writer) {
  if (!writer)
    return;
  pcache__free(writer->data);
  pcache__free(writer);
}

int pcache__archive_add_device(pcache__archive_writer *writer, const Pcachepb__DeviceInfo *info) {
  int r = writer_add(writer, ARCHIVE_RECORD_DEVICE, &info->base);
  if (r == 0)
    writer->devices++;
  return r;
}

int pcache__archive_add_module(pcache__archive_writer *writer, const pcache__hash *hash,
                               const void *code, size_t size) {
  Pcachepb__Module module = PCACHEPB__MODULE__INIT;
  int r;
  /* protobuf-c's pack only reads through these pointers. */
  module.hash.data = (uint8_t *)hash->bytes;
  module.hash.len = PCACHE_HASH_SIZE;
  module.code.data = (uint8_t *)code;
  module.code.len = size;
  r = writer_add(writer, ARCHIVE_RECORD_MODULE, &module.base);
  if (r == 0)
    writer->modules++;
  return r;
}

int pcache__archive_add_entry(pcache__archive_writer *writer, const pcache__archive_entry *entry) {
  Pcachepb__ArchiveEntry msg = PCACHEPB__ARCHIVE_ENTRY__INIT;
  int r;
  msg.device_key.data = (uint8_t *)entry->device_key.bytes;
  msg.device_key.len = PCACHE_DEVKEY_SIZE;
  msg.state_hash.data = (uint8_t *)entry->state_hash.bytes;
  msg.state_hash.len = PCACHE_HASH_SIZE;
  msg.kind = entry->kind;
  msg.app = (char *)(entry->app ? entry->app : "");
  msg.blob.data = (uint8_t *)entry->blob;
  msg.blob.len = entry->blob_size;
  msg.checksum = entry->checksum;
  msg.desc.data = (uint8_t *)entry->desc;
  msg.desc.len = entry->desc_size;
  msg.created = entry->created;
  msg.last_used = entry->last_used;
  msg.hits = entry->hits;
  msg.compile_ns = entry->compile_ns;
  r = writer_add(writer, ARCHIVE_RECORD_ENTRY, &msg.base);
  if (r == 0)
    writer->entries++;
  return r;
}

int pcache__archive_add_program(pcache__archive_writer *writer, const char *app, const char *exe) {
  Pcachepb__ArchiveProgram msg = PCACHEPB__ARCHIVE_PROGRAM__INIT;
  msg.app = (char *)app;
  msg.exe = (char *)exe;
  return writer_add(writer, ARCHIVE_RECORD_PROGRAM, &msg.base);
}

int pcache__archive_finish(pcache__archive_writer *writer, uint8_t **ret_data, size_t *ret_size) {
  Pcachepb__ArchiveEnd end = PCACHEPB__ARCHIVE_END__INIT;
  int r;
  if (writer->failed)
    return -ENOMEM;
  end.records = writer->records;
  end.devices = writer->devices;
  end.modules = writer->modules;
  end.entries = writer->entries;
  r = writer_add(writer, ARCHIVE_RECORD_END, &end.base);
  if (r < 0)
    return r;
  if (writer->fd >= 0) {
    *ret_data = NULL;
    *ret_size = (size_t)writer->written;
  } else {
    *ret_data = writer->data;
    *ret_size = writer->size;
  }
  if (writer->fd >= 0)
    pcache__free(writer->data);
  writer->data = NULL;
  writer->size = writer->capacity = 0;
  writer->failed = 1; /* spent */
  return 0;
}

/* ------------------------------------------------------------------ reader */

static int bad(const pcache__archive_visitor *visitor, void *ctx, uint64_t index, int err) {
  return visitor->bad_record ? visitor->bad_record(ctx, index, err) : 0;
}

static int visit_device(const pcache__archive_visitor *visitor, void *ctx, uint64_t index,
                        const uint8_t *payload, size_t size) {
  Pcachepb__DeviceInfo *info = pcachepb__device_info__unpack(&pcache__pb_allocator, size, payload);
  int r;
  if (!info)
    return bad(visitor, ctx, index, PCACHE_EPROTO);
  if (info->key.len != PCACHE_DEVKEY_SIZE)
    r = bad(visitor, ctx, index, PCACHE_EBAD_KEY);
  else
    r = visitor->device ? visitor->device(ctx, info) : 0;
  pcachepb__device_info__free_unpacked(info, &pcache__pb_allocator);
  return r;
}

static int visit_module(const pcache__archive_visitor *visitor, void *ctx, uint64_t index,
                        const uint8_t *payload, size_t size) {
  Pcachepb__Module *module = pcachepb__module__unpack(&pcache__pb_allocator, size, payload);
  pcache__hash hash;
  int r;
  if (!module)
    return bad(visitor, ctx, index, PCACHE_EPROTO);
  if (module->hash.len != PCACHE_HASH_SIZE) {
    r = bad(visitor, ctx, index, PCACHE_EBAD_KEY);
  } else {
    memcpy(hash.bytes, module->hash.data, PCACHE_HASH_SIZE);
    r = visitor->module ? visitor->module(ctx, &hash, module->code.data, module->code.len) : 0;
  }
  pcachepb__module__free_unpacked(module, &pcache__pb_allocator);
  return r;
}

static int visit_entry(const pcache__archive_visitor *visitor, void *ctx, uint64_t index,
                       const uint8_t *payload, size_t size) {
  Pcachepb__ArchiveEntry *msg =
      pcachepb__archive_entry__unpack(&pcache__pb_allocator, size, payload);
  pcache__archive_entry entry;
  int r;
  if (!msg)
    return bad(visitor, ctx, index, PCACHE_EPROTO);
  if (msg->device_key.len != PCACHE_DEVKEY_SIZE || msg->state_hash.len != PCACHE_HASH_SIZE) {
    r = bad(visitor, ctx, index, PCACHE_EBAD_KEY);
    goto out_free;
  }
  memset(&entry, 0, sizeof entry);
  memcpy(entry.device_key.bytes, msg->device_key.data, PCACHE_DEVKEY_SIZE);
  memcpy(entry.state_hash.bytes, msg->state_hash.data, PCACHE_HASH_SIZE);
  entry.kind = msg->kind;
  entry.app = msg->app ? msg->app : "";
  entry.blob = msg->blob.data;
  entry.blob_size = msg->blob.len;
  entry.checksum = msg->checksum;
  entry.desc = msg->desc.data;
  entry.desc_size = msg->desc.len;
  entry.created = msg->created;
  entry.last_used = msg->last_used;
  entry.hits = msg->hits;
  entry.compile_ns = msg->compile_ns;
  r = visitor->entry ? visitor->entry(ctx, &entry) : 0;

out_free:
  pcachepb__archive_entry__free_unpacked(msg, &pcache__pb_allocator);
  return r;
}

static int visit_program(const pcache__archive_visitor *visitor, void *ctx, uint64_t index,
                         const uint8_t *payload, size_t size) {
  Pcachepb__ArchiveProgram *msg =
      pcachepb__archive_program__unpack(&pcache__pb_allocator, size, payload);
  int r;
  if (!msg)
    return bad(visitor, ctx, index, PCACHE_EPROTO);
  r = visitor->program ? visitor->program(ctx, msg->app ? msg->app : "", msg->exe ? msg->exe : "")
                       : 0;
  pcachepb__archive_program__free_unpacked(msg, &pcache__pb_allocator);
  return r;
}

int pcache__archive_read(const void *data, size_t size, const pcache__archive_visitor *visitor,
                         void *ctx) {
  pcache_archive_cursor cursor = {0};
  return pcache__archive_read_from(data, size, &cursor, visitor, ctx);
}

int pcache__archive_read_from(const void *data, size_t size, pcache_archive_cursor *cursor,
                              const pcache__archive_visitor *visitor, void *ctx) {
  const uint8_t *p = data;
  int r;

  if (size < ARCHIVE_FILE_HEADER_SIZE || memcmp(p, ARCHIVE_MAGIC, 8) != 0)
    return PCACHE_EARCHIVE;
  if (pcache__le32(p + 8) != ARCHIVE_VERSION)
    return PCACHE_EARCHIVE_VERSION;
  /* Flags are reserved: a writer that sets one means something this reader
   * cannot honour. */
  if (pcache__le32(p + 12) != 0)
    return PCACHE_EARCHIVE_VERSION;
  if (cursor->off < ARCHIVE_FILE_HEADER_SIZE)
    cursor->off = ARCHIVE_FILE_HEADER_SIZE;
  if (cursor->off > size)
    return PCACHE_EARCHIVE;

  for (;;) {
    const uint8_t *header = p + cursor->off, *payload;
    uint64_t index = cursor->index;
    uint32_t type, length;

    if (size - cursor->off < ARCHIVE_RECORD_HEADER_SIZE)
      return PCACHE_EARCHIVE; /* ended without an end record: truncated */
    type = pcache__le32(header);
    length = pcache__le32(header + 4);
    /* A length past the end is either truncation or a damaged length field;
     * either way nothing after it can be found. */
    if (length > size - cursor->off - ARCHIVE_RECORD_HEADER_SIZE)
      return PCACHE_EARCHIVE;
    payload = header + ARCHIVE_RECORD_HEADER_SIZE;
    /* Past this record before visiting it: a callback that stops the read
     * leaves the cursor on the next one. */
    cursor->off += ARCHIVE_RECORD_HEADER_SIZE + (size_t)length;
    cursor->index++;

    if (record_checksum(header, payload, length) != pcache__le64(header + 8)) {
      r = bad(visitor, ctx, index, PCACHE_ECHECKSUM);
      if (r)
        return r;
      continue;
    }

    switch (type) {
    case ARCHIVE_RECORD_DEVICE:
      cursor->devices++;
      r = visit_device(visitor, ctx, index, payload, length);
      break;
    case ARCHIVE_RECORD_MODULE:
      cursor->modules++;
      r = visit_module(visitor, ctx, index, payload, length);
      break;
    case ARCHIVE_RECORD_ENTRY:
      cursor->entries++;
      r = visit_entry(visitor, ctx, index, payload, length);
      break;
    case ARCHIVE_RECORD_PROGRAM:
      r = visit_program(visitor, ctx, index, payload, length);
      break;
    case ARCHIVE_RECORD_END: {
      Pcachepb__ArchiveEnd *end =
          pcachepb__archive_end__unpack(&pcache__pb_allocator, length, payload);
      int ok;
      if (!end)
        return PCACHE_EARCHIVE;
      /* Records that failed their checksum are counted as the writer wrote
       * them (records), but their kind is unknown, so only the total is
       * compared; the per-kind counts can only be short of the writer's. */
      ok = end->records == index && cursor->devices <= end->devices &&
           cursor->modules <= end->modules && cursor->entries <= end->entries;
      pcachepb__archive_end__free_unpacked(end, &pcache__pb_allocator);
      if (!ok || cursor->off != size)
        return PCACHE_EARCHIVE;
      return 0;
    }
    default:
      /* A record type from a later writer of the same version: skipped, so
       * such additions never need a version bump. */
      r = 0;
      break;
    }
    if (r)
      return r;
  }
}
