#include "rel_util.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/blob.h"
#include "test.h"

uint64_t rel_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static long status_kb(pid_t pid, const char *field) {
  char path[64], line[256];
  size_t n = strlen(field);
  long kb = -1;
  FILE *f;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  if (!(f = fopen(path, "r")))
    return -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = strtol(line + n + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kb;
}

long rel_rss_kb(pid_t pid) { return status_kb(pid, "VmRSS"); }

long rel_anon_kb(pid_t pid) { return status_kb(pid, "RssAnon"); }

long rel_env_long(const char *name, long def) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : def;
}

int rel_part_wanted(int argc, char **argv, const char *name) {
  return argc < 2 || strcmp(argv[1], name) == 0;
}

int rel_still_open(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, ms) == 0;
}

void rel_stats(int fd, uint64_t *ret_entries, uint64_t *ret_bytes, uint64_t *ret_devices,
               uint64_t *ret_modules) {
  wire_reply rep;
  wire_stats(fd, &rep);
  if (ret_entries)
    *ret_entries = rep.resp->stats->entries;
  if (ret_bytes)
    *ret_bytes = rep.resp->stats->bytes_used;
  if (ret_devices)
    *ret_devices = rep.resp->stats->devices;
  if (ret_modules)
    *ret_modules = rep.resp->stats->modules;
  wire_reply_free(&rep);
}

uint64_t rel_verify(int fd) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Verify v = PCACHEPB__VERIFY__INIT;
  wire_reply rep;
  uint64_t n;
  req.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
  req.verify = &v;
  wire_call(fd, &req, &rep);
  ASSERT_OK(rep.resp->status);
  ASSERT_EQ(rep.resp->body_case, PCACHEPB__RESPONSE__BODY_VERIFY);
  n = rep.resp->verify->n_problems;
  for (size_t i = 0; i < rep.resp->verify->n_problems; i++)
    fprintf(stderr, "verify problem: %s\n", rep.resp->verify->problems[i]->message);
  wire_reply_free(&rep);
  return n;
}

void rel_figure(const char *name, const char *fmt, ...) {
  const char *path = getenv("PCACHE_REL_FIGURES");
  va_list ap;
  FILE *f;
  va_start(ap, fmt);
  printf("FIGURE %s ", name);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (!path || !*path || !(f = fopen(path, "a")))
    return;
  va_start(ap, fmt);
  fprintf(f, "%s ", name);
  vfprintf(f, fmt, ap);
  fprintf(f, "\n");
  va_end(ap);
  fclose(f);
}

static pthread_mutex_t item_lock = PTHREAD_MUTEX_INITIALIZER;

void rel_item_make(wire_item *it, const pcache__devkey *key, uint64_t salt, size_t blob_size) {
  pthread_mutex_lock(&item_lock);
  wire_item_make(it, key, salt, blob_size);
  pthread_mutex_unlock(&item_lock);
}

int rel_put(int fd, const pcache__devkey *key, wire_item *items, size_t n) {
  wire_put_msg m;
  wire_reply rep;
  int r;
  wire_put_msg_init(&m, key, "reliability device", items, n);
  r = wire_try_call(fd, &m.req, &rep);
  wire_put_msg_free(&m);
  if (r < 0)
    return r;
  if (rep.resp->status < 0)
    r = rep.resp->status;
  else if (rep.resp->body_case != PCACHEPB__RESPONSE__BODY_PUT)
    r = PCACHE_EPROTO;
  else
    r = (int)rep.resp->put->stored;
  wire_reply_free(&rep);
  return r;
}

void rel_archive_entry(pcache__archive_writer *w, const pcache__devkey *key, uint64_t salt,
                       const uint8_t *blob, size_t blob_size, const pcache__hash *module) {
  pcache__archive_entry e;
  uint8_t *desc;
  size_t desc_size;
  memset(&e, 0, sizeof e);
  e.device_key = *key;
  wire_desc(PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, salt, module, &desc, &desc_size,
            &e.state_hash);
  e.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS;
  e.app = "imported";
  e.blob = blob;
  e.blob_size = blob_size;
  e.checksum = pcache__checksum64(blob, blob_size);
  e.desc = desc;
  e.desc_size = desc_size;
  ASSERT_OK(pcache__archive_add_entry(w, &e));
  free(desc);
}
