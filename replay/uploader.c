/* The replayer's uploads (uploader.h): its thread, on the Put batcher
 * (proto/put_batch.h) that libpcache's upload thread uses too. */
#include "replay/uploader.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "proto/put_batch.h"
#include "proto/transport.h"

/* Items per Put: a batch shares one durable commit. The replayer has at
 * most 16 threads, each with one item queued. */
#define BATCH_MAX 32

typedef struct upload {
  pcache__put_item put; /* first: the batcher's queue holds these; put.app is owned */
  pcache__replay_upload_done done;
  void *ctx;
} upload;

struct pcache__replay_uploader {
  pcache__transport *t;
  const Pcachepb__DeviceInfo *device;
  uint32_t timeout_ms;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Unbounded (each thread has at most one item here, replayer.c); a
   * batch takes the first item and the next ones of its app, passing
   * over the others: a Put names one app. */
  pcache__put_batcher batcher;
  int stopping;
  atomic_int broken;     /* a Put failed with no reply: the stream is out of step */
  uint64_t put_ns, puts; /* the thread's alone */
};

static void upload_free(upload *up) {
  pcache__free((char *)up->put.app);
  pcache__free(up->put.desc);
  pcache__free(up->put.blob);
  pcache__free(up);
}

/* One Put of the n items of batch (one app), each item's result handed to
 * its thread. The daemon lands the items as it stores them. */
static void put_batch(pcache__replay_uploader *u, pcache__put_item *batch, size_t n) {
  pcache__put_request put = {0};
  pcache__reply reply = {0};
  char msgs[BATCH_MAX][160];
  int statuses[BATCH_MAX];
  uint64_t t0 = pcache__mono_ns();
  size_t i;
  int r;
  if (atomic_load(&u->broken))
    r = -EPIPE;
  else if ((r = pcache__put_request_build(&put, batch, n, u->device, NULL, NULL, NULL)) < 0)
    ; /* out of memory: each item's thread hears so */
  else if ((r = pcache__transport_rpc(u->t, &put.request, PCACHEPB__RESPONSE__BODY_PUT,
                                      pcache__mono_ms() + u->timeout_ms, &reply)) < 0 &&
           !reply.response)
    atomic_store(&u->broken, 1);
  pcache__put_request_free(&put);
  u->put_ns += pcache__mono_ns() - t0;
  u->puts++;
  for (i = 0; i < n; i++) {
    const Pcachepb__PutResult *res = NULL;
    char *msg = msgs[i];
    int status = r;
    if (r == 0 && reply.response->put->n_results == n)
      res = reply.response->put->results[i];
    else if (r == 0)
      status = PCACHE_EPROTO; /* a reply that does not answer each item */
    if (res)
      status = res->status;
    if (status < 0)
      snprintf(msg, sizeof msgs[i], "upload refused: %s",
               res && res->message && *res->message ? res->message
                                                    : pcache__reply_why(&reply, status));
    else
      msg[0] = '\0';
    statuses[i] = status;
  }
  if (r < 0 || (r == 0 && reply.response->put->n_results != n))
    log_warn("replay: upload of %zu pipelines: %s", n, msgs[0]);
  pcache__reply_release(&reply);
  i = 0;
  for (pcache__put_item *p = batch; p && i < n; p = p->next, i++) {
    upload *up = (upload *)p;
    up->done(up->ctx, statuses[i]);
  }
}

static void *uploader_main(void *arg) {
  pcache__replay_uploader *u = arg;
  for (;;) {
    pcache__put_queue batch;
    pcache__put_item *p;
    size_t n;
    pthread_mutex_lock(&u->lock);
    while (pcache_queue_empty(&u->batcher.queue) && !u->stopping)
      pthread_cond_wait(&u->cond, &u->lock);
    if (pcache_queue_empty(&u->batcher.queue)) {
      pthread_mutex_unlock(&u->lock);
      return NULL;
    }
    n = pcache__put_batcher_take(&u->batcher, &batch, BATCH_MAX, UINT64_MAX);
    pthread_mutex_unlock(&u->lock);
    put_batch(u, batch.head, n);
    while ((p = pcache_queue_pop(&batch)) != NULL)
      upload_free((upload *)p);
  }
}

int pcache__replay_uploader_start(const char *socket_path, uint32_t timeout_ms,
                                  const Pcachepb__DeviceInfo *device,
                                  pcache__replay_uploader **ret_uploader) {
  pcache__replay_uploader *u = pcache__calloc(1, sizeof *u);
  int r;
  if (!u)
    return -ENOMEM;
  u->device = device;
  u->timeout_ms = timeout_ms;
  pcache__put_batcher_init(&u->batcher, 0, 0, 1);
  if ((r = pcache__transport_open(socket_path, "pcache-replay", timeout_ms, &u->t, NULL)) < 0) {
    pcache__free(u);
    return r;
  }
  pthread_mutex_init(&u->lock, NULL);
  pthread_cond_init(&u->cond, NULL);
  if (pthread_create(&u->thread, NULL, uploader_main, u) != 0) {
    pthread_cond_destroy(&u->cond);
    pthread_mutex_destroy(&u->lock);
    pcache__transport_close(u->t);
    pcache__free(u);
    return -EAGAIN;
  }
  *ret_uploader = u;
  return 0;
}

int pcache__replay_uploader_queue(pcache__replay_uploader *u, const Pcachepb__ReplayItem *item,
                                  uint8_t *blob, size_t size, uint64_t compile_ns,
                                  pcache__replay_upload_done done, void *ctx) {
  upload *up = pcache__calloc(1, sizeof *up);
  if (!up || item->state_hash.len != PCACHE_HASH_SIZE ||
      !(up->put.app = pcache__strdup(item->app ? item->app : "")) ||
      (item->desc.len && !(up->put.desc = pcache__malloc(item->desc.len)))) {
    if (up)
      upload_free(up);
    pcache__free(blob);
    return -ENOMEM;
  }
  memcpy(up->put.state_hash.bytes, item->state_hash.data, PCACHE_HASH_SIZE);
  if (item->desc.len)
    memcpy(up->put.desc, item->desc.data, item->desc.len);
  up->put.desc_size = item->desc.len;
  up->put.kind = (uint32_t)item->kind;
  up->put.blob = blob;
  up->put.blob_size = size;
  up->put.compile_ns = compile_ns;
  up->done = done;
  up->ctx = ctx;
  pthread_mutex_lock(&u->lock);
  /* Unbounded: nothing comes back. */
  (void)pcache__put_batcher_push(&u->batcher, &up->put);
  pthread_cond_signal(&u->cond);
  pthread_mutex_unlock(&u->lock);
  return 0;
}

void pcache__replay_uploader_stop(pcache__replay_uploader *u, uint64_t *ret_put_ns,
                                  uint64_t *ret_puts) {
  if (!u)
    return;
  pthread_mutex_lock(&u->lock);
  u->stopping = 1;
  pthread_cond_signal(&u->cond);
  pthread_mutex_unlock(&u->lock);
  pthread_join(u->thread, NULL);
  if (ret_put_ns)
    *ret_put_ns = u->put_ns;
  if (ret_puts)
    *ret_puts = u->puts;
  pthread_cond_destroy(&u->cond);
  pthread_mutex_destroy(&u->lock);
  pcache__transport_close(u->t);
  pcache__free(u);
}

int pcache__replay_uploader_broken(pcache__replay_uploader *u) {
  return u && atomic_load(&u->broken);
}
