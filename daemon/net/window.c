#include "window.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "proto/frame.h"

struct pcd_window {
  int fd;
  uint8_t *map; /* shared, writable: made before the seals */
  size_t size;
  uint64_t first_seq; /* drawn at random: what window_taken starts at */
  uint64_t seq;       /* the window_seq of the last reply written here */
  size_t populated;   /* [0, populated) has its pages (page-aligned) */
};

#define PAGE 4096u

/* Gives [0, end) of the window its pages (writable) before anything is
 * written there: a page the system will not give is then an error here,
 * not a SIGBUS in the write. 0 or -errno. */
static int populate(pcd_window *w, size_t end) {
  size_t to = (end + PAGE - 1) / PAGE * PAGE;
  if (to > w->size)
    to = w->size;
  if (to <= w->populated)
    return 0;
  if (madvise(w->map + w->populated, to - w->populated, MADV_POPULATE_WRITE) < 0)
    return -errno;
  w->populated = to;
  return 0;
}

/* Never 0 (what a client without a window says), and far from wrapping. */
static uint64_t draw_first_seq(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
    v = pcache__mono_ns() ^ (uint64_t)(uintptr_t)&v;
  return (v >> 2) | 1;
}

int pcd_window_open(size_t size, pcd_window **ret_window) {
  pcd_window *w = pcache__calloc(1, sizeof *w);
  int r;
  if (!w)
    return -ENOMEM;
  w->size = size;
  w->map = MAP_FAILED;
  w->first_seq = w->seq = draw_first_seq();
  w->fd = memfd_create("pcache-window", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (w->fd < 0 || ftruncate(w->fd, (off_t)size) < 0)
    goto fail_errno;
  w->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
  if (w->map == MAP_FAILED)
    goto fail_errno;
  if (fcntl(w->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) <
      0)
    goto fail_errno;
  /* The first page now: a kernel without MADV_POPULATE_WRITE (before
   * 5.14) says so here, and the client gets no window. */
  if ((r = populate(w, 1)) < 0)
    goto fail;
  *ret_window = w;
  return 0;
fail_errno:
  r = -errno;
fail:
  pcd_window_free(w);
  return r;
}

void pcd_window_free(pcd_window *w) {
  if (!w)
    return;
  if (w->map != MAP_FAILED)
    munmap(w->map, w->size);
  if (w->fd >= 0)
    close(w->fd);
  pcache__free(w);
}

int pcd_window_fd(const pcd_window *w) { return w->fd; }

size_t pcd_window_size(const pcd_window *w) { return w->size; }

uint64_t pcd_window_first_seq(const pcd_window *w) { return w->first_seq; }

void pcd_window_unplace(pcd_window *w) {
  if (w && w->seq != w->first_seq)
    w->seq--;
}

/* The Blobs of reply with inline bytes, the snapshot first; *i starts at
 * 0. NULL after the last. */
static Pcachepb__Blob *next_inline(const Pcachepb__GetReply *reply, size_t *i) {
  while (*i <= reply->n_blobs) {
    Pcachepb__Blob *b = pcache__get_reply_blob(reply, (*i)++);
    if (b && b->blob.len)
      return b;
  }
  return NULL;
}

pcd_window_placed pcd_window_place(pcd_window *w, Pcachepb__GetReply *reply, uint64_t taken) {
  Pcachepb__Blob *b;
  uint64_t total = 0, at = 0, n = 0;
  size_t i = 0;
  if (!w)
    return PCD_WINDOW_NONE;
  while ((b = next_inline(reply, &i)) != NULL) {
    total += b->blob.len;
    n++;
  }
  if (total == 0 || total > w->size)
    return PCD_WINDOW_NONE;
  /* Only a reply that then fits one inline frame: a bulk reply's memfd
   * holds its bytes anyway (bulk.c). Out of the window, each Blob loses
   * its bytes and gains blob_offset and blob_size (a tag and a varint of
   * at most 10 bytes each); the Response around it adds a few bytes. */
  if (pcachepb__get_reply__get_packed_size(reply) - total + n * 22 > PCACHE_BULK_THRESHOLD - 64)
    return PCD_WINDOW_NONE;
  if (taken != w->seq)
    return PCD_WINDOW_BUSY;
  if (populate(w, (size_t)total) < 0)
    return PCD_WINDOW_NONE; /* no memory for it now: inline, as without a window */
  for (i = 0; (b = next_inline(reply, &i)) != NULL; at += b->blob_size) {
    memcpy(w->map + at, b->blob.data, b->blob.len);
    b->blob_offset = at;
    b->blob_size = b->blob.len;
    b->blob.data = NULL;
    b->blob.len = 0;
  }
  reply->window_seq = ++w->seq;
  return PCD_WINDOW_USED;
}
