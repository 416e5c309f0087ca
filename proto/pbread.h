/* Reading the protobuf wire format by hand, where protobuf-c's unpacking
 * will not do: before it, to bound what it would do with untrusted bytes
 * (frame.c's allocation count, desc_check.c's library nesting), and on the
 * describer's hit path (client/desc_graphics.c, client/desc_library.c),
 * which reads back a few fields of its own encodings. Static inline, like
 * the describer's writer. */
#ifndef PCACHE_PROTO_PBREAD_H
#define PCACHE_PROTO_PBREAD_H

#include <stddef.h>
#include <stdint.h>

#include <pcache/pcache.h> /* PCACHE_EPROTO */

#define PCACHE_WIRE_VARINT 0
#define PCACHE_WIRE_FIXED64 1
#define PCACHE_WIRE_LEN 2
#define PCACHE_WIRE_FIXED32 5

/* A base-128 varint at *p (below end): 0 and the value, with *p past it;
 * or PCACHE_EPROTO. */
static inline int pcache__wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *ret = v;
      return 0;
    }
  }
  return PCACHE_EPROTO;
}

/*
 * pcache__wire_field - the field at *p (below end): its tag (field number
 * << 3 | wire type) in *ret_tag; for a varint its value in *ret_value; for
 * a length-delimited field its length in *ret_value and its body at
 * *ret_body; fixed-size values are skipped (*ret_value 0). *p moves past
 * the field. Returns 0, or PCACHE_EPROTO for bytes that do not parse, groups included
 * (never in pcache's schemas).
 */
static inline int pcache__wire_field(const uint8_t **p, const uint8_t *end, uint64_t *ret_tag,
                                     uint64_t *ret_value, const uint8_t **ret_body) {
  uint64_t v = 0;
  size_t skip = 0;
  if (pcache__wire_varint(p, end, ret_tag) < 0)
    return PCACHE_EPROTO;
  switch (*ret_tag & 7) {
  case PCACHE_WIRE_VARINT:
    if (pcache__wire_varint(p, end, &v) < 0)
      return PCACHE_EPROTO;
    break;
  case PCACHE_WIRE_LEN:
    if (pcache__wire_varint(p, end, &v) < 0 || v > (uint64_t)(end - *p))
      return PCACHE_EPROTO;
    *ret_body = *p;
    skip = (size_t)v;
    break;
  case PCACHE_WIRE_FIXED64:
    skip = 8;
    break;
  case PCACHE_WIRE_FIXED32:
    skip = 4;
    break;
  default:
    return PCACHE_EPROTO;
  }
  if (skip > (size_t)(end - *p))
    return PCACHE_EPROTO;
  *p += skip;
  *ret_value = v;
  return 0;
}

#endif
