/* libpcache's connection against a daemon played here, on a real Unix
 * socket, that breaks the protocol in ways pcached never does:
 *   - it offers a HelloReply.max_frame of 4 GiB - 1, then announces a 1 GiB
 *     reply: the client refuses the frame (PCACHE_EFRAME_TOO_LARGE) without
 *     allocating it, since what it accepts stays its own 64 MiB;
 *   - it answers a request with a Response of another kind sent unasked,
 *     then with the real one: the client calls the first PCACHE_EPROTO
 *     and drops the connection, so that its next request, on a fresh
 *     connection, gets its own reply and not the stale one behind it;
 *   - it refuses a request (a negative status): the connection stays;
 *   - it closes a connection that has been idle for a second, as pcached
 *     does for a newcomer at its limits: the client's next request goes
 *     out on a new connection at once, and is answered;
 *   - an impostor answers a Get of one hash with a sealed, sparse 1 GiB
 *     memfd, a ReplyWindow with a 1 GiB window, a Segment with an 8 GiB
 *     one: each is refused before it is mapped (PCACHE_EPROTO, the
 *     connection closed), and this process's peak RSS stays far below
 *     what mapping one would cost;
 *   - an impostor announces the largest limits (max_blob 1 GiB,
 *     max_snapshot 4 GiB) in its Hello: a Get of one hash is still
 *     refused a 1 GiB memfd and a Prefetch a 1.5 GiB one, since what the
 *     client takes is its own (PCACHE_CLIENT_MAX_*); a reply within those
 *     bounds costs only the pages its Blobs name, and Blobs that name
 *     more bytes together than the memfd holds are refused. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "proto/rpc.h"
#include "proto/transport.h"
#include "test.h"

static char sock_path[108];
static int listen_fd = -1;

typedef enum script {
  BIG_FRAME,   /* max_frame 4 GiB - 1, then a 1 GiB header */
  OUT_OF_STEP, /* an unasked GetReply before the StatsReply, then "fresh" */
  IDLE_CLOSE,  /* answers one Stats, closes; the next connection "second" */
  HUGE_FDS,    /* a 1 GiB bulk Get reply, a 1 GiB window, an 8 GiB segment */
  BIG_HELLO,   /* the largest limits announced, then replies past ours */
} script;

#define GIB (1ull << 30)

/* Reads one request frame; its body case, or -1 when the peer is gone. */
static int read_request(int c) {
  uint8_t header[PCACHE_FRAME_HEADER_SIZE], *body;
  uint32_t length;
  size_t got = 0;
  Pcachepb__Request *req;
  int kind;
  while (got < sizeof header) {
    ssize_t n = read(c, header + got, sizeof header - got);
    if (n <= 0)
      return -1;
    got += (size_t)n;
  }
  if (pcache__frame_length(header, 1u << 20, &length) < 0)
    return -1;
  body = pcache__malloc(length);
  ASSERT_TRUE(body);
  for (got = 0; got < length;) {
    ssize_t n = read(c, body + got, length - got);
    if (n <= 0) {
      pcache__free(body);
      return -1;
    }
    got += (size_t)n;
  }
  ASSERT_OK(pcache__request_decode(body, length, 1000, &req));
  kind = (int)req->body_case;
  pcache__request_free(req);
  pcache__free(body);
  return kind;
}

static void send_response(int c, Pcachepb__Response *resp) {
  uint8_t *buf;
  size_t size;
  ssize_t n;
  ASSERT_OK(pcache__response_encode(resp, 1u << 20, &buf, &size));
  /* A client that refused an earlier reply may have hung up already. */
  n = send(c, buf, size, MSG_NOSIGNAL);
  ASSERT_TRUE(n == (ssize_t)size || (n < 0 && (errno == EPIPE || errno == ECONNRESET)));
  pcache__free(buf);
}

