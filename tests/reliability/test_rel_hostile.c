/* Hostile and slow peers. A client that sends a frame one byte at a time,
 * one that stalls mid-frame, one that pipelines requests and never reads
 * the replies, and one more than --max-connections: none of them holds up
 * a well-behaved client (each of its requests answered within 500 ms, all
 * along), none grows the daemon's memory beyond a bound (RSS from /proc),
 * and each gets the treatment docs/protocol.md promises. Another uid being
 * refused is test_daemon_peer's. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "proto/frame.h"
#include "rel_util.h"
#include "test.h"

#define MAX_CONN 12
#define SERVED_MS 500

static test_env env;
static pcache__devkey key;
static int witness;
static wire_item big;
static uint64_t worst_ms;

/* The well-behaved client: a Get of a stored entry, answered in time. */
static void witness_ok(void) {
  wire_reply rep;
  uint64_t t0 = rel_now_ms(), ms;
  wire_get(witness, &key, &big.hash, 1, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->get->n_blobs, 1);
  wire_reply_free(&rep);
  ms = rel_now_ms() - t0;
  if (ms > worst_ms)
    worst_ms = ms;
  ASSERT_LT(ms, SERVED_MS * (REL_SANITIZED ? 4 : 1));
}

static uint8_t *get_frame(size_t *ret_size) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get g = PCACHEPB__GET__INIT;
  ProtobufCBinaryData h = {16, big.hash.bytes};
  uint8_t *buf;
  g.device_key = (ProtobufCBinaryData){32, key.bytes};
  g.state_hashes = &h;
  g.n_state_hashes = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &g;
  ASSERT_OK(pcache__request_encode(&req, UINT32_MAX, &buf, ret_size));
  return buf;
}

int main(void) {
  const char *args[] = {"--frame-timeout", "2", "--max-connections", "12", "--max-pending", "1M",
                        NULL};
  long rss0, rss;
  wire_reply rep;
  size_t fsize;
  uint8_t *frame;

  test_env_init(&env, "rel-hostile");
  wire_guard(&env);
  test_daemon_start(&env, args);
  wire_devkey(6, &key);
  witness = wire_open(&env, "witness");
  /* 60 KiB: its Get reply travels inline, so unread replies pile up. */
  wire_item_make(&big, &key, 1, 60000);
  wire_put(witness, &key, &big, 1, &rep);
  ASSERT_EQ(rep.resp->put->stored, 1);
  wire_reply_free(&rep);
  witness_ok();
  rss0 = rel_rss_kb(env.daemon_pid);

  /* 1. One byte at a time, a little faster than --frame-timeout: the frame
   * keeps progressing, so it is served in the end; others are served all
   * along. */
  {
    int slow = wire_open(&env, "slow");
    frame = get_frame(&fsize);
    for (size_t i = 0; i < fsize; i++) {
      ASSERT_OK(wire_send_raw(slow, frame + i, 1));
      witness_ok();
      usleep(i < 8 ? 300000 : 1000); /* slow through the header and first bytes */
    }
    ASSERT_OK(wire_recv(slow, &rep));
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->get->n_blobs, 1);
    wire_reply_free(&rep);
    close(slow);
    pcache__free(frame);
  }

  /* 2. Stalls mid-frame: closed after --frame-timeout, without a reply. */
  {
    int stall = wire_open(&env, "stall");
    uint64_t t0 = rel_now_ms();
    ASSERT_OK(wire_send_raw(stall, "\x40\x00\x00\x00\x12", 5));
    while (rel_still_open(stall, 200))
      witness_ok();
    ASSERT_EQ(wire_closed_with(stall), 0);
    ASSERT_GE(rel_now_ms() - t0, 1500);
    ASSERT_LT(rel_now_ms() - t0, 6000);
  }

  /* 3. Pipelines 2000 Gets (120 MB of replies) and never reads: the daemon
   * stops reading it at --max-pending (1 MiB queued), so its memory stays
   * bounded, and closes it when its replies make no progress. */
  {
    int hog = wire_open(&env, "hog");
    size_t sent = 0, requests = 0;
    uint64_t t0 = rel_now_ms();
    int fl = fcntl(hog, F_GETFL);
    ASSERT_EQ(fcntl(hog, F_SETFL, fl | O_NONBLOCK), 0);
    frame = get_frame(&fsize);
    while (requests < 2000 && rel_now_ms() - t0 < 1500) {
      ssize_t n = send(hog, frame + sent, fsize - sent, MSG_NOSIGNAL);
      if (n < 0) {
        ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
        witness_ok();
        usleep(10000);
        continue;
      }
      sent += (size_t)n;
      if (sent == fsize) {
        sent = 0;
        requests++;
      }
    }
    witness_ok();
    rss = rel_rss_kb(env.daemon_pid);
    printf("non-reading client: %zu requests accepted by the socket; daemon RSS %ld -> %ld KiB\n",
           requests, rss0, rss);
    rel_figure("hostile_unread_requests", "%zu", requests);
    rel_figure("hostile_rss_kb_before", "%ld", rss0);
    rel_figure("hostile_rss_kb_during", "%ld", rss);
    /* 1 MiB queued plus the socket buffers and allocator slack, not 120 MB. */
    if (!REL_SANITIZED)
      ASSERT_LT(rss - rss0, 16 * 1024);
    /* No progress on its replies for --frame-timeout: it is dropped. */
    t0 = rel_now_ms();
    for (;;) {
      char buf[65536];
      witness_ok();
      usleep(200000);
      if (recv(hog, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT) == 0)
        break;
      /* The queued replies are still in our receive buffer: drain it, then
       * see whether the daemon hung up. */
      if (rel_now_ms() - t0 > 4000) {
        ssize_t n;
        while ((n = recv(hog, buf, sizeof buf, MSG_DONTWAIT)) > 0)
          ;
        if (n == 0)
          break;
      }
      ASSERT_LT(rel_now_ms() - t0, 15000);
    }
    close(hog);
    pcache__free(frame);
  }

  /* 4. The connection limit: the witness and MAX_CONN - 1 more, then one
   * too many is told so and closed; the others keep working. */
  {
    int fds[MAX_CONN];
    int extra;
    for (int i = 0; i < MAX_CONN - 1; i++)
      fds[i] = wire_open(&env, "many");
    extra = test_raw_connect(&env);
    ASSERT_GE(extra, 0);
    ASSERT_ERR(wire_closed_with(extra), PCACHE_ETOO_MANY_CONNECTIONS);
    witness_ok();
    for (int i = 0; i < MAX_CONN - 1; i++)
      close(fds[i]);
  }

  rss = rel_rss_kb(env.daemon_pid);
  rel_figure("hostile_rss_kb_after", "%ld", rss);
  rel_figure("hostile_witness_worst_ms", "%llu", (unsigned long long)worst_ms);
  printf("hostile peers: witness worst latency %llu ms; RSS %ld -> %ld KiB\n",
         (unsigned long long)worst_ms, rss0, rss);
  ASSERT_EQ(rel_verify(witness), 0);
  close(witness);
  wire_item_free(&big);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
