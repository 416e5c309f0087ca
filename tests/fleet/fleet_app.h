/* The app the fleet tests run on each machine (a separate process, on
 * lavapipe): the client test set of N_GRAPHICS graphics and N_COMPUTE
 * compute pipelines. */
#ifndef PCACHE_TESTS_FLEET_APP_H
#define PCACHE_TESTS_FLEET_APP_H

#define FLEET_APP_GRAPHICS 6
#define FLEET_APP_COMPUTE 2
#define FLEET_APP_PIPELINES (FLEET_APP_GRAPHICS + FLEET_APP_COMPUTE)

/* One run against the daemon at $PCACHE_SOCKET: cold (every pipeline
 * compiled and uploaded) or from the daemon (every one a daemon hit, none
 * compiled or uploaded; prefetched unless $PCACHE_NO_PREFETCH is set). */
void fleet_app_run(int cold);

#endif
