#include "clock.h"

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t pcache__mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

uint64_t pcache__mono_us(void) { return clock_ns(CLOCK_MONOTONIC) / 1000u; }

uint64_t pcache__mono_ms(void) { return clock_ns(CLOCK_MONOTONIC) / 1000000u; }

uint64_t pcache__real_us(void) { return clock_ns(CLOCK_REALTIME) / 1000u; }

void pcache__timespec_in(clockid_t id, uint64_t ms, struct timespec *ts) {
  clock_gettime(id, ts);
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}
