/* Where libpcache's create-info path spends its time, phase by phase: a
 * build option for benchmarks (cmake -DPCACHE_PHASE_TIMING=ON), off in
 * every other build, where the macros below are nothing.
 *
 * A timed build reads CLOCK_MONOTONIC around each phase, sums the
 * nanoseconds per phase over the process (atomically: pipelines may be
 * made on many threads), and prints one line at exit to stderr:
 *   pcache_phases total_ns=... total_n=... describe_ns=... ...
 * bench/probe-phases.sh runs the light and heavy sets with it. The timers
 * cost about 20 ns each, some 0.2-0.4 us a pipeline: compare phases with
 * each other and with the driver's share, not a timed build's totals
 * with an untimed one's. */
#ifndef PCACHE_CLIENT_PHASE_H
#define PCACHE_CLIENT_PHASE_H

#include <stdint.h>

enum pcache__phase {
  PCACHE__PHASE_TOTAL,    /* a create info's whole call (pipeline.c) */
  PCACHE__PHASE_DESCRIBE, /* describing and hashing it */
  PCACHE__PHASE_TIER,     /* its tier's lookup, and the claim of a miss */
  PCACHE__PHASE_DRIVER,   /* the driver-first probe's vkCreate*Pipelines */
  PCACHE__PHASE_OWN,      /* the owned set's add (shared ownership) */
  PCACHE__PHASE_COUNT
};

#ifdef PCACHE_PHASE_TIMING
uint64_t pcache__phase_now(void);
void pcache__phase_add(enum pcache__phase phase, uint64_t ns);
#define PCACHE_PHASE_BEGIN(phase) const uint64_t pcache__phase_t0_##phase = pcache__phase_now()
#define PCACHE_PHASE_END(phase)                                                                    \
  pcache__phase_add(PCACHE__PHASE_##phase, pcache__phase_now() - pcache__phase_t0_##phase)
#else
#define PCACHE_PHASE_BEGIN(phase) ((void)0)
#define PCACHE_PHASE_END(phase) ((void)0)
#endif

#endif
