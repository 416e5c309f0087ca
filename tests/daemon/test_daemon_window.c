/* Reply windows on a real pcached (docs/protocol.md "Reply window").
 *
 * - A ReplyWindow reply brings a memfd of --reply-window bytes, sealed so
 *   that the client can neither shrink, grow, write nor punch holes in it
 *   (each tried here), only map it read-only.
 * - A Get naming the window's last reply (window_taken) gets its blobs
 *   through the window, back to back, byte for byte as stored.
 * - A Get that does not (sent before the last reply was read, or naming a
 *   reply the window never carried: a confused or hostile client) gets its
 *   blob inline, and the window's bytes are left alone; so does a blob
 *   larger than the window.
 * - Through the transport (proto/transport.h), as libpcache fetches: the
 *   bytes are copied out and checksum as stored; two Gets in flight at
 *   once each get theirs, the second inline.
 * - Stats count windows, replies through them and busy ones; a closed
 *   connection's window is freed; a second request replaces the window;
 *   --reply-window 0 gives none, and Gets work as before. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "proto/transport.h"
#include "test.h"
#include "wire.h"

enum { N_SMALL = 3, SMALL = 20480, BIG = 300000, WINDOW = 256 << 10 };

static pcache__devkey key;
static wire_item items[N_SMALL + 1]; /* the last is BIG */

typedef struct window {
  int fd;
  const uint8_t *map;
  uint64_t size;
} window;

/* A ReplyWindow on a raw connection. */
static void ask_window(int fd, window *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplyWindow rw = PCACHEPB__REPLY_WINDOW__INIT;
  wire_reply r;
  req.body_case = PCACHEPB__REQUEST__BODY_REPLY_WINDOW;
  req.reply_window = &rw;
  wire_call(fd, &req, &r);
  ASSERT_EQ(r.resp->status, 0);
  ASSERT_EQ(r.resp->body_case, PCACHEPB__RESPONSE__BODY_REPLY_WINDOW);
  ret->size = r.resp->reply_window->size;
  ASSERT_EQ(r.reply.has_passed_fd, ret->size > 0);
  ret->fd = ret->size ? r.reply.passed_fd : -1;
  r.reply.has_passed_fd = 0;
  ret->map = ret->size ? mmap(NULL, ret->size, PROT_READ, MAP_SHARED, ret->fd, 0) : NULL;
  ASSERT_TRUE(ret->map != MAP_FAILED);
  wire_reply_free(&r);
}

static void window_close(window *w) {
  if (w->map)
    munmap((void *)w->map, w->size);
  if (w->fd >= 0)
    close(w->fd);
}

/* A Get of items[idx...] (n of them) naming window_taken. */
static void get_taken(int fd, const size_t *idx, size_t n, uint64_t taken, wire_reply *ret) {
  pcache__hash h[4];
  for (size_t i = 0; i < n; i++)
    h[i] = items[idx[i]].hash;
  wire_get_taken(fd, &key, h, n, taken, ret);
  ASSERT_EQ(ret->resp->status, 0);
  ASSERT_EQ(ret->resp->get->n_blobs, n);
}

/* Blob b of a reply is item's, in the window at its offset. */
static void assert_in_window(const window *w, const Pcachepb__Blob *b, const wire_item *it) {
  ASSERT_EQ(b->blob.len, 0);
  ASSERT_EQ(b->blob_size, it->item.blob.len);
  ASSERT_TRUE(b->blob_offset <= w->size && b->blob_size <= w->size - b->blob_offset);
  ASSERT_MEMEQ(w->map + b->blob_offset, it->item.blob.data, it->item.blob.len);
}

static void assert_inline(const wire_reply *r, const Pcachepb__Blob *b, const wire_item *it) {
  size_t size;
  const uint8_t *bytes = wire_blob_data(r, b, &size);
  ASSERT_TRUE(bytes != NULL);
  ASSERT_EQ(size, it->item.blob.len);
  ASSERT_MEMEQ(bytes, it->item.blob.data, size);
}

/* The seals: no shrinking, growing, writing or hole punching, for the
 * client; reading is all it may do. */
