/* The replayer's device and builds (replay_vk.h): the physical device
 * whose key a replay builds for, its VkDevice (made in replay_device.c),
 * and the keys --list-keys reports. A replay for a binary key adds
 * VK_KHR_pipeline_binary and builds each pipeline's binaries into the
 * container a program uploads. */
#include "replay_vk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#include <pcache/pcache.h>

#include "client/binary.h"
#include "common/alloc.h"
#include "common/blob.h"
#include "common/clock.h"
#include "common/log.h"
#include "replay/desc_decode.h"
#include "replay/replay_device.h"

struct pcache__replay_vk {
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  pcache__devkey key; /* what the uploads name: the replay's key */
  /* A replay for a binary key (PCACHE_DEVKEY_ABI_BINARY) builds pipeline
   * binaries, not VkPipelineCache data: its device has the extension
   * (binary_key), key is that binary key, bin its entry points. */
  int binary;
  pcache__binary_vk bin;
  Pcachepb__DeviceInfo info;
  char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
  char driver_name[VK_MAX_DRIVER_NAME_SIZE], driver_info[VK_MAX_DRIVER_INFO_SIZE];
  uint8_t device_uuid[VK_UUID_SIZE];
};

/* What an app's libpcache reports of the device (client/device.c), so that
 * the record of a key the replayer made first names the device as fully
 * as one an app made: the deviceUUID (Vulkan 1.1) and the driver's
 * identity (1.2). */
static void driver_names(pcache__replay_vk *vk) {
  VkPhysicalDeviceDriverProperties driver = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceProperties2 props2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                        .pNext = &id};
  if (vk->info.api_version >= VK_API_VERSION_1_2)
    id.pNext = &driver;
  if (vk->info.api_version >= VK_API_VERSION_1_1) {
    vkGetPhysicalDeviceProperties2(vk->physical_device, &props2);
    memcpy(vk->device_uuid, id.deviceUUID, sizeof vk->device_uuid);
    vk->info.device_uuid.data = vk->device_uuid;
    vk->info.device_uuid.len = sizeof vk->device_uuid;
  }
  if (vk->info.api_version >= VK_API_VERSION_1_2) {
    vk->info.driver_id = (uint32_t)driver.driverID;
    memcpy(vk->driver_name, driver.driverName, sizeof vk->driver_name);
    memcpy(vk->driver_info, driver.driverInfo, sizeof vk->driver_info);
  }
  vk->info.key.data = vk->key.bytes;
  vk->info.key.len = PCACHE_DEVKEY_SIZE;
  vk->info.name = vk->name;
  vk->info.driver_name = vk->driver_name;
  vk->info.driver_info = vk->driver_info;
}

/* What a client knows of a physical device (client/device.c, identify):
 * its key, made by the same function from the same properties, this
 * process's pointer size the ABI; and its names, asked as far as the
 * instance's version allows. */
static void describe(pcache__replay_vk *vk, VkPhysicalDevice dev, uint32_t instance_api) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(dev, &p);
  pcache__devkey_make(p.pipelineCacheUUID, p.vendorID, p.deviceID, p.driverVersion,
                      (uint32_t)sizeof(void *), &vk->key);
  vk->physical_device = dev;
  memcpy(vk->name, p.deviceName, sizeof vk->name);
  memset(vk->driver_name, 0, sizeof vk->driver_name);
  memset(vk->driver_info, 0, sizeof vk->driver_info);
  vk->info.driver_id = 0;
  vk->info.api_version = p.apiVersion < instance_api ? p.apiVersion : instance_api;
  driver_names(vk);
}

/* The instance, at the highest version up to 1.3 the loader has (written
 * to *ret_api). Returns 0, PCACHE_ENOT_FOUND when the loader finds no
 * driver (VK_ERROR_INCOMPATIBLE_DRIVER), or -EIO. */