static void hello_reply_limits(int c, uint64_t max_frame, uint64_t max_blob,
                               uint64_t max_snapshot) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__HelloReply h = PCACHEPB__HELLO_REPLY__INIT;
  ASSERT_EQ(read_request(c), PCACHEPB__REQUEST__BODY_HELLO);
  h.protocol_version = PCACHE_PROTOCOL_VERSION;
  h.max_frame = max_frame;
  h.max_blob = max_blob;
  h.max_snapshot = max_snapshot;
  resp.body_case = PCACHEPB__RESPONSE__BODY_HELLO;
  resp.hello = &h;
  send_response(c, &resp);
}

static void stats_reply(int c, const char *message, int32_t status) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__StatsReply st = PCACHEPB__STATS_REPLY__INIT;
  resp.message = (char *)message;
  resp.status = status;
  resp.body_case = PCACHEPB__RESPONSE__BODY_STATS;
  resp.stats = &st;
  send_response(c, &resp);
}

/* A sealed memfd of size bytes, sparse but for tail at its end. */
static int sparse_memfd(uint64_t size, const uint8_t *tail, size_t tail_size) {
  int fd = memfd_create("impostor", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, (off_t)size), 0);
  if (tail_size)
    ASSERT_EQ(pwrite(fd, tail, tail_size, (off_t)(size - tail_size)), (ssize_t)tail_size);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW), 0);
  return fd;
}

/* resp's frame with fd (SCM_RIGHTS) on its first byte, as pcached sends. */
static void send_response_fd(int c, Pcachepb__Response *resp, int fd) {
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  uint8_t *buf;
  size_t size;
  struct iovec iov;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  struct cmsghdr *cm;
  ASSERT_OK(pcache__response_encode(resp, 1u << 20, &buf, &size));
  iov = (struct iovec){buf, size};
  memset(&ctl, 0, sizeof ctl);
  msg.msg_control = ctl.buf;
  msg.msg_controllen = sizeof ctl.buf;
  cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  ASSERT_EQ(sendmsg(c, &msg, MSG_NOSIGNAL), (ssize_t)size);
  pcache__free(buf);
  close(fd);
}

static void hello_reply(int c, uint64_t max_frame) { hello_reply_limits(c, max_frame, 0, 0); }

/* A Get (or Prefetch) reply in a sparse bulk memfd of size bytes laid out
 * as pcached lays one, the Response last: n_blobs Blobs, each of
 * blob_size bytes at offset 0. */
static void bulk_reply(int c, int prefetch, uint64_t size, size_t n_blobs, uint64_t blob_size) {
  Pcachepb__Response inner = PCACHEPB__RESPONSE__INIT, outer = PCACHEPB__RESPONSE__INIT;
  Pcachepb__GetReply g = PCACHEPB__GET_REPLY__INIT;
  Pcachepb__Blob b[2], *bp[2];
  Pcachepb__Bulk bulk = PCACHEPB__BULK__INIT;
  uint8_t hash[16] = {1}, packed[256];
  size_t n;
  ASSERT_LE(n_blobs, 2);
  for (size_t i = 0; i < n_blobs; i++) {
    pcachepb__blob__init(&b[i]);
    b[i].state_hash = (ProtobufCBinaryData){16, hash};
    b[i].blob_offset = 0;
    b[i].blob_size = blob_size;
    bp[i] = &b[i];
  }
  g.blobs = bp;
  g.n_blobs = n_blobs;
  inner.body_case = prefetch ? PCACHEPB__RESPONSE__BODY_PREFETCH : PCACHEPB__RESPONSE__BODY_GET;
  if (prefetch)
    inner.prefetch = &g;
  else
    inner.get = &g;
  n = pcachepb__response__pack(&inner, packed);
  ASSERT_LE(n, sizeof packed);
  bulk.size = size;
  bulk.response_offset = size - n;
  bulk.response_size = n;
  outer.body_case = PCACHEPB__RESPONSE__BODY_BULK;
  outer.bulk = &bulk;
  send_response_fd(c, &outer, sparse_memfd(size, packed, n));
}

/* The Get reply of a blob of (nearly) 1 GiB. */
static void huge_bulk_reply(int c) { bulk_reply(c, 0, GIB, 1, GIB - 4096); }

