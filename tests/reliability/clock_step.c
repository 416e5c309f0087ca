/* LD_PRELOAD shim for test_rel_hardening: once the file named by
 * $PCACHE_TEST_CLOCK_STEP exists, CLOCK_REALTIME reads an hour later, as
 * after an NTP step or `date -s`. Other clocks are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

__attribute__((visibility("default"))) int clock_gettime(clockid_t id, struct timespec *ts) {
  static int (*real)(clockid_t, struct timespec *);
  const char *step;
  int r;
  if (!real)
    real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  r = real(id, ts);
  step = getenv("PCACHE_TEST_CLOCK_STEP");
  if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) && step &&
      access(step, F_OK) == 0)
    ts->tv_sec += 3600;
  return r;
}
