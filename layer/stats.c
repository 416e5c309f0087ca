/* What the layer did for one device, and the report of it: at
 * vkDestroyDevice, or at exit for a device the app never destroyed.
 * PCACHE_LAYER_STATS=1 writes it to stderr, PCACHE_LAYER_STATS_FILE=<path>
 * appends it to a file (one process, or many sharing the file: each report
 * is one write of whole lines, so concurrent reports do not interleave
 * within a line). The format is documented in docs/layer.md. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer/layer.h"

void layer_stats_init(layer_stats *stats) { pthread_mutex_init(&stats->reasons_lock, NULL); }

void layer_stats_fini(layer_stats *stats) { pthread_mutex_destroy(&stats->reasons_lock); }

void layer_stats_unhashable(layer_stats *stats, const char *reason, uint32_t stype) {
  pthread_mutex_lock(&stats->reasons_lock);
  size_t i = 0;
  while (i < stats->n_reasons &&
         (stats->reasons[i].stype != stype || strcmp(stats->reasons[i].reason, reason) != 0))
    i++;
  if (i == stats->n_reasons && i < LAYER_MAX_REASONS) {
    stats->reasons[i].reason = reason;
    stats->reasons[i].stype = stype;
    stats->n_reasons++;
  }
  /* Past LAYER_MAX_REASONS distinct reasons the rest count only in the
   * unhashable total. */
  if (i < stats->n_reasons)
    stats->reasons[i].count++;
  pthread_mutex_unlock(&stats->reasons_lock);
}

/* Appends to buf (size cap) what fits; returns the new length. */
static size_t append(char *buf, size_t len, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t len, size_t cap, const char *fmt, ...) {
  va_list ap;
  int n;
  if (len >= cap)
    return len;
  va_start(ap, fmt);
  n = vsnprintf(buf + len, cap - len, fmt, ap);
  va_end(ap);
  if (n < 0)
    return len;
  return len + (size_t)n < cap ? len + (size_t)n : cap - 1;
}

static void write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n <= 0)
      return;
    buf += n;
    len -= (size_t)n;
  }
}

void layer_stats_report(layer_device *ld) {
  const char *to_stderr = getenv("PCACHE_LAYER_STATS");
  const char *path = getenv("PCACHE_LAYER_STATS_FILE");
  const char *app =
      ld->instance && ld->instance->client ? pcache_client_app_name(ld->instance->client) : "";
  layer_stats *s = &ld->stats;
  pcache_stats core = {0};
  char buf[4096];
  size_t len = 0;
  long pid = (long)getpid();
  if (!(to_stderr && to_stderr[0] == '1') && !(path && *path))
    return;
  if (ld->pc)
    (void)pcache_device_get_stats(ld->pc, &core);
  len = append(buf, len, sizeof buf,
               "pcache-layer pid=%ld app=%s pipelines=%llu hashable=%llu daemon_hits=%llu "
               "local_hits=%llu compiles=%llu uploaded=%llu unhashable=%llu passed_through=%llu\n",
               pid, app, (unsigned long long)atomic_load(&s->pipelines),
               (unsigned long long)atomic_load(&s->hashable),
               (unsigned long long)atomic_load(&s->daemon_hits),
               (unsigned long long)atomic_load(&s->local_hits),
               (unsigned long long)atomic_load(&s->compiles), (unsigned long long)core.uploaded,
               (unsigned long long)atomic_load(&s->unhashable),
               (unsigned long long)atomic_load(&s->failed));
  pthread_mutex_lock(&s->reasons_lock);
  for (size_t i = 0; i < s->n_reasons; i++)
    len = append(
        buf, len, sizeof buf, "pcache-layer-unhashable pid=%ld reason=%s stype=%u count=%llu\n",
        pid, s->reasons[i].reason, s->reasons[i].stype, (unsigned long long)s->reasons[i].count);
  pthread_mutex_unlock(&s->reasons_lock);
  if (to_stderr && to_stderr[0] == '1')
    write_all(STDERR_FILENO, buf, len);
  if (path && *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      write_all(fd, buf, len);
      close(fd);
    }
  }
}
