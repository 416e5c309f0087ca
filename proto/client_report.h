/* The counters of a ClientReport (proto/pcache.proto), in the order the
 * layer's text report gives them (layer/stats.c). The text's keys, the
 * message's fields, the daemon's copy of a report and pcachectl's JSON
 * keys are these names: each place that lists the counters expands this
 * one list, so none of them can miss a counter another has. */
#ifndef PCACHE_PROTO_CLIENT_REPORT_H
#define PCACHE_PROTO_CLIENT_REPORT_H

#define PCACHE_CLIENT_REPORT_COUNTERS(X)                                                           \
  X(pipelines)                                                                                     \
  X(hashable)                                                                                      \
  X(daemon_hits)                                                                                   \
  X(local_hits)                                                                                    \
  X(compiles)                                                                                      \
  X(uploaded)                                                                                      \
  X(unhashable)                                                                                    \
  X(passed_through)                                                                                \
  X(app_cache_entries)                                                                             \
  X(upload_dropped)                                                                                \
  X(driver_hits)                                                                                   \
  X(staged)

#endif
