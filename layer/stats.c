/* What the layer did for one device, and the report of it: at
 * vkDestroyDevice, or at exit for a device the app never destroyed.
 *
 * The report always goes to the daemon (a ClientReport, which
 * `pcachectl layer` shows), best effort within the client's timeout, for
 * every device that saw a pipeline. PCACHE_LAYER_STATS=1 also writes it to
 * stderr, PCACHE_LAYER_STATS_FILE=<path> appends it to a file (one
 * process, or many sharing the file: each report is one write of whole
 * lines, so concurrent reports do not interleave within a line). Both are
 * made from one reading of the counters (layer_report). The text format is
 * documented in docs/layer.md. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "layer/layer.h"
#include "proto/client_report.h"

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

/* One reading of a device's counters and reasons. */
typedef struct layer_report {
  uint32_t pid;
  const char *app;
#define LAYER_REPORT_FIELD(name) uint64_t name;
  PCACHE_CLIENT_REPORT_COUNTERS(LAYER_REPORT_FIELD)
#undef LAYER_REPORT_FIELD
  uint64_t setup_us; /* text only: not a counter the daemon keeps */
  size_t n_reasons;
  layer_unhashable reasons[LAYER_MAX_REASONS]; /* reason words are static strings */
} layer_report;

static void collect(layer_device *ld, layer_report *r) {
  layer_stats *s = &ld->stats;
  pcache_stats core = {0};
  pcache_counters counters = {0};
  if (ld->pc) {
    (void)pcache_device_get_stats(ld->pc, &core);
    (void)pcache_device_get_counters(ld->pc, &counters);
  }
  r->pid = (uint32_t)getpid();
  r->app = ld->instance && ld->instance->client ? pcache_client_app_name(ld->instance->client) : "";
  r->pipelines = atomic_load(&s->pipelines);
  r->hashable = atomic_load(&s->hashable);
  r->daemon_hits = atomic_load(&s->daemon_hits);
  r->driver_hits = atomic_load(&s->driver_hits);
  r->local_hits = atomic_load(&s->local_hits);
  r->compiles = atomic_load(&s->compiles);
  r->uploaded = core.uploaded;
  r->unhashable = atomic_load(&s->unhashable);
  r->passed_through = atomic_load(&s->passed_through);
  r->app_cache_entries = atomic_load(&s->app_cache_entries);
  r->upload_dropped = counters.upload_dropped;
  r->staged = counters.staged;
  r->setup_us = ld->setup_us;
  pthread_mutex_lock(&s->reasons_lock);
  r->n_reasons = s->n_reasons;
  memcpy(r->reasons, s->reasons, s->n_reasons * sizeof *s->reasons);
  pthread_mutex_unlock(&s->reasons_lock);
}

/* The report as text lines (docs/layer.md); returns their length. */
static size_t format_text(const layer_report *r, char *buf, size_t cap) {
  size_t len = append(buf, 0, cap, "pcache-layer pid=%ld app=%s", (long)r->pid, r->app);
#define LAYER_REPORT_TEXT(name)                                                                    \
  len = append(buf, len, cap, " " #name "=%llu", (unsigned long long)r->name);
  PCACHE_CLIENT_REPORT_COUNTERS(LAYER_REPORT_TEXT)
#undef LAYER_REPORT_TEXT
  len = append(buf, len, cap, " setup_us=%llu\n", (unsigned long long)r->setup_us);
  for (size_t i = 0; i < r->n_reasons; i++)
    len = append(buf, len, cap, "pcache-layer-unhashable pid=%ld reason=%s stype=%u count=%llu\n",
                 (long)r->pid, r->reasons[i].reason, r->reasons[i].stype,
                 (unsigned long long)r->reasons[i].count);
  return len;
}

/* The report as a ClientReport, through the client's one connection: at
 * most the client's timeout, and nothing the app can see when the daemon
 * is away, slow or refuses it. A device that saw no pipeline has nothing
 * to say, and would only push older reports out of the daemon's few. */
static void send_report(layer_device *ld, const layer_report *r) {
  pcache_client *client = ld->instance ? ld->instance->client : NULL;
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__ClientReport m = PCACHEPB__CLIENT_REPORT__INIT;
  Pcachepb__UnhashableReason reasons[LAYER_MAX_REASONS], *reason_ptrs[LAYER_MAX_REASONS];
  pcache__reply reply;
  if (!client || r->pipelines == 0)
    return;
  m.pid = r->pid;
  m.app = (char *)r->app;
  if (ld->pc) {
    m.device_key.data = ld->pc->core.key.bytes;
    m.device_key.len = PCACHE_DEVKEY_SIZE;
    m.device_name = ld->pc->core.device_name;
  }
#define LAYER_REPORT_COPY(name) m.name = r->name;
  PCACHE_CLIENT_REPORT_COUNTERS(LAYER_REPORT_COPY)
#undef LAYER_REPORT_COPY
  for (size_t i = 0; i < r->n_reasons; i++) {
    pcachepb__unhashable_reason__init(&reasons[i]);
    reasons[i].reason = (char *)r->reasons[i].reason;
    reasons[i].stype = r->reasons[i].stype;
    reasons[i].count = r->reasons[i].count;
    reason_ptrs[i] = &reasons[i];
  }
  m.reasons = reason_ptrs;
  m.n_reasons = r->n_reasons;
  request.body_case = PCACHEPB__REQUEST__BODY_CLIENT_REPORT;
  request.client_report = &m;
  (void)pcache__client_rpc(client, PCACHE__LANE_APP, &request,
                           PCACHEPB__RESPONSE__BODY_CLIENT_REPORT, client->timeout_ms, &reply);
  pcache__reply_release(&reply);
}

void layer_stats_report(layer_device *ld) {
  const char *to_stderr = getenv("PCACHE_LAYER_STATS");
  const char *path = getenv("PCACHE_LAYER_STATS_FILE");
  layer_report r;
  char buf[4096];
  size_t len;
  collect(ld, &r);
  send_report(ld, &r);
  if (!(to_stderr && to_stderr[0] == '1') && !(path && *path))
    return;
  len = format_text(&r, buf, sizeof buf);
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
