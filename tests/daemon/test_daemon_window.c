/* Reply windows on a real pcached (docs/protocol.md "Reply window").
 *
 * - A ReplyWindow reply brings a memfd of --reply-window bytes, sealed so
 *   that the client can neither shrink, grow, write nor punch holes in it
 *   (each tried here), only map it read-only, and the first_seq its
 *   replies count from (never 0).
 * - A Get naming the window's last reply (window_taken) gets its blobs
 *   through the window, back to back, byte for byte as stored.
 * - A Get that does not (sent before the last reply was read, naming a
 *   reply the window never carried, or 0: a client that never got the
 *   window) gets its blob inline, and the window's bytes are left alone;
 *   so does a blob larger than the window, and a reply that would still
 *   need a bulk memfd (many small blobs).
 * - A second ReplyWindow on a connection is refused (-EEXIST), its window
 *   kept.
 * - Through the transport (proto/transport.h), as libpcache fetches: Gets
 *   and a Prefetch page copied out and checksumming as stored; two Gets in
 *   flight at once each get theirs, the second inline.
 * - Replies the socket cannot take at once are queued as themselves: 96
 *   different replies to a client that reads nothing until it has sent
 *   every request (the daemon encodes each into one scratch buffer, so a
 *   queued reply must be a copy).
 * - A window's pages are made as replies first reach them (one at first,
 *   then as far as the first reply went), not when it is asked for.
 * - The daemon's side alone: a placed reply that was never sent (it could not be
 *   encoded) is taken back, so the client's next request, which never saw
 *   it, is answered through the window.
 * - Stats count windows, replies through them and busy ones; a closed
 *   connection's window is freed; --reply-window 0 gives none, and Gets
 *   work as before. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "daemon/net/window.h"
#include "proto/transport.h"
#include "test.h"
#include "wire.h"

enum { N_SMALL = 3, SMALL = 20480, BIG = 300000, WINDOW = 256 << 10, N_TINY = 1500, TINY = 64 };

static pcache__devkey key;
static wire_item items[N_SMALL + 1]; /* app winapp; the last, BIG, app bigapp */
static wire_item tiny[N_TINY];       /* app tinyapp */

typedef struct window {
  int fd;
  const uint8_t *map;
  uint64_t size, first_seq;
} window;

