/* What the fleet tests that speak the wire protocol (faults, trust,
 * large) read of a member: its StatsReply.remote, waited on until it
 * says something, and its log. */
#ifndef PCACHE_TESTS_FLEET_WIRE_H
#define PCACHE_TESTS_FLEET_WIRE_H

#include <stdint.h>

#include "harness.h"

/* StatsReply.remote, copied (the strings cut to these sizes), and the
 * member's entry count. */
typedef struct remote_view {
  char state[16], last_error[256], signing_key[32];
  uint64_t asks, fetched, stored, refused, pushed, push_dropped, reconnects, skipped, timeouts;
  uint64_t refused_unsigned, refused_untrusted, refused_signature;
  uint32_t trusted_keys;
  uint64_t entries;
} remote_view;

/* One Stats on a connection of its own as app; aborts when the reply has
 * no remote (the member runs without --remote). */
remote_view fleet_view(const test_env *env, const char *app);
/* Waits (10 s at most) until env's remote is in state; else dumps the
 * log and fails. */
void fleet_wait_state(const test_env *env, const char *app, const char *state);
/* Waits (10 s at most) until env has pushed at least n values. */
void fleet_wait_pushed(const test_env *env, const char *app, uint64_t n);
/* How many lines of env's log hold text, debug lines left out (the test
 * daemons log at debug; a daemon logs at info by default). */
int fleet_log_count(const test_env *env, const char *text);

#endif
