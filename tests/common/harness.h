/* A scratch world for integration tests: a private 0700 runtime dir, a data
 * dir, and the real pcached started on a socket inside it. */
#ifndef PCACHE_TESTS_HARNESS_H
#define PCACHE_TESTS_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct test_env {
  char root[256];        /* removed by test_env_cleanup */
  char runtime_dir[300]; /* 0700, exported as XDG_RUNTIME_DIR */
  char socket_path[320]; /* exported as PCACHE_SOCKET */
  char data_dir[300];
  pid_t daemon_pid;      /* 0 when not running */
  char log_path[320];    /* the daemon's stderr */
} test_env;

/* Makes the directories and sets XDG_RUNTIME_DIR, PCACHE_SOCKET,
 * PCACHE_DATA_DIR for this process (and children), and
 * PCACHE_REPLAY_DETECT=off (no probe of the drivers at pcached's start).
 * Aborts on failure. */
void test_env_init(test_env *env, const char *name);

/* Starts pcached with --socket, --data-dir and --log-level debug, plus
 * extra_args (NULL-terminated, may be NULL), and waits until the socket
 * accepts connections (10 s at most; aborts otherwise). stderr goes to
 * env->log_path. Returns the pid. */
pid_t test_daemon_start(test_env *env, const char *const *extra_args);

/* test_daemon_start with library preloaded into pcached alone (a test
 * shim: a slow disk, a stepped clock). Under ASan the preloaded library
 * comes before the runtime in the daemon's list, which ASan would refuse:
 * verify_asan_link_order=0 is added to the daemon's ASAN_OPTIONS. This
 * process's LD_PRELOAD and ASAN_OPTIONS are as before on return. */
pid_t test_daemon_start_preloaded(test_env *env, const char *library,
                                  const char *const *extra_args);

/* Sends sig (SIGTERM for a clean stop, SIGKILL for a crash) and reaps the
 * daemon. Returns its wait status. */
int test_daemon_stop(test_env *env, int sig);

/* Stops the daemon with SIGSTOP and returns only once every one of its
 * threads is stopped (kill() returns before they are, and a worker thread
 * on another core could still answer). Aborts after 5 s. */
void test_daemon_pause(test_env *env);

/* Stops a running daemon with SIGKILL and removes env->root. */
void test_env_cleanup(test_env *env);

/* Path of the pcached binary under test. */
const char *test_pcached_path(void);

/* Prints the daemon's log to stderr (for failure diagnosis). */
void test_dump_daemon_log(const test_env *env);

/* Runs pcached with exactly args (NULL-terminated; argv[0] is added) to
 * its exit, its stderr captured in out (NUL-terminated, truncated to
 * out_size). Returns its wait status. Pass --idle-exit for a run that
 * might start serving. */
int test_pcached_run(const test_env *env, const char *const *args, char *out, size_t out_size);

/* How many stores were moved aside (data.mdb.corrupt-*) in env's data dir. */
int test_count_aside(const test_env *env);

/* Connects a raw Unix socket to env's daemon; returns the fd or -errno. */
int test_raw_connect(const test_env *env);

/* Connects and says Hello as app (pcache__rpc, within timeout_ms); returns
 * the fd, or the negative code of the failure or of the daemon's refusal
 * (PCACHE_EVERSION also when it answers another protocol version). */
int test_open(const test_env *env, const char *app, uint32_t timeout_ms);
/* test_open, with the daemon's HelloReply in *ret_hello (its strings
 * cleared: they are not kept). */
struct Pcachepb__HelloReply;
int test_open_hello(const test_env *env, const char *app, uint32_t timeout_ms,
                    struct Pcachepb__HelloReply *ret_hello);

/* This process's stderr sent to a file, for a test that reads what a
 * library or layer said there. */
typedef struct test_stderr {
  int saved; /* the stderr it replaced */
} test_stderr;
/* From now on stderr goes to path (made afresh, mode 0600). */
void test_stderr_begin(test_stderr *c, const char *path);
/* Puts stderr back and reads path into text (at most size - 1 bytes,
 * NUL-terminated); returns how many bytes it read. */
size_t test_stderr_end(test_stderr *c, const char *path, char *text, size_t size);

#endif
