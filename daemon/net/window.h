/* Reply windows (window.c; docs/protocol.md "Reply window"): a memfd one
 * connection's client maps read-only, into which the daemon writes the
 * blob bytes of that connection's Get and Prefetch replies instead of the
 * frame. A 20 KB blob sent through the socket costs the kernel a buffer
 * allocation and two copies (about 10 us on the lent VMs, bench_floor);
 * through the window it is one copy here and one in the client.
 *
 * The window is the connection's alone and holds one reply at a time: the
 * daemon writes a reply into it only when the request says the client has
 * copied out the last one (Get.window_taken), and otherwise sends the bytes
 * inline. The memfd is sealed against shrinking, growing and new writers
 * before it is handed over, so a client can neither make the daemon's
 * writes fault (SIGBUS past a shrunk end) nor punch holes in it; the
 * daemon keeps writing through the mapping it made before the seals. */
#ifndef PCD_WINDOW_H
#define PCD_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "proto/pcache.pb-c.h"

typedef struct pcd_window pcd_window;

/* A window of size bytes, its first_seq drawn at random. Its pages come
 * as replies first reach that far into it, each range populated
 * (MADV_POPULATE_WRITE) before the write: a write into a shared mapping
 * that needed a page the system would not give would be SIGBUS, the
 * populate says so as an error and the reply goes inline. So a window
 * costs only what its replies have used, and making one costs nothing a
 * client could repeat for memory. Returns 0, -ENOMEM, or -errno
 * (memfd_create, mmap; -EINVAL when the kernel lacks F_SEAL_FUTURE_WRITE
 * or MADV_POPULATE_WRITE). */
int pcd_window_open(size_t size, pcd_window **ret_window);
/* Unmaps and closes. window may be NULL. A client that mapped it keeps its
 * mapping. */
void pcd_window_free(pcd_window *window);
/* The memfd, for the reply that hands the window over (the caller dups it:
 * the window keeps its own). */
int pcd_window_fd(const pcd_window *window);
size_t pcd_window_size(const pcd_window *window);
/* ReplyWindowReply.first_seq: the window_seq before the first reply. */
uint64_t pcd_window_first_seq(const pcd_window *window);

/* What pcd_window_place did. */
typedef enum pcd_window_placed {
  PCD_WINDOW_NONE, /* no blob bytes to move, more than the window holds, a reply
                      that would still need a bulk memfd, or no memory for the pages */
  PCD_WINDOW_BUSY, /* taken does not name the last reply: the client may still read it */
  PCD_WINDOW_USED, /* the bytes are in the window; reply->window_seq says so */
} pcd_window_placed;

/*
 * pcd_window_place - moves the blob bytes of reply (every Blob with inline
 * bytes, the snapshot's included) into the window, back to back from
 * offset 0, and points each Blob there (blob_offset, blob_size; no inline
 * bytes), when they fit, the reply is then small enough for one inline
 * frame, and taken (the request's window_taken) is the last window_seq the
 * window carried. The bytes are read where the Blobs point
 * (LMDB's map): call it inside the read transaction. window may be NULL.
 */
pcd_window_placed pcd_window_place(pcd_window *window, Pcachepb__GetReply *reply, uint64_t taken);
/* The reply pcd_window_place last placed was never sent (it could not be
 * encoded; an error reply went instead): the window's count goes back, so
 * that the client's next window_taken, which never saw it, still matches. */
void pcd_window_unplace(pcd_window *window);

#endif
