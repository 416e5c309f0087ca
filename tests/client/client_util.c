#include "client_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"
#include "proto/transport.h"
#include "test.h"

pcache_client *util_client(uint32_t timeout_ms) {
  pcache_client_options opts = {.app_name = "pcache-client-test", .timeout_ms = timeout_ms};
  pcache_client *client;
  ASSERT_OK(pcache_client_open(&opts, &client));
  return client;
}

static void call(const Pcachepb__Request *request, Pcachepb__Response__BodyCase expect,
                 pcache__reply *reply) {
  pcache__transport *t;
  ASSERT_OK(pcache__transport_open(getenv("PCACHE_SOCKET"), "pcache-client-test-check", 5000, &t,
                                   NULL));
  ASSERT_OK(pcache__transport_rpc(t, request, expect, pcache__mono_ms() + 5000, reply));
  pcache__transport_close(t);
}

static Pcachepb__Response *list_response(pcache__reply *reply) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  list.entries = 1;
  request.body_case = PCACHEPB__REQUEST__BODY_LIST;
  request.list = &list;
  call(&request, PCACHEPB__RESPONSE__BODY_LIST, reply);
  return reply->response;
}

size_t util_count_entries(void) {
  pcache__reply reply = {0};
  size_t n = list_response(&reply)->list->n_entries;
  pcache__reply_release(&reply);
  return n;
}

size_t util_list_hashes(uint8_t (*ret_hashes)[16], size_t max) {
  pcache__reply reply = {0};
  const Pcachepb__ListReply *list = list_response(&reply)->list;
  size_t n = 0;
  for (size_t i = 0; i < list->n_entries && n < max; i++) {
    ASSERT_EQ(list->entries[i]->state_hash.len, 16);
    memcpy(ret_hashes[n++], list->entries[i]->state_hash.data, 16);
  }
  pcache__reply_release(&reply);
  return n;
}

Pcachepb__Response *util_stats(void) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Stats stats = PCACHEPB__STATS__INIT;
  pcache__reply reply = {0};
  Pcachepb__Response *resp;
  request.body_case = PCACHEPB__REQUEST__BODY_STATS;
  request.stats = &stats;
  call(&request, PCACHEPB__RESPONSE__BODY_STATS, &reply);
  ASSERT_TRUE(reply.bulk == NULL);
  resp = reply.response;
  reply.response = NULL;
  pcache__reply_release(&reply);
  return resp;
}

void util_run_self(const char *argv0, const char *arg) {
  int status;
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    execl("/proc/self/exe", argv0, arg, (char *)NULL);
    _exit(127);
  }
  while (waitpid(pid, &status, 0) < 0)
    ASSERT_EQ(errno, EINTR);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    TEST_FAIL_("child '%s %s' failed (status 0x%x)", argv0, arg, status);
}

uint64_t util_segments_sent(void) {
  Pcachepb__Response *r = util_stats();
  uint64_t n = r->stats->segment_sent;
  pcache__response_free(r);
  return n;
}

uint64_t util_window_replies(void) {
  Pcachepb__Response *r = util_stats();
  uint64_t n = r->stats->window_replies;
  pcache__response_free(r);
  return n;
}

uint64_t util_segment_builds(void) {
  Pcachepb__Response *r = util_stats();
  uint64_t n = r->stats->segment_builds;
  pcache__response_free(r);
  return n;
}

void util_wait_segment_builds(uint64_t n) {
  for (int i = 0; util_segment_builds() < n; i++) {
    ASSERT_LT(i, 1000);
    usleep(10000);
  }
}

uint64_t util_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void util_app_open_device(util_app *a, uint32_t timeout_ms) {
  a->client = util_client(timeout_ms);
  test_vk_init(&a->vk);
  a->info = test_vk_device_info(&a->vk);
  ASSERT_OK(pcache_device_create(a->client, &a->info, &a->device));
}

void util_app_open(util_app *a, uint32_t timeout_ms) {
  util_app_open_device(a, timeout_ms);
  test_objects_create(&a->o, a->device);
}

void util_app_close(util_app *a) {
  test_objects_destroy(&a->o);
  pcache_device_destroy(a->device);
  pcache_client_close(a->client);
  test_vk_fini(&a->vk);
}

void util_build_set(pcache_device *device, const test_objects *o, uint32_t n_graphics,
                    uint32_t n_compute, VkPipeline *ret) {
  VkPipeline p;
  for (uint32_t i = 0; i < n_graphics; i++) {
    test_graphics g;
    test_graphics_info(&g, o, i);
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
    ASSERT_TRUE(p != VK_NULL_HANDLE);
    if (ret)
      ret[i] = p;
  }
  for (uint32_t i = 0; i < n_compute; i++) {
    test_compute c;
    test_compute_info(&c, o, i);
    ASSERT_VK(pcache_get_compute_pipeline(device, &c.info, &p));
    ASSERT_TRUE(p != VK_NULL_HANDLE);
    if (ret)
      ret[n_graphics + i] = p;
  }
}

void util_run_set(const char *mode, uint32_t n_graphics, uint32_t n_compute, uint32_t hits) {
  util_app a;
  pcache_stats st;
  util_app_open(&a, 5000);
  if (strcmp(mode, "touch") != 0)
    util_build_set(a.device, &a.o, n_graphics, n_compute, NULL);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  if (strcmp(mode, "warm") == 0) {
    ASSERT_EQ(st.daemon_hits, (uint64_t)hits);
    ASSERT_EQ(st.compiles, (uint64_t)(n_graphics + n_compute - hits));
    ASSERT_EQ(st.rejected_blobs, 0);
  } else if (strcmp(mode, "cold") == 0) {
    ASSERT_EQ(st.compiles, (uint64_t)(n_graphics + n_compute));
  } else if (strcmp(mode, "staged") == 0) {
    /* Compiled as the program would, each staged (PCACHE_STAGE=all). */
    pcache_counters c = {0};
    ASSERT_OK(pcache_device_get_counters(a.device, &c));
    ASSERT_EQ(st.compiles, (uint64_t)(n_graphics + n_compute));
    ASSERT_EQ(c.staged, (uint64_t)(n_graphics + n_compute));
    ASSERT_EQ(c.upload_dropped, 0);
  }
  util_app_close(&a);
}

void util_rpc(const test_env *env, const Pcachepb__Request *req, Pcachepb__Response__BodyCase b,
              pcache__reply *ret) {
  int fd = test_open(env, "client-test", 5000);
  ASSERT_GE(fd, 0);
  ASSERT_OK(pcache__rpc(fd, req, b, 64u << 20, pcache__mono_ms() + 20000, ret));
  close(fd);
}

void util_purge_all(const test_env *env) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Purge purge = PCACHEPB__PURGE__INIT;
  pcache__reply reply = {0};
  req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  req.purge = &purge;
  purge.selector_case = PCACHEPB__PURGE__SELECTOR_ALL;
  purge.all = 1;
  util_rpc(env, &req, PCACHEPB__RESPONSE__BODY_PURGE, &reply);
  pcache__reply_release(&reply);
  ASSERT_EQ(util_count_entries(), 0);
}
