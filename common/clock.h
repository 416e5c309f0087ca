/* The two clocks, named apart. Monotonic time measures intervals: every
 * timeout, stall check, idle exit and flush interval, which a wall-clock
 * step (NTP, a suspended laptop's resync, `date -s`) must never fire or
 * hold off. Real time is only for what is stored or shown as a date
 * (created, last used). */
#ifndef PCACHE_COMMON_CLOCK_H
#define PCACHE_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds, microseconds or milliseconds: only
 * differences mean anything (and deadlines made of them). */
uint64_t pcache__mono_ns(void);
uint64_t pcache__mono_us(void);
uint64_t pcache__mono_ms(void);
/* CLOCK_REALTIME in microseconds since the Unix epoch. */
uint64_t pcache__real_us(void);
/* The time ms milliseconds from now on clock id, as the absolute
 * timespec a timed wait takes: CLOCK_MONOTONIC for a condition variable
 * made with it, CLOCK_REALTIME where the API knows no other clock
 * (pthread_mutex_timedlock). */
void pcache__timespec_in(clockid_t id, uint64_t ms, struct timespec *ret_ts);

#endif
