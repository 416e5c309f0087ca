/* Fuzz target: the frame decoder both sides run on untrusted bytes. The
 * first 4 bytes are a frame header; the rest is decoded as a Request and
 * as a Response. What decodes must re-encode and decode to the same kind:
 * a message the daemon accepts but cannot write back would break replies. */
#include <stdint.h>
#include <stdlib.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/devkey.h"
#include "proto/frame.h"
#include "fuzz.h"

/* protobuf-c keeps fields it does not know, even with the invalid field
 * number 0, and packs them back as it got them: bytes it then refuses to
 * read. pcache never trusts re-packed bytes (a stored DeviceInfo that does
 * not unpack is shown without its details), so the round trip is only
 * required of messages without unknown fields. */
static int has_unknown(const ProtobufCMessage *m) {
  const ProtobufCMessageDescriptor *d;
  if (!m)
    return 0;
  if (m->n_unknown_fields)
    return 1;
  d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const char *base = (const char *)m;
    if (f->type != PROTOBUF_C_TYPE_MESSAGE)
      continue;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(base + f->quantifier_offset);
      ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)(base + f->offset);
      for (size_t j = 0; j < n; j++)
        if (has_unknown(v[j]))
          return 1;
    } else {
      if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
          *(const uint32_t *)(base + f->quantifier_offset) != f->id)
        continue;
      if (has_unknown(*(ProtobufCMessage *const *)(base + f->offset)))
        return 1;
    }
  }
  return 0;
}

static void request(const uint8_t *body, size_t size) {
  Pcachepb__Request *req = NULL, *again = NULL;
  uint8_t *buf;
  size_t n;
  uint32_t len;
  int r = pcache__request_decode(body, size, 0, &req);
  CHECK(r == 0 || r == PCACHE_EPROTO || r == PCACHE_EUNKNOWN_REQUEST);
  if (r < 0)
    return;
  CHECK(req->body_case != PCACHEPB__REQUEST__BODY__NOT_SET);
  (void)pcache__request_kind_name(req);
  if (!has_unknown(&req->base) && pcache__request_encode(req, UINT32_MAX, &buf, &n) == 0) {
    CHECK(n > PCACHE_FRAME_HEADER_SIZE);
    CHECK(pcache__frame_length(buf, UINT32_MAX, &len) == 0);
    CHECK(len == n - PCACHE_FRAME_HEADER_SIZE);
    CHECK(pcache__request_decode(buf + PCACHE_FRAME_HEADER_SIZE, len, 0, &again) == 0);
    CHECK(again->body_case == req->body_case);
    pcache__request_free(again);
    pcache__free(buf);
  }
  pcache__request_free(req);
}

static void response(const uint8_t *body, size_t size) {
  Pcachepb__Response *resp = NULL, *again = NULL;
  uint8_t *buf;
  size_t n;
  int r = pcache__response_decode(body, size, &resp);
  CHECK(r == 0 || r == PCACHE_EPROTO);
  if (r < 0)
    return;
  if (!has_unknown(&resp->base) && pcache__response_encode(resp, UINT32_MAX, &buf, &n) == 0) {
    CHECK(pcache__response_decode(buf + PCACHE_FRAME_HEADER_SIZE, n - PCACHE_FRAME_HEADER_SIZE,
                                  &again) == 0);
    CHECK(again->body_case == resp->body_case && again->status == resp->status);
    pcache__response_free(again);
    pcache__free(buf);
  }
  pcache__response_free(resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *body = data;
  size_t body_size = size;
  if (size >= PCACHE_FRAME_HEADER_SIZE) {
    uint32_t len = 0;
    int r = pcache__frame_length(data, 1u << 16, &len);
    CHECK(r == 0 || r == PCACHE_EEMPTY_FRAME || r == PCACHE_EFRAME_TOO_LARGE);
    CHECK(r != 0 || (len > 0 && len <= (1u << 16)));
    CHECK(r != PCACHE_EEMPTY_FRAME || pcache__le32(data) == 0);
    body += PCACHE_FRAME_HEADER_SIZE;
    body_size -= PCACHE_FRAME_HEADER_SIZE;
    /* Like a reader, decode only what the header announced when it fits. */
    if (r == 0 && len < body_size)
      body_size = len;
  }
  request(body, body_size);
  response(body, body_size);
  return 0;
}