/* A ReplyWindow on a raw connection; its status is returned. */
static int ask_window(int fd, window *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplyWindow rw = PCACHEPB__REPLY_WINDOW__INIT;
  wire_reply r;
  int status;
  memset(ret, 0, sizeof *ret);
  ret->fd = -1;
  req.body_case = PCACHEPB__REQUEST__BODY_REPLY_WINDOW;
  req.reply_window = &rw;
  wire_call(fd, &req, &r);
  status = r.resp->status;
  if (status == 0) {
    ASSERT_EQ(r.resp->body_case, PCACHEPB__RESPONSE__BODY_REPLY_WINDOW);
    ret->size = r.resp->reply_window->size;
    ret->first_seq = r.resp->reply_window->first_seq;
    ASSERT_EQ(r.reply.has_passed_fd, ret->size > 0);
    ASSERT_EQ(ret->first_seq != 0, ret->size > 0);
    ret->fd = ret->size ? r.reply.passed_fd : -1;
    r.reply.has_passed_fd = 0;
    ret->map = ret->size ? mmap(NULL, ret->size, PROT_READ, MAP_SHARED, ret->fd, 0) : NULL;
    ASSERT_TRUE(ret->map != MAP_FAILED);
  }
  wire_reply_free(&r);
  return status;
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
  window w, again;
  wire_reply r;
  Pcachepb__StatsReply st;
  uint8_t *before = malloc(SMALL);

  ASSERT_EQ(ask_window(fd, &w), 0);
  ASSERT_EQ(w.size, WINDOW);
  check_seals(&w);
  {
    /* Its pages come as replies reach them: one so far. */
    struct stat file;
    ASSERT_EQ(fstat(w.fd, &file), 0);
    ASSERT_LT((uint64_t)file.st_blocks * 512, SMALL);
  }

  /* A client that never got the window (it says 0): inline. */
  get_taken(fd, (size_t[]){0}, 1, 0, &r);
  ASSERT_EQ(r.resp->get->window_seq, 0);
  assert_inline(&r, r.resp->get->blobs[0], &items[0]);
  wire_reply_free(&r);

  /* The first reply through the window, its pages made first. */
  get_taken(fd, (size_t[]){0}, 1, w.first_seq, &r);
  ASSERT_EQ(r.resp->get->window_seq, w.first_seq + 1);
  ASSERT_EQ(r.resp->get->blobs[0]->blob_offset, 0);
  assert_in_window(&w, r.resp->get->blobs[0], &items[0]);
  wire_reply_free(&r);
  {
    struct stat file;
    ASSERT_EQ(fstat(w.fd, &file), 0);
    ASSERT_GE((uint64_t)file.st_blocks * 512, SMALL);
    ASSERT_LT((uint64_t)file.st_blocks * 512, WINDOW);
  }

  /* Asked as if reply 1 were still unread, or naming a reply the window
   * never carried: inline, the window untouched. */
  memcpy(before, w.map, SMALL);
  get_taken(fd, (size_t[]){1}, 1, w.first_seq, &r);
  ASSERT_EQ(r.resp->get->window_seq, 0);
  assert_inline(&r, r.resp->get->blobs[0], &items[1]);
  wire_reply_free(&r);
  get_taken(fd, (size_t[]){1}, 1, w.first_seq + 12345, &r);
  ASSERT_EQ(r.resp->get->window_seq, 0);
  assert_inline(&r, r.resp->get->blobs[0], &items[1]);
  wire_reply_free(&r);
  ASSERT_MEMEQ(w.map, before, SMALL);

  /* Taken: two blobs back to back in the window. */
  get_taken(fd, (size_t[]){1, 2}, 2, w.first_seq + 1, &r);
  ASSERT_EQ(r.resp->get->window_seq, w.first_seq + 2);
  ASSERT_EQ(r.resp->get->blobs[0]->blob_offset, 0);
  ASSERT_EQ(r.resp->get->blobs[1]->blob_offset, SMALL);
  assert_in_window(&w, r.resp->get->blobs[0], &items[1]);
  assert_in_window(&w, r.resp->get->blobs[1], &items[2]);
  wire_reply_free(&r);

  /* Larger than the window: a bulk memfd, as without one. */
  get_taken(fd, (size_t[]){N_SMALL}, 1, w.first_seq + 2, &r);
  ASSERT_EQ(r.resp->get->window_seq, 0);
  ASSERT_GE(r.fd, 0);
  assert_inline(&r, r.resp->get->blobs[0], &items[N_SMALL]);
  wire_reply_free(&r);

  /* One window a connection: a second request is refused, the first
   * goes on. */
  ASSERT_EQ(ask_window(fd, &again), -EEXIST);
  get_taken(fd, (size_t[]){0}, 1, w.first_seq + 2, &r);
  ASSERT_EQ(r.resp->get->window_seq, w.first_seq + 3);
  assert_in_window(&w, r.resp->get->blobs[0], &items[0]);
  wire_reply_free(&r);

  st = wire_stats_of(fd);
  ASSERT_EQ(st.windows, 1);
  ASSERT_EQ(st.window_bytes, WINDOW);
  ASSERT_EQ(st.window_replies, 3);
  ASSERT_EQ(st.window_busy, 3);
  window_close(&w);
  close(fd);
  free(before);
}

/* The bytes of Blob b of a transport's reply, checked against it. */
static void assert_reply_blob(const pcache__reply *reply, const Pcachepb__Blob *b,
                              const wire_item *it) {
  size_t size;
  const uint8_t *bytes = pcache__reply_bytes(reply, b->blob, b->blob_offset, b->blob_size, &size);
  ASSERT_TRUE(bytes != NULL);
  ASSERT_EQ(size, it->item.blob.len);
  ASSERT_MEMEQ(bytes, it->item.blob.data, size);
  ASSERT_EQ(pcache__checksum64(bytes, size), b->checksum);
}

/* The wire_item of a reply's blob, by its state hash. */
static const wire_item *item_of(const Pcachepb__Blob *b, const wire_item *set, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b->state_hash.len == PCACHE_HASH_SIZE &&
        memcmp(b->state_hash.data, set[i].hash.bytes, PCACHE_HASH_SIZE) == 0)
      return &set[i];
  ASSERT_TRUE(!"a blob nobody asked for");
  return NULL;
}

