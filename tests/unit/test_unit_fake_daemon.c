/* libpcache's connection against a daemon played here, on a real Unix
 * socket, that breaks the protocol in ways pcached never does:
 *   - it offers a HelloReply.max_frame of 4 GiB - 1, then announces a 1 GiB
 *     reply: the client refuses the frame (PCACHE_EFRAME_TOO_LARGE) without
 *     allocating it, since what it accepts stays its own 64 MiB;
 *   - it answers a request with a Response of another kind sent unasked,
 *     then with the real one: the client calls the first PCACHE_EPROTO
 *     and drops the connection, so that its next request, on a fresh
 *     connection, gets its own reply and not the stale one behind it;
 *   - it refuses a request (a negative status): the connection stays. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
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
} script;

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
  ASSERT_OK(pcache__response_encode(resp, 1u << 20, &buf, &size));
  ASSERT_EQ(write(c, buf, size), (ssize_t)size);
  pcache__free(buf);
}

static void hello_reply(int c, uint64_t max_frame) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__HelloReply h = PCACHEPB__HELLO_REPLY__INIT;
  ASSERT_EQ(read_request(c), PCACHEPB__REQUEST__BODY_HELLO);
  h.protocol_version = PCACHE_PROTOCOL_VERSION;
  h.max_frame = max_frame;
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

static void *daemon_main(void *arg) {
  script s = (script)(intptr_t)arg;
  int c = accept(listen_fd, NULL, NULL);
  ASSERT_GE(c, 0);
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
  close(listen_fd);
  unlink(sock_path);
  rmdir(dir);
  return 0;
}