static int make_instance(pcache__replay_vk *vk, uint32_t *ret_api) {
  uint32_t api = VK_API_VERSION_1_0;
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "pcache-replay"};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkResult vr;
  if (vkEnumerateInstanceVersion(&api) != VK_SUCCESS)
    api = VK_API_VERSION_1_0;
  app.apiVersion = api >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : api;
  if ((vr = vkCreateInstance(&ici, NULL, &vk->instance)) != VK_SUCCESS)
    return vr == VK_ERROR_INCOMPATIBLE_DRIVER ? PCACHE_ENOT_FOUND : -EIO;
  *ret_api = app.apiVersion;
  return 0;
}

/* Whether the device described in vk may have binary key want: the
 * derivation (pcache__devkey_binary) keeps the vendor, device and driver
 * version, and adds the binary mark to the ABI. Saves making a device on
 * every other one. */
static int binary_candidate(const pcache__replay_vk *vk, const pcache__devkey *want) {
  return memcmp(vk->key.bytes + PCACHE_UUID_SIZE, want->bytes + PCACHE_UUID_SIZE,
                PCACHE_DEVKEY_SIZE - PCACHE_UUID_SIZE - 4) == 0 &&
         (pcache__devkey_abi(&vk->key) | PCACHE_DEVKEY_ABI_BINARY) == pcache__devkey_abi(want);
}

/* The device binary_key made, gone again: another key than the one
 * wanted, or only listed. */
static void drop_device(pcache__replay_vk *vk) {
  vkDestroyDevice(vk->device, NULL);
  vk->device = VK_NULL_HANDLE;
}

/* The binary key of the device described in vk, from the global pipeline
 * key its driver gives now (the guarded call of pcache__binary_open, as a
 * program's libpcache asks it): 0 with vk->device made (with the
 * extension) and vk->bin set, else PCACHE_ENOT_FOUND (the device has not
 * the extensions, the feature or Vulkan 1.3) or PCACHE_EVULKAN (no global
 * key: logged), and no device. */
static int binary_key(pcache__replay_vk *vk, pcache__devkey *ret_key) {
  int changed = 0, r;
  VkResult vr;
  if (vk->info.api_version < VK_API_VERSION_1_3 ||
      pcache__replay_make_device(vk->physical_device, vk->info.api_version, 1, &vk->device) < 0)
    return PCACHE_ENOT_FOUND;
  r = pcache__binary_open(vk->device, vkGetDeviceProcAddr, NULL, &vk->key, &vk->bin, ret_key, &vr,
                          &changed);
  if (changed)
    log_debug("replay: vkGetPipelineKeyKHR changed a callee-saved register; it was restored");
  if (r < 0) {
    /* Said, since "no device" alone would not tell it from a missing
     * driver. */
    log_info("replay: %.*s gives no global pipeline key (%s, VkResult %d)", (int)sizeof vk->name,
             vk->name, pcache_strerror(r), (int)vr);
    drop_device(vk);
  }
  return r;
}

/* For a binary key: the device of vk (described) is the one when its
 * binary key, from the global pipeline key the driver gives now, is want.
 * 0 with vk->device made and vk->key the binary key, else
 * PCACHE_ENOT_FOUND and no device. */
static int try_binary(pcache__replay_vk *vk, const pcache__devkey *want) {
  pcache__devkey bin_key;
  char hex[65];
  if (binary_key(vk, &bin_key) < 0)
    return PCACHE_ENOT_FOUND;
  if (memcmp(bin_key.bytes, want->bytes, PCACHE_DEVKEY_SIZE) == 0) {
    vk->key = bin_key;
    vk->binary = 1;
    return 0;
  }
  /* Said, since "no device" alone would not tell a stale global key from
   * a missing driver. */
  pcache__devkey_format(&bin_key, hex);
  log_info("replay: %.*s gives binary key %s now, not the replay's", (int)sizeof vk->name, vk->name,
           hex);
  drop_device(vk);
  return PCACHE_ENOT_FOUND;
}

