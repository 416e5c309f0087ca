/* common/log.c writes "<N>" priority prefixes only when stderr is the
 * journal ($JOURNAL_STREAM), the level as a word elsewhere; and escapes
 * what callers format in: control bytes, C1 controls
 * (8-bit CSI, NEL), U+2028/U+2029 and bytes that are not UTF-8 become
 * \xNN, so a client's string can neither forge a journal line nor steer a
 * terminal; printable UTF-8 (an app named in another script) stays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "test.h"

/* How JOURNAL_STREAM reads for the pipe that stands in for stderr. */
enum { JOURNAL_NONE, JOURNAL_THIS, JOURNAL_OTHER };

static void set_journal(int fd, int which) {
  struct stat st;
  char v[64];
  ASSERT_OK(fstat(fd, &st));
  if (which == JOURNAL_NONE) {
    unsetenv("JOURNAL_STREAM");
    return;
  }
  /* Another stream: what a service's child sees once its stderr is
   * redirected to a pipe or a file. */
  snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino + (which == JOURNAL_OTHER));
  setenv("JOURNAL_STREAM", v, 1);
}

static void logged_as(int journal, const char *arg, char *out, size_t size) {
  int p[2], saved = dup(STDERR_FILENO);
  ssize_t n;
  ASSERT_OK(pipe(p));
  ASSERT_TRUE(dup2(p[1], STDERR_FILENO) >= 0);
  set_journal(p[1], journal);
  pcache__log_at(PCACHE_LOG_WARNING, "app '%s'", arg);
  ASSERT_TRUE(dup2(saved, STDERR_FILENO) >= 0);
  close(saved);
  close(p[1]);
  n = read(p[0], out, size - 1);
  close(p[0]);
  ASSERT_GT(n, 0);
  out[n] = '\0';
}

/* As the journal gets it: with the "<N>" prefix. */
static void logged(const char *arg, char *out, size_t size) {
  logged_as(JOURNAL_THIS, arg, out, size);
}

int main(void) {
  char line[4096];
  pcache__log_set_level(PCACHE_LOG_DEBUG);

  /* The "<N>" prefix is for the journal alone: a pipe or a file that is not
   * the stream $JOURNAL_STREAM names gets the level as a word. */
  logged_as(JOURNAL_NONE, "x", line, sizeof line);
  ASSERT_STREQ(line, "warning: app 'x'\n");
  logged_as(JOURNAL_OTHER, "x", line, sizeof line);
  ASSERT_STREQ(line, "warning: app 'x'\n");
  logged_as(JOURNAL_THIS, "x", line, sizeof line);
  ASSERT_STREQ(line, "<4>app 'x'\n");
  setenv("JOURNAL_STREAM", "garbage", 1);
  ASSERT_EQ(pcache__log_stderr_is_journal(), 0);

  logged("game\n<0>forged", line, sizeof line);
  ASSERT_STREQ(line, "<4>app 'game\\x0a<0>forged'\n");

  /* 8-bit CSI, NEL, LINE SEPARATOR, not UTF-8, DEL, ESC. */
  logged("a\x9b[2Jb\xc2\x85"
         "c\xe2\x80\xa8"
         "d\xff\xfe\x7f\x1b",
         line, sizeof line);
  ASSERT_STREQ(line, "<4>app 'a\\x9b[2Jb\\xc2\\x85c\\xe2\\x80\\xa8d\\xff\\xfe\\x7f\\x1b'\n");

  /* Overlong and surrogate forms are not UTF-8 either. */
  logged("\xc0\xaf\xed\xa0\x80", line, sizeof line);
  ASSERT_STREQ(line, "<4>app '\\xc0\\xaf\\xed\\xa0\\x80'\n");

  /* Printable UTF-8 passes as it is. */
  logged("M\xc3\xb6rder \xe2\x9c\x93 \xf0\x9f\x8e\xae", line, sizeof line);
  ASSERT_STREQ(line, "<4>app 'M\xc3\xb6rder \xe2\x9c\x93 \xf0\x9f\x8e\xae'\n");

  /* A flood of warnings is held back past a burst; errors never are; the
   * next line that goes out says how many were held back. */
  {
    static char buf[1 << 16];
    int p[2], saved = dup(STDERR_FILENO), lines = 0, errors = 0;
    ssize_t n;
    ASSERT_OK(pipe(p));
    ASSERT_TRUE(dup2(p[1], STDERR_FILENO) >= 0);
    set_journal(p[1], JOURNAL_THIS);
    for (int i = 0; i < 1000; i++)
      pcache__log_at(PCACHE_LOG_WARNING, "w%d", i);
    for (int i = 0; i < 20; i++)
      pcache__log_at(PCACHE_LOG_ERR, "e%d", i);
    usleep(100 * 1000);
    pcache__log_at(PCACHE_LOG_WARNING, "after");
    ASSERT_TRUE(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    close(p[1]);
    n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    ASSERT_GT(n, 0);
    buf[n] = '\0';
    for (char *q = buf; (q = strchr(q, '\n')); q++)
      lines++;
    for (char *q = buf; (q = strstr(q, "<3>e")); q++)
      errors++;
    ASSERT_EQ(errors, 20);
    ASSERT_LE(lines, 200 + 20 + 2);
    ASSERT_TRUE(strstr(buf, "log lines held back") != NULL);
    ASSERT_TRUE(strstr(buf, "<4>after") != NULL);
  }
  return 0;
}
