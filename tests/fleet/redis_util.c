#include "redis_util.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"
#include "test.h"

void redis_require(void) {
  if (system("command -v redis-server >/dev/null 2>&1") != 0) {
    fprintf(stderr, "SKIP: redis-server is not installed (scripts/setup-deps.sh installs it)\n");
    exit(77);
  }
}

int redis_free_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port;
  ASSERT_TRUE(fd >= 0);
  ASSERT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ASSERT_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static int answers(const test_redis *r) {
  redisContext *c = redisConnect("127.0.0.1", r->port);
  redisReply *rep;
  int ok = 0;
  if (!c || c->err) {
    redisFree(c);
    return 0;
  }
  rep = r->password[0] ? redisCommand(c, "AUTH %s", r->password) : NULL;
  freeReplyObject(rep);
  rep = redisCommand(c, "PING");
  ok = rep && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0;
  freeReplyObject(rep);
  redisFree(c);
  return ok;
}

void redis_start(test_redis *r, const char *dir) {
  char port[16], log[400];
  const char *argv[24];
  int n = 0;
  snprintf(r->dir, sizeof r->dir, "%s", dir);
  mkdir(dir, 0700);
  if (!r->port)
    r->port = redis_free_port();
  snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
  snprintf(port, sizeof port, "%d", r->port);
  snprintf(log, sizeof log, "%s/redis.log", dir);
  argv[n++] = "redis-server";
  argv[n++] = "--port", argv[n++] = port;
  argv[n++] = "--bind", argv[n++] = "127.0.0.1";
  argv[n++] = "--dir", argv[n++] = dir;
  argv[n++] = "--save", argv[n++] = "";
  argv[n++] = "--appendonly", argv[n++] = "no";
  argv[n++] = "--logfile", argv[n++] = log;
  argv[n++] = "--maxmemory-policy", argv[n++] = "allkeys-lru";
  if (r->password[0])
    argv[n++] = "--requirepass", argv[n++] = r->password;
  argv[n] = NULL;
  r->pid = fork();
  ASSERT_TRUE(r->pid >= 0);
  if (r->pid == 0) {
    /* Dies with the test, even one that aborts; says nothing on the
     * test's output (its log is in dir). */
    int null = open("/dev/null", O_RDWR);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(null, 1);
    dup2(null, 2);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  for (int i = 0; i < 1000; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    if (answers(r))
      return;
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "redis-server did not answer on port %d\n", r->port);
  abort();
}

void redis_kill(test_redis *r) {
  if (!r->pid)
    return;
  kill(r->pid, SIGCONT);
  kill(r->pid, SIGKILL);
  waitpid(r->pid, NULL, 0);
  r->pid = 0;
}

redisContext *redis_connect(const test_redis *r) {
  redisContext *c = redisConnect("127.0.0.1", r->port);
  ASSERT_TRUE(c && !c->err);
  if (r->password[0])
    freeReplyObject(redisCommand(c, "AUTH %s", r->password));
  return c;
}

redisReply *redis_cmd(redisContext *c, int argc, const char **argv, const size_t *len) {
  redisReply *rep = redisCommandArgv(c, argc, argv, len);
  ASSERT_TRUE(rep != NULL);
  return rep;
}

size_t redis_count_keys(redisContext *c, const char *pattern) {
  redisReply *rep = redisCommand(c, "KEYS %s", pattern);
  size_t n;
  ASSERT_TRUE(rep && rep->type == REDIS_REPLY_ARRAY);
  n = rep->elements;
  freeReplyObject(rep);
  return n;
}

int fleet_sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  int st;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

void fleet_keygen(test_fleet_key *k, const char *dir) {
  snprintf(k->dir, sizeof k->dir, "%s", dir);
  snprintf(k->key, sizeof k->key, "%s/fleet.key", dir);
  snprintf(k->pub, sizeof k->pub, "%s/fleet.pub", dir);
  ASSERT_EQ(fleet_sh("'%s' fleet keygen '%s' >/dev/null", PCACHECTL_PATH, dir), 0);
}

void fleet_trust_file(const char *path, const test_fleet_key *keys, size_t n) {
  FILE *out = fopen(path, "w");
  ASSERT_TRUE(out != NULL);
  fprintf(out, "# writers this member accepts\n\n");
  for (size_t i = 0; i < n; i++) {
    char line[512];
    FILE *in = fopen(keys[i].pub, "r");
    ASSERT_TRUE(in != NULL);
    while (fgets(line, sizeof line, in))
      fputs(line, out);
    fclose(in);
  }
  fclose(out);
  chmod(path, 0644);
}

redisReply *redis_get(redisContext *c, const char *k) {
  const char *argv[2] = {"GET", k};
  size_t len[2] = {3, strlen(k)};
  redisReply *v = redis_cmd(c, 2, argv, len);
  ASSERT_EQ(v->type, REDIS_REPLY_STRING);
  return v;
}

void redis_set(redisContext *c, const char *k, const void *v, size_t n) {
  const char *argv[3] = {"SET", k, v};
  size_t len[3] = {3, strlen(k), n};
  freeReplyObject(redis_cmd(c, 3, argv, len));
}

const char *fleet_entry_key(const uint8_t device_key[32], const uint8_t state_hash[16]) {
  static char k[256];
  char dev[65], h[33];
  pcache__hex(device_key, 32, dev);
  pcache__hex(state_hash, 16, h);
  snprintf(k, sizeof k, "pcache:e:%s:%s", dev, h);
  return k;
}

void fleet_sleep_ms(unsigned ms) {
  nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

void fleet_member_start(test_env *env, const char *name, const test_redis *rs, const char *key,
                        const char *trusted, int probe) {
  /* Generous: the tests that start members this way are about what is
   * shared, not how fast (the fault test and bench/bench_fleet.c are
   * about time). */
  const char *args[] = {"--remote",
                        rs->url,
                        "--remote-timeout",
                        "2000",
                        "--remote-signing-key",
                        key,
                        "--remote-trusted-keys",
                        trusted,
                        NULL};
  test_env_init(env, name);
  if (probe)
    unsetenv("PCACHE_REPLAY_DETECT");
  test_daemon_start(env, args);
  setenv("PCACHE_REPLAY_DETECT", "off", 1);
}

void fleet_begin(test_env *root, const char *name, test_redis *rs, test_fleet_key *keys, size_t n) {
  char dir[400];
  redis_require();
  test_env_init(root, name);
  snprintf(dir, sizeof dir, "%s/redis", root->root);
  redis_start(rs, dir);
  for (size_t i = 0; i < n; i++) {
    snprintf(dir, sizeof dir, "%s/keys-%c", root->root, (char)('a' + i));
    fleet_keygen(&keys[i], dir);
  }
}
