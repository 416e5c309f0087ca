#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int log_level = PCACHE_LOG_INFO;
static const char *log_ident = NULL;

void pcache_log_set_level(int level) { log_level = level; }
int pcache_log_get_level(void) { return log_level; }
void pcache_log_set_ident(const char *ident) { log_ident = ident; }

int pcache_log_parse_level(const char *name) {
  if (!strcmp(name, "error"))
    return PCACHE_LOG_ERR;
  if (!strcmp(name, "warn") || !strcmp(name, "warning"))
    return PCACHE_LOG_WARNING;
  if (!strcmp(name, "notice"))
    return PCACHE_LOG_NOTICE;
  if (!strcmp(name, "info"))
    return PCACHE_LOG_INFO;
  if (!strcmp(name, "debug"))
    return PCACHE_LOG_DEBUG;
  return -1;
}

void pcache_log(int level, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  int n;
  if (level > log_level)
    return;
  /* One write() per line so lines from threads never interleave. */
  if (isatty(STDERR_FILENO)) {
    static const char *const words[] = {"emerg", "alert", "crit", "error", "warning",
                                        "notice", "info", "debug"};
    n = snprintf(line, sizeof line, "%s: ", words[level & 7]);
  } else {
    n = snprintf(line, sizeof line, "<%d>", level);
  }
  if (log_ident && n < (int)sizeof line)
    n += snprintf(line + n, sizeof line - (size_t)n, "%s: ", log_ident);
  va_start(ap, fmt);
  if (n < (int)sizeof line)
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof line - 1)
    n = (int)sizeof line - 2;
  line[n++] = '\n';
  (void)!write(STDERR_FILENO, line, (size_t)n);
}
