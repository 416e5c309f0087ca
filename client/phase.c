/* The phase timers of a PCACHE_PHASE_TIMING build (phase.h); empty in
 * every other build. */
#include "client/phase.h"

#ifdef PCACHE_PHASE_TIMING
#include <stdatomic.h>
#include <stdio.h>

#include "common/clock.h"

static const char *const names[PCACHE__PHASE_COUNT] = {"total", "describe", "tier", "driver",
                                                       "own"};
static atomic_uint_fast64_t sums[PCACHE__PHASE_COUNT], counts[PCACHE__PHASE_COUNT];

uint64_t pcache__phase_now(void) { return pcache__mono_ns(); }

void pcache__phase_add(enum pcache__phase phase, uint64_t ns) {
  atomic_fetch_add_explicit(&sums[phase], ns, memory_order_relaxed);
  atomic_fetch_add_explicit(&counts[phase], 1, memory_order_relaxed);
}

/* At exit, so that any program prints its sums without a call of its own;
 * nothing when no pipeline was asked for. */
__attribute__((destructor)) static void print_phases(void) {
  if (!atomic_load(&counts[PCACHE__PHASE_TOTAL]))
    return;
  fprintf(stderr, "pcache_phases");
  for (int i = 0; i < PCACHE__PHASE_COUNT; i++)
    fprintf(stderr, " %s_ns=%llu %s_n=%llu", names[i], (unsigned long long)atomic_load(&sums[i]),
            names[i], (unsigned long long)atomic_load(&counts[i]));
  fprintf(stderr, "\n");
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int pcache__phase_timing_off;
#endif
