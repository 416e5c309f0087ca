#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "proto/rpc.h"
#include "test.h"

#ifndef PCACHE_TEST_PCACHED
#error "PCACHE_TEST_PCACHED must name the pcached binary"
#endif

const char *test_pcached_path(void) {
  const char *env = getenv("PCACHE_TEST_PCACHED");
  return env && *env ? env : PCACHE_TEST_PCACHED;
}

void test_env_init(test_env *env, const char *name) {
  const char *tmp = getenv("TMPDIR");
  memset(env, 0, sizeof *env);
  snprintf(env->root, sizeof env->root, "%s/pcache-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
  if (!mkdtemp(env->root))
    TEST_FAIL_("mkdtemp %s: %s", env->root, strerror(errno));
  snprintf(env->runtime_dir, sizeof env->runtime_dir, "%s/run", env->root);
  snprintf(env->data_dir, sizeof env->data_dir, "%s/data", env->root);
  snprintf(env->socket_path, sizeof env->socket_path, "%s/pcache/socket", env->runtime_dir);
  snprintf(env->log_path, sizeof env->log_path, "%s/pcached.log", env->root);
  ASSERT_EQ(mkdir(env->runtime_dir, 0700), 0);
  ASSERT_EQ(chmod(env->runtime_dir, 0700), 0);
  setenv("XDG_RUNTIME_DIR", env->runtime_dir, 1);
  setenv("PCACHE_SOCKET", env->socket_path, 1);
  setenv("PCACHE_DATA_DIR", env->data_dir, 1);
  unsetenv("PCACHE_DISABLE");
  /* No probe of the installed drivers at each test daemon's start
   * (docs/replay.md): it would cost every test a Vulkan instance, and
   * lavapipe's real key supersedes the tests' made-up keys of its vendor
   * and device 0, whose replays would then start. The replay tests that
   * test the probe set it back. */
  setenv("PCACHE_REPLAY_DETECT", "off", 1);
}

int test_raw_connect(const test_env *env) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  size_t len = strlen(env->socket_path);
  if (len >= sizeof sun.sun_path) {
    close(fd);
    return -ENAMETOOLONG;
  }
  memcpy(sun.sun_path, env->socket_path, len + 1);
  if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

int test_open(const test_env *env, const char *app, uint32_t timeout_ms) {
  return test_open_hello(env, app, timeout_ms, NULL);
}

int test_open_hello(const test_env *env, const char *app, uint32_t timeout_ms,
                    Pcachepb__HelloReply *ret_hello) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Hello hello = PCACHEPB__HELLO__INIT;
  pcache__reply reply;
  int r, fd = test_raw_connect(env);
  if (fd < 0)
    return fd;
  hello.protocol_version = PCACHE_PROTOCOL_VERSION;
  hello.app = (char *)app;
  hello.pid = (uint32_t)getpid();
  hello.client_version = (char *)"test";
  req.body_case = PCACHEPB__REQUEST__BODY_HELLO;
  req.hello = &hello;
  r = pcache__rpc(fd, &req, PCACHEPB__RESPONSE__BODY_HELLO, PCACHE_DEFAULT_MAX_FRAME,
                  pcache__mono_ms() + timeout_ms, &reply);
  if (r == 0 && reply.response->hello->protocol_version != PCACHE_PROTOCOL_VERSION)
    r = PCACHE_EVERSION;
  if (r == 0 && ret_hello) {
    *ret_hello = *reply.response->hello;
    ret_hello->daemon_version = NULL; /* it points into the reply */
  }
  pcache__reply_release(&reply);
  if (r < 0) {
    close(fd);
    return r;
  }
  return fd;
}

/* Ready means serving: a Hello answered, not just a socket that accepts
 * (pcached listens before its store is open). */
static int hello_answered(const test_env *env) {
  int fd = test_open(env, "test-harness", 1000);
  if (fd < 0)
    return 0;
  close(fd);
  return 1;
}