static void check_seals(const window *w) {
  int seals = fcntl(w->fd, F_GET_SEALS);
  ASSERT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL);
  ASSERT_EQ(ftruncate(w->fd, 0), -1);
  ASSERT_EQ(errno, EPERM);
  ASSERT_EQ(ftruncate(w->fd, (off_t)w->size * 2), -1);
  ASSERT_EQ(errno, EPERM);
  ASSERT_TRUE(mmap(NULL, w->size, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0) == MAP_FAILED);
  ASSERT_EQ(errno, EPERM);
  ASSERT_EQ(fallocate(w->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), -1);
  ASSERT_EQ(errno, EPERM);
  ASSERT_EQ(pwrite(w->fd, "x", 1, 0), -1);
  ASSERT_EQ(errno, EPERM);
  ASSERT_EQ(fcntl(w->fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
}

static void raw_client(const test_env *env) {
  int fd = wire_open(env, "winapp");
  window w;
  wire_reply r, r2;
  Pcachepb__StatsReply st;
  uint8_t before[64];

  ask_window(fd, &w);
  ASSERT_EQ(w.size, WINDOW);
  check_seals(&w);

  /* The first reply through the window. */
  get_taken(fd, (size_t[]){0}, 1, 0, &r);
  ASSERT_EQ(r.resp->get->window_seq, 1);
  ASSERT_EQ(r.resp->get->blobs[0]->blob_offset, 0);
  assert_in_window(&w, r.resp->get->blobs[0], &items[0]);
  wire_reply_free(&r);

  /* Asked as if reply 1 were still unread: inline, the window untouched. */
  memcpy(before, w.map, sizeof before);
  get_taken(fd, (size_t[]){1}, 1, 0, &r);
  ASSERT_EQ(r.resp->get->window_seq, 0);
  assert_inline(&r, r.resp->get->blobs[0], &items[1]);
  ASSERT_MEMEQ(w.map, before, sizeof before);
  wire_reply_free(&r);
  /* Naming a reply the window never carried: the same. */
  get_taken(fd, (size_t[]){1}, 1, 12345, &r);
  ASSERT_EQ(r.resp->get->window_seq, 0);
  assert_inline(&r, r.resp->get->blobs[0], &items[1]);
  wire_reply_free(&r);

  /* Taken: two blobs back to back in the window. */
  get_taken(fd, (size_t[]){1, 2}, 2, 1, &r);
  ASSERT_EQ(r.resp->get->window_seq, 2);
  ASSERT_EQ(r.resp->get->blobs[0]->blob_offset, 0);
  ASSERT_EQ(r.resp->get->blobs[1]->blob_offset, SMALL);
  assert_in_window(&w, r.resp->get->blobs[0], &items[1]);
  assert_in_window(&w, r.resp->get->blobs[1], &items[2]);
  wire_reply_free(&r);

  /* Larger than the window: a bulk memfd, as without one. */
  get_taken(fd, (size_t[]){N_SMALL}, 1, 2, &r);
  ASSERT_EQ(r.resp->get->window_seq, 0);
  ASSERT_GE(r.fd, 0);
  assert_inline(&r, r.resp->get->blobs[0], &items[N_SMALL]);
  wire_reply_free(&r);

  st = wire_stats_of(fd);
  ASSERT_EQ(st.windows, 1);
  ASSERT_EQ(st.window_bytes, WINDOW);
  ASSERT_EQ(st.window_replies, 2);
  ASSERT_EQ(st.window_busy, 2);

  /* A second request replaces the window: the old mapping stays whole,
   * the new window starts again at reply 1. */
  {
    window w2;
    ask_window(fd, &w2);
    get_taken(fd, (size_t[]){0}, 1, 0, &r2);
    ASSERT_EQ(r2.resp->get->window_seq, 1);
    assert_in_window(&w2, r2.resp->get->blobs[0], &items[0]);
    ASSERT_MEMEQ(w.map + SMALL, items[2].item.blob.data, SMALL); /* the old one as it was */
    wire_reply_free(&r2);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.windows, 1);
    window_close(&w2);
  }
  window_close(&w);
  close(fd);
}

/* What libpcache does: the transport asks for the window, names what it
 * took, and copies each reply's bytes out. */