/* The device whose key is want; for a binary key, made here (try_binary). */
static int pick_device(pcache__replay_vk *vk, const pcache__devkey *want, uint32_t instance_api) {
  VkPhysicalDevice devs[PCACHE_REPLAY_VK_MAX_DEVICES];
  uint32_t n = PCACHE_REPLAY_VK_MAX_DEVICES;
  int binary = (pcache__devkey_abi(want) & PCACHE_DEVKEY_ABI_BINARY) != 0;
  if (vkEnumeratePhysicalDevices(vk->instance, &n, devs) < 0)
    return -EIO;
  for (uint32_t i = 0; i < n; i++) {
    describe(vk, devs[i], instance_api);
    if (!binary && memcmp(vk->key.bytes, want->bytes, PCACHE_DEVKEY_SIZE) == 0)
      return 0;
    if (binary && binary_candidate(vk, want) && try_binary(vk, want) == 0)
      return 0;
  }
  return PCACHE_ENOT_FOUND;
}

int pcache__replay_vk_open(const pcache__devkey *want, pcache__replay_vk **ret) {
  pcache__replay_vk *vk = pcache__calloc(1, sizeof *vk);
  uint32_t api;
  int r;
  if (!vk)
    return -ENOMEM;
  pcachepb__device_info__init(&vk->info);
  if ((r = make_instance(vk, &api)) < 0)
    goto out_free;
  if ((r = pick_device(vk, want, api)) < 0)
    goto out_instance;
  if (!vk->device && (r = pcache__replay_make_device(vk->physical_device, vk->info.api_version, 0,
                                                     &vk->device)) < 0)
    goto out_instance;
  *ret = vk;
  return 0;

out_instance:
  vkDestroyInstance(vk->instance, NULL);
out_free:
  pcache__free(vk);
  return r;
}

/* A driver's text on one line of the list: its tabs and line ends (and
 * any other control character) would split the line. */
static void put_field(FILE *out, const char *text) {
  fputc('\t', out);
  for (; *text; text++)
    fputc((unsigned char)*text < 0x20 || *text == 0x7f ? '?' : *text, out);
}

/* One line of the list: key, then the device's and driver's names. */
static void put_line(FILE *out, const pcache__replay_vk *vk, const pcache__devkey *key) {
  char hex[65];
  pcache__devkey_format(key, hex);
  fputs(hex, out);
  put_field(out, vk->name);
  put_field(out, vk->driver_name);
  put_field(out, vk->driver_info);
  fputc('\n', out);
}

/* The device's binary key on a line of its own, after its VkPipelineCache
 * key's: the device made and destroyed here, as a binary replay makes it
 * (binary_key), so the key is the one that replay would build for. A
 * device without pipeline binaries has none, and says nothing. */
static void put_binary_line(FILE *out, pcache__replay_vk *vk) {
  pcache__devkey bin_key;
  if (binary_key(vk, &bin_key) < 0)
    return;
  put_line(out, vk, &bin_key);
  drop_device(vk);
}

int pcache__replay_vk_list(FILE *out, int binary) {
  pcache__replay_vk vk;
  VkPhysicalDevice devs[PCACHE_REPLAY_VK_MAX_DEVICES];
  uint32_t api, n = PCACHE_REPLAY_VK_MAX_DEVICES;
  int r;
  memset(&vk, 0, sizeof vk);
  if ((r = make_instance(&vk, &api)) < 0)
    return r;
  if (vkEnumeratePhysicalDevices(vk.instance, &n, devs) < 0) {
    vkDestroyInstance(vk.instance, NULL);
    return -EIO;
  }
  for (uint32_t i = 0; i < n; i++) {
    describe(&vk, devs[i], api);
    vk.name[sizeof vk.name - 1] = '\0';
    vk.driver_name[sizeof vk.driver_name - 1] = '\0';
    vk.driver_info[sizeof vk.driver_info - 1] = '\0';
    put_line(out, &vk, &vk.key);
    if (binary)
      put_binary_line(out, &vk);
  }
  vkDestroyInstance(vk.instance, NULL);
  if (fflush(out) != 0)
    return -errno;
  return n ? 0 : PCACHE_ENOT_FOUND;
}

