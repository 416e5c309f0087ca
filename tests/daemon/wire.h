/* The protocol for the daemon tests: requests through the wire layer's RPC
 * helper (proto/rpc.h), raw bytes for the tests that send malformed frames
 * on purpose, and makers of valid blobs and descriptions. Deliberately
 * independent of libpcache. */
#ifndef PCACHE_TESTS_WIRE_H
#define PCACHE_TESTS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "harness.h"
#include "proto/rpc.h"

/* A reply as the tests read it: views of what reply holds. */
typedef struct wire_reply {
  pcache__reply reply;
  Pcachepb__Response *resp;
  int fd;             /* the memfd of a bulk reply, else -1 */
  int seals;          /* F_GET_SEALS of fd */
  const uint8_t *map; /* fd mapped read-only */
  size_t map_size;
} wire_reply;

/* Longer than any call of a passing test takes, even under sanitizers: a
 * daemon that stalls fails the test at the call, with its log (wire_guard). */
#define WIRE_TIMEOUT_MS 60000u

/* Sends one request frame, of any size (the daemon's limit is under test);
 * 0 or a negative code. */
int wire_send(int fd, const Pcachepb__Request *req);
/* Writes raw bytes; 0 or -errno. */
int wire_send_raw(int fd, const void *data, size_t size);
/* Reads one response, whatever its status and body, resolving a bulk reply
 * (blobs then point into map). Returns 0 or pcache__rpc's failure of the
 * exchange: -EPIPE or -ECONNRESET at end of stream. */
int wire_recv(int fd, wire_reply *ret);
void wire_reply_free(wire_reply *r);
/* send + recv: 0, or a negative code of the exchange (the reply's own
 * status is the test's to check). Thread-safe, for tests whose daemon dies
 * under them. */
int wire_try_call(int fd, const Pcachepb__Request *req, wire_reply *ret);
/* wire_try_call that aborts the test on a failure of the exchange. */
void wire_call(int fd, const Pcachepb__Request *req, wire_reply *ret);

/* Waits for the daemon to close fd (5 s at most) and returns the status of
 * the reply it sent before closing, 0 when it sent none. Closes fd. */
int wire_closed_with(int fd);

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

/* A Put of items for key from a device named name: req is ready to send
 * and points into the struct (do not copy it) and into items. Free with
 * wire_put_msg_free. */
typedef struct wire_put_msg {
  Pcachepb__Request req;
  Pcachepb__Put put;
  Pcachepb__DeviceInfo dev;
  Pcachepb__PutItem **items;
} wire_put_msg;
void wire_put_msg_init(wire_put_msg *m, const pcache__devkey *key, const char *name,
                       wire_item *items, size_t n);
void wire_put_msg_free(wire_put_msg *m);

/* Put items for one device; returns the reply (caller frees). */
void wire_put(int fd, const pcache__devkey *key, wire_item *items, size_t n, wire_reply *ret);
/* Get hashes; returns the reply. */
void wire_get(int fd, const pcache__devkey *key, const pcache__hash *hashes, size_t n,
              wire_reply *ret);
/* The same, naming window_taken (docs/protocol.md "Reply window"). */
void wire_get_taken(int fd, const pcache__devkey *key, const pcache__hash *hashes, size_t n,
                    uint64_t window_taken, wire_reply *ret);
/* One Prefetch page of the Hello app's entries (aborts unless it is
 * answered with status 0); the caller frees the reply. */
void wire_prefetch(int fd, const pcache__devkey *key, uint32_t max_entries, uint32_t offset,
                   int snapshot, wire_reply *ret);
/* Stats reply (aborts on error); caller frees. */
void wire_stats(int fd, wire_reply *ret);
/* The daemon's counters (aborts on error); the strings are not kept. */
Pcachepb__StatsReply wire_stats_of(int fd);

/* A blob's bytes whether inline or in the memfd. */
const uint8_t *wire_blob_data(const wire_reply *r, const Pcachepb__Blob *b, size_t *ret_size);


/* On abort (a failed assertion), kill env's daemon and print its log, so a
 * failing test neither hangs ctest nor hides the daemon's side. */
void wire_guard(test_env *env);
#endif