static void huge_window_reply(int c) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__ReplyWindowReply w = PCACHEPB__REPLY_WINDOW_REPLY__INIT;
  w.size = GIB;
  w.first_seq = 7;
  resp.body_case = PCACHEPB__RESPONSE__BODY_REPLY_WINDOW;
  resp.reply_window = &w;
  send_response_fd(c, &resp, sparse_memfd(GIB, NULL, 0));
}

static void huge_segment_reply(int c) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__SegmentReply sr = PCACHEPB__SEGMENT_REPLY__INIT;
  sr.size = 8 * GIB;
  resp.body_case = PCACHEPB__RESPONSE__BODY_SEGMENT;
  resp.segment = &sr;
  send_response_fd(c, &resp, sparse_memfd(8 * GIB, NULL, 0));
}

/* Each connection of HUGE_FDS: Hello, then one request answered with a
 * descriptor too large; the client must close. */
static void huge_fds(void) {
  void (*reply[])(int) = {huge_bulk_reply, huge_window_reply, huge_segment_reply};
  for (size_t i = 0; i < sizeof reply / sizeof *reply; i++) {
    int c = accept(listen_fd, NULL, NULL);
    ASSERT_GE(c, 0);
    hello_reply(c, 64u << 20);
    ASSERT_GE(read_request(c), 0);
    reply[i](c);
    ASSERT_EQ(read_request(c), -1); /* refused: the client hung up */
    close(c);
  }
}

#define MIB (1ull << 20)

/* BIG_HELLO: each connection announces max_blob 1 GiB and max_snapshot
 * 4 GiB, then answers one request: a 1 GiB memfd to a Get of one hash, a
 * 1.5 GiB one to a Prefetch, a 48 MiB one whose one Blob names 64 KiB
 * (accepted: the client stays connected), and two Blobs that each name
 * the same 40 MiB of a 48 MiB memfd. */
static void big_hello(void) {
  for (int i = 0; i < 4; i++) {
    int c = accept(listen_fd, NULL, NULL);
    ASSERT_GE(c, 0);
    hello_reply_limits(c, 64u << 20, GIB, 4 * GIB);
    ASSERT_GE(read_request(c), 0);
    if (i == 0)
      bulk_reply(c, 0, GIB, 1, GIB - 4096);
    else if (i == 1)
      bulk_reply(c, 1, GIB + GIB / 2, 1, GIB - 4096);
    else if (i == 2)
      bulk_reply(c, 0, 48 * MIB, 1, 64 << 10);
    else
      bulk_reply(c, 0, 48 * MIB, 2, 40 * MIB);
    ASSERT_EQ(read_request(c), -1); /* the client hung up */
    close(c);
  }
}

