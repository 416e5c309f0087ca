/* What every file of pcache-demo shares: its name, its options, logging
 * and the clock.
 *
 * The demo's files, each naming only those listed after it:
 *   pcache_demo.c     the options, and main: the pcache path, its two
 *                     measured passes and what it prints (read it first)
 *   demo_plain.c      --plain: the same pipelines with no pcache code
 *   demo_pipelines.c  the objects and the pipeline variants it builds
 *   demo_vk.c         Vulkan set-up: instance, device, what it supports */
#ifndef PCACHE_EXAMPLES_DEMO_H
#define PCACHE_EXAMPLES_DEMO_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEMO_NAME "pcache-demo"
#define DEMO_MAX_PIPELINES 4096

typedef struct demo_options {
  uint32_t pipelines;
  const char *app_name;
  uint32_t device_index;
  int no_daemon;
  int plain;              /* no pcache code: plain Vulkan (what the layer serves) */
  const char *cache_file; /* --plain: the app's own VkPipelineCache file */
  uint32_t threads;       /* --plain: threads creating pipelines (replay's baseline) */
  int shuffle;            /* --plain: the variants in a fixed scrambled order */
  uint32_t fresh_caches;  /* --plain: each run of this many pipelines (of a thread)
                           * into an empty cache of its own; 0: none */
  int fresh_objects;      /* --plain: each pipeline with a layout and render pass of its own */
  int destroy_each;       /* --plain: each pipeline destroyed once made */
  int alternate;          /* --plain: the probes above on every other pipeline */
  int read_each;          /* --plain: a fresh cache's data read after each pipeline */
  int app_owned;          /* PCACHE_PIPELINES_APP: a pipeline per call, the demo's */
} demo_options;

/* Programs log with sd-daemon "<N>" prefixes when stderr is the journal,
 * so journald reads the level, and the level as a word anywhere else
 * (common/log.h, which the demo, using only the public header, does not
 * link). */
#define log_err(...) demo_log(3, __VA_ARGS__)

static inline void demo_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* $JOURNAL_STREAM names stderr's device and inode (systemd.exec(5)). */
static inline int stderr_is_journal(void) {
  const char *v = getenv("JOURNAL_STREAM");
  unsigned long long dev, ino;
  struct stat st;
  char end;
  return v && sscanf(v, "%llu:%llu%c", &dev, &ino, &end) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
         (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static inline void demo_log(int level, const char *fmt, ...) {
  static const char *const words[] = {"emerg",   "alert",  "crit", "error",
                                      "warning", "notice", "info", "debug"};
  va_list ap;
  if (stderr_is_journal())
    fprintf(stderr, "<%d>" DEMO_NAME ": ", level);
  else
    fprintf(stderr, "%s: " DEMO_NAME ": ", words[level & 7]);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif
