#include "fleet_wire.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "redis_util.h"
#include "test.h"
#include "wire.h"

remote_view fleet_view(const test_env *env, const char *app) {
  int fd = wire_open(env, app);
  wire_reply r;
  remote_view v = {0};
  wire_stats(fd, &r);
  const Pcachepb__RemoteStats *m = r.resp->stats->remote;
  ASSERT_TRUE(m != NULL);
  snprintf(v.state, sizeof v.state, "%s", m->state);
  snprintf(v.last_error, sizeof v.last_error, "%s", m->last_error);
  snprintf(v.signing_key, sizeof v.signing_key, "%s", m->signing_key);
  v.asks = m->asks, v.fetched = m->fetched, v.stored = m->stored, v.refused = m->refused;
  v.pushed = m->pushed, v.push_dropped = m->push_dropped, v.reconnects = m->reconnects;
  v.skipped = m->skipped, v.timeouts = m->timeouts;
  v.refused_unsigned = m->refused_unsigned, v.refused_untrusted = m->refused_untrusted;
  v.refused_signature = m->refused_signature, v.trusted_keys = m->trusted_keys;
  v.entries = r.resp->stats->entries;
  wire_reply_free(&r);
  close(fd);
  return v;
}

void fleet_wait_state(const test_env *env, const char *app, const char *state) {
  for (int i = 0; i < 1000; i++) {
    if (strcmp(fleet_view(env, app).state, state) == 0)
      return;
    fleet_sleep_ms(10);
  }
  test_dump_daemon_log(env);
  TEST_FAIL_("remote never became %s", state);
}

void fleet_wait_pushed(const test_env *env, const char *app, uint64_t n) {
  for (int i = 0; i < 1000; i++) {
    if (fleet_view(env, app).pushed >= n)
      return;
    fleet_sleep_ms(10);
  }
  test_dump_daemon_log(env);
  TEST_FAIL_("fewer than %llu values pushed", (unsigned long long)n);
}

int fleet_log_count(const test_env *env, const char *text) {
  char line[2048];
  int n = 0;
  FILE *f = fopen(env->log_path, "r");
  ASSERT_TRUE(f != NULL);
  while (fgets(line, sizeof line, f))
    n += strncmp(line, "<7>", 3) != 0 && strncmp(line, "debug: ", 7) != 0 &&
         strstr(line, text) != NULL;
  fclose(f);
  return n;
}