static void *daemon_main(void *arg) {
  script s = (script)(intptr_t)arg;
  int c;
  if (s == HUGE_FDS) {
    huge_fds();
    return NULL;
  }
  if (s == BIG_HELLO) {
    big_hello();
    return NULL;
  }
  c = accept(listen_fd, NULL, NULL);
  ASSERT_GE(c, 0);
  if (s == IDLE_CLOSE) {
    hello_reply(c, 64u << 20);
    ASSERT_EQ(read_request(c), PCACHEPB__REQUEST__BODY_STATS);
    stats_reply(c, "first", 0);
    close(c); /* idle: the client sends nothing more before we close */
    c = accept(listen_fd, NULL, NULL);
    ASSERT_GE(c, 0);
    hello_reply(c, 64u << 20);
    ASSERT_EQ(read_request(c), PCACHEPB__REQUEST__BODY_STATS);
    stats_reply(c, "second", 0);
    read_request(c); /* until the client goes */
    close(c);
    return NULL;
  }
  if (s == BIG_FRAME) {
    uint8_t header[PCACHE_FRAME_HEADER_SIZE];
    hello_reply(c, 0xffffffffu);
    ASSERT_EQ(read_request(c), PCACHEPB__REQUEST__BODY_STATS);
    pcache__frame_put_length(header, 1u << 30);
    ASSERT_EQ(write(c, header, sizeof header), (ssize_t)sizeof header);
    /* The client refuses the length and closes; nothing more comes. */
    read_request(c);
    close(c);
    return NULL;
  }
  /* OUT_OF_STEP: the first connection answers one request twice. */
  {
    Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
    Pcachepb__GetReply g = PCACHEPB__GET_REPLY__INIT;
    hello_reply(c, 64u << 20);
    ASSERT_EQ(read_request(c), PCACHEPB__REQUEST__BODY_STATS);
    resp.body_case = PCACHEPB__RESPONSE__BODY_GET;
    resp.get = &g;
    send_response(c, &resp);
    stats_reply(c, "stale", 0);
    /* A client that kept this connection reads "stale" next. */
    if (read_request(c) == PCACHEPB__REQUEST__BODY_STATS)
      stats_reply(c, "stale-2", 0);
    close(c);
  }
  /* The second: a refusal, which keeps it, then the fresh reply. */
  c = accept(listen_fd, NULL, NULL);
  ASSERT_GE(c, 0);
  hello_reply(c, 64u << 20);
  ASSERT_EQ(read_request(c), PCACHEPB__REQUEST__BODY_STATS);
  stats_reply(c, "no", PCACHE_EPROTO);
  ASSERT_EQ(read_request(c), PCACHEPB__REQUEST__BODY_STATS);
  stats_reply(c, "fresh", 0);
  read_request(c); /* until the client goes */
  close(c);
  return NULL;
}

static pthread_t start_daemon(script s) {
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, daemon_main, (void *)(intptr_t)s), 0);
  return t;
}

static void stats_request(Pcachepb__Request *req, Pcachepb__Stats *st) {
  pcachepb__request__init(req);
  pcachepb__stats__init(st);
  req->body_case = PCACHEPB__REQUEST__BODY_STATS;
  req->stats = st;
}

static void test_frame_over_our_limit(void) {
  pthread_t t = start_daemon(BIG_FRAME);
  pcache__transport *tr;
  Pcachepb__Request req;
  Pcachepb__Stats st;
  pcache__reply reply;
  ASSERT_OK(pcache__transport_open(sock_path, "fake", 5000, &tr, NULL));
  stats_request(&req, &st);
  ASSERT_ERR(pcache__transport_rpc(tr, &req, PCACHEPB__RESPONSE__BODY_STATS,
                                   pcache__mono_ms() + 5000, &reply),
             PCACHE_EFRAME_TOO_LARGE);
  pcache__reply_release(&reply);
  pcache__transport_close(tr);
  pthread_join(t, NULL);
}

static int client_stats(pcache_client *client, pcache__reply *reply) {
  Pcachepb__Request req;
  Pcachepb__Stats st;
  stats_request(&req, &st);
  return pcache__client_rpc(client, PCACHE__LANE_APP, &req, PCACHEPB__RESPONSE__BODY_STATS, 5000,
                            reply);
}

static void test_out_of_step_reply(void) {
  pthread_t t = start_daemon(OUT_OF_STEP);
  pcache_client_options opts = {.socket_path = sock_path, .app_name = "fake", .timeout_ms = 5000};
  pcache_client *client;
  pcache__reply reply;
  uint64_t until;
  int r;
  ASSERT_OK(pcache_client_open(&opts, &client));
  ASSERT_ERR(client_stats(client, &reply), PCACHE_EPROTO);
  ASSERT_EQ(reply.response->body_case, PCACHEPB__RESPONSE__BODY_GET);
  pcache__reply_release(&reply);
  /* The next call connects anew (once the lane's one-second pause is
   * over) and is refused: the daemon's own PCACHE_EPROTO keeps the
   * connection, so the call after it reads "fresh" on the same one. */
  until = pcache__mono_ms() + 5000;
  while ((r = client_stats(client, &reply)) == PCACHE_EUNAVAILABLE && pcache__mono_ms() < until) {
    pcache__reply_release(&reply);
    usleep(50 * 1000);
  }
  ASSERT_ERR(r, PCACHE_EPROTO);
  ASSERT_STREQ(reply.response->message, "no");
  pcache__reply_release(&reply);
  ASSERT_OK(client_stats(client, &reply));
  ASSERT_STREQ(reply.response->message, "fresh");
  pcache__reply_release(&reply);
  pcache_client_close(client);
  pthread_join(t, NULL);
}

