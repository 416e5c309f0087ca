#include "bulk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/log.h"
#include "proto/frame.h"

/* Inline frames are at most the bulk threshold, so any client's max_frame
 * accepts them; this cap only guards the encoder. */
#define INLINE_LIMIT (PCACHE_BULK_THRESHOLD + 4096u)

int pcd_write_iov(int fd, struct iovec *iov, int n, uint64_t *off) {
  while (n > 0) {
    ssize_t w = pwritev(fd, iov, n, (off_t)*off);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    *off += (uint64_t)w;
    /* A short write: skip what went, go on with the rest. */
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (uint8_t *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
  return 0;
}

static Pcachepb__GetReply *blob_reply(Pcachepb__Response *resp) {
  switch (resp->body_case) {
  case PCACHEPB__RESPONSE__BODY_GET:
    return resp->get;
  case PCACHEPB__RESPONSE__BODY_PREFETCH:
    return resp->prefetch;
  default:
    return NULL;
  }
}

/* Moves every blob into the memfd, in reply order, straight from where it
 * lies (LMDB's map): gathered writes of up to BATCH blobs, so a 4096-blob
 * Prefetch costs a handful of syscalls, and no buffer in between. */
static int move_blobs(int fd, Pcachepb__GetReply *g, uint64_t *off) {
  enum { BATCH = 1024 }; /* IOV_MAX on Linux */
  struct iovec iov[BATCH];
  size_t i = 0;
  uint64_t at = *off;
  if (g && g->snapshot && g->snapshot->blob.len) {
    /* The snapshot first: it is the one big piece a warm start maps. */
    Pcachepb__Blob *b = g->snapshot;
    struct iovec one = {b->blob.data, b->blob.len};
    int r;
    b->blob_offset = at;
    b->blob_size = b->blob.len;
    at += b->blob.len;
    b->blob.data = NULL;
    b->blob.len = 0;
    if ((r = pcd_write_iov(fd, &one, 1, off)) < 0)
      return r;
  }
  while (g && i < g->n_blobs) {
    int n = 0, r;
    for (; i < g->n_blobs && n < BATCH; i++) {
      Pcachepb__Blob *b = g->blobs[i];
      b->blob_offset = at;
      at += b->blob.len;
      b->blob_size = b->blob.len;
      if (b->blob.len)
        iov[n++] = (struct iovec){b->blob.data, b->blob.len};
      b->blob.data = NULL;
      b->blob.len = 0;
    }
    if ((r = pcd_write_iov(fd, iov, n, off)) < 0)
      return r;
  }
  return 0;
}

/* A protobuf-c output that streams the packed Response into the memfd
 * through a stack buffer, so packing needs no heap buffer of its size. */
typedef struct fd_sink {
  ProtobufCBuffer base;
  int fd;
  int err;
  uint64_t off;
  size_t used;
  uint8_t buf[32768];
} fd_sink;

static void sink_flush(fd_sink *s) {
  struct iovec iov = {s->buf, s->used};
  if (!s->err && s->used)
    s->err = pcd_write_iov(s->fd, &iov, 1, &s->off);
  s->used = 0;
}

static void sink_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data) {
  fd_sink *s = (fd_sink *)buffer;
  while (len) {
    size_t n = sizeof s->buf - s->used < len ? sizeof s->buf - s->used : len;
    memcpy(s->buf + s->used, data, n);
    s->used += n;
    data += n;
    len -= n;
    if (s->used == sizeof s->buf)
      sink_flush(s);
  }
}

/*
 * The payloads go to the memfd first (blobs from where they lie, or the
 * archive), resp is pointed at their offsets, and the now small Response
 * is packed behind them. No intermediate buffer holds the payload bytes
 * and no syscall is made per blob. Measured alternatives (docs/storage.md
 * "Bulk reply cost"): filling it through a MAP_SHARED|MAP_POPULATE mapping
 * spent more in populating and unmapping 20,000 page-table entries than in
 * the copy; fallocate first moved the page allocation, not its cost.
 */
static int encode_bulk(Pcachepb__Response *resp, int fd, uint64_t off, pcd_out *ret_out) {
  Pcachepb__Response frame_resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__Bulk bulk = PCACHEPB__BULK__INIT;
  Pcachepb__GetReply *g = blob_reply(resp);
  fd_sink *sink;
  int r;

  if (fd >= 0) {
    r = 0; /* the payload is in fd already */
  } else if ((fd = memfd_create("pcache-reply", MFD_ALLOW_SEALING | MFD_CLOEXEC)) < 0) {
    return -errno;
  } else if (g) {
    r = move_blobs(fd, g, &off);
  } else if (resp->body_case == PCACHEPB__RESPONSE__BODY_EXPORT) {
    struct iovec iov = {resp->export->archive.data, resp->export->archive.len};
    resp->export->archive_offset = off;
    resp->export->archive_size = resp->export->archive.len;
    r = pcd_write_iov(fd, &iov, 1, &off);
    resp->export->archive.data = NULL;
    resp->export->archive.len = 0;
  } else {
    r = 0;
  }
  if (r < 0)
    goto out_close;
  sink = pcache__malloc(sizeof *sink);
  if (!sink) {
    r = -ENOMEM;
    goto out_close;
  }
  sink->base.append = sink_append;
  sink->fd = fd;
  sink->err = 0;
  sink->off = off;
  sink->used = 0;
  bulk.response_offset = off;
  bulk.response_size = pcachepb__response__pack_to_buffer(resp, &sink->base);
  sink_flush(sink);
  r = sink->err;
  pcache__free(sink);
  if (r < 0)
    goto out_close;
  bulk.size = off + bulk.response_size;
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
    r = -errno;
    goto out_close;
  }
  frame_resp.status = resp->status;
  frame_resp.body_case = PCACHEPB__RESPONSE__BODY_BULK;
  frame_resp.bulk = &bulk;
  r = pcache__response_encode(&frame_resp, INLINE_LIMIT, &ret_out->frame, &ret_out->size);
  if (r < 0)
    goto out_close;
  ret_out->fd = fd;
  ret_out->lease_fd = -1;
  ret_out->bulk_size = bulk.size;
  return 0;

out_close:
  close(fd);
  return r;
}

