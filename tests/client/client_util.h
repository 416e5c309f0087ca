/* Helpers the client tests share: a client with a chosen timeout, what the
 * daemon holds (through the real transport), running this test binary
 * again as a second process, and building the test pipeline set. */
#ifndef PCACHE_TESTS_CLIENT_UTIL_H
#define PCACHE_TESTS_CLIENT_UTIL_H

#include <stdint.h>

#include <pcache/pcache.h>

#include "proto/frame.h"
#include "proto/rpc.h"
#include "vk.h"

pcache_client *util_client(uint32_t timeout_ms);
/* Entries the daemon at $PCACHE_SOCKET lists (all devices, all apps). */
size_t util_count_entries(void);
/* The daemon's Stats reply (freed by the caller with
 * pcache__response_free(util_stats_response)). */
Pcachepb__Response *util_stats(void);
/* Its segment_sent (Segment replies that carried one) and segment_builds. */
uint64_t util_segments_sent(void);
uint64_t util_segment_builds(void);
/* Its window_replies (Get and Prefetch replies through a reply window). */
uint64_t util_window_replies(void);
/* Waits (10 s at most) until the daemon has built n segments. */
void util_wait_segment_builds(uint64_t n);
/* Each entry's state hash, for the first max entries; returns the count. */
size_t util_list_hashes(uint8_t (*ret_hashes)[16], size_t max);
/* Runs argv0 with one argument and the current environment; asserts that
 * it exits 0. */
void util_run_self(const char *argv0, const char *arg);
uint64_t util_now_ms(void);
/* What most client tests run: the lavapipe device, a client of the daemon
 * at $PCACHE_SOCKET, a pcache device on it and the test objects. */
typedef struct util_app {
  test_vk vk;
  pcache_device_info info;
  pcache_client *client;
  pcache_device *device;
  test_objects o;
} util_app;
/* The client (timeout_ms), the Vulkan device and the pcache device, not
 * yet the objects: for tests that look at what device creation did
 * (prefetch, snapshot) before anything is made through it. */
void util_app_open_device(util_app *a, uint32_t timeout_ms);
/* That, then the test objects. */
void util_app_open(util_app *a, uint32_t timeout_ms);
/* Destroys the objects and the device, closes the client and the Vulkan
 * device: what util_app_open made, last first. */
void util_app_close(util_app *a);
/* Gets graphics pipelines 0..n_graphics-1, then compute pipelines
 * 0..n_compute-1 of the test set through device, asserting each succeeds
 * with a handle; their handles go to ret (n_graphics + n_compute) unless
 * it is NULL. */
void util_build_set(pcache_device *device, const test_objects *o, uint32_t n_graphics,
                    uint32_t n_compute, VkPipeline *ret);
/* One process's run of that set (as util_build_set) through a client of
 * its own: "cold" expects every pipeline compiled; "touch" makes the
 * device, which names its key to the daemon, and builds nothing; "warm"
 * expects `hits` daemon hits, the rest compiled, and no blob the driver
 * refused. */
void util_run_set(const char *mode, uint32_t n_graphics, uint32_t n_compute, uint32_t hits);
/* One request on a connection of its own to env's daemon, as app
 * "client-test" (20 s at most); aborts unless it is answered with body b. */
struct test_env;
void util_rpc(const struct test_env *env, const Pcachepb__Request *req,
              Pcachepb__Response__BodyCase b, pcache__reply *ret);
/* Empties env's daemon's store (a Purge of everything) and checks that
 * pcachectl list then shows no entry. */
void util_purge_all(const struct test_env *env);

#endif