static void test_idle_close(void) {
  pthread_t t = start_daemon(IDLE_CLOSE);
  pcache_client_options opts = {.socket_path = sock_path, .app_name = "fake", .timeout_ms = 5000};
  pcache_client *client;
  pcache__reply reply;
  ASSERT_OK(pcache_client_open(&opts, &client));
  ASSERT_OK(client_stats(client, &reply));
  ASSERT_STREQ(reply.response->message, "first");
  pcache__reply_release(&reply);
  usleep((PCACHE_IDLE_CLOSE_MIN_MS + 100) * 1000); /* closed meanwhile */
  /* No failed call first: the next request is answered. */
  ASSERT_OK(client_stats(client, &reply));
  ASSERT_STREQ(reply.response->message, "second");
  pcache__reply_release(&reply);
  pcache_client_close(client);
  pthread_join(t, NULL);
}

/* This process's peak resident set, in KiB. */
/* A line of /proc/self/status, in KiB: "VmHWM" (peak RSS) or "VmRSS". */
static long status_kib(const char *field) {
  char line[256];
  size_t len = strlen(field);
  long kib = -1;
  FILE *f = fopen("/proc/self/status", "re");
  ASSERT_TRUE(f);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, len) == 0 && line[len] == ':' &&
        sscanf(line + len + 1, "%ld", &kib) == 1)
      break;
  fclose(f);
  return kib;
}

static long peak_rss_kib(void) { return status_kib("VmHWM"); }

/* req on a new connection is refused as malformed (PCACHE_EPROTO). */
static void refused_on_new_connection(const Pcachepb__Request *req,
                                      Pcachepb__Response__BodyCase expect) {
  pcache__transport *tr;
  pcache__reply reply;
  ASSERT_OK(pcache__transport_open(sock_path, "fake", 5000, &tr, NULL));
  ASSERT_ERR(pcache__transport_rpc(tr, req, expect, pcache__mono_ms() + 5000, &reply),
             PCACHE_EPROTO);
  pcache__reply_release(&reply);
  pcache__transport_close(tr);
}

static void test_huge_fds(void) {
  pthread_t t = start_daemon(HUGE_FDS);
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  Pcachepb__Segment sg = PCACHEPB__SEGMENT__INIT;
  uint8_t key[32] = {0}, hash[16] = {1};
  ProtobufCBinaryData h = {16, hash};
  pcache__transport *tr;
  pcache__reply reply;

  /* A Get of one hash may bring one blob of at most max_blob (64 MiB
   * here, the Hello said none): not 1 GiB. */
  ASSERT_OK(pcache__transport_open(sock_path, "fake", 5000, &tr, NULL));
  get.device_key = (ProtobufCBinaryData){32, key};
  get.state_hashes = &h;
  get.n_state_hashes = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  ASSERT_ERR(pcache__transport_rpc(tr, &req, PCACHEPB__RESPONSE__BODY_GET, pcache__mono_ms() + 5000,
                                   &reply),
             PCACHE_EPROTO);
  ASSERT_TRUE(reply.response == NULL); /* no Response: the caller closes */
  pcache__transport_close(tr);

  /* A window over --reply-window's bound (16 MiB). */
  ASSERT_OK(pcache__transport_open(sock_path, "fake", 5000, &tr, NULL));
  ASSERT_ERR(pcache__transport_open_window(tr, pcache__mono_ms() + 5000), PCACHE_EPROTO);
  pcache__transport_close(tr);

  /* A segment over PCACHE_SEG_MAX_SIZE. */
  sg.device_key = (ProtobufCBinaryData){32, key};
  req.body_case = PCACHEPB__REQUEST__BODY_SEGMENT;
  req.segment = &sg;
  refused_on_new_connection(&req, PCACHEPB__RESPONSE__BODY_SEGMENT);
  pthread_join(t, NULL);
  /* Mapping the bulk memfd (populated) alone would be 1 GiB. */
  ASSERT_LT(peak_rss_kib(), 256 * 1024);
}

