/* Issue 12 §4, ownership and identity. pcached refuses a data or socket
 * directory that another uid owns (root included: CI runs this as root) or
 * that others may write to, naming the path and the fix, and never changes
 * an existing directory's mode; it warns about a parent that would let
 * another user replace the directory, by owner and mode alone (no name is
 * exempt). It opens data.mdb and lock.mdb without following links. And
 * libpcache and pcachectl refuse a listener of another uid (an impostor
 * that listened first on the path) before sending it anything. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "ctl_util.h"
#include "test.h"
#include "transport.h"

#define OTHER_UID 65534

static test_env env;
static char out[16384];

/* Runs pcached on socket and data_dir until it exits (--idle-exit 1 ends
 * one that wrongly starts); its stderr lands in out. Returns the status. */
static int run_pcached(const char *socket, const char *data_dir) {
  const char *args[] = {"--socket", socket, "--data-dir", data_dir, "--idle-exit", "1", NULL};
  int status = test_pcached_run(&env, args, out, sizeof out);
  fprintf(stderr, "pcached --data-dir %s --socket %s -> 0x%x\n%s", data_dir, socket, status, out);
  return status;
}

static void make_dir(const char *path, mode_t mode, uid_t uid) {
  ASSERT_EQ(mkdir(path, 0700), 0);
  ASSERT_EQ(chown(path, uid, 0), 0);
  ASSERT_EQ(chmod(path, mode), 0);
}

static mode_t mode_of(const char *path) {
  struct stat st;
  ASSERT_EQ(stat(path, &st), 0);
  return st.st_mode & 07777;
}

/* pcached must exit 1 without serving, saying why and naming dir. */
static void expect_refused(const char *socket, const char *data_dir, const char *dir,
                           const char *why) {
  int status = run_pcached(socket, data_dir);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 1);
  ASSERT_TRUE(strstr(out, "refusing the") != NULL);
  ASSERT_TRUE(strstr(out, dir) != NULL);
  ASSERT_TRUE(strstr(out, why) != NULL);
  /* No socket left behind for clients to find. */
  ASSERT_TRUE(access(socket, F_OK) < 0 && errno == ENOENT);
}

static void test_directories(void) {
  char d[400], sock_dir[500], sock[600], parent[400];

  /* Another uid's data dir, writable by all, with a store of theirs. */
  snprintf(d, sizeof d, "%s/theirs", env.root);
  make_dir(d, 0777, OTHER_UID);
  expect_refused(env.socket_path, d, d, "owned by uid 65534");
  ASSERT_EQ(mode_of(d), 0777);
  /* ... and private to them: still theirs. */
  snprintf(d, sizeof d, "%s/theirs-private", env.root);
  make_dir(d, 0700, OTHER_UID);
  expect_refused(env.socket_path, d, d, "owned by uid 65534");
  /* Ours, but group- or world-writable. */
  snprintf(d, sizeof d, "%s/ours-open", env.root);
  make_dir(d, 0770, 0);
  expect_refused(env.socket_path, d, d, "writable by other users");
  ASSERT_EQ(mode_of(d), 0770);
  /* A shared (1777) data dir keeps its mode. */
  snprintf(d, sizeof d, "%s/shared-data", env.root);
  make_dir(d, 01777, 0);
  expect_refused(env.socket_path, d, d, "mode 1777");
  ASSERT_EQ(mode_of(d), 01777);

  /* A shared socket dir, ours (as /tmp is root's): refused, mode kept. */
  snprintf(sock_dir, sizeof sock_dir, "%s/shared-run", env.root);
  make_dir(sock_dir, 01777, 0);
  snprintf(sock, sizeof sock, "%s/socket", sock_dir);
  expect_refused(sock, env.data_dir, sock_dir, "mode 1777");
  ASSERT_EQ(mode_of(sock_dir), 01777);
  /* Another uid's socket dir. */
  snprintf(sock_dir, sizeof sock_dir, "%s/their-run", env.root);
  make_dir(sock_dir, 0700, OTHER_UID);
  snprintf(sock, sizeof sock, "%s/socket", sock_dir);
  expect_refused(sock, env.data_dir, sock_dir, "owned by uid 65534");

  /* A private dir under a parent anyone may write to without the sticky
   * bit: served, with a warning naming the parent; under a sticky one
   * (like /tmp) no warning. */
  snprintf(parent, sizeof parent, "%s/open-parent", env.root);
  make_dir(parent, 0777, 0);
  snprintf(sock, sizeof sock, "%s/run/socket", parent);
  ASSERT_EQ(run_pcached(sock, env.data_dir), 0);
  ASSERT_TRUE(strstr(out, "another user could replace it") != NULL);
  ASSERT_TRUE(strstr(out, parent) != NULL);
  ASSERT_EQ(chmod(parent, 01777), 0);
  ASSERT_EQ(run_pcached(sock, env.data_dir), 0);
  ASSERT_TRUE(strstr(out, "another user could replace it") == NULL);
  /* The directory pcached made for the socket is 0700. */
  snprintf(sock_dir, sizeof sock_dir, "%s/run", parent);
  ASSERT_EQ(mode_of(sock_dir), 0700);
}

static const char secret[] = "a file the link points at\n";

/* Plants a link to target at name in the data dir, runs the daemon and a
 * pcachectl status, and checks that the target was not written and that
 * a regular file is at name now. */