void pcache__replay_vk_close(pcache__replay_vk *vk) {
  if (!vk)
    return;
  vkDestroyDevice(vk->device, NULL);
  vkDestroyInstance(vk->instance, NULL);
  pcache__free(vk);
}

const Pcachepb__DeviceInfo *pcache__replay_vk_info(const pcache__replay_vk *vk) {
  return &vk->info;
}

struct modules {
  Pcachepb__Module *const *v;
  size_t n;
};

static int find_code(void *ctx, const pcache__hash *hash, const uint32_t **ret_code,
                     size_t *ret_size) {
  const struct modules *m = ctx;
  for (size_t i = 0; i < m->n; i++) {
    const Pcachepb__Module *mod = m->v[i];
    if (mod->hash.len == PCACHE_HASH_SIZE &&
        memcmp(mod->hash.data, hash->bytes, PCACHE_HASH_SIZE) == 0 && mod->code.len &&
        mod->code.len % 4 == 0) {
      *ret_code = (const uint32_t *)(const void *)mod->code.data;
      *ret_size = mod->code.len;
      return 0;
    }
  }
  return PCACHE_EMISSING_MODULE;
}

VkDevice pcache__replay_vk_device(const pcache__replay_vk *vk) { return vk->device; }

/* The build's cache, seeded when a seed came with the item and has the
 * device's header: a driver that still refuses its data gets an empty
 * cache instead, and the build goes on from the description. */
static VkResult make_cache(pcache__replay_vk *vk, const uint8_t *seed, size_t seed_size,
                           VkPipelineCache *ret_cache, pcache__replay_times *times) {
  VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkResult vr;
  if (seed_size && pcache__blob_check_header(seed, seed_size, &vk->key) == 0) {
    pci.initialDataSize = seed_size;
    pci.pInitialData = seed;
    if ((vr = vkCreatePipelineCache(vk->device, &pci, NULL, ret_cache)) == VK_SUCCESS) {
      times->seeded++;
      return vr;
    }
    log_info("replay: the driver refused a seed (VkResult %d); building without it", (int)vr);
    pci.initialDataSize = 0;
    pci.pInitialData = NULL;
  }
  return vkCreatePipelineCache(vk->device, &pci, NULL, ret_cache);
}

/* A binary replay's pipeline: created with the capture bit, in a
 * VkPipelineCreateFlags2CreateInfoKHR in front of the create info's chain
 * (carrying its flags, which it replaces), with no pipeline cache
 * (capturing through one is invalid), as libpcache's binary capture does
 * (client/build_compile.c); its binaries read back into the container a
 * program would upload (pcache__binary_capture). */
static int build_binary(pcache__replay_vk *vk, pcache__desc_decoded *d, VkPipeline *ret_pipeline,
                        uint8_t **ret_blob, size_t *ret_size, uint64_t *ret_ns) {
  VkPipelineCreateFlags2CreateInfoKHR f2 = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR};
  const void **head = d->kind == 2 ? &d->compute.pNext : &d->graphics.pNext;
  uint64_t t0 = pcache__mono_ns();
  int r;
  f2.flags = (uint64_t)(d->kind == 2 ? d->compute.flags : d->graphics.flags) |
             VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR;
  f2.pNext = *head;
  *head = &f2;
  r = pcache__desc_decoded_create_pipeline(d, vk->device, VK_NULL_HANDLE, NULL, ret_pipeline);
  *head = f2.pNext;
  *ret_ns = pcache__mono_ns() - t0;
  if (r < 0)
    return r;
  r = pcache__binary_capture(&vk->bin, &vk->key, *ret_pipeline, NULL, ret_blob, ret_size);
  return r == PCACHE_EVULKAN ? -EIO : r;
}

