#include "window.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "frame.h"

struct pcache__window {
  int fd;
  const uint8_t *map;
  uint64_t size;
  uint64_t taken; /* the last window_seq copied out */
};

int pcache__window_map(int fd, uint64_t size, uint64_t first_seq, pcache__window **ret_window) {
  pcache__window *w;
  void *map;
  if (first_seq == 0 || pcache__memfd_check(fd, F_SEAL_SHRINK, size, 0, NULL) < 0) {
    close(fd);
    return PCACHE_EPROTO;
  }
  map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    int r = -errno;
    close(fd);
    return r;
  }
  w = pcache__calloc(1, sizeof *w);
  if (!w) {
    munmap(map, (size_t)size);
    close(fd);
    return -ENOMEM;
  }
  w->fd = fd;
  w->map = map;
  w->size = size;
  w->taken = first_seq;
  *ret_window = w;
  return 0;
}

void pcache__window_unmap(pcache__window *w) {
  if (!w)
    return;
  munmap((void *)w->map, (size_t)w->size);
  close(w->fd);
  pcache__free(w);
}

uint64_t pcache__window_taken(const pcache__window *w) { return w ? w->taken : 0; }

/* The Blobs of g whose bytes are not inline, the snapshot first; *i starts
 * at 0. NULL after the last. */
static Pcachepb__Blob *next_placed(const Pcachepb__GetReply *g, size_t *i) {
  while (*i <= g->n_blobs) {
    Pcachepb__Blob *b = pcache__get_reply_blob(g, (*i)++);
    if (b && !b->blob.len && b->blob_size)
      return b;
  }
  return NULL;
}

int pcache__window_take(pcache__window *w, pcache__reply *reply) {
  const Pcachepb__Response *resp = reply->response;
  Pcachepb__GetReply *g = NULL;
  Pcachepb__Blob *b;
  uint64_t total = 0, at = 0;
  uint8_t *copy;
  size_t i = 0;
  if (resp && resp->body_case == PCACHEPB__RESPONSE__BODY_GET)
    g = resp->get;
  else if (resp && resp->body_case == PCACHEPB__RESPONSE__BODY_PREFETCH)
    g = resp->prefetch;
  if (!g || !g->window_seq)
    return 0;
  if (!w || reply->bulk || g->window_seq != w->taken + 1)
    return PCACHE_EPROTO;
  /* Each range inside the window, and no more bytes than it holds: the
   * daemon writes them back to back. */
  while ((b = next_placed(g, &i)) != NULL) {
    if (b->blob_offset > w->size || b->blob_size > w->size - b->blob_offset ||
        b->blob_size > w->size - total)
      return PCACHE_EPROTO;
    total += b->blob_size;
  }
  copy = pcache__malloc(total ? (size_t)total : 1);
  if (!copy)
    return -ENOMEM;
  for (i = 0; (b = next_placed(g, &i)) != NULL; at += b->blob_size) {
    memcpy(copy + at, w->map + b->blob_offset, (size_t)b->blob_size);
    b->blob_offset = at;
  }
  reply->bulk = copy;
  reply->bulk_size = (size_t)total;
  reply->bulk_owned = 1;
  w->taken = g->window_seq;
  return 0;
}
