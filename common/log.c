#include "log.h"

#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int log_level = PCACHE_LOG_INFO;
static const char *log_ident = NULL;

void pcache__log_set_level(int level) { log_level = level; }
int pcache__log_get_level(void) { return log_level; }
void pcache__log_set_ident(const char *ident) { log_ident = ident; }

int pcache__log_parse_level(const char *name) {
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
  return -EINVAL;
}

size_t pcache__utf8_decode(const unsigned char *s, size_t n, uint32_t *ret_cp) {
  uint32_t cp;
  size_t len;
  if (s[0] < 0x80) {
    *ret_cp = s[0];
    return 1;
  }
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    len = 2, cp = s[0] & 0x1f;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    len = 3, cp = s[0] & 0x0f;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    len = 4, cp = s[0] & 0x07;
  else
    return 0;
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  *ret_cp = cp;
  return len;
}

/* The length of the printable character at s (at most len bytes, len >
 * 0), else 0: ASCII controls and DEL, bytes that are not well-formed
 * UTF-8, C1 controls (U+0080..U+009F, NEL among them) and the line and
 * paragraph separators U+2028/U+2029 are not. */
static size_t printable_at(const unsigned char *s, size_t len) {
  uint32_t cp;
  size_t n;
  if (s[0] < 0x80)
    return s[0] >= 0x20 && s[0] < 0x7f;
  n = pcache__utf8_decode(s, len, &cp);
  if (n == 0 || cp <= 0x9f || cp == 0x2028 || cp == 0x2029)
    return 0;
  return n;
}

int pcache__utf8_printable(const char *s, size_t n) {
  for (size_t i = 0, k; i < n; i += k)
    if ((k = printable_at((const unsigned char *)s + i, n - i)) == 0)
      return 0;
  return 1;
}

/* Writes text into out (size > 4) with every control byte, and every byte
 * that is not part of printable UTF-8, as \xNN, so nothing a client sent
 * (an app name, a path, a message) can end the line and start a forged one
 * such as "\n<0>..." that journald would file as an emergency, nor steer a
 * terminal (8-bit CSI, NEL) or make journald store the line as binary.
 * Returns the length written, stopping at a whole escape. */
static size_t escape_controls(const char *text, size_t len, char *out, size_t size) {
  static const char hex[] = "0123456789abcdef";
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    const unsigned char *p = (const unsigned char *)text + i;
    size_t keep = printable_at(p, len - i);
    if (keep) {
      if (n + keep >= size)
        break;
      memcpy(out + n, p, keep);
      n += keep;
      i += keep;
      continue;
    }
    if (n + 4 >= size)
      break;
    out[n++] = '\\';
    out[n++] = 'x';
    out[n++] = hex[*p >> 4];
    out[n++] = hex[*p & 15];
    i++;
  }
  return n;
}

/* Warning, notice and info lines a client can cause (a refused Hello, a
 * refused connection) must not flood the journal, which would then drop
 * lines of its own accord, the important ones too: at most
 * LOG_BURST such lines at once, refilled at LOG_RATE a second. Errors are
 * never held back, and debug is asked for. What is held back is counted
 * and said with the next line that goes out. */
#define LOG_RATE 50u
#define LOG_BURST 200u

static pthread_mutex_t rate_lock = PTHREAD_MUTEX_INITIALIZER;
static double rate_tokens = LOG_BURST;
static uint64_t rate_last_us, rate_dropped;

/* 1 to write the line (*ret_dropped: lines held back before it), 0 to
 * hold it back. */
static int rate_allow(int level, uint64_t *ret_dropped) {
  int ok = 1;
  *ret_dropped = 0;
  if (level <= PCACHE_LOG_ERR || level >= PCACHE_LOG_DEBUG)
    return 1;
  pthread_mutex_lock(&rate_lock);
  uint64_t now = pcache__mono_us();
  if (rate_last_us)
    rate_tokens += (double)(now - rate_last_us) * LOG_RATE / 1e6;
  if (rate_tokens > LOG_BURST)
    rate_tokens = LOG_BURST;
  rate_last_us = now;
  if (rate_tokens >= 1) {
    rate_tokens -= 1;
    *ret_dropped = rate_dropped;
    rate_dropped = 0;
  } else {
    rate_dropped++;
    ok = 0;
  }
  pthread_mutex_unlock(&rate_lock);
  return ok;
}

int pcache__log_stderr_is_journal(void) {
  /* systemd sets $JOURNAL_STREAM to "DEVICE:INODE" of the stream it
   * connected stdout or stderr to (systemd.exec(5)): stderr is the journal
   * only when it is still that very stream. A child of a service
   * inherits the variable with its stderr redirected to a file or a pipe,
   * and a terminal is never the journal. */
  const char *v = getenv("JOURNAL_STREAM");
  unsigned long long dev, ino;
  struct stat st;
  char end;
  if (!v || sscanf(v, "%llu:%llu%c", &dev, &ino, &end) != 2)
    return 0;
  if (fstat(STDERR_FILENO, &st) < 0)
    return 0;
  return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* Formats, escapes and writes one line. */
static void emit(int level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void emit(int level, const char *fmt, va_list ap) {
  char line[2048], text[2048];
  int n, t;
  /* One write() per line so lines from threads never interleave. The
   * journal reads the level from a "<N>" prefix; a terminal, a pipe or a
   * file gets it as a word. */
  if (pcache__log_stderr_is_journal()) {
    n = snprintf(line, sizeof line, "<%d>", level);
  } else {
    static const char *const words[] = {"emerg", "alert", "crit", "error", "warning",
                                        "notice", "info", "debug"};
    n = snprintf(line, sizeof line, "%s: ", words[level & 7]);
  }
  if (log_ident && n < (int)sizeof line)
    n += snprintf(line + n, sizeof line - (size_t)n, "%s: ", log_ident);
  t = vsnprintf(text, sizeof text, fmt, ap);
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

static void emit_fmt(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit_fmt(int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(level, fmt, ap);
  va_end(ap);
}

void pcache__log_at(int level, const char *fmt, ...) {
  uint64_t dropped;
  va_list ap;
  if (level > log_level || !rate_allow(level, &dropped))
    return;
  if (dropped)
    emit_fmt(PCACHE_LOG_WARNING, "(%llu log lines held back: more than %u a second)",
             (unsigned long long)dropped, LOG_RATE);
  va_start(ap, fmt);
  emit(level, fmt, ap);
  va_end(ap);
}
