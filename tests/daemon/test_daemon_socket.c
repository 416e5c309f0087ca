/* The socket's life: modes 0600 in a 0700 directory, a live daemon's socket
 * is not stolen (the second daemon exits 1 saying why), nor its data
 * directory (a second daemon on another socket is refused, naming the
 * first's pid), a stale one is replaced, --idle-exit, and systemd socket activation with sd_notify.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

static test_env env;

/* A second pcached on env's socket, with its own data dir. */
static int run_pcached(const char *const *extra, char *out, size_t out_size) {
  const char *args[16] = {"--socket", env.socket_path, "--data-dir"};
  char dd[400];
  int n = 4;
  snprintf(dd, sizeof dd, "%s/other-data", env.root);
  args[3] = dd;
  for (int i = 0; extra && extra[i] && n < 15; i++)
    args[n++] = extra[i];
  return test_pcached_run(&env, args, out, out_size);
}

static void test_modes_and_second_daemon(void) {
  struct stat st;
  char dir[400], out[4096];
  int status;
  test_daemon_start(&env, NULL);
  ASSERT_EQ(stat(env.socket_path, &st), 0);
  ASSERT_TRUE(S_ISSOCK(st.st_mode));
  ASSERT_EQ(st.st_mode & 0777, 0600);
  snprintf(dir, sizeof dir, "%s/pcache", env.runtime_dir);
  ASSERT_EQ(stat(dir, &st), 0);
  ASSERT_EQ(st.st_mode & 0777, 0700);
  ASSERT_EQ(stat(env.data_dir, &st), 0);
  ASSERT_EQ(st.st_mode & 0777, 0700);

  status = run_pcached(NULL, out, sizeof out);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 1);
  if (!strstr(out, "already listening"))
    TEST_FAIL_("second daemon said: %s", out);
  /* The first one still serves. */
  close(wire_open(&env, "still"));
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
}

/* A second pcached on its own socket but the first's data directory is
 * refused: it names the first's pid and the fix, exits 1, and leaves no
 * socket behind; once the first stops, the directory can be served again. */
static void test_second_daemon_same_store(void) {
  char other[400], out[4096], pid[64];
  const char *args[] = {"--socket", other, "--data-dir", env.data_dir, "--idle-exit", "1", NULL};
  int status;
  snprintf(other, sizeof other, "%s/other.sock", env.runtime_dir);
  test_daemon_start(&env, NULL);
  status = test_pcached_run(&env, args, out, sizeof out);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 1);
  snprintf(pid, sizeof pid, "another pcached (pid %ld)", (long)env.daemon_pid);
  if (!strstr(out, "already served by") || !strstr(out, pid) || !strstr(out, "--data-dir"))
    TEST_FAIL_("second daemon said: %s", out);
  ASSERT_EQ(access(other, F_OK), -1);
  close(wire_open(&env, "still"));
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  /* Free again: it serves, and exits when idle. */
  status = test_pcached_run(&env, args, out, sizeof out);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) != 0)
    TEST_FAIL_("a daemon on the freed directory said: %s", out);
}

static void test_stale_socket(void) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  /* A socket file nobody listens on, as a crashed daemon leaves it. */
  strcpy(sun.sun_path, env.socket_path);
  unlink(env.socket_path);
  ASSERT_EQ(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
  close(fd);
  ASSERT_EQ(access(env.socket_path, F_OK), 0);
  test_daemon_start(&env, NULL);
  close(wire_open(&env, "stale"));
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
}

static void test_idle_exit(void) {
  const char *args[] = {"--idle-exit", "1", NULL};
  int status, fd;
  time_t t0 = time(NULL);
  pid_t pid = test_daemon_start(&env, args);
  /* A connection holds it up... */
  fd = wire_open(&env, "idle");
  sleep(2);
  ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0);
  close(fd);
  /* ...and it goes 1 s after the last one left, with status 0. */
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  env.daemon_pid = 0;
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  ASSERT_LT(time(NULL) - t0, 10);
}

/* Appends the sd_notify datagrams that arrive on nfd to got, one a line,
 * until one holds word: at most tries of them, each within timeout_ms. */
static void notified(int nfd, const char *word, int tries, int timeout_ms, char *got,
                     size_t got_size) {
  char buf[512];
  for (int i = 0; i < tries && !strstr(got, word); i++) {
    struct pollfd p = {nfd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, timeout_ms), 1);
    ssize_t n = recv(nfd, buf, sizeof buf - 1, 0);
    ASSERT_GT(n, 0);
    buf[n] = '\0';
    strncat(got, buf, got_size - strlen(got) - 2);
    strcat(got, "\n");
  }
  ASSERT_TRUE(strstr(got, word) != NULL);
}

static void test_activation(void) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX}, nsun = {.sun_family = AF_UNIX};
  char notify_path[400], got[2048] = "";
  int lfd, nfd, status;
  pid_t pid;

  unlink(env.socket_path);
  strcpy(sun.sun_path, env.socket_path);
  lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(bind(lfd, (struct sockaddr *)&sun, sizeof sun), 0);
  ASSERT_EQ(listen(lfd, 16), 0);
  snprintf(notify_path, sizeof notify_path, "%s/notify", env.root);
  strcpy(nsun.sun_path, notify_path);
  nfd = socket(AF_UNIX, SOCK_DGRAM, 0);
  ASSERT_EQ(bind(nfd, (struct sockaddr *)&nsun, sizeof nsun), 0);

  pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char pidbuf[32], dd[400];
    int lf;
    snprintf(pidbuf, sizeof pidbuf, "%d", (int)getpid());
    snprintf(dd, sizeof dd, "%s/act-data", env.root);
    dup2(lfd, 3);
    setenv("LISTEN_PID", pidbuf, 1);
    setenv("LISTEN_FDS", "1", 1);
    setenv("NOTIFY_SOCKET", notify_path, 1);
    /* The socket path must come from the fd, not from here. */
    setenv("PCACHE_SOCKET", "/nonexistent/socket", 1);
    lf = open(env.log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(lf, 2);
    execl(test_pcached_path(), "pcached", "--data-dir", dd, "--log-level", "debug", NULL);
    _exit(127);
  }
  close(lfd);
  env.daemon_pid = pid;
  /* READY=1 arrives once it serves. */
  notified(nfd, "READY=1", 3, 10000, got, sizeof got);
  close(wire_open(&env, "activated"));
  status = test_daemon_stop(&env, SIGTERM);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  /* STATUS= came after READY=1; STOPPING=1 follows. */
  notified(nfd, "STOPPING=1", 5, 5000, got, sizeof got);
  ASSERT_TRUE(strstr(got, "STATUS=") != NULL);
  /* systemd owns the socket file: an activated daemon leaves it. */
  ASSERT_EQ(access(env.socket_path, F_OK), 0);
  close(nfd);
}

int main(void) {
  test_env_init(&env, "socket");
  wire_guard(&env);
  test_modes_and_second_daemon();
  test_second_daemon_same_store();
  test_stale_socket();
  test_idle_exit();
  test_activation();
  test_env_cleanup(&env);
  return 0;
}