/* A Get of n of set's hashes through t. */
static void transport_get(pcache__transport *t, const wire_item *set, size_t n,
                          pcache__reply *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  ProtobufCBinaryData *h = calloc(n, sizeof *h);
  for (size_t i = 0; i < n; i++)
    h[i] = (ProtobufCBinaryData){PCACHE_HASH_SIZE, (uint8_t *)set[i].hash.bytes};
  get.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, key.bytes};
  get.state_hashes = h;
  get.n_state_hashes = n;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  ASSERT_OK(pcache__transport_rpc(t, &req, PCACHEPB__RESPONSE__BODY_GET,
                                  pcache__mono_ms() + WIRE_TIMEOUT_MS, ret));
  ASSERT_EQ(ret->response->get->n_blobs, n);
  for (size_t i = 0; i < n; i++)
    assert_reply_blob(ret, ret->response->get->blobs[i],
                      item_of(ret->response->get->blobs[i], set, n));
  free(h);
}

/* What libpcache does: the transport asks for the window, names what it
 * took, and copies each reply's bytes out. */
static void transport_client(const test_env *env) {
  pcache__transport *t;
  pcache__reply reply, second;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  Pcachepb__Prefetch pre = PCACHEPB__PREFETCH__INIT;
  ProtobufCBinaryData h;
  uint64_t deadline = pcache__mono_ms() + WIRE_TIMEOUT_MS, seq;

  ASSERT_OK(pcache__transport_open(env->socket_path, "winapp", 10000, &t, NULL));
  ASSERT_EQ(pcache__transport_open_window(t, deadline), 1);
  ASSERT_EQ(pcache__transport_open_window(t, deadline), 1); /* kept, not asked again */
  for (size_t round = 0; round < 6; round++) {
    transport_get(t, &items[round % N_SMALL], 1, &reply);
    ASSERT_TRUE(reply.response->get->window_seq != 0);
    ASSERT_TRUE(reply.bulk_owned); /* a copy, not the window */
    pcache__reply_release(&reply);
  }

  /* A Prefetch page of winapp: its three blobs through the window. */
  pre.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, key.bytes};
  req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  req.prefetch = &pre;
  ASSERT_OK(pcache__transport_rpc(t, &req, PCACHEPB__RESPONSE__BODY_PREFETCH, deadline, &reply));
  ASSERT_EQ(reply.response->prefetch->n_blobs, N_SMALL);
  ASSERT_TRUE(reply.response->prefetch->window_seq != 0);
  for (size_t i = 0; i < N_SMALL; i++)
    assert_reply_blob(&reply, reply.response->prefetch->blobs[i],
                      item_of(reply.response->prefetch->blobs[i], items, N_SMALL));
  seq = reply.response->prefetch->window_seq;
  pcache__reply_release(&reply);

  /* Two in flight: the second was sent before the first reply was taken,
   * so its blob comes inline; both are right. */
  get.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, key.bytes};
  get.state_hashes = &h;
  get.n_state_hashes = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  h = (ProtobufCBinaryData){PCACHE_HASH_SIZE, items[0].hash.bytes};
  ASSERT_OK(pcache__transport_send(t, &req, deadline));
  h = (ProtobufCBinaryData){PCACHE_HASH_SIZE, items[1].hash.bytes};
  ASSERT_OK(pcache__transport_send(t, &req, deadline));
  ASSERT_OK(pcache__transport_recv(t, PCACHEPB__RESPONSE__BODY_GET, deadline, &reply));
  ASSERT_OK(pcache__transport_recv(t, PCACHEPB__RESPONSE__BODY_GET, deadline, &second));
  ASSERT_EQ(reply.response->get->window_seq, seq + 1);
  ASSERT_EQ(second.response->get->window_seq, 0);
  assert_reply_blob(&reply, reply.response->get->blobs[0], &items[0]);
  assert_reply_blob(&second, second.response->get->blobs[0], &items[1]);
  pcache__reply_release(&reply);
  pcache__reply_release(&second);

  /* Many small blobs: 1000 fit one inline frame once their bytes are in
   * the window; 1500 would not, so their reply is a bulk memfd, as
   * without a window. */
  transport_get(t, tiny, 1000, &reply);
  ASSERT_TRUE(reply.response->get->window_seq != 0);
  pcache__reply_release(&reply);
  transport_get(t, tiny, N_TINY, &reply);
  ASSERT_EQ(reply.response->get->window_seq, 0);
  ASSERT_TRUE(reply.bulk != NULL && !reply.bulk_owned);
  pcache__reply_release(&reply);
  pcache__transport_close(t);
}

