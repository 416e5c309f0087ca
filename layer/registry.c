/* The layer's records by handle: instances and devices by dispatch key,
 * app pipeline caches by handle. One mutex for all: these are looked up
 * when an object or pipeline is created, never per draw, and a process has
 * a handful of instances and devices and a few dozen caches. */
#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "common/vec.h"
#include "layer/layer.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static PCACHE_VEC(layer_instance *) instances;
static PCACHE_VEC(layer_device *) devices;
static PCACHE_VEC(layer_cache *) caches;

/* The generic part of the three tables: find by a key the caller's match
 * function compares, remove by swapping the last item in. */
static ssize_t find(void *const *items, size_t n, int (*match)(const void *item, const void *key),
                    const void *key) {
  for (size_t i = 0; i < n; i++)
    if (match(items[i], key))
      return (ssize_t)i;
  return -1;
}

static int instance_is(const void *item, const void *key) {
  return ((const layer_instance *)item)->key == key;
}
static int device_is(const void *item, const void *key) {
  return ((const layer_device *)item)->key == key;
}
static int cache_is(const void *item, const void *key) {
  const layer_cache *cache = item, *wanted = key;
  return cache->device_key == wanted->device_key && cache->handle == wanted->handle;
}

#define ADD(vec, item)                                                                             \
  do {                                                                                             \
    int r_;                                                                                        \
    pthread_mutex_lock(&lock);                                                                     \
    r_ = pcache_vec_push(&(vec), (item));                                                          \
    pthread_mutex_unlock(&lock);                                                                   \
    return r_ < 0 ? -ENOMEM : 0;                                                                   \
  } while (0)

#define LOOKUP(vec, match, key, remove)                                                            \
  do {                                                                                             \
    void *found_ = NULL;                                                                           \
    pthread_mutex_lock(&lock);                                                                     \
    ssize_t i_ = find((void *const *)(vec).items, (vec).n, (match), (key));                        \
    if (i_ >= 0) {                                                                                 \
      found_ = (vec).items[i_];                                                                    \
      if (remove)                                                                                  \
        (vec).items[i_] = (vec).items[--(vec).n];                                                  \
    }                                                                                              \
    pthread_mutex_unlock(&lock);                                                                   \
    return found_;                                                                                 \
  } while (0)

int layer_registry_add_instance(layer_instance *instance) { ADD(instances, instance); }
layer_instance *layer_registry_instance(const void *key) { LOOKUP(instances, instance_is, key, 0); }
layer_instance *layer_registry_remove_instance(const void *key) {
  LOOKUP(instances, instance_is, key, 1);
}

/* A device whose key a stale record still has (the program leaked a device,
 * the loader freed its dispatch and gave the key to this one) replaces it:
 * lookups must find the live device. The stale record is dropped, not
 * freed: it was ended when its instance went (layer_DestroyInstance). */
int layer_registry_add_device(layer_device *device) {
  int r = 0;
  pthread_mutex_lock(&lock);
  ssize_t i = find((void *const *)devices.items, devices.n, device_is, device->key);
  if (i >= 0)
    devices.items[i] = device;
  else
    r = pcache_vec_push(&devices, device) < 0 ? -ENOMEM : 0;
  pthread_mutex_unlock(&lock);
  return r;
}
layer_device *layer_registry_device(const void *key) { LOOKUP(devices, device_is, key, 0); }
layer_device *layer_registry_remove_device(const void *key) { LOOKUP(devices, device_is, key, 1); }

layer_device *layer_registry_remove_device_of(const layer_instance *instance) {
  layer_device *found = NULL;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < devices.n && !found; i++)
    if (devices.items[i]->instance == instance) {
      found = devices.items[i];
      devices.items[i] = devices.items[--devices.n];
    }
  pthread_mutex_unlock(&lock);
  return found;
}

void layer_registry_drop_caches(const void *device_key) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < caches.n;) {
    layer_cache *c = caches.items[i];
    if (c->device_key != device_key) {
      i++;
      continue;
    }
    caches.items[i] = caches.items[--caches.n];
    layer_cache_free(c);
  }
  pthread_mutex_unlock(&lock);
}

void layer_registry_each_device(void (*fn)(layer_device *device)) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < devices.n; i++)
    fn(devices.items[i]);
  pthread_mutex_unlock(&lock);
}

int layer_registry_add_cache(layer_cache *cache) { ADD(caches, cache); }
layer_cache *layer_registry_cache(const void *device_key, VkPipelineCache handle) {
  layer_cache wanted = {.device_key = (void *)device_key, .handle = handle};
  LOOKUP(caches, cache_is, &wanted, 0);
}
layer_cache *layer_registry_remove_cache(const void *device_key, VkPipelineCache handle) {
  layer_cache wanted = {.device_key = (void *)device_key, .handle = handle};
  LOOKUP(caches, cache_is, &wanted, 1);
}
