/* A small streaming JSON writer for pcachectl --json: one document per
 * command, pretty-printed, strings escaped and made valid UTF-8 whatever
 * bytes the daemon sent (a device name is the driver's text). */
#ifndef PCACHE_TOOLS_JSON_H
#define PCACHE_TOOLS_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CTL_JSON_MAX_DEPTH 16

typedef struct ctl_json {
  FILE *out;
  int depth;
  int after_key;                         /* a key was written; its value comes next */
  int count[CTL_JSON_MAX_DEPTH];         /* values written at each level */
} ctl_json;

void ctl_json_init(ctl_json *j, FILE *out);

void ctl_json_object_begin(ctl_json *j);
void ctl_json_object_end(ctl_json *j);
void ctl_json_array_begin(ctl_json *j);
void ctl_json_array_end(ctl_json *j);
/* Inside an object: the next value's name. */
void ctl_json_key(ctl_json *j, const char *key);

void ctl_json_string(ctl_json *j, const char *s);
void ctl_json_string_n(ctl_json *j, const char *s, size_t n);
void ctl_json_uint(ctl_json *j, uint64_t v);
void ctl_json_int(ctl_json *j, int64_t v);
void ctl_json_bool(ctl_json *j, int v);
void ctl_json_null(ctl_json *j);
/* Bytes as a lowercase hex string. */
void ctl_json_hex(ctl_json *j, const void *data, size_t size);

/* key + value in one call. */
void ctl_json_kv_string(ctl_json *j, const char *key, const char *s);
void ctl_json_kv_uint(ctl_json *j, const char *key, uint64_t v);
void ctl_json_kv_int(ctl_json *j, const char *key, int64_t v);
void ctl_json_kv_bool(ctl_json *j, const char *key, int v);
void ctl_json_kv_hex(ctl_json *j, const char *key, const void *data, size_t size);

/* Ends the document with a newline. */
void ctl_json_finish(ctl_json *j);

#endif
