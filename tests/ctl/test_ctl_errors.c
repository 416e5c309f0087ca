/* Exit codes: 3 with a hint when no daemon listens, 2 for usage errors,
 * 0 for help and version. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"
#include "test.h"

/* Every command --help lists says what it does: text from column 31 of
 * its line, or of the next line when the synopsis is long. */
static void check_summaries(const char *help) {
  const char *p = strstr(help, "Commands:\n"), *end;
  int commands = 0;
  ASSERT_TRUE(p != NULL);
  p += strlen("Commands:\n");
  end = strstr(p, "\n\n");
  ASSERT_TRUE(end != NULL);
  while (p < end) {
    const char *eol = strchr(p, '\n'), *next;
    ASSERT_TRUE(eol != NULL);
    next = eol + 1;
    if (p[0] == ' ' && p[1] == ' ' && p[2] != ' ') {
      size_t len = (size_t)(eol - p);
      commands++;
      if (next < end && strspn(next, " ") == 31 && next[31] != '\n') {
        next = strchr(next, '\n') + 1; /* a long synopsis: the summary is under it */
      } else if (len <= 31 || p[30] != ' ' || p[31] == ' ') {
        TEST_FAIL_("a command without its one-line description: %.*s", (int)len, p);
      }
    }
    p = next;
  }
  ASSERT_GE(commands, 9);
}

int main(void) {
  test_env env;
  test_env_init(&env, "ctl-errors");

  /* No daemon at all. */
  ASSERT_EQ(ctl_run(&env, "status"), 3);
  ASSERT_TRUE(strstr(ctl_err, "systemctl --user start pcached.socket"));
  ASSERT_TRUE(strstr(ctl_err, "pcached"));
  ASSERT_TRUE(strstr(ctl_err, env.socket_path));
  ASSERT_EQ(ctl_run(&env, "list"), 3);
  ASSERT_EQ(ctl_run(&env, "purge --all"), 3);
  ASSERT_EQ(ctl_run(&env, "--json verify"), 3);
  ASSERT_EQ(ctl_run(&env, "export '%s/x.pcar'", env.root), 3);
  ASSERT_EQ(ctl_run(&env, "import /dev/null"), 3);
  /* Nothing names a socket. */
  ASSERT_EQ(ctl_sh("env -u PCACHE_SOCKET -u XDG_RUNTIME_DIR '%s' status 2>/dev/null", ctl_path()),
            3);

  /* A daemon that was killed leaves its socket file behind. */
  ctl_start(&env);
  ASSERT_EQ(ctl_run(&env, "status"), 0);
  test_daemon_stop(&env, SIGKILL);
  ASSERT_EQ(ctl_run(&env, "status"), 3);
  ASSERT_TRUE(strstr(ctl_err, "systemctl --user start pcached.socket"));

  /* Usage. */
  ASSERT_EQ(ctl_run(&env, "%s", ""), 2);
  ASSERT_EQ(ctl_run(&env, "frobnicate"), 2);
  ASSERT_TRUE(strstr(ctl_err, "unknown command"));
  ASSERT_EQ(ctl_run(&env, "--bogus status"), 2);
  ASSERT_EQ(ctl_run(&env, "--timeout 0 status"), 2);
  ASSERT_EQ(ctl_run(&env, "--timeout forever status"), 2);
  ASSERT_EQ(ctl_run(&env, "purge"), 2);
  ASSERT_EQ(ctl_run(&env, "verify --repair extra"), 2);
  ASSERT_EQ(ctl_run(&env, "help frobnicate"), 2);

  /* Help and version need no daemon. */
  ASSERT_EQ(ctl_run(&env, "--help"), 0);
  ASSERT_TRUE(strstr(ctl_out, "Usage: pcachectl"));
  ASSERT_TRUE(strstr(ctl_out, "import FILE"));
  check_summaries(ctl_out);
  ASSERT_EQ(ctl_run(&env, "help purge"), 0);
  ASSERT_TRUE(strstr(ctl_out, "--older-than"));
  ASSERT_EQ(ctl_run(&env, "purge --help"), 0);
  ASSERT_TRUE(strstr(ctl_out, "--older-than"));
  ASSERT_EQ(ctl_run(&env, "help"), 0);
  ASSERT_EQ(ctl_run(&env, "--version"), 0);
  ASSERT_TRUE(strstr(ctl_out, "pcachectl " PCACHE_VERSION_STRING));
  ASSERT_EQ(ctl_run(&env, "export --help"), 0);
  ASSERT_TRUE(strstr(ctl_out, "atomically"));

  /* The man page is well formed. */
  if (ctl_sh("command -v man >/dev/null") == 0)
    ASSERT_EQ(ctl_sh("MANWIDTH=80 man -l '%s' >/dev/null 2>&1", PCACHECTL_MANPAGE), 0);

  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
