/* Raw protocol for the daemon tests: frames over a Unix socket, bulk
 * replies through the memfd, and makers of valid blobs and descriptions.
 * Deliberately independent of libpcache. */
#ifndef PCACHE_TESTS_WIRE_H
#define PCACHE_TESTS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "harness.h"
#include "proto/pcache.pb-c.h"

typedef struct wire_reply {
  Pcachepb__Response *resp;
  int fd;          /* the memfd of a bulk reply, else -1 */
  int seals;       /* F_GET_SEALS of fd */
  uint8_t *map;    /* fd mapped read-only */
  size_t map_size;
} wire_reply;

/* Sends one request frame; 0 or -errno. */
int wire_send(int fd, const Pcachepb__Request *req);
/* Writes raw bytes; 0 or -errno. */
int wire_send_raw(int fd, const void *data, size_t size);
/* Reads one response, resolving a bulk reply (blobs then point into map).
 * Returns 0, -errno, or -EPIPE at end of stream. */
int wire_recv(int fd, wire_reply *ret);
void wire_reply_free(wire_reply *r);
/* send + recv; aborts the test on transport failure. */
void wire_call(int fd, const Pcachepb__Request *req, wire_reply *ret);

/* Connects and says Hello as app; aborts on failure. */
int wire_open(const test_env *env, const char *app);

/* A device key with this number in its UUID (lavapipe-like values). */
void wire_devkey(unsigned n, pcache__devkey *ret);
/* Fake SPIR-V number n (16 bytes, static) and its hash. */
const uint8_t *wire_spirv(unsigned n, size_t *ret_size, pcache__hash *ret_hash);
/* A packed PipelineDesc of kind with one stage using module, made unique
 * by salt (its subpass), and its state hash. Free *ret_desc with free(). */
void wire_desc(uint32_t kind, uint64_t salt, const pcache__hash *module, uint8_t **ret_desc,
               size_t *ret_size, pcache__hash *ret_hash);
/* A blob valid for key: its header then size - 32 bytes of pattern. */
uint8_t *wire_blob(const pcache__devkey *key, size_t size, uint8_t pattern);

/* One valid put item (owning its buffers; free with wire_item_free). */
typedef struct wire_item {
  Pcachepb__PutItem item;
  pcache__hash hash;
  Pcachepb__Module module; /* SPIR-V number 0, carried by the item */
  Pcachepb__Module *modules[1];
  pcache__hash module_hash;
} wire_item;
void wire_item_make(wire_item *it, const pcache__devkey *key, uint64_t salt, size_t blob_size);
void wire_item_free(wire_item *it);

/* Put items for one device; returns the reply (caller frees). */
void wire_put(int fd, const pcache__devkey *key, wire_item *items, size_t n, wire_reply *ret);
/* Get hashes; returns the reply. */
void wire_get(int fd, const pcache__devkey *key, const pcache__hash *hashes, size_t n,
              wire_reply *ret);
/* One Prefetch page of the Hello app's entries (aborts unless it is
 * answered with status 0); the caller frees the reply. */
void wire_prefetch(int fd, const pcache__devkey *key, uint32_t max_entries, uint32_t offset,
                   int snapshot, wire_reply *ret);
/* Stats reply (aborts on error); caller frees. */
void wire_stats(int fd, wire_reply *ret);
/* The Stats reply's numbers (its strings NULL); aborts on error. */
Pcachepb__StatsReply wire_counters(int fd);

/* A blob's bytes whether inline or in the memfd. */
const uint8_t *wire_blob_data(const wire_reply *r, const Pcachepb__Blob *b, size_t *ret_size);


/* On abort (a failed assertion), kill env's daemon and print its log, so a
 * failing test neither hangs ctest nor hides the daemon's side. */
void wire_guard(test_env *env);
#endif
