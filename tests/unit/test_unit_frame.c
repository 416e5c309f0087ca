/* Frame lengths are validated before anything is allocated, and requests
 * survive an encode/decode round trip. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/frame.h"
#include "test.h"

int main(void) {
  uint8_t hdr[4], *buf;
  uint32_t len = 0;
  size_t size;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT, *back;
  Pcachepb__Hello h = PCACHEPB__HELLO__INIT;
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT, *rback;

  pcache__frame_put_length(hdr, 0);
  ASSERT_ERR(pcache__frame_length(hdr, 1024, &len), PCACHE_EEMPTY_FRAME);
  pcache__frame_put_length(hdr, 1025);
  ASSERT_ERR(pcache__frame_length(hdr, 1024, &len), PCACHE_EFRAME_TOO_LARGE);
  pcache__frame_put_length(hdr, 0xffffffffu);
  ASSERT_ERR(pcache__frame_length(hdr, PCACHE_DEFAULT_MAX_FRAME, &len), PCACHE_EFRAME_TOO_LARGE);
  pcache__frame_put_length(hdr, 1024);
  ASSERT_OK(pcache__frame_length(hdr, 1024, &len));
  ASSERT_EQ(len, 1024);
  ASSERT_EQ(hdr[0], 0x00); /* little-endian */
  ASSERT_EQ(hdr[1], 0x04);

  h.protocol_version = PCACHE_PROTOCOL_VERSION;
  h.app = (char *)"unit";
  req.body_case = PCACHEPB__REQUEST__BODY_HELLO;
  req.hello = &h;
  ASSERT_OK(pcache__request_encode(&req, PCACHE_DEFAULT_MAX_FRAME, &buf, &size));
  ASSERT_OK(pcache__frame_length(buf, PCACHE_DEFAULT_MAX_FRAME, &len));
  ASSERT_EQ(len + 4, size);
  ASSERT_OK(pcache__request_decode(buf + 4, len, 0, &back));
  ASSERT_EQ(back->body_case, PCACHEPB__REQUEST__BODY_HELLO);
  ASSERT_STREQ(back->hello->app, "unit");
  ASSERT_STREQ(pcache__request_kind_name(back), "hello");
  pcache__request_free(back);
  /* Over the encoder's limit. */
  pcache__free(buf);
  buf = NULL;
  ASSERT_ERR(pcache__request_encode(&req, 2, &buf, &size), PCACHE_EFRAME_TOO_LARGE);
  ASSERT_TRUE(buf == NULL);

  /* Garbage and an empty oneof. */
  ASSERT_ERR(pcache__request_decode((const uint8_t *)"\xff\xff\xff", 3, 0, &back), PCACHE_EPROTO);
  ASSERT_ERR(pcache__request_decode((const uint8_t *)"", 0, 0, &back), PCACHE_EUNKNOWN_REQUEST);

  /* A Put of N empty items is 2 bytes an item on the wire but a struct
   * each when unpacked: the count is checked before anything is. */
  {
    enum { N = 70000 };
    size_t body = 2u * N, n = 0;
    uint8_t *frame = pcache__malloc(body + 8);
    ASSERT_TRUE(frame != NULL);
    frame[n++] = 0x22; /* Request.put, length-delimited */
    for (size_t v = body;; v >>= 7) {
      frame[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
      if (v < 0x80)
        break;
    }
    for (size_t i = 0; i < N; i++) {
      frame[n++] = 0x12; /* Put.items (field 2), an empty PutItem */
      frame[n++] = 0x00;
    }
    ASSERT_ERR(pcache__request_decode(frame, n, 65600, &back), PCACHE_ETOO_MANY_HASHES);
    ASSERT_OK(pcache__request_decode(frame, n, N + 1, &back));
    ASSERT_EQ(back->put->n_items, N);
    pcache__request_free(back);
    ASSERT_OK(pcache__request_decode(frame, n, 0, &back));
    pcache__request_free(back);
    /* Truncated inside a length: refused, not read past the end. */
    ASSERT_ERR(pcache__request_decode(frame, 2, 65600, &back), PCACHE_EPROTO);
    pcache__free(frame);
  }

  resp.status = PCACHE_ECHECKSUM;
  resp.message = (char *)"bad";
  ASSERT_OK(pcache__response_encode(&resp, 1024, &buf, &size));
  ASSERT_OK(pcache__response_decode(buf + 4, size - 4, &rback));
  ASSERT_EQ(rback->status, PCACHE_ECHECKSUM);
  pcache__response_free(rback);
  pcache__free(buf);
  return 0;
}