static void transport_client(const test_env *env) {
  pcache__transport *t;
  pcache__reply reply;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  ProtobufCBinaryData h;
  uint64_t deadline = pcache__mono_ms() + WIRE_TIMEOUT_MS;

  ASSERT_OK(pcache__transport_open(env->socket_path, "winapp", 10000, &t, NULL));
  ASSERT_EQ(pcache__transport_open_window(t, deadline), 1);
  get.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, key.bytes};
  get.state_hashes = &h;
  get.n_state_hashes = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  for (size_t round = 0; round < 6; round++) {
    const wire_item *it = &items[round % N_SMALL];
    const Pcachepb__Blob *b;
    const uint8_t *bytes;
    size_t size;
    h = (ProtobufCBinaryData){PCACHE_HASH_SIZE, (uint8_t *)it->hash.bytes};
    ASSERT_OK(pcache__transport_rpc(t, &req, PCACHEPB__RESPONSE__BODY_GET, deadline, &reply));
    b = reply.response->get->blobs[0];
    ASSERT_EQ(reply.response->get->window_seq, round + 1);
    ASSERT_TRUE(reply.bulk_owned); /* a copy, not the window */
    bytes = pcache__reply_bytes(&reply, b->blob, b->blob_offset, b->blob_size, &size);
    ASSERT_EQ(size, it->item.blob.len);
    ASSERT_MEMEQ(bytes, it->item.blob.data, size);
    ASSERT_EQ(pcache__checksum64(bytes, size), b->checksum);
    pcache__reply_release(&reply);
  }

  /* Two in flight: the second was sent before the first reply was taken,
   * so its blob comes inline; both are right. */
  {
    pcache__reply second;
    h = (ProtobufCBinaryData){PCACHE_HASH_SIZE, items[0].hash.bytes};
    ASSERT_OK(pcache__transport_send(t, &req, deadline));
    h = (ProtobufCBinaryData){PCACHE_HASH_SIZE, items[1].hash.bytes};
    ASSERT_OK(pcache__transport_send(t, &req, deadline));
    ASSERT_OK(pcache__transport_recv(t, PCACHEPB__RESPONSE__BODY_GET, deadline, &reply));
    ASSERT_OK(pcache__transport_recv(t, PCACHEPB__RESPONSE__BODY_GET, deadline, &second));
    ASSERT_EQ(reply.response->get->window_seq, 7);
    ASSERT_EQ(second.response->get->window_seq, 0);
    ASSERT_MEMEQ(pcache__reply_bytes(&reply, reply.response->get->blobs[0]->blob,
                                     reply.response->get->blobs[0]->blob_offset,
                                     reply.response->get->blobs[0]->blob_size, &(size_t){0}),
                 items[0].item.blob.data, SMALL);
    ASSERT_MEMEQ(second.response->get->blobs[0]->blob.data, items[1].item.blob.data, SMALL);
    pcache__reply_release(&reply);
    pcache__reply_release(&second);
  }
  pcache__transport_close(t);
}

int main(void) {
  test_env env;
  int fd;
  wire_reply r;
  Pcachepb__StatsReply st;

  test_env_init(&env, "daemon-window");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  wire_devkey(1, &key);
  for (size_t i = 0; i <= N_SMALL; i++)
    wire_item_make(&items[i], &key, i + 1, i < N_SMALL ? SMALL : BIG);
  fd = wire_open(&env, "winapp");
  for (size_t i = 0; i <= N_SMALL; i++) {
    wire_put(fd, &key, &items[i], 1, &r);
    ASSERT_EQ(r.resp->status, 0);
    wire_reply_free(&r);
  }

  raw_client(&env);
  transport_client(&env);
  /* Both connections closed: their windows are gone. */
  for (int i = 0; i < 100 && (st = wire_stats_of(fd)).windows; i++)
    usleep(20000);
  ASSERT_EQ(st.windows, 0);
  ASSERT_EQ(st.window_bytes, 0);
  close(fd);

  /* --reply-window 0: none given, the blob inline, as before windows. */
  test_daemon_stop(&env, SIGTERM);
  test_daemon_start(&env, (const char *const[]){"--reply-window", "0", NULL});
  {
    pcache__transport *t;
    window w;
    fd = wire_open(&env, "winapp");
    ask_window(fd, &w);
    ASSERT_EQ(w.size, 0);
    get_taken(fd, (size_t[]){0}, 1, 0, &r);
    ASSERT_EQ(r.resp->get->window_seq, 0);
    assert_inline(&r, r.resp->get->blobs[0], &items[0]);
    wire_reply_free(&r);
    ASSERT_OK(pcache__transport_open(env.socket_path, "winapp", 10000, &t, NULL));
    ASSERT_EQ(pcache__transport_open_window(t, pcache__mono_ms() + WIRE_TIMEOUT_MS), 0);
    pcache__transport_close(t);
    close(fd);
  }

  for (size_t i = 0; i <= N_SMALL; i++)
    wire_item_free(&items[i]);
  test_env_cleanup(&env);
  return 0;
}
