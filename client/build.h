/* Building one pipeline (build.c): from the daemon's blob, from what this
 * process already built, or by compiling and queueing the upload. Shared by
 * libpcache's create-info path and tiers (pipeline.c) and the Vulkan layer
 * (layer/pipelines.c), which differ only in who owns the pipeline and in
 * whether an app cache must receive it. */
#ifndef PCACHE_CLIENT_BUILD_H
#define PCACHE_CLIENT_BUILD_H

#include <pthread.h>

#include "client/core.h"

/* What building keeps between pipelines. */
typedef struct pcache__build_state {
  /* State hashes built in this process (value 1), whose pipelines the
   * device cache therefore holds; a build in flight is a claim others
   * wait on. */
  pcache__table built;
  /* Staging ("Staging" below), set once the daemon answered at creation:
   * stage_hits, a driver hit's description goes up as a staged build;
   * stage_compiles, a true miss is compiled as the program would and
   * staged. staged: state hashes staged here (value 1), each once. */
  int stage_hits, stage_compiles;
  pcache__table staged;
  /* Driver-first probes that missed (pcache__build_driver_first): a
   * prefetched pipeline is asked of the driver only while the probe has
   * hit, or missed fewer than PCACHE__PROBE_MISSES times (build.c). */
  atomic_uint_fast64_t probe_misses;
} pcache__build_state;

/* One pipeline to build. */
typedef struct pcache__build {
  uint32_t kind;                                /* Pcachepb__EntryKind */
  const VkGraphicsPipelineCreateInfo *graphics; /* exactly one of the two */
  const VkComputePipelineCreateInfo *compute;
  const VkAllocationCallbacks *allocator; /* the pipeline's own */
  /* The app's own cache, or VK_NULL_HANDLE (then only the device cache is
   * used). It receives this pipeline's entry, and only that: never other
   * pipelines' entries, so what the app saves stays its own. Merges into it
   * take app_cache_lock's write side and creations its read side, since the
   * app may create pipelines with it from other threads while we merge. */
  VkPipelineCache app_cache;
  pthread_rwlock_t *app_cache_lock;
  /* The caller knows app_cache already holds this pipeline's entry (it
   * received it from an earlier build): no Get, no merge. */
  int app_cache_has;
  /* Set to 1 when app_cache received the entry in this build (may be NULL). */
  int *app_cache_got;
  /* Optional: when the device cache already holds the pipeline (prefetched,
   * or built earlier here), its entry is not fetched for app_cache now: the
   * pipeline comes from the device cache and app_cache_defer(ctx, hash)
   * hands the hash to the caller, which gives the app cache its entries
   * before the app can read them (pcache__build_fill_app_cache). This keeps
   * a Get, a load and a merge (about 70 us a pipeline on NVIDIA) out of
   * pipeline creation. NULL: the entry is fetched and merged at once. */
  void (*app_cache_defer)(void *ctx, const pcache__hash *state_hash);
  void *app_cache_defer_ctx;
  /* The caller asked the driver first (pcache__build_driver_first) and it
   * had nothing: the build does not ask again. */
  int driver_asked;
  /* The caller holds a claim on this state hash that makes this the one
   * build of it (a tier's, pipeline.c): pcache__build_hashed takes no
   * claim of `built`, and records in it only what the driver's own
   * caches did not serve, as the next build after a release asks the
   * driver first anyway. Keeps a lock, an allocation and their cache
   * misses off a warm start's every pipeline. */
  int claimed;
} pcache__build;

/*
 * pcache__build_driver_first - driver first: build's pipeline as the
 * program would create it without pcache (its app cache, or none), with
 * VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT, so the
 * driver's in-memory and disk caches answer at their own cost; a miss
 * costs a few microseconds (bench/RESULTS.md, "Driver first"). Needs
 * nothing described: the layer asks before it describes, so a hit costs
 * the program no more than without pcache. Returns 1 with the pipeline
 * (the caller's; counted in driver_hits), 0 when the driver did not have
 * it, -1 when it was not asked (driver first is off, or the chain carries
 * VkPipelineCreateFlags2CreateInfoKHR).
 */
int pcache__build_driver_first(pcache_device *device, const pcache__build *build,
                               VkPipeline *ret_pipeline);

/*
 * pcache__build_probe_first - the driver first, before anything is
 * described: what the layer does for every create info, and libpcache for
 * PCACHE_PIPELINES_APP, where no tier needs the state hash first. A hit
 * then costs the program what it costs without pcache (describing and
 * hashing alone cost 5-6 % of a 15-23 us light-set driver hit on the
 * H200's host: bench/RESULTS.md). A library is not asked (0): pipelines
 * that link it are described through its description (record.h). Returns
 * 1 with the pipeline (the caller's; staged first when stage_hits, which
 * needs it described), or 0, with build->driver_asked set when the driver
 * was asked and did not have it, so that the build does not ask again.
 */
int pcache__build_probe_first(pcache_device *device, pcache__build *build,
                              VkPipeline *ret_pipeline);

