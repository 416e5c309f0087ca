/* A slow disk for tests, preloaded into pcached (LD_PRELOAD): every
 * fdatasync, fsync and msync(MS_SYNC) first sleeps
 * $PCACHE_TEST_SYNC_DELAY_MS milliseconds (default 300), as an fsync does
 * on a disk busy with someone else's writes. LMDB syncs once per commit,
 * so each acknowledged write takes at least that long. And while the file
 * $PCACHE_TEST_SYNC_GATE names exists, every sync waits for it to go (at
 * most a minute): a test holds a commit in flight exactly as long as it
 * needs. No hook in the
 * daemon: it is the real daemon on a slow disk. (Exported by name: the
 * project builds with hidden visibility.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (ms > 0 && nanosleep(&ts, &ts) != 0)
    ;
}

static void slow(void) {
  const char *v = getenv("PCACHE_TEST_SYNC_DELAY_MS");
  const char *gate = getenv("PCACHE_TEST_SYNC_GATE");
  sleep_ms(v && *v ? strtol(v, NULL, 10) : 300);
  for (int i = 0; gate && *gate && i < 6000 && access(gate, F_OK) == 0; i++)
    sleep_ms(10);
}

__attribute__((visibility("default"))) int fdatasync(int fd) {
  int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  slow();
  return next(fd);
}

__attribute__((visibility("default"))) int fsync(int fd) {
  int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  slow();
  return next(fd);
}

__attribute__((visibility("default"))) int msync(void *addr, size_t length, int flags) {
  int (*next)(void *, size_t, int) = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "msync");
  if (flags & MS_SYNC)
    slow();
  return next(addr, length, flags);
}
