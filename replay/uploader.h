/* The replayer's uploads (uploader.c): blobs its threads built, queued and
 * sent to pcached in batched Puts on a connection of their own, so that a
 * thread builds its next pipeline while the last one's Put waits for its
 * durable commit.
 *
 * The daemon lands a Put's items for the replay as it stores them
 * (pcd_replay_put_landed), so an item is in flight at the daemon only
 * while it is built or uploaded: a thread whose next build crashes or
 * hangs has nothing else out to be blamed with it. The thread hears of
 * the item through a callback (its window of one upload). */
#ifndef PCACHE_REPLAY_UPLOADER_H
#define PCACHE_REPLAY_UPLOADER_H

#include <stddef.h>
#include <stdint.h>

#include "proto/pcache.pb-c.h"

typedef struct pcache__replay_uploader pcache__replay_uploader;

/* status: 0 or the Put's error for the item (the daemon knows it
 * already). Called on the uploader's thread. */
typedef void (*pcache__replay_upload_done)(void *ctx, int status);

/*
 * pcache__replay_uploader_start - connects to socket_path (as app
 * "pcache-replay") and starts the uploader's thread. device is what every
 * Put carries; it must outlive the uploader. Returns 0, -ENOMEM, -EAGAIN
 * (no thread) or what pcache__transport_open returns.
 */
int pcache__replay_uploader_start(const char *socket_path, uint32_t timeout_ms,
                                  const Pcachepb__DeviceInfo *device,
                                  pcache__replay_uploader **ret_uploader);

/*
 * pcache__replay_uploader_queue - queues item's blob (blob is taken over:
 * freed by the uploader; the item's fields are copied). done is called
 * once for it, whatever happens, before pcache__replay_uploader_stop
 * returns. Returns 0, or -ENOMEM (done is not called; blob freed).
 */
int pcache__replay_uploader_queue(pcache__replay_uploader *u, const Pcachepb__ReplayItem *item,
                                  uint8_t *blob, size_t size, uint64_t compile_ns,
                                  pcache__replay_upload_done done, void *ctx);

/* 1 once a Put failed with no reply (the daemon is gone or the stream
 * out of step): every later item fails with -EPIPE, unsent. Any thread. */
int pcache__replay_uploader_broken(pcache__replay_uploader *u);

/* Sends what is queued, stops the thread, closes the connection; total
 * time spent in Puts and the number sent into *ret_put_ns / *ret_puts
 * (either may be NULL). u may be NULL. */
void pcache__replay_uploader_stop(pcache__replay_uploader *u, uint64_t *ret_put_ns,
                                  uint64_t *ret_puts);

#endif
