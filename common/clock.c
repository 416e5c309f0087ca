#include "clock.h"

#include <time.h>

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t pcache__mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

uint64_t pcache__mono_us(void) { return clock_ns(CLOCK_MONOTONIC) / 1000u; }

uint64_t pcache__mono_ms(void) { return clock_ns(CLOCK_MONOTONIC) / 1000000u; }

uint64_t pcache__real_us(void) { return clock_ns(CLOCK_REALTIME) / 1000u; }