pid_t test_daemon_start(test_env *env, const char *const *extra_args) {
  const char *argv[64];
  int argc = 0;
  pid_t pid, parent;
  argv[argc++] = test_pcached_path();
  argv[argc++] = "--socket";
  argv[argc++] = env->socket_path;
  argv[argc++] = "--data-dir";
  argv[argc++] = env->data_dir;
  argv[argc++] = "--log-level";
  argv[argc++] = "debug";
  for (int i = 0; extra_args && extra_args[i] && argc < 62; i++)
    argv[argc++] = extra_args[i];
  argv[argc] = NULL;

  parent = getpid();
  pid = fork();
  if (pid < 0)
    TEST_FAIL_("fork: %s", strerror(errno));
  if (pid == 0) {
    /* A test that aborts must not leave its daemon behind holding ctest's
     * output pipe open (ctest would then wait for the timeout). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(127);
    int fd = open(env->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  env->daemon_pid = pid;
  for (int i = 0; i < 1000; i++) {
    int status;
    if (hello_answered(env))
      return pid;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      env->daemon_pid = 0;
      test_dump_daemon_log(env);
      TEST_FAIL_("pcached exited during start-up (status 0x%x)", status);
    }
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  test_dump_daemon_log(env);
  TEST_FAIL_("pcached did not accept connections on %s within 10 s", env->socket_path);
}

pid_t test_daemon_start_preloaded(test_env *env, const char *library,
                                  const char *const *extra_args) {
  const char *asan = getenv("ASAN_OPTIONS");
  char *saved = asan ? strdup(asan) : NULL, opts[1024];
  pid_t pid;
  if (asan && !saved)
    TEST_FAIL_("strdup: out of memory");
  snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", saved ? saved : "",
           saved && *saved ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
  setenv("LD_PRELOAD", library, 1);
  pid = test_daemon_start(env, extra_args);
  unsetenv("LD_PRELOAD");
  if (saved)
    setenv("ASAN_OPTIONS", saved, 1);
  else
    unsetenv("ASAN_OPTIONS");
  free(saved);
  return pid;
}

int test_daemon_stop(test_env *env, int sig) {
  int status = 0;
  if (!env->daemon_pid)
    return -1;
  kill(env->daemon_pid, sig);
  while (waitpid(env->daemon_pid, &status, 0) < 0 && errno == EINTR)
    ;
  env->daemon_pid = 0;
  return status;
}

/* 1 when every thread of pid is in the stopped state ('T'). */
static int all_threads_stopped(pid_t pid) {
  char path[64], buf[512];
  struct dirent *de;
  DIR *dir;
  int stopped = 1;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  if (!(dir = opendir(path)))
    return 0;
  while (stopped && (de = readdir(dir))) {
    FILE *f;
    char *paren;
    if (de->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "/proc/%d/task/%.16s/stat", (int)pid, de->d_name);
    if (!(f = fopen(path, "r")))
      continue; /* the thread just ended */
    /* The state follows the parenthesised command name. */
    if (!fgets(buf, sizeof buf, f) || !(paren = strrchr(buf, ')')) || paren[1] != ' ' ||
        (paren[2] != 'T' && paren[2] != 't'))
      stopped = 0;
    fclose(f);
  }
  closedir(dir);
  return stopped;
}

void test_daemon_pause(test_env *env) {
  ASSERT_TRUE(env->daemon_pid > 0);
  ASSERT_EQ(kill(env->daemon_pid, SIGSTOP), 0);
  for (int i = 0; i < 5000; i++) {
    if (all_threads_stopped(env->daemon_pid))
      return;
    nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
  }
  TEST_FAIL_("pcached (pid %d) did not stop within 5 s", (int)env->daemon_pid);
}

void test_dump_daemon_log(const test_env *env) {
  char buf[4096];
  size_t n;
  FILE *f = fopen(env->log_path, "r");
  if (!f)
    return;
  fprintf(stderr, "---- %s ----\n", env->log_path);
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    fwrite(buf, 1, n, stderr);
  fprintf(stderr, "---- end of daemon log ----\n");
  fclose(f);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

void test_env_cleanup(test_env *env) {
  if (env->daemon_pid)
    test_daemon_stop(env, SIGKILL);
  if (getenv("PCACHE_TEST_KEEP"))
    return;
  nftw(env->root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int test_pcached_run(const test_env *env, const char *const *args, char *out, size_t out_size) {
  const char *argv[64] = {test_pcached_path()};
  char log[400];
  int status, lf, n = 1;
  ssize_t got;
  pid_t pid;
  for (; args && args[n - 1] && n < 63; n++)
    argv[n] = args[n - 1];
  argv[n] = NULL;
  snprintf(log, sizeof log, "%s/run.log", env->root);
  pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    lf = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (lf >= 0)
      dup2(lf, STDERR_FILENO);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  while (waitpid(pid, &status, 0) < 0)
    ASSERT_EQ(errno, EINTR);
  lf = open(log, O_RDONLY);
  ASSERT_GE(lf, 0);
  got = read(lf, out, out_size - 1);
  out[got > 0 ? got : 0] = '\0';
  close(lf);
  return status;
}

int test_count_aside(const test_env *env) {
  DIR *d = opendir(env->data_dir);
  struct dirent *e;
  int n = 0;
  ASSERT_TRUE(d != NULL);
  while ((e = readdir(d)))
    n += strncmp(e->d_name, "data.mdb.corrupt-", 17) == 0;
  closedir(d);
  return n;
}

void test_stderr_begin(test_stderr *c, const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_TRUE(fd >= 0);
  fflush(stderr);
  c->saved = dup(STDERR_FILENO);
  ASSERT_TRUE(c->saved >= 0 && dup2(fd, STDERR_FILENO) >= 0);
  close(fd);
}

size_t test_stderr_end(test_stderr *c, const char *path, char *text, size_t size) {
  ssize_t n;
  int fd;
  fflush(stderr);
  ASSERT_TRUE(dup2(c->saved, STDERR_FILENO) >= 0);
  close(c->saved);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  ASSERT_TRUE(fd >= 0);
  n = read(fd, text, size - 1);
  close(fd);
  ASSERT_TRUE(n >= 0);
  text[n] = '\0';
  return (size_t)n;
}
