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

/* Writes text into out (size > 4) with every control byte as \xNN, so
 * nothing a client sent (an app name, a path, a message) can end the line
 * and start a forged one such as "\n<0>..." that journald would file as an
 * emergency. Returns the length written, stopping at a whole escape. */
static size_t escape_controls(const char *text, size_t len, char *out, size_t size) {
  static const char hex[] = "0123456789abcdef";
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)text[i];
    if (ch >= 0x20 && ch != 0x7f) {
      if (n + 1 >= size)
        break;
      out[n++] = (char)ch;
      continue;
    }
    if (n + 4 >= size)
      break;
    out[n++] = '\\';
    out[n++] = 'x';
    out[n++] = hex[ch >> 4];
    out[n++] = hex[ch & 15];
  }
  return n;
}

void pcache_log(int level, const char *fmt, ...) {
  char line[2048], text[2048];
  va_list ap;
  int n, t;
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
  t = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (t < 0)
    t = 0;
  if ((size_t)t >= sizeof text)
    t = (int)sizeof text - 1;
  /* Escaped here, once, rather than at each call: every string a caller
   * formats in is covered, including ones it did not know came from a
   * client. */
  if (n < (int)sizeof line - 1)
    n += (int)escape_controls(text, (size_t)t, line + n, sizeof line - 1 - (size_t)n);
  if (n > (int)sizeof line - 2)
    n = (int)sizeof line - 2;
  line[n++] = '\n';
  (void)!write(STDERR_FILENO, line, (size_t)n);
}
