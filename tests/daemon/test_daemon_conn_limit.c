/* Idle connections cannot lock others out (issue 30, point 5). With
 * --max-connections 6 and --max-connections-per-process 3:
 *   - a process at its bound whose connections have been quiet for a
 *     second opens one more: its oldest is closed, the new one served;
 *   - when none of its connections is idle (each in the middle of a
 *     frame), the new one is refused with a message naming the bound;
 *   - two other processes fill the whole limit with idle connections: a
 *     newcomer is still served, the oldest idle one closed for it, and
 *     the daemon holds no more than its limit;
 *   - two processes fill it with connections kept busy: a process holding
 *     none is still served, the oldest of the biggest holder's closed.
 * Before, every newcomer at the limit was refused "too many connections",
 * and idle connections were never closed. */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

#define MAX_CONN 6
#define PER_PROCESS 3
/* Past the daemon's idle grace (one second). */
#define QUIET_US 1300000

static test_env env;

/* Another process holding PER_PROCESS connections until killed: idle, or
 * busy (each in the middle of a frame, so never idle). */
static pid_t holder_of_kind(int busy) {
  int p[2];
  char c;
  pid_t pid;
  ASSERT_EQ(pipe(p), 0);
  pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(p[0]);
    for (int i = 0; i < PER_PROCESS; i++) {
      int fd = wire_open(&env, "holder");
      if (busy)
        (void)wire_send_raw(fd, "\x10\x00", 2);
    }
    (void)!write(p[1], "x", 1);
    for (;;)
      pause();
  }
  close(p[1]);
  ASSERT_EQ(read(p[0], &c, 1), 1);
  close(p[0]);
  return pid;
}

static pid_t holder(void) { return holder_of_kind(0); }

static uint64_t open_connections(int fd) {
  wire_reply rep;
  uint64_t n;
  wire_stats(fd, &rep);
  n = rep.resp->stats->connections;
  wire_reply_free(&rep);
  return n;
}

int main(void) {
  const char *args[] = {"--max-connections", "6", "--max-connections-per-process", "3", NULL};
  int fds[PER_PROCESS + 1], fd;
  pid_t a, b;
  wire_reply rep;
  uint64_t n = 0;

  test_env_init(&env, "conn-limit");
  wire_guard(&env);
  test_daemon_start(&env, args);

  /* One process at its bound, all quiet: the one quiet the longest goes
   * for a new one. The daemon stamps a connection quiet when its reply has
   * gone, on its I/O thread, and a Hello answered on the other thread a
   * moment later can be stamped first (a CI run on a loaded machine closed
   * another than fds[0]): the first is made quiet well before the others. */
  for (int i = 0; i < PER_PROCESS; i++) {
    fds[i] = wire_open(&env, "mine");
    if (i == 0)
      usleep(50000);
  }
  usleep(QUIET_US);
  fds[PER_PROCESS] = wire_open(&env, "mine");
  ASSERT_EQ(wire_closed_with(fds[0]), 0); /* closed without a word */
  ASSERT_EQ(open_connections(fds[1]), PER_PROCESS);
  ASSERT_EQ(open_connections(fds[PER_PROCESS]), PER_PROCESS);

  /* None of them idle (each mid-frame): the next is refused, and told
   * what to do. */
  for (int i = 1; i <= PER_PROCESS; i++)
    ASSERT_OK(wire_send_raw(fds[i], "\x10\x00", 2));
  usleep(QUIET_US);
  fd = test_raw_connect(&env);
  ASSERT_GE(fd, 0);
  ASSERT_OK(wire_recv(fd, &rep));
  ASSERT_EQ(rep.resp->status, PCACHE_ETOO_MANY_CONNECTIONS);
  ASSERT_TRUE(strstr(rep.resp->message, "--max-connections-per-process") != NULL);
  wire_reply_free(&rep);
  close(fd);
  for (int i = 1; i <= PER_PROCESS; i++)
    close(fds[i]);

  /* Two other processes fill the limit with idle connections: a third is
   * still served, and the daemon stays within the limit. */
  a = holder();
  b = holder();
  usleep(QUIET_US);
  fd = wire_open(&env, "newcomer");
  for (int i = 0; i < 50 && (n = open_connections(fd)) > MAX_CONN; i++)
    usleep(20000); /* the closing runs on the holder's I/O thread */
  ASSERT_EQ(n, MAX_CONN);
  close(fd);

  kill(a, SIGKILL);
  kill(b, SIGKILL);
  ASSERT_EQ(waitpid(a, NULL, 0), a);
  ASSERT_EQ(waitpid(b, NULL, 0), b);

  /* Two processes fill the limit with connections kept busy, so none is
   * ever idle: a process holding none is still served (the oldest of a
   * biggest holder's closed for it), where it was refused before. */
  usleep(200000);
  a = holder_of_kind(1);
  b = holder_of_kind(1);
  usleep(QUIET_US);
  fd = wire_open(&env, "busy-newcomer"); /* aborts when refused */
  for (int i = 0; i < 50 && (n = open_connections(fd)) > MAX_CONN; i++)
    usleep(20000);
  ASSERT_EQ(n, MAX_CONN);
  close(fd);
  kill(a, SIGKILL);
  kill(b, SIGKILL);
  ASSERT_EQ(waitpid(a, NULL, 0), a);
  ASSERT_EQ(waitpid(b, NULL, 0), b);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
