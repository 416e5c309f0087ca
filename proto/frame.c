#include "frame.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/devkey.h"
#include "proto/pbread.h"

int pcache__frame_length(const uint8_t header[PCACHE_FRAME_HEADER_SIZE], uint32_t max_frame,
                         uint32_t *ret_length) {
  uint32_t length = pcache__le32(header);
  if (length == 0)
    return PCACHE_EEMPTY_FRAME;
  if (length > max_frame)
    return PCACHE_EFRAME_TOO_LARGE;
  *ret_length = length;
  return 0;
}

void pcache__frame_put_length(uint8_t header[PCACHE_FRAME_HEADER_SIZE], uint32_t length) {
  pcache__put_le32(header, length);
}

/* Adds to *count what unpacking data as desc allocates one by one: each
 * sub-message, each element of a repeated field, each unknown field.
 * Stops with PCACHE_ETOO_MANY_HASHES as soon as *count passes budget, or
 * with PCACHE_EPROTO at bytes that do not parse (unpack then refuses them
 * too). */
static int count_allocations(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                             const uint8_t *end, uint64_t budget, uint64_t *count, int depth) {
  if (depth > 16)
    return PCACHE_EPROTO;
  while (p < end) {
    uint64_t tag, len;
    const uint8_t *body = NULL;
    const ProtobufCFieldDescriptor *f;
    if (pcache__wire_field(&p, end, &tag, &len, &body) < 0)
      return PCACHE_EPROTO;
    f = tag >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3))
                               : NULL;
    if (!f || f->label == PROTOBUF_C_LABEL_REPEATED || f->type == PROTOBUF_C_TYPE_MESSAGE)
      (*count)++;
    if (*count > budget)
      return PCACHE_ETOO_MANY_HASHES;
    if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && (tag & 7) == PCACHE_WIRE_LEN) {
      int r = count_allocations(f->descriptor, body, body + len, budget, count, depth + 1);
      if (r < 0)
        return r;
    }
  }
  return 0;
}

int pcache__request_decode(const uint8_t *data, size_t size, uint64_t max_allocations,
                           Pcachepb__Request **ret_request) {
  Pcachepb__Request *req;
  /* protobuf-c allocates a struct for every sub-message and array element
   * it unpacks, before anything can check the counts: two bytes of an
   * empty repeated message cost a hundred of heap. Count first. */
  if (max_allocations) {
    uint64_t count = 0;
    int r = count_allocations(&pcachepb__request__descriptor, data, data + size, max_allocations,
                              &count, 0);
    if (r < 0)
      return r;
  }
  req = pcachepb__request__unpack(&pcache__pb_allocator, size, data);
  if (!req)
    return PCACHE_EPROTO;
  /* protobuf-c keeps fields of a newer schema as unknown fields and leaves
   * the oneof unset: to this build that is a request kind it does not know. */
  if (req->body_case == PCACHEPB__REQUEST__BODY__NOT_SET) {
    pcachepb__request__free_unpacked(req, &pcache__pb_allocator);
    return PCACHE_EUNKNOWN_REQUEST;
  }
  *ret_request = req;
  return 0;
}

void pcache__request_free(Pcachepb__Request *request) {
  if (request)
    pcachepb__request__free_unpacked(request, &pcache__pb_allocator);
}

int pcache__response_decode(const uint8_t *data, size_t size, Pcachepb__Response **ret_response) {
  Pcachepb__Response *resp = pcachepb__response__unpack(&pcache__pb_allocator, size, data);
  if (!resp)
    return PCACHE_EPROTO;
  *ret_response = resp;
  return 0;
}

void pcache__response_free(Pcachepb__Response *response) {
  if (response)
    pcachepb__response__free_unpacked(response, &pcache__pb_allocator);
}

static int encode(const ProtobufCMessage *msg, uint32_t max_frame, uint8_t **ret_buf,
                  size_t *ret_size) {
  size_t body = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf;
  if (body > max_frame)
    return PCACHE_EFRAME_TOO_LARGE;
  buf = pcache__malloc(PCACHE_FRAME_HEADER_SIZE + body);
  if (!buf)
    return -ENOMEM;
  pcache__frame_put_length(buf, (uint32_t)body);
  protobuf_c_message_pack(msg, buf + PCACHE_FRAME_HEADER_SIZE);
  *ret_buf = buf;
  *ret_size = PCACHE_FRAME_HEADER_SIZE + body;
  return 0;
}

int pcache__request_encode(const Pcachepb__Request *request, uint32_t max_frame,
                           uint8_t **ret_buf, size_t *ret_size) {
  return encode(&request->base, max_frame, ret_buf, ret_size);
}

int pcache__response_encode(const Pcachepb__Response *response, uint32_t max_frame,
                            uint8_t **ret_buf, size_t *ret_size) {
  return encode(&response->base, max_frame, ret_buf, ret_size);
}

const char *pcache__request_kind_name(const Pcachepb__Request *request) {
  switch (request->body_case) {
  case PCACHEPB__REQUEST__BODY_HELLO:
    return "hello";
  case PCACHEPB__REQUEST__BODY_GET:
    return "get";
  case PCACHEPB__REQUEST__BODY_PREFETCH:
    return "prefetch";
  case PCACHEPB__REQUEST__BODY_PUT:
    return "put";
  case PCACHEPB__REQUEST__BODY_REPORT:
    return "report";
  case PCACHEPB__REQUEST__BODY_LIST:
    return "list";
  case PCACHEPB__REQUEST__BODY_PURGE:
    return "purge";
  case PCACHEPB__REQUEST__BODY_STATS:
    return "stats";
  case PCACHEPB__REQUEST__BODY_VERIFY:
    return "verify";
  case PCACHEPB__REQUEST__BODY_EXPORT:
    return "export";
  case PCACHEPB__REQUEST__BODY_IMPORT:
    return "import";
  case PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT:
    return "put_snapshot";
  case PCACHEPB__REQUEST__BODY_CLIENT_REPORT:
    return "client_report";
  case PCACHEPB__REQUEST__BODY_LIST_CLIENT_REPORTS:
    return "list_client_reports";
  case PCACHEPB__REQUEST__BODY_REPLAY_START:
    return "replay_start";
  case PCACHEPB__REQUEST__BODY_REPLAY_CLAIM:
    return "replay_claim";
  case PCACHEPB__REQUEST__BODY_FLEET_SYNC:
    return "fleet_sync";
  case PCACHEPB__REQUEST__BODY_SEGMENT:
    return "segment";
  case PCACHEPB__REQUEST__BODY_REPLY_WINDOW:
    return "reply_window";
  default:
    return "unknown";
  }
}

int pcache__memfd_check(int fd, int need_seals, uint64_t size, int exact, const char **ret_why) {
  struct stat st;
  int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
  const char *why = NULL;
  if (seals < 0 || (seals & need_seals) != need_seals)
    why = "its memfd is not sealed";
  else if (size == 0 || size > SIZE_MAX || fstat(fd, &st) < 0 || st.st_size < 0 ||
           (exact ? (uint64_t)st.st_size != size : (uint64_t)st.st_size < size))
    why = "its memfd is not the size announced (truncated?)";
  if (why && ret_why)
    *ret_why = why;
  return why ? PCACHE_EPROTO : 0;
}