void pcd_scratch_free(pcd_scratch *scratch) {
  pcache__free(scratch->data);
  *scratch = (pcd_scratch){0};
}

static void out_init(pcd_out *out) { *out = (pcd_out){.fd = -1, .lease_fd = -1}; }

/* Packs resp (size bytes packed) behind a frame header in scratch, grown
 * as needed. 0, or -ENOMEM (scratch as it was). */
static int encode_scratch(const Pcachepb__Response *resp, size_t size, pcd_scratch *scratch,
                          pcd_out *ret_out) {
  size_t need = PCACHE_FRAME_HEADER_SIZE + size;
  if (scratch->cap < need) {
    size_t cap = need < 4096 ? 4096 : need;
    uint8_t *p = pcache__realloc(scratch->data, cap);
    if (!p)
      return -ENOMEM;
    scratch->data = p;
    scratch->cap = cap;
  }
  pcache__frame_put_length(scratch->data, (uint32_t)size);
  protobuf_c_message_pack(&resp->base, scratch->data + PCACHE_FRAME_HEADER_SIZE);
  ret_out->frame = scratch->data;
  ret_out->size = need;
  ret_out->borrowed = 1;
  return 0;
}

int pcd_reply_encode(Pcachepb__Response *resp, pcd_scratch *scratch, pcd_out *ret_out) {
  size_t size = pcachepb__response__get_packed_size(resp);
  out_init(ret_out);
  if (size > PCACHE_BULK_THRESHOLD)
    return encode_bulk(resp, -1, 0, ret_out);
  if (scratch && encode_scratch(resp, size, scratch, ret_out) == 0)
    return 0;
  return pcache__response_encode(resp, INLINE_LIMIT, &ret_out->frame, &ret_out->size);
}

int pcd_reply_encode_fd(Pcachepb__Response *resp, int fd, uint64_t payload_size, pcd_out *ret_out) {
  out_init(ret_out);
  return encode_bulk(resp, fd, payload_size, ret_out);
}

int pcd_reply_error(int status, const char *message, pcd_out *ret_out) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  char buf[512];
  resp.status = status;
  snprintf(buf, sizeof buf, "%s", message ? message : pcache_strerror(status));
  resp.message = buf;
  out_init(ret_out);
  return pcache__response_encode(&resp, INLINE_LIMIT, &ret_out->frame, &ret_out->size);
}

void pcd_out_release(pcd_out *out) {
  if (!out->borrowed)
    pcache__free(out->frame);
  out->frame = NULL;
  out->borrowed = 0;
  if (out->fd >= 0)
    close(out->fd);
  if (out->lease_fd >= 0)
    close(out->lease_fd);
  out->fd = out->lease_fd = -1;
  out->bulk_size = 0;
}
