/* The client's side of a reply window (proto/window.h), against replies
 * made here: a memfd that is not sealed against shrinking, or shorter
 * than the reply says, is refused; a reply naming a window is taken only
 * as the window's next one, with every range inside the window, and its
 * bytes (the snapshot's too) are copied out, so that nothing of the reply
 * points into the window afterwards; a reply with no window_seq is left as
 * it was. Replies count from the window's first_seq, never from 0. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/alloc.h"
#include "proto/frame.h"
#include "proto/window.h"
#include "test.h"

#define WINDOW_SIZE 65536u

/* A memfd of size bytes: byte i is (i * 7) & 0xff; sealed with seals. */
static int window_fd(size_t size, int seals) {
  int fd = memfd_create("test-window", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  uint8_t *p;
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, (off_t)size), 0);
  p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_TRUE(p != MAP_FAILED);
  for (size_t i = 0; i < size; i++)
    p[i] = (uint8_t)(i * 7);
  munmap(p, size);
  if (seals)
    ASSERT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}

typedef struct range {
  uint64_t offset, size;
} range;

/* A Get (or, with snapshot, a Prefetch) reply as the transport receives
 * it: packed and unpacked, so that release frees it as it frees any.
 * Blob i lies at ranges[i]; with snapshot, the snapshot at *snapshot. */
static void make_reply(uint64_t seq, const range *ranges, size_t n, const range *snapshot,
                       pcache__reply *ret) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__GetReply g = PCACHEPB__GET_REPLY__INIT;
  Pcachepb__Blob blobs[4], *ptrs[4], snap = PCACHEPB__BLOB__INIT;
  uint8_t hash[16] = {1}, *buf;
  size_t size;
  ASSERT_TRUE(n <= 4);
  for (size_t i = 0; i < n; i++) {
    pcachepb__blob__init(&blobs[i]);
    blobs[i].state_hash = (ProtobufCBinaryData){sizeof hash, hash};
    blobs[i].blob_offset = ranges[i].offset;
    blobs[i].blob_size = ranges[i].size;
    ptrs[i] = &blobs[i];
  }
  g.n_blobs = n;
  g.blobs = ptrs;
  g.window_seq = seq;
  if (snapshot) {
    snap.blob_offset = snapshot->offset;
    snap.blob_size = snapshot->size;
    g.snapshot = &snap;
  }
  resp.body_case = snapshot ? PCACHEPB__RESPONSE__BODY_PREFETCH : PCACHEPB__RESPONSE__BODY_GET;
  if (snapshot)
    resp.prefetch = &g;
  else
    resp.get = &g;
  ASSERT_OK(pcache__response_encode(&resp, PCACHE_DEFAULT_MAX_FRAME, &buf, &size));
  *ret = (pcache__reply){0};
  ASSERT_OK(pcache__response_decode(buf + PCACHE_FRAME_HEADER_SIZE, size - PCACHE_FRAME_HEADER_SIZE,
                                    &ret->response));
  pcache__free(buf);
}

/* The bytes a Blob stands for equal the window's at [offset, offset + size). */
static void assert_window_bytes(const pcache__reply *reply, const Pcachepb__Blob *b,
                                uint64_t offset, uint64_t size) {
  size_t got = 0;
  const uint8_t *bytes = pcache__reply_bytes(reply, b->blob, b->blob_offset, b->blob_size, &got);
  ASSERT_TRUE(bytes != NULL);
  ASSERT_EQ(got, size);
  for (uint64_t i = 0; i < size; i++)
    ASSERT_EQ(bytes[i], (uint8_t)((offset + i) * 7));
}

static void expect_refused(pcache__window *w, uint64_t seq, const range *ranges, size_t n) {
  pcache__reply reply;
  make_reply(seq, ranges, n, NULL, &reply);
  ASSERT_ERR(pcache__window_take(w, &reply), PCACHE_EPROTO);
  ASSERT_TRUE(reply.bulk == NULL);
  pcache__reply_release(&reply);
}

/* window_map refuses fd, and closes it either way. */
static void expect_map_refused(int fd, uint64_t size, uint64_t first_seq) {
  pcache__window *w = NULL;
  ASSERT_ERR(pcache__window_map(fd, size, first_seq, &w), PCACHE_EPROTO);
  ASSERT_TRUE(w == NULL);
  ASSERT_EQ(fcntl(fd, F_GETFD), -1);
  ASSERT_EQ(errno, EBADF);
}