static void serve_over_link(const char *target, const char *name) {
  char link_path[400];
  struct stat st;
  size_t size;
  uint8_t *got;
  snprintf(link_path, sizeof link_path, "%s/%s", env.data_dir, name);
  ASSERT_TRUE(unlink(link_path) == 0 || errno == ENOENT);
  ASSERT_EQ(symlink(target, link_path), 0);
  ctl_start(&env);
  ASSERT_EQ(ctl_run(&env, "status"), 0);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  got = ctl_read_file(target, &size);
  ASSERT_EQ(size, sizeof secret);
  ASSERT_MEMEQ(got, secret, sizeof secret);
  free(got);
  ASSERT_EQ(lstat(link_path, &st), 0);
  ASSERT_TRUE(S_ISREG(st.st_mode));
}

/* A planted link at lock.mdb or data.mdb: the link goes (a data.mdb link
 * is moved aside, as a link), its target is never written. */
static void test_store_links(void) {
  char target[400], aside[400];
  struct stat st;
  snprintf(target, sizeof target, "%s/target", env.root);
  ctl_write_file(target, secret, sizeof secret);
  ASSERT_TRUE(mkdir(env.data_dir, 0700) == 0 || errno == EEXIST);
  serve_over_link(target, "lock.mdb");
  serve_over_link(target, "data.mdb");
  ASSERT_EQ(test_count_aside(&env), 1);
  snprintf(aside, sizeof aside, "%s/aside", env.root);
  ASSERT_EQ(ctl_sh("cp -P '%s'/data.mdb.corrupt-* '%s'", env.data_dir, aside), 0);
  ASSERT_EQ(lstat(aside, &st), 0);
  ASSERT_TRUE(S_ISLNK(st.st_mode));
}

/* An impostor of another uid listening first on the daemon's path: it
 * binds as root in the root-owned dir, then drops to OTHER_UID before
 * listen(), which is whose credentials SO_PEERCRED reports. It answers
 * nothing; it only records whether a request reached it. */
static pid_t start_impostor(int *ret_heard) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  int pipefd[2];
  pid_t pid;
  ASSERT_EQ(pipe(pipefd), 0);
  ASSERT_TRUE(strlen(env.socket_path) < sizeof sun.sun_path);
  memcpy(sun.sun_path, env.socket_path, strlen(env.socket_path) + 1);
  pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    char c = 'r';
    close(pipefd[0]);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, sizeof sun) < 0 ||
        setresgid(OTHER_UID, OTHER_UID, OTHER_UID) < 0 ||
        setresuid(OTHER_UID, OTHER_UID, OTHER_UID) < 0 || listen(lfd, 16) < 0)
      _exit(1);
    /* Dies with the test even when an assertion ends it (set after the
     * uid change, which clears it). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
      _exit(1);
    (void)!write(pipefd[1], &c, 1); /* ready */
    for (;;) {
      char buf[256];
      int cfd = accept(lfd, NULL, NULL);
      if (cfd < 0)
        _exit(1);
      if (read(cfd, buf, sizeof buf) > 0) {
        c = 'h'; /* heard a request */
        (void)!write(pipefd[1], &c, 1);
      }
      close(cfd);
    }
  }
  close(pipefd[1]);
  {
    char c;
    ASSERT_EQ(read(pipefd[0], &c, 1), 1);
    ASSERT_EQ(c, 'r');
  }
  fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
  *ret_heard = pipefd[0];
  return pid;
}

static void test_impostor(void) {
  pcache__transport *t = NULL;
  char *message = NULL, c;
  int heard, status;
  pid_t pid;
  char dir[400];
  snprintf(dir, sizeof dir, "%s/pcache", env.runtime_dir);
  mkdir(dir, 0700);
  unlink(env.socket_path);
  pid = start_impostor(&heard);

  ASSERT_ERR(pcache__transport_open(env.socket_path, "impostor-test", 2000, &t, &message),
             PCACHE_EPEER);
  ASSERT_TRUE(t == NULL);
  ASSERT_TRUE(message != NULL && strstr(message, "uid 65534") != NULL);
  pcache__free(message);

  status = ctl_run(&env, "status");
  ASSERT_TRUE(status != 0);
  ASSERT_TRUE(strstr(ctl_err, "uid 65534") != NULL);
  ASSERT_TRUE(strstr(ctl_out, "entries") == NULL);

  /* Nothing was sent to it. */
  ASSERT_EQ(read(heard, &c, 1), -1);
  ASSERT_EQ(errno, EAGAIN);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  close(heard);
  unlink(env.socket_path);
}

/* With an argument ("dirs", "links" or "impostor"), runs only that part. */
int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL;
  if (geteuid() != 0) {
    fprintf(stderr, "needs root (chown to uid %d, setuid); skipped\n", OTHER_UID);
    return 77;
  }
  test_env_init(&env, "ctl-ownership");
  /* Under the harness's mkdtemp root (0700, root's), which uid 65534
   * cannot enter: open it for them as a parent; the sticky bit keeps
   * the parent warning away from the other checks. */
  ASSERT_EQ(chmod(env.root, 01777), 0);
  if (!only || strcmp(only, "dirs") == 0)
    test_directories();
  if (!only || strcmp(only, "links") == 0)
    test_store_links();
  if (!only || strcmp(only, "impostor") == 0)
    test_impostor();
  test_env_cleanup(&env);
  return 0;
}
