/* The replayer's uploads: see uploader.h. */
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
#include "proto/transport.h"

/* Items per Put: a batch shares one durable commit. The replayer has at
 * most 16 threads, each with one item queued. */
#define BATCH_MAX 32

typedef struct upload {
  struct upload *next;
  uint8_t state_hash[PCACHE_HASH_SIZE];
  char *app;
  Pcachepb__EntryKind kind;
  uint8_t *desc;
  size_t desc_size;
  uint8_t *blob;
  size_t size;
  uint64_t compile_ns;
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
  upload *head, **tail; /* FIFO */
  int stopping;
  atomic_int broken;     /* a Put failed with no reply: the stream is out of step */
  uint64_t put_ns, puts; /* the thread's alone */
};

static void upload_free(upload *up) {
  pcache__free(up->app);
  pcache__free(up->desc);
  pcache__free(up->blob);
  pcache__free(up);
}

/* One Put of batch[0..n) (one app), each item's result handed to its
 * thread. The daemon lands the items as it stores them. */
static void put_batch(pcache__replay_uploader *u, upload **batch, size_t n) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Put put = PCACHEPB__PUT__INIT;
  Pcachepb__PutItem items[BATCH_MAX], *ptrs[BATCH_MAX];
  pcache__reply reply = {0};
  char msgs[BATCH_MAX][160];
  int statuses[BATCH_MAX];
  uint64_t t0 = pcache__mono_ns();
  int r;
  for (size_t i = 0; i < n; i++) {
    pcachepb__put_item__init(&items[i]);
    items[i].state_hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, batch[i]->state_hash};
    items[i].kind = batch[i]->kind;
    items[i].blob = (ProtobufCBinaryData){batch[i]->size, batch[i]->blob};
    items[i].desc = (ProtobufCBinaryData){batch[i]->desc_size, batch[i]->desc};
    items[i].compile_ns = batch[i]->compile_ns;
    ptrs[i] = &items[i];
  }
  put.device = (Pcachepb__DeviceInfo *)u->device;
  put.app = batch[0]->app;
  put.items = ptrs;
  put.n_items = n;
  req.body_case = PCACHEPB__REQUEST__BODY_PUT;
  req.put = &put;
  if (atomic_load(&u->broken))
    r = -EPIPE;
  else if ((r = pcache__transport_rpc(u->t, &req, PCACHEPB__RESPONSE__BODY_PUT,
                                      pcache__mono_ms() + u->timeout_ms, &reply)) < 0 &&
           !reply.response)
    atomic_store(&u->broken, 1);
  u->put_ns += pcache__mono_ns() - t0;
  u->puts++;
  for (size_t i = 0; i < n; i++) {
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
  for (size_t i = 0; i < n; i++)
    batch[i]->done(batch[i]->ctx, statuses[i]);
}

static void *uploader_main(void *arg) {
  pcache__replay_uploader *u = arg;
  upload *batch[BATCH_MAX];
  for (;;) {
    size_t n = 0;
    pthread_mutex_lock(&u->lock);
    while (!u->head && !u->stopping)
      pthread_cond_wait(&u->cond, &u->lock);
    if (!u->head) {
      pthread_mutex_unlock(&u->lock);
      return NULL;
    }
    /* The first queued and every other of its app, in order, up to a
     * batch: a Put names one app. */
    for (upload **p = &u->head; *p && n < BATCH_MAX;) {
      if (n && strcmp((*p)->app, batch[0]->app) != 0) {
        p = &(*p)->next;
        continue;
      }
      batch[n++] = *p;
      *p = (*p)->next;
    }
    u->tail = &u->head;
    while (*u->tail)
      u->tail = &(*u->tail)->next;
    pthread_mutex_unlock(&u->lock);
    put_batch(u, batch, n);
    for (size_t i = 0; i < n; i++)
      upload_free(batch[i]);
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
  u->tail = &u->head;
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
      !(up->app = pcache__strdup(item->app ? item->app : "")) ||
      (item->desc.len && !(up->desc = pcache__malloc(item->desc.len)))) {
    if (up)
      upload_free(up);
    pcache__free(blob);
    return -ENOMEM;
  }
  memcpy(up->state_hash, item->state_hash.data, PCACHE_HASH_SIZE);
  if (item->desc.len)
    memcpy(up->desc, item->desc.data, item->desc.len);
  up->desc_size = item->desc.len;
  up->kind = item->kind;
  up->blob = blob;
  up->size = size;
  up->compile_ns = compile_ns;
  up->done = done;
  up->ctx = ctx;
  pthread_mutex_lock(&u->lock);
  *u->tail = up;
  u->tail = &up->next;
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