int main(void) {
  const int sealed = F_SEAL_SHRINK | F_SEAL_GROW;
  const uint64_t first = 0x123456789ull; /* the daemon draws it at random */
  pcache__window *w = NULL;
  pcache__reply reply;

  /* Not sealed against shrinking, shorter than said, of no size, or with
   * no first_seq: refused. */
  expect_map_refused(window_fd(WINDOW_SIZE, F_SEAL_GROW), WINDOW_SIZE, first);
  expect_map_refused(window_fd(4096, sealed), WINDOW_SIZE, first);
  expect_map_refused(window_fd(WINDOW_SIZE, sealed), 0, first);
  expect_map_refused(window_fd(WINDOW_SIZE, sealed), WINDOW_SIZE, 0);

  /* No window: a reply naming one is out of step; one naming none passes. */
  expect_refused(NULL, 1, &(range){0, 16}, 1);
  make_reply(0, &(range){0, 16}, 1, NULL, &reply);
  ASSERT_OK(pcache__window_take(NULL, &reply));
  ASSERT_TRUE(reply.bulk == NULL);
  pcache__reply_release(&reply);

  ASSERT_OK(pcache__window_map(window_fd(WINDOW_SIZE, sealed), WINDOW_SIZE, first, &w));
  ASSERT_EQ(pcache__window_taken(w), first);

  /* Not the next reply (from 0, as if the window were another's; two
   * ahead); ranges past the end, or wrapping around. */
  expect_refused(w, 1, &(range){0, 16}, 1);
  expect_refused(w, first + 2, &(range){0, 16}, 1);
  expect_refused(w, first + 1, &(range){WINDOW_SIZE - 8, 16}, 1);
  expect_refused(w, first + 1, &(range){WINDOW_SIZE + 1, 1}, 1);
  expect_refused(w, first + 1, &(range){8, UINT64_MAX - 4}, 1);
  expect_refused(w, first + 1, &(range){UINT64_MAX, 2}, 1);
  /* More bytes than the window holds, each range inside it. */
  expect_refused(w, first + 1, (range[]){{0, WINDOW_SIZE}, {0, 1}}, 2);
  ASSERT_EQ(pcache__window_taken(w), first);

  /* The next reply: copied out, the Blobs pointing at the copy. */
  make_reply(first + 1, (range[]){{0, 20480}, {20480, 100}}, 2, NULL, &reply);
  ASSERT_OK(pcache__window_take(w, &reply));
  ASSERT_EQ(pcache__window_taken(w), first + 1);
  ASSERT_TRUE(reply.bulk != NULL && reply.bulk_owned);
  ASSERT_EQ(reply.bulk_size, 20580);
  assert_window_bytes(&reply, reply.response->get->blobs[0], 0, 20480);
  assert_window_bytes(&reply, reply.response->get->blobs[1], 20480, 100);
  pcache__reply_release(&reply);

  /* A Prefetch page: its snapshot comes out too. */
  make_reply(first + 2, &(range){4096, 64}, 1, &(range){8192, 1000}, &reply);
  ASSERT_OK(pcache__window_take(w, &reply));
  ASSERT_EQ(pcache__window_taken(w), first + 2);
  assert_window_bytes(&reply, reply.response->prefetch->snapshot, 8192, 1000);
  assert_window_bytes(&reply, reply.response->prefetch->blobs[0], 4096, 64);
  pcache__reply_release(&reply);

  /* The same seq again (a replayed reply) is out of step. */
  expect_refused(w, first + 2, &(range){0, 16}, 1);

  /* A reply that also came with a memfd of its own cannot name a window. */
  make_reply(first + 3, &(range){0, 16}, 1, NULL, &reply);
  reply.bulk = pcache__malloc(16);
  reply.bulk_size = 16;
  reply.bulk_owned = 1;
  ASSERT_ERR(pcache__window_take(w, &reply), PCACHE_EPROTO);
  pcache__reply_release(&reply);

  pcache__window_unmap(w);
  return 0;
}
