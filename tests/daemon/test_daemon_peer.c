/* A client of another uid is refused (SO_PEERCRED). Needs root to become
 * another user; skipped otherwise. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

int main(void) {
  test_env env;
  wire_reply rep;
  pid_t pid;
  int status, fd;

  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root to connect as another uid\n");
    return 77;
  }
  test_env_init(&env, "peer");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  /* Let uid 65534 reach the socket file; the daemon must still refuse it. */
  ASSERT_EQ(chmod(env.root, 0755), 0);
  ASSERT_EQ(chmod(env.runtime_dir, 0755), 0);
  {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/pcache", env.runtime_dir);
    ASSERT_EQ(chmod(dir, 0755), 0);
    ASSERT_EQ(chmod(env.socket_path, 0666), 0);
  }
  pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
      _exit(2);
    fd = test_raw_connect(&env);
    if (fd < 0)
      _exit(3);
    if (wire_recv(fd, &rep) < 0)
      _exit(4);
    _exit(rep.resp->status == PCACHE_EPEER ? 0 : 5);
  }
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  /* Our own uid is still served. */
  fd = wire_open(&env, "peer");
  wire_stats(fd, &rep);
  wire_reply_free(&rep);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
