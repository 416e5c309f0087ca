/* A real redis-server for the fleet tests: on loopback, on a free port,
 * its files in a scratch directory, started and stopped by the test. A
 * test calls redis_require() first: without redis-server installed it
 * exits 77 (skipped) saying so; scripts/setup-deps.sh installs it. */
#ifndef PCACHE_TESTS_REDIS_UTIL_H
#define PCACHE_TESTS_REDIS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "harness.h"

typedef struct test_redis {
  char dir[320];
  char url[64]; /* redis://127.0.0.1:PORT */
  int port;
  pid_t pid;         /* 0 when not running */
  char password[64]; /* requirepass, "" for none */
} test_redis;

/* Exits 77 with a message when redis-server is not on PATH. */
void redis_require(void);
/* A loopback TCP port nothing listens on now. */
int redis_free_port(void);
/* Starts redis-server in dir (made), on a free port unless r->port is set,
 * with r->password as requirepass when not empty; waits until it answers
 * PING (aborts after 10 s). */
void redis_start(test_redis *r, const char *dir);
/* SIGKILL and reap. */
void redis_kill(test_redis *r);
/* A synchronous hiredis connection (AUTH done); aborts on failure. */
redisContext *redis_connect(const test_redis *r);
/* A reply to argv (binary-safe); aborts when there is none. */
redisReply *redis_cmd(redisContext *c, int argc, const char **argv, const size_t *len);
/* Keys matching pattern (KEYS), how many. */
size_t redis_count_keys(redisContext *c, const char *pattern);
/* GET k, which must hold a string; aborts otherwise. Free the reply. */
redisReply *redis_get(redisContext *c, const char *k);
/* SET k to the n bytes at v. */
void redis_set(redisContext *c, const char *k, const void *v, size_t n);
/* The Redis key of the entry (device key hex, state hash hex) under the
 * default prefix "pcache:". Static storage: valid until the next call. */
const char *fleet_entry_key(const uint8_t device_key[32], const uint8_t state_hash[16]);
/* Sleeps ms milliseconds. */
void fleet_sleep_ms(unsigned ms);

/* ------------------------------------------------ the fleet's trust
 * (docs/fleet.md "Who can do what"): every member that pushes signs, and
 * accepts only the writers its --remote-trusted-keys file lists. */

/* A writer's key pair, made by the command the docs name: `pcachectl
 * fleet keygen DIR`; key and pub are DIR/fleet.key and DIR/fleet.pub. */
typedef struct test_fleet_key {
  char dir[400], key[420], pub[420];
} test_fleet_key;
void fleet_keygen(test_fleet_key *k, const char *dir);
/* Writes a --remote-trusted-keys file at path (mode 0644) holding the
 * public key lines of the n keys, with a comment line and a blank line
 * among them, as a person would write one. */
void fleet_trust_file(const char *path, const test_fleet_key *keys, size_t n);
/* A fleet test's start: root, a scratch directory named after name; a
 * redis-server in it (rs); n writers' key pairs in root/keys-a, -b, ... */
void fleet_begin(test_env *root, const char *name, test_redis *rs, test_fleet_key *keys, size_t n);
/* Starts a fleet member in env (test_env_init: $PCACHE_SOCKET points at
 * it) on rs, signing with the key file key and trusting the writers the
 * file trusted lists, with a --remote-timeout of 2 s; probe: whether it
 * probes its drivers at start (and so syncs; test_env_init turns that
 * off). */
void fleet_member_start(test_env *env, const char *name, const test_redis *rs, const char *key,
                        const char *trusted, int probe);
/* Runs a shell command line (printf format); returns its exit status. */
int fleet_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
