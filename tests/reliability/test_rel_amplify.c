/* A frame that would unpack into far more structures than its bytes
 * (hostile tester, after issue 12): 8 MiB of empty repeated Put items,
 * two bytes each on the wire, made protobuf-c allocate about 78 times the
 * frame (634 MB at the peak, 495 MB kept) before any count was checked.
 * The daemon now counts what a request would allocate before unpacking
 * it: such a frame is refused with PCACHE_ETOO_MANY_HASHES and its
 * heap barely moves; a normal request on another connection still works. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rel_util.h"
#include "test.h"

#define FRAME_BYTES (8u << 20)

int main(void) {
  const char *args[] = {"--max-frame", "16M", NULL};
  test_env env;
  wire_reply rep;
  long anon0, anon;
  size_t n = 0, body = FRAME_BYTES - 16;
  uint8_t *frame = malloc(FRAME_BYTES);
  int fd;

  ASSERT_TRUE(frame != NULL);
  test_env_init(&env, "rel-amplify");
  wire_guard(&env);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "amplifier");
  anon0 = rel_anon_kb(env.daemon_pid);

  /* u32 length, Request.put (field 4) holding body bytes of Put.items
   * (field 2), each an empty PutItem. */
  n = 4;
  frame[n++] = 0x22;
  for (size_t v = body;; v >>= 7) {
    frame[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80)
      break;
  }
  for (size_t i = 0; i < body / 2; i++) {
    frame[n++] = 0x12;
    frame[n++] = 0x00;
  }
  frame[0] = (uint8_t)(n - 4);
  frame[1] = (uint8_t)((n - 4) >> 8);
  frame[2] = (uint8_t)((n - 4) >> 16);
  frame[3] = (uint8_t)((n - 4) >> 24);
  ASSERT_OK(wire_send_raw(fd, frame, n));
  ASSERT_OK(wire_recv(fd, &rep));
  ASSERT_EQ(rep.resp->status, PCACHE_ETOO_MANY_HASHES);
  wire_reply_free(&rep);
  close(fd);
  free(frame);

  anon = rel_anon_kb(env.daemon_pid);
  printf("a %u-byte frame of empty items: RssAnon %ld -> %ld KiB\n", FRAME_BYTES, anon0, anon);
  rel_figure("amplify_anon_kb_before", "%ld", anon0);
  rel_figure("amplify_anon_kb_after", "%ld", anon);
  /* The frame itself is read into one buffer of its size; nothing near
   * the 78x it used to cost. */
  if (!REL_SANITIZED)
    ASSERT_LT(anon - anon0, 3 * (long)(FRAME_BYTES / 1024));

  /* The daemon serves on. */
  fd = wire_open(&env, "after");
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Stats st = PCACHEPB__STATS__INIT;
    req.body_case = PCACHEPB__REQUEST__BODY_STATS;
    req.stats = &st;
    wire_call(fd, &req, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    wire_reply_free(&rep);
  }
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