const char *pcache__replay_vk_fix(int err) {
  /* Said to whoever reads pcachectl status: the replayer reads no
   * PCACHE_BINARIES, so the variable is for the programs, whose next
   * uploads are then VkPipelineCache data, which a replay can build.
   * With "build failed: " and the code's text, under RESULT_MSG_SIZE. */
  return err == PCACHE_ECAPTURE ? "its binaries cannot be replayed: run the programs with "
                                  "PCACHE_BINARIES=0 to store VkPipelineCache data"
                                : NULL;
}

int pcache__replay_vk_build(pcache__replay_vk *vk, pcache__module_pool *pool,
                            pcache__replay_keep *keep, const uint8_t *desc, size_t desc_size,
                            Pcachepb__Module *const *modules, size_t n_modules, const uint8_t *seed,
                            size_t seed_size, uint8_t **ret_blob, size_t *ret_size,
                            uint64_t *ret_ns, pcache__replay_times *times) {
  struct modules m = {modules, n_modules};
  pcache__desc_decoded *d = NULL;
  VkPipelineCache cache = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint8_t *blob = NULL;
  size_t size = 0;
  uint64_t t0 = pcache__mono_ns(), t1;
  int r;
  /* The SPIR-V words must be aligned for the driver: protobuf-c's bytes
   * are, as they sit in their own allocations. */
  if ((r = pcache__desc_decode(desc, desc_size, find_code, &m, &d)) < 0)
    return r;
  t1 = pcache__mono_ns();
  times->decode_ns += t1 - t0;
  if (pool && (r = pcache__module_pool_lend(pool, d)) < 0)
    goto out_free;
  if ((r = pcache__desc_decoded_create_objects(d, vk->device, NULL)) < 0)
    goto out_free;
  if (vk->binary) {
    /* A seed is VkPipelineCache data, of no use to a binary. */
    t0 = pcache__mono_ns();
    times->objects_ns += t0 - t1;
    r = build_binary(vk, d, &pipeline, &blob, &size, ret_ns);
    times->compile_ns += *ret_ns;
    t0 += *ret_ns;
    if (r < 0)
      goto out_pipeline;
    goto out_keep;
  }
  if (make_cache(vk, seed, seed_size, &cache, times) != VK_SUCCESS) {
    r = -EIO;
    goto out_objects;
  }
  t0 = pcache__mono_ns();
  times->objects_ns += t0 - t1;
  if ((r = pcache__desc_decoded_create_pipeline(d, vk->device, cache, NULL, &pipeline)) < 0)
    goto out_cache;
  *ret_ns = pcache__mono_ns() - t0;
  times->compile_ns += *ret_ns;
  t0 += *ret_ns;
  if (vkGetPipelineCacheData(vk->device, cache, &size, NULL) != VK_SUCCESS || !size) {
    r = -EIO;
    goto out_pipeline;
  }
  if (!(blob = pcache__malloc(size))) {
    r = -ENOMEM;
    goto out_pipeline;
  }
  if (vkGetPipelineCacheData(vk->device, cache, &size, blob) != VK_SUCCESS) {
    r = -EIO;
    goto out_pipeline;
  }
  /* What the daemon would refuse anyway, said here with the reason. */
  if ((r = pcache__blob_check_header(blob, size, &vk->key)) < 0)
    goto out_pipeline;
out_keep:
  *ret_blob = blob;
  *ret_size = size;
  blob = NULL;
  /* Alive a while longer, for the driver to share its stages (keep.h). */
  pcache__replay_keep_add(keep, vk->device, pipeline, size);
  pipeline = VK_NULL_HANDLE;
out_pipeline:
  vkDestroyPipeline(vk->device, pipeline, NULL);
out_cache:
  vkDestroyPipelineCache(vk->device, cache, NULL);
out_objects:
  pcache__desc_decoded_destroy_objects(d, vk->device, NULL);
out_free:
  pcache__desc_decoded_free(d);
  pcache__free(blob);
  times->data_ns += pcache__mono_ns() - t0;
  return r;
}