/* A Get of n hashes (n <= 2) on a new connection to the BIG_HELLO
 * impostor, with a deadline of deadline_ms from now. */
static int get_from_impostor(size_t n, uint32_t deadline_ms, pcache__transport **ret_tr,
                             pcache__reply *ret_reply) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  uint8_t key[32] = {0}, hash[2][16] = {{1}, {2}};
  ProtobufCBinaryData h[2] = {{16, hash[0]}, {16, hash[1]}};
  ASSERT_OK(pcache__transport_open(sock_path, "fake", 5000, ret_tr, NULL));
  get.device_key = (ProtobufCBinaryData){32, key};
  get.state_hashes = h;
  get.n_state_hashes = n;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  return pcache__transport_rpc(*ret_tr, &req, PCACHEPB__RESPONSE__BODY_GET,
                               pcache__mono_ms() + deadline_ms, ret_reply);
}

static void test_big_hello(void) {
  pthread_t t = start_daemon(BIG_HELLO);
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  uint8_t key[32] = {0};
  pcache__transport *tr;
  pcache__reply reply;
  uint64_t t0;
  long rss;

  /* 1 GiB to a Get of one hash, with libpcache's 50 ms: refused, well
   * before the 1 s mapping it would have cost. */
  t0 = pcache__mono_ms();
  ASSERT_ERR(get_from_impostor(1, 50, &tr, &reply), PCACHE_EPROTO);
  ASSERT_LT(pcache__mono_ms() - t0, 1000);
  pcache__transport_close(tr);

  /* 1.5 GiB to a Prefetch that asks for the snapshot. */
  pf.device_key = (ProtobufCBinaryData){32, key};
  pf.snapshot = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  req.prefetch = &pf;
  refused_on_new_connection(&req, PCACHEPB__RESPONSE__BODY_PREFETCH);

  /* 48 MiB within our bounds, of which the reply names 64 KiB: only what
   * it names is faulted in. */
  rss = status_kib("VmRSS");
  ASSERT_OK(get_from_impostor(1, 5000, &tr, &reply));
  ASSERT_EQ(reply.response->get->n_blobs, 1);
  ASSERT_LT(status_kib("VmRSS") - rss, 8 * 1024);
  pcache__reply_release(&reply);
  pcache__transport_close(tr);

  /* Two Blobs naming 80 MiB of a 48 MiB memfd. */
  ASSERT_ERR(get_from_impostor(2, 5000, &tr, &reply), PCACHE_EPROTO);
  pcache__transport_close(tr);
  pthread_join(t, NULL);
  ASSERT_LT(peak_rss_kib(), 256 * 1024);
}

int main(void) {
  char dir[] = "/tmp/pcache-fake-daemon-XXXXXX";
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  ASSERT_TRUE(mkdtemp(dir));
  ASSERT_EQ(chmod(dir, 0700), 0);
  setenv("XDG_RUNTIME_DIR", dir, 1);
  setenv("PCACHE_NO_WINDOW", "1", 1); /* the fake answers no ReplyWindow */
  snprintf(sock_path, sizeof sock_path, "%s/sock", dir);
  memcpy(sun.sun_path, sock_path, strlen(sock_path) + 1);
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listen_fd, 0);
  ASSERT_EQ(bind(listen_fd, (struct sockaddr *)&sun, sizeof sun), 0);
  ASSERT_EQ(listen(listen_fd, 4), 0);
  test_frame_over_our_limit();
  test_out_of_step_reply();
  test_idle_close();
  test_huge_fds();
  test_big_hello();
  close(listen_fd);
  unlink(sock_path);
  rmdir(dir);
  return 0;
}
