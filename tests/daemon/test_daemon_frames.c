/* Hostile framing: garbage, a frame cut short, an announced length over
 * the limit, a zero length, a client that stalls mid-frame. Each costs the
 * offender its connection; another client is served throughout. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "proto/frame.h"
#include "test.h"
#include "wire.h"

static test_env env;
static int witness;

/* The witness connection still gets answers. */
static void witness_ok(void) {
  wire_reply rep;
  wire_stats(witness, &rep);
  wire_reply_free(&rep);
}

int main(void) {
  const char *args[] = {"--max-frame", "1M",         "--frame-timeout", "1",
                        "--max-pending", "8K",      "--max-connections", "3", NULL};
  uint8_t hdr[4];
  int fd;

  test_env_init(&env, "frames");
  wire_guard(&env);
  test_daemon_start(&env, args);
  witness = wire_open(&env, "witness");

  /* Garbage: a length, then bytes that are no Request. */
  fd = wire_open(&env, "garbage");
  pcache__put_le32(hdr, 6);
  ASSERT_OK(wire_send_raw(fd, hdr, 4));
  ASSERT_OK(wire_send_raw(fd, "\xff\xff\xff\xff\xff\xff", 6));
  ASSERT_ERR(wire_closed_with(fd), PCACHE_EPROTO);
  witness_ok();

  /* Zero length: an error reply, then the connection is closed. */
  fd = wire_open(&env, "zero");
  pcache__put_le32(hdr, 0);
  ASSERT_OK(wire_send_raw(fd, hdr, 4));
  ASSERT_ERR(wire_closed_with(fd), PCACHE_EEMPTY_FRAME);
  witness_ok();

  /* Announced length over --max-frame: closed, nothing allocated. */
  fd = wire_open(&env, "huge");
  pcache__put_le32(hdr, 0xfffffff0u);
  ASSERT_OK(wire_send_raw(fd, hdr, 4));
  ASSERT_EQ(wire_closed_with(fd), 0);
  witness_ok();

  /* Truncated: half a frame, then the client goes away. */
  fd = wire_open(&env, "truncated");
  pcache__put_le32(hdr, 100);
  ASSERT_OK(wire_send_raw(fd, hdr, 4));
  ASSERT_OK(wire_send_raw(fd, "\x42\x00", 2));
  close(fd);
  witness_ok();

  /* Stalled mid-frame: closed after --frame-timeout. */
  fd = wire_open(&env, "stalled");
  ASSERT_OK(wire_send_raw(fd, hdr, 2));
  ASSERT_EQ(wire_closed_with(fd), 0);
  witness_ok();

  /* A client that sends but never reads: once its replies pile up past
   * --max-pending it is no longer read from, the witness is served, and
   * it is dropped when its replies make no progress. */
  {
    pcache__devkey key;
    wire_item it;
    wire_reply rep;
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Get get = PCACHEPB__GET__INIT;
    ProtobufCBinaryData h;
    uint8_t *frame;
    size_t size;
    int rcvbuf = 4096;
    fd = wire_open(&env, "hog");
    wire_devkey(9, &key);
    wire_item_make(&it, &key, 900, 30000);
    wire_put(fd, &key, &it, 1, &rep);
    ASSERT_EQ(rep.resp->put->stored, 1);
    wire_reply_free(&rep);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    h.data = it.hash.bytes;
    h.len = 16;
    get.device_key.data = key.bytes;
    get.device_key.len = 32;
    get.state_hashes = &h;
    get.n_state_hashes = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_GET;
    req.get = &get;
    ASSERT_OK(pcache__request_encode(&req, 1 << 20, &frame, &size));
    /* 30 KB replies inline... they are under 64 KiB: 200 of them is 6 MB. */
    for (int i = 0; i < 200; i++)
      if (send(fd, frame, size, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        break;
    pcache__free(frame);
    witness_ok();
    sleep(3); /* past --frame-timeout with no progress */
    witness_ok();
    {
      /* The hog was disconnected: reading drains, then ends. */
      uint8_t buf[65536];
      ssize_t n;
      int total = 0;
      struct pollfd p = {fd, POLLIN, 0};
      while (poll(&p, 1, 2000) == 1 && (n = recv(fd, buf, sizeof buf, 0)) > 0)
        total += (int)n;
      ASSERT_GT(total, 0);
      ASSERT_LT(total, 200 * 30000);
    }
    close(fd);
    wire_item_free(&it);
  }

  /* --max-connections 3: the witness and two more; the fourth is refused. */
  {
    int a = wire_open(&env, "a"), b = wire_open(&env, "b");
    int c = test_raw_connect(&env);
    ASSERT_GE(c, 0);
    ASSERT_ERR(wire_closed_with(c), PCACHE_ETOO_MANY_CONNECTIONS);
    close(a);
    close(b);
    usleep(100000);
    close(wire_open(&env, "again"));
  }

  close(witness);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
