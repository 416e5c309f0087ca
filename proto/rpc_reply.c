/* A reply once its frame arrived (rpc_reply.h, rpc.h): its bulk memfd
 * checked, mapped and faulted in for rpc.c's receive, and what a caller
 * does with a reply: read its bytes, say why it failed, release it. The
 * sending and receiving of frames is rpc.c's. */
#include "proto/rpc_reply.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"

/* A bulk reply: the frame's Response only says where, in the sealed memfd
 * that came with it, the real Response lies. The memfd must be sealed
 * against writes and shrinking, or the daemon (or anyone holding the fd)
 * could change the bytes after we checked them. Its size must be within
 * what was asked for (max_bulk), and the Response last in it, as pcached
 * lays it (daemon/jobs/bulk.c). Mapped, not populated: only the Response is
 * read here, and bulk_populate faults in the ranges it names once they
 * pass their bounds, so a sparse memfd of any size costs this process
 * only the pages a request could have brought. */
int pcache__rpc_open_bulk(const Pcachepb__Bulk *bulk, int fd, uint64_t max_bulk,
                          pcache__reply *reply) {
  void *map;
  if (bulk->size > max_bulk || bulk->response_offset > bulk->size ||
      bulk->response_size != bulk->size - bulk->response_offset || bulk->response_size == 0)
    return PCACHE_EPROTO;
  if (pcache__memfd_check(fd, F_SEAL_WRITE | F_SEAL_SHRINK, bulk->size, 0, NULL) < 0)
    return PCACHE_EPROTO;
  map = mmap(NULL, (size_t)bulk->size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED)
    return -errno;
  reply->bulk = map;
  reply->bulk_size = (size_t)bulk->size;
  reply->memfd = fd;
  return 0;
}

/* Faulted in a chunk at a time, the deadline looked at between them. */
#define POPULATE_CHUNK (4u << 20)

/* Faults in n bytes at p (page-aligned). */
static int populate_chunk(const uint8_t *p, size_t n, size_t page) {
#ifdef MADV_POPULATE_READ
  if (madvise((void *)p, n, MADV_POPULATE_READ) == 0)
    return 0;
  if (errno != EINVAL)
    return -errno;
#endif
  /* A kernel before 5.14: touch each page. */
  for (size_t at = 0; at < n; at += page)
    (void)*(const volatile uint8_t *)(p + at);
  return 0;
}

/* Faults in [offset, offset + size) of a bulk mapping before deadline:
 * every byte of it is read (checksum, then the driver), and a fault per
 * 4 KiB on first touch cost much of a large prefetch. */
static int populate(const uint8_t *map, uint64_t offset, uint64_t size, uint64_t deadline) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), end = offset + size;
  int r;
  for (offset -= offset % page; offset < end; offset += POPULATE_CHUNK) {
    uint64_t n = end - offset < POPULATE_CHUNK ? end - offset : POPULATE_CHUNK;
    if (pcache__mono_ms() >= deadline)
      return -ETIMEDOUT;
    if ((r = populate_chunk(map + offset, (size_t)n, (size_t)page)) < 0)
      return r;
  }
  return 0;
}

/* A bulk reply's Blobs against bounds, then the bytes they name faulted
 * in: each inside the memfd and within its bound, all together no more
 * than the memfd holds (pcached lays them back to back, so ranges named
 * twice cannot make the client read one region over and over). Any
 * other reply is read whole, and was bounded whole. */
int pcache__rpc_bulk_populate(const pcache__reply *reply, const pcache__reply_bounds *bounds,
                              uint64_t deadline) {
  const Pcachepb__Response *resp = reply->response;
  const Pcachepb__GetReply *g = NULL;
  const Pcachepb__Blob *b;
  uint64_t total = 0;
  size_t i;
  int r;
  if (resp->body_case == PCACHEPB__RESPONSE__BODY_GET)
    g = resp->get;
  else if (resp->body_case == PCACHEPB__RESPONSE__BODY_PREFETCH)
    g = resp->prefetch;
  if (!g)
    return populate(reply->bulk, 0, reply->bulk_size, deadline);
  for (i = 0; i <= g->n_blobs; i++) {
    if (!(b = pcache__get_reply_blob(g, i)) || b->blob.len)
      continue;
    if (b->blob_offset > reply->bulk_size || b->blob_size > reply->bulk_size - b->blob_offset ||
        b->blob_size > reply->bulk_size - total ||
        (bounds && b->blob_size > (i == 0 ? bounds->snapshot : bounds->blob)))
      return PCACHE_EPROTO;
    total += b->blob_size;
  }
  for (i = 0; i <= g->n_blobs; i++) {
    if (!(b = pcache__get_reply_blob(g, i)) || b->blob.len || !b->blob_size)
      continue;
    if ((r = populate(reply->bulk, b->blob_offset, b->blob_size, deadline)) < 0)
      return r;
  }
  return 0;
}

const char *pcache__reply_why(const pcache__reply *reply, int err) {
  if (reply && reply->response && reply->response->message && *reply->response->message)
    return reply->response->message;
  return pcache_strerror(err);
}

void pcache__reply_release(pcache__reply *reply) {
  if (!reply)
    return;
  pcache__response_free(reply->response);
  if (reply->has_passed_fd)
    close(reply->passed_fd);
  if (reply->has_lease_fd)
    close(reply->lease_fd);
  if (reply->bulk && reply->bulk_owned) {
    pcache__free((void *)reply->bulk);
  } else if (reply->bulk) {
    munmap((void *)reply->bulk, reply->bulk_size);
    close(reply->memfd);
  }
  *reply = (pcache__reply){0};
}

const uint8_t *pcache__reply_bytes(const pcache__reply *reply, ProtobufCBinaryData inline_data,
                                   uint64_t offset, uint64_t size, size_t *ret_size) {
  *ret_size = 0;
  if (inline_data.len > 0) {
    *ret_size = inline_data.len;
    return inline_data.data;
  }
  if (!reply || !reply->bulk || offset > reply->bulk_size || size > reply->bulk_size - offset)
    return NULL;
  *ret_size = (size_t)size;
  return reply->bulk + offset;
}
