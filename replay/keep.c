/* The replayer's kept pipelines (keep.h): a ring, oldest first, under one
 * mutex. A pipeline pushed out is destroyed after the lock is dropped, so
 * no thread waits on another's vkDestroyPipeline. */
#include "replay/keep.h"

#include <errno.h>
#include <pthread.h>

#include "common/alloc.h"

typedef struct kept {
  VkPipeline pipeline;
  size_t bytes;
} kept;

struct pcache__replay_keep {
  VkDevice device;
  pthread_mutex_t lock;
  kept *ring;
  unsigned cap, head, n, peak;
  size_t bytes, max_bytes;
};

int pcache__replay_keep_new(VkDevice device, unsigned max_pipelines, size_t max_bytes,
                            pcache__replay_keep **ret_keep) {
  pcache__replay_keep *k = pcache__calloc(1, sizeof *k);
  if (!k)
    return -ENOMEM;
  if (max_pipelines && !(k->ring = pcache__calloc(max_pipelines, sizeof *k->ring))) {
    pcache__free(k);
    return -ENOMEM;
  }
  k->device = device;
  k->cap = max_pipelines;
  k->max_bytes = max_bytes;
  pthread_mutex_init(&k->lock, NULL);
  *ret_keep = k;
  return 0;
}

void pcache__replay_keep_free(pcache__replay_keep *k) {
  if (!k)
    return;
  for (unsigned i = 0; i < k->n; i++)
    vkDestroyPipeline(k->device, k->ring[(k->head + i) % k->cap].pipeline, NULL);
  pthread_mutex_destroy(&k->lock);
  pcache__free(k->ring);
  pcache__free(k);
}

/* Pushed out under the lock at a time, destroyed after it. */
#define OUT_MAX 16

void pcache__replay_keep_add(pcache__replay_keep *k, VkDevice device, VkPipeline pipeline,
                             size_t blob_size) {
  if (pipeline == VK_NULL_HANDLE)
    return;
  if (!k || !k->cap || blob_size > k->max_bytes) {
    vkDestroyPipeline(device, pipeline, NULL);
    return;
  }
  /* Each round pushes out at least one while there is no room, and with
   * none left there is (blob_size fits max_bytes alone): it ends. */
  for (;;) {
    VkPipeline out[OUT_MAX];
    unsigned n_out = 0;
    int placed = 0;
    pthread_mutex_lock(&k->lock);
    while (k->n && n_out < OUT_MAX && (k->n == k->cap || k->bytes + blob_size > k->max_bytes)) {
      kept *old = &k->ring[k->head];
      out[n_out++] = old->pipeline;
      k->bytes -= old->bytes;
      k->head = (k->head + 1) % k->cap;
      k->n--;
    }
    if (k->n < k->cap && k->bytes + blob_size <= k->max_bytes) {
      k->ring[(k->head + k->n) % k->cap] = (kept){pipeline, blob_size};
      k->n++;
      k->bytes += blob_size;
      if (k->n > k->peak)
        k->peak = k->n;
      placed = 1;
    }
    pthread_mutex_unlock(&k->lock);
    for (unsigned i = 0; i < n_out; i++)
      vkDestroyPipeline(k->device, out[i], NULL);
    if (placed)
      return;
  }
}

int pcache__replay_keep_holds(pcache__replay_keep *k, VkPipeline pipeline) {
  int found = 0;
  if (!k)
    return 0;
  pthread_mutex_lock(&k->lock);
  for (unsigned i = 0; i < k->n && !found; i++)
    found = k->ring[(k->head + i) % k->cap].pipeline == pipeline;
  pthread_mutex_unlock(&k->lock);
  return found;
}

void pcache__replay_keep_counts(pcache__replay_keep *k, unsigned *ret_now, unsigned *ret_peak) {
  unsigned now = 0, peak = 0;
  if (k) {
    pthread_mutex_lock(&k->lock);
    now = k->n;
    peak = k->peak;
    pthread_mutex_unlock(&k->lock);
  }
  *ret_now = now;
  *ret_peak = peak;
}