/*
 * Staging: what goes to the daemon as a staged build (Put.stage,
 * docs/client.md "Staging"), a description without a blob that the
 * daemon's replayer builds in the background, when the daemon says it can
 * (HelloReply.stages):
 * - by default, a true miss on drivers measured to pay for the fresh
 *   VkPipelineCache a blob is captured from (NVIDIA: +23%): compiled as the
 *   program would, the replayer captures the blob;
 * - with $PCACHE_STAGE=learn, also a driver hit in a (device, app)'s first
 *   run under pcache (the store had nothing of it at creation), so that the
 *   store learns what a warm driver cache served; it costs that run the
 *   describing and queueing (1.4-1.9x on the light set);
 * - with $PCACHE_STAGE=all, every driver hit not prefetched and every miss,
 *   on any driver; "off" stages nothing.
 *
 * pcache__build_stage_policy - sets device->build.stage_hits and stage_compiles
 * once the creation's prefetch is done; store_had_nothing: the daemon
 * answered and had nothing of this (device, app).
 *
 * pcache__build_stage_hit - stages a driver hit built from desc (keys its
 * keys) when stage_hits is set, the daemon did not send it (prefetch) and
 * it was not staged here before. 1 when queued, 0 when not.
 */
void pcache__build_stage_policy(pcache_device *device, int store_had_nothing);
int pcache__build_stage_hit(pcache_device *device, const pcache__build *build,
                            const pcache__desc_keys *keys, const pcache__desc_buf *desc);

/*
 * pcache__pipeline_flags - the create flags in effect for a create info
 * whose pNext chain is chain: VkPipelineCreateFlags2CreateInfoKHR's
 * (VK_KHR_maintenance5) replace flags when chained, and *ret_in_flags2
 * says so. The bits pcache acts on have the same values in both.
 */
uint64_t pcache__pipeline_flags(const void *chain, VkPipelineCreateFlags flags, int *ret_in_flags2);

/* Where a built pipeline came from. */
typedef enum pcache__build_source {
  PCACHE__BUILT_DAEMON = 1, /* the daemon's blob (prefetched or fetched by one Get) */
  PCACHE__BUILT_LOCAL,      /* the device cache already held it (built earlier here) */
  PCACHE__BUILT_COMPILED,   /* compiled now; its blob is queued for upload */
  PCACHE__BUILT_DRIVER,     /* the driver's own caches had it, asked first */
  PCACHE__BUILT_UNHASHABLE, /* not describable: built through the driver alone */
} pcache__build_source;

/*
 * pcache__build_hashed - builds the pipeline whose description and keys
 * the caller made. Two threads building the same state hash build it once:
 * the second waits and then finds it in the device cache. Returns the
 * driver's VkResult (VK_PIPELINE_COMPILE_REQUIRED included, when the app
 * asked not to compile), with the pipeline (the caller's to destroy) and
 * where it came from. A graphics pipeline library built is recorded in the
 * object map by its description (record.h), whatever the source; the
 * caller forgets it when it destroys it. Never inside a read section.
 */
VkResult pcache__build_hashed(pcache_device *device, const pcache__build *build,
                              const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                              VkPipeline *ret_pipeline, pcache__build_source *ret_source);

/* An unhashable pipeline: through the app cache if there is one, else the
 * device cache, as the driver would without pcache. */
VkResult pcache__build_unhashable(pcache_device *device, const pcache__build *build,
                                  VkPipeline *ret_pipeline);

/*
 * pcache__build_fill_app_cache - gives app_cache the daemon's entries for n
 * state hashes: Gets of up to 64 hashes each, every blob checked as any
 * other (pcache__blob_load) and merged into app_cache under lock's write
 * side; refused blobs are reported. ret_got[i] (n of them) is set to 1 for
 * each hash app_cache received. Returns how many it received; 0 without a
 * daemon.
 */
size_t pcache__build_fill_app_cache(pcache_device *device, VkPipelineCache app_cache,
                                    pthread_rwlock_t *lock, const pcache__hash *hashes, size_t n,
                                    uint8_t *ret_got);

/*
 * pcache__build_describe - describes build's create info (inside an object
 * map read section). Returns 0, -ENOMEM or PCACHE_EUNHASHABLE.
 */
int pcache__build_describe(pcache_device *device, const pcache__build *build, pcache__desc_buf *buf,
                           pcache__desc_keys *ret_keys);

/*
 * pcache__build_from_daemon - whether the daemon has the blob of keys'
 * state hash: PCACHE__DAEMON_PREFETCHED (the prefetch merged it into the
 * device cache), PCACHE__DAEMON_FETCHED (one Get fetched it now and merged
 * it, and into build's app cache too when *ret_in_app_cache says so), or 0
 * (no daemon, or it lacks the blob). A hit counts in daemon_hits.
 */
enum { PCACHE__DAEMON_PREFETCHED = 1, PCACHE__DAEMON_FETCHED = 2 };
int pcache__build_from_daemon(pcache_device *device, const pcache__build *build,
                              const pcache__desc_keys *keys, int *ret_in_app_cache);

/* What a compiled pipeline leaves behind (pcache__build_keep). */
typedef struct pcache__build_kept {
  uint32_t kind; /* Pcachepb__EntryKind */
  const pcache__desc_keys *keys;
  const uint8_t *desc; /* its description */
  size_t desc_size;
  uint64_t compile_ns;
  size_t n_modules; /* the code the upload carries: references, taken over */
  pcache__module *modules[PCACHE_DESC_MAX_MODULES];
} pcache__build_kept;

/*
 * pcache__build_keep - the fresh cache a pipeline was just compiled
 * through: its data merged into the device cache (the state hash joins the
 * snapshot) and queued for upload under kept's state hash, with kept's
 * description and modules. The module references are always released.
 */
void pcache__build_keep(pcache_device *device, VkPipelineCache fresh,
                        const pcache__build_kept *kept);

/* The modules build's stages name that an upload carries (references),
 * as many as fit. Returns how many. */
size_t pcache__build_modules(pcache_device *device, const pcache__build *build,
                             pcache__module *ret_modules[PCACHE_DESC_MAX_MODULES]);

#endif