/* 96 Gets, each for another of the three blobs, sent before any reply is
 * read by a client whose receive buffer is small: most replies wait in
 * the daemon's queue. Each must be its own when read. */
static void unread_client(const test_env *env) {
  enum { N = 96 };
  int fd = wire_open(env, "winapp"), small = 4096;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  ProtobufCBinaryData h;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  get.device_key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, key.bytes};
  get.state_hashes = &h;
  get.n_state_hashes = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  for (size_t i = 0; i < N; i++) {
    h = (ProtobufCBinaryData){PCACHE_HASH_SIZE, items[i % N_SMALL].hash.bytes};
    ASSERT_OK(wire_send(fd, &req));
  }
  for (size_t i = 0; i < N; i++) {
    wire_reply r;
    ASSERT_OK(wire_recv(fd, &r));
    ASSERT_EQ(r.resp->status, 0);
    ASSERT_EQ(r.resp->get->n_blobs, 1);
    assert_inline(&r, r.resp->get->blobs[0], &items[i % N_SMALL]);
    wire_reply_free(&r);
  }
  close(fd);
}

static void daemon_side(void) {
  pcd_window *w;
  uint8_t bytes[100];
  Pcachepb__Blob b = PCACHEPB__BLOB__INIT, *bp = &b;
  Pcachepb__GetReply g = PCACHEPB__GET_REPLY__INIT;
  uint64_t first;
  memset(bytes, 7, sizeof bytes);
  ASSERT_OK(pcd_window_open(65536, &w));
  first = pcd_window_first_seq(w);
  ASSERT_TRUE(first != 0);
  g.blobs = &bp;
  g.n_blobs = 1;
  for (int round = 0; round < 2; round++) {
    b.blob = (ProtobufCBinaryData){sizeof bytes, bytes};
    g.window_seq = 0;
    ASSERT_EQ(pcd_window_place(w, &g, first), PCD_WINDOW_USED);
    ASSERT_EQ(g.window_seq, first + 1);
    ASSERT_EQ(b.blob_size, sizeof bytes);
    if (round == 0)
      pcd_window_unplace(w); /* never sent */
  }
  /* Sent this time: the same taken is now behind. */
  b.blob = (ProtobufCBinaryData){sizeof bytes, bytes};
  ASSERT_EQ(pcd_window_place(w, &g, first), PCD_WINDOW_BUSY);
  ASSERT_EQ(pcd_window_place(w, &g, first + 1), PCD_WINDOW_USED);
  ASSERT_EQ(g.window_seq, first + 2);
  pcd_window_free(w);
}

static void put_all(const test_env *env, const char *app, wire_item *set, size_t n) {
  int fd = wire_open(env, app);
  for (size_t i = 0; i < n; i += 100) {
    wire_reply r;
    wire_put(fd, &key, &set[i], n - i < 100 ? n - i : 100, &r);
    ASSERT_EQ(r.resp->status, 0);
    wire_reply_free(&r);
  }
  close(fd);
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
  for (size_t i = 0; i < N_TINY; i++)
    wire_item_make(&tiny[i], &key, 100 + i, TINY);
  put_all(&env, "winapp", items, N_SMALL);
  put_all(&env, "bigapp", &items[N_SMALL], 1);
  put_all(&env, "tinyapp", tiny, N_TINY);

  daemon_side();
  raw_client(&env);
  transport_client(&env);
  unread_client(&env);
  /* Every connection closed: their windows are gone. */
  fd = wire_open(&env, "winapp");
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
    ASSERT_EQ(ask_window(fd, &w), 0);
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
  for (size_t i = 0; i < N_TINY; i++)
    wire_item_free(&tiny[i]);
  test_env_cleanup(&env);
  return 0;
}
