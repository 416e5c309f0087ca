#include "json.h"

#include <inttypes.h>
#include <string.h>

#include "common/log.h"

void ctl_json_init(ctl_json *j, FILE *out) {
  memset(j, 0, sizeof *j);
  j->out = out;
}

static void indent(ctl_json *j) {
  fputc('\n', j->out);
  for (int i = 0; i < j->depth; i++)
    fputs("  ", j->out);
}

/* Comma and indentation before a value (or a key) at the current level. */
static void before_value(ctl_json *j) {
  if (j->after_key) {
    j->after_key = 0;
    return;
  }
  if (j->depth > 0) {
    if (j->count[j->depth - 1]++ > 0)
      fputc(',', j->out);
    indent(j);
  }
}

static void open_container(ctl_json *j, char c) {
  before_value(j);
  fputc(c, j->out);
  if (j->depth < CTL_JSON_MAX_DEPTH)
    j->count[j->depth] = 0;
  j->depth++;
}

static void close_container(ctl_json *j, char c) {
  int had = j->depth <= CTL_JSON_MAX_DEPTH && j->count[j->depth - 1] > 0;
  j->depth--;
  if (had)
    indent(j);
  fputc(c, j->out);
}

void ctl_json_object_begin(ctl_json *j) { open_container(j, '{'); }
void ctl_json_object_end(ctl_json *j) { close_container(j, '}'); }
void ctl_json_array_begin(ctl_json *j) { open_container(j, '['); }
void ctl_json_array_end(ctl_json *j) { close_container(j, ']'); }

void ctl_json_string_n(ctl_json *j, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  before_value(j);
  fputc('"', j->out);
  while (i < n) {
    unsigned char c = p[i];
    uint32_t cp;
    size_t len;
    switch (c) {
    case '"':
      fputs("\\\"", j->out);
      break;
    case '\\':
      fputs("\\\\", j->out);
      break;
    case '\n':
      fputs("\\n", j->out);
      break;
    case '\r':
      fputs("\\r", j->out);
      break;
    case '\t':
      fputs("\\t", j->out);
      break;
    case '\b':
      fputs("\\b", j->out);
      break;
    case '\f':
      fputs("\\f", j->out);
      break;
    default:
      if (c < 0x20 || c == 0x7f) {
        fprintf(j->out, "\\u%04x", c);
      } else if (c >= 0x80) {
        len = pcache__utf8_decode(p + i, n - i, &cp);
        if (len == 0) {
          fputs("\\ufffd", j->out); /* not UTF-8: keep the document valid */
        } else {
          fwrite(p + i, 1, len, j->out);
          i += len - 1;
        }
      } else {
        fputc(c, j->out);
      }
    }
    i++;
  }
  fputc('"', j->out);
}

void ctl_json_key(ctl_json *j, const char *key) {
  ctl_json_string(j, key);
  fputs(": ", j->out);
  j->after_key = 1;
}

void ctl_json_string(ctl_json *j, const char *s) {
  if (!s) {
    ctl_json_null(j);
    return;
  }
  ctl_json_string_n(j, s, strlen(s));
}

void ctl_json_uint(ctl_json *j, uint64_t v) {
  before_value(j);
  fprintf(j->out, "%" PRIu64, v);
}

void ctl_json_int(ctl_json *j, int64_t v) {
  before_value(j);
  fprintf(j->out, "%" PRId64, v);
}

void ctl_json_bool(ctl_json *j, int v) {
  before_value(j);
  fputs(v ? "true" : "false", j->out);
}

void ctl_json_null(ctl_json *j) {
  before_value(j);
  fputs("null", j->out);
}

void ctl_json_hex(ctl_json *j, const void *data, size_t size) {
  static const char digits[] = "0123456789abcdef";
  const uint8_t *p = data;
  before_value(j);
  fputc('"', j->out);
  for (size_t i = 0; i < size; i++) {
    fputc(digits[p[i] >> 4], j->out);
    fputc(digits[p[i] & 15], j->out);
  }
  fputc('"', j->out);
}

void ctl_json_kv_string(ctl_json *j, const char *key, const char *s) {
  ctl_json_key(j, key);
  ctl_json_string(j, s);
}

void ctl_json_kv_uint(ctl_json *j, const char *key, uint64_t v) {
  ctl_json_key(j, key);
  ctl_json_uint(j, v);
}

void ctl_json_kv_int(ctl_json *j, const char *key, int64_t v) {
  ctl_json_key(j, key);
  ctl_json_int(j, v);
}

void ctl_json_kv_bool(ctl_json *j, const char *key, int v) {
  ctl_json_key(j, key);
  ctl_json_bool(j, v);
}

void ctl_json_kv_hex(ctl_json *j, const char *key, const void *data, size_t size) {
  ctl_json_key(j, key);
  ctl_json_hex(j, data, size);
}

void ctl_json_finish(ctl_json *j) {
  fputc('\n', j->out);
  fflush(j->out);
}
