#include "clock.h"

#include <time.h>

static uint64_t clock_us(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t pcache__mono_us(void) { return clock_us(CLOCK_MONOTONIC); }

uint64_t pcache__real_us(void) { return clock_us(CLOCK_REALTIME); }
