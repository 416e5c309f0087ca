/*
 * libpcache — a Vulkan pipeline cache shared through a per-user daemon.
 *
 * An app opens one pcache_client per process and one pcache_device per
 * VkDevice. The device context owns a VkPipelineCache seeded from the
 * daemon (pcached), builds pipelines through a tiered in-process cache, and
 * uploads what it had to compile in the background. The daemon is optional:
 * when it is absent, slow or disabled, every call still works locally.
 *
 * Conventions
 *  - Functions returning int give 0 on success or a negative code: -errno
 *    for system errors, PCACHE_E* (below) for pcache's own. A cache miss is
 *    not an error, and neither is an absent daemon.
 *  - Functions that create Vulkan objects return VkResult, exactly like the
 *    vkCreate* call they stand in for, so they drop into an engine as is.
 *  - Outputs come last, are named ret_*, and are left untouched on failure.
 *  - Every destroy/close function accepts NULL.
 *  - Thread-safety is stated per function. "Externally synchronized" has
 *    Vulkan's meaning: the caller must not use the object from two threads
 *    at once.
 *
 * Over 600 lines: the one installed public header, the whole API with its
 * contract (return codes, lifetimes, thread-safety) beside each function;
 * split, an app would include several headers for one library.
 */
#ifndef PCACHE_PCACHE_H
#define PCACHE_PCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include <pcache/version.h>

#ifdef __cplusplus
/* PCACHE_STRUCT_INIT for C++, which has no compound literals: every field
 * value-initialized (zero), then the size. A template, so outside the
 * extern "C" block. */
template <typename T> static inline T pcache_cxx_struct_init() {
  T value = T();
  value.struct_size = sizeof(T);
  return value;
}
extern "C" {
#endif

#if defined(PCACHE_STATIC)
#define PCACHE_API
#elif defined(__GNUC__)
#define PCACHE_API __attribute__((visibility("default")))
#else
#define PCACHE_API
#endif

/* ------------------------------------------------------------------ errors */

/*
 * pcache's own error codes, below -10000 so they never collide with -errno.
 * XX(name, value, message). The list is append-only: values are on the wire.
 */
#define PCACHE_ERRNO_MAP(XX)                                                                       \
  XX(PROTO, -10001, "malformed message")                                                           \
  XX(VERSION, -10002, "unsupported protocol version")                                              \
  XX(FRAME_TOO_LARGE, -10003, "frame larger than the limit")                                       \
  XX(EMPTY_FRAME, -10004, "zero-length frame")                                                     \
  XX(UNKNOWN_REQUEST, -10005, "unknown request kind")                                              \
  XX(TOO_MANY_HASHES, -10006, "too many state hashes in one request")                              \
  XX(BAD_KEY, -10007, "device key or state hash of the wrong length")                              \
  XX(BLOB_TOO_LARGE, -10008, "blob larger than the daemon's limit")                                \
  XX(BLOB_SHORT, -10009, "blob shorter than a pipeline cache header")                              \
  XX(HEADER_SIZE, -10010, "pipeline cache header size out of range")                               \
  XX(HEADER_VERSION, -10011, "pipeline cache header version is not 1")                             \
  XX(WRONG_VENDOR, -10012, "blob made for another vendor")                                         \
  XX(WRONG_DEVICE, -10013, "blob made for another device")                                         \
  XX(WRONG_UUID, -10014, "blob made for another pipelineCacheUUID")                                \
  XX(CHECKSUM, -10015, "checksum mismatch")                                                        \
  XX(BAD_DESC, -10016, "malformed pipeline description")                                           \
  XX(HASH_MISMATCH, -10017, "state hash does not match the description")                           \
  XX(PEER, -10018, "peer refused: another user")                                                   \
  XX(UNAVAILABLE, -10019, "daemon unavailable")                                                    \
  XX(DISABLED, -10020, "daemon disabled (PCACHE_DISABLE)")                                         \
  XX(UNHASHABLE, -10021, "pipeline has state the library cannot describe")                         \
  XX(FULL, -10022, "store full and nothing left to evict")                                         \
  XX(STORE, -10023, "store error")                                                                 \
  XX(ARCHIVE, -10024, "malformed archive")                                                         \
  XX(ARCHIVE_VERSION, -10025, "unsupported archive version")                                       \
  XX(NOT_FOUND, -10026, "not found")                                                               \
  XX(TOO_MANY_CONNECTIONS, -10027, "too many connections")                                         \
  XX(MISSING_MODULE, -10028, "description names SPIR-V the daemon lacks")                          \
  XX(DB_VERSION, -10029, "store has an unknown format version")                                    \
  XX(BAD_SIZE, -10030, "size out of range")                                                        \
  XX(NOT_READY, -10031, "hello not sent yet")                                                      \
  XX(VULKAN, -10032, "a Vulkan call failed")                                                       \
  XX(CACHE_FILE, -10033, "not a pcache cache file, or another version of one")                     \
  XX(BINARY, -10034, "malformed pipeline-binary container")                                        \
  XX(CAPTURE, -10035, "the driver's capture gave no pipeline binaries, or more than pcache stores")

typedef enum pcache_errno {
#define PCACHE__ERR_ENUM(name, value, msg) PCACHE_E##name = value,
  PCACHE_ERRNO_MAP(PCACHE__ERR_ENUM)
#undef PCACHE__ERR_ENUM
      PCACHE_ERRNO_LAST_ = -10036
} pcache_errno;

/*
 * pcache_strerror - a message for a code from any pcache function.
 * Handles 0, -errno and PCACHE_E*. Returns a static string (never NULL).
 * Thread-safe.
 */
PCACHE_API const char *pcache_strerror(int err);

/*
 * pcache_err_name - the symbolic name of a code ("PCACHE_ECHECKSUM",
 * "ENOENT", "OK", "UNKNOWN"). Static string. Thread-safe.
 */
PCACHE_API const char *pcache_err_name(int err);

/* pcache_version_string - the library's version, e.g. "0.1.0". */
PCACHE_API const char *pcache_version_string(void);

/* ------------------------------------------------------------- allocation */

typedef void *(*pcache_malloc_func)(size_t size);
typedef void *(*pcache_realloc_func)(void *ptr, size_t size);
typedef void *(*pcache_calloc_func)(size_t count, size_t size);
typedef void (*pcache_free_func)(void *ptr);

/*
 * pcache_replace_allocator - route the library's own memory through these
 * functions (Vulkan objects use the VkAllocationCallbacks given per call).
 * Must be called before any other pcache function; all four are required.
 * Returns 0 or -EINVAL. Not thread-safe.
 */
PCACHE_API int pcache_replace_allocator(pcache_malloc_func malloc_func,
                                        pcache_realloc_func realloc_func,
                                        pcache_calloc_func calloc_func,
                                        pcache_free_func free_func);

/* ----------------------------------------------------------------- client */

typedef struct pcache_client pcache_client;

/*
 * Growable structs. Every struct the app passes in starts with
 * struct_size: set it to sizeof the struct as the app compiled it
 * (PCACHE_STRUCT_INIT does). The library reads and writes only the fields
 * that fit in that size and treats the rest as zero, so an app built
 * against an older header keeps working with a newer library. 0 means the
 * first version of the struct (every field this header documents as
 * "since 0.1"), so zero-initialized structs keep working too. Structs the
 * library fills are sized by the call instead (pcache_device_get_stats).
 */
#ifdef __cplusplus
#define PCACHE_STRUCT_INIT(type) (pcache_cxx_struct_init<type>())
#else
#define PCACHE_STRUCT_INIT(type) ((type){.struct_size = sizeof(type)})
#endif

/*
 * Logging. The library prints nothing by itself; it tells the app's log
 * function, and $PCACHE_LOG (error, warning, info or debug) writes the
 * same messages to stderr. What it says: every pipeline it could not
 * cache, and why (the object no wrapper made, by type and handle, or the
 * sType of the struct it cannot describe), at warning; blobs the driver
 * or the checks refused, at warning; the daemon coming and going, at info.
 * A message that repeats (an uncached pipeline made every frame) is given
 * once, then at most once every 10 s with how often it came meanwhile.
 * Levels are syslog's priorities, as pcached's stderr prefixes.
 */
typedef enum pcache_severity {
  PCACHE_SEVERITY_ERROR = 3,
  PCACHE_SEVERITY_WARNING = 4,
  PCACHE_SEVERITY_INFO = 6,
  PCACHE_SEVERITY_DEBUG = 7,
} pcache_severity;

/*
 * pcache_log_func - receives one message: a line without its newline,
 * valid only during the call. Called from any thread the library runs on
 * (the app's, or a device's upload thread), never with a lock of the
 * app's held, and possibly from two threads at once: it must be
 * thread-safe and must not call back into pcache.
 */
typedef void (*pcache_log_func)(void *user_data, pcache_severity level, const char *message);

typedef struct pcache_client_options {
  size_t struct_size; /* sizeof(pcache_client_options), or 0: see above */
  /* Since 0.1. Socket of pcached. NULL: $PCACHE_SOCKET, else
   * $XDG_RUNTIME_DIR/pcache/socket. */
  const char *socket_path;
  /* The name entries are filed under: the bucket Prefetch asks for, so
   * give each program its own. $PCACHE_APP_NAME, when set and not empty,
   * overrides it. NULL: application_name below, else the program name
   * (/proc/self/comm), which already tells apart the samples of one
   * framework that all pass one pApplicationName (docs/client.md, "The app
   * name"). */
  const char *app_name;
  /* Deprecated: set app_name. Kept for the 0.1 ABI; used only when
   * app_name is NULL or empty (app_name wins). */
  const char *application_name;
  /* Longest any call waits on the daemon, in ms. 0: $PCACHE_TIMEOUT_MS,
   * else 50. */
  uint32_t timeout_ms;
  /* Nonzero: never contact the daemon. $PCACHE_DISABLE=1 does the same. */
  int disable_daemon;
  /* Since 0.3. Where messages go (see "Logging" above); NULL: nowhere
   * but $PCACHE_LOG's stderr. log_level: the least severe level passed to
   * log_func; 0 means PCACHE_SEVERITY_WARNING. */
  pcache_log_func log_func;
  void *log_user_data;
  pcache_severity log_level;
} pcache_client_options;

/*
 * pcache_client_open - create a client. Never fails because the daemon is
 * absent, slow or refuses: the client then works locally and retries the
 * connection later by itself (at most once a second, from a call that
 * needs it). It connects and sends its Hello without waiting for the
 * answer, which the first call that needs the daemon reads (or
 * pcache_client_connected). A client is its process's: after fork(), the
 * child's calls leave the daemon alone (open another client there).
 * options may be NULL for all defaults; the strings are copied. Returns 0,
 * -ENOMEM or -EINVAL. Thread-safe.
 */
PCACHE_API int pcache_client_open(const pcache_client_options *options,
                                  pcache_client **ret_client);

/*
 * pcache_client_close - close the connections and free the client. Every
 * pcache_device made with it must be destroyed first. Accepts NULL.
 */
PCACHE_API void pcache_client_close(pcache_client *client);

/*
 * pcache_client_connected - 1 when the last exchange with the daemon
 * succeeded, 0 otherwise (absent, disabled, timed out, refused). Does not
 * connect, but reads the answer to the Hello that pcache_client_open sent
 * if no call has, waiting at most the client's timeout in all (for a call
 * in flight on the connection, then for the answer; 0 if it still has
 * none). In a forked child, 0: the child must open a client of its own.
 * Thread-safe.
 */
PCACHE_API int pcache_client_connected(const pcache_client *client);

/* pcache_client_app_name - the app name in use. Valid until close. */
PCACHE_API const char *pcache_client_app_name(const pcache_client *client);

/* ----------------------------------------------------------------- device */

typedef struct pcache_device pcache_device;

typedef struct pcache_device_info {
  size_t struct_size; /* sizeof(pcache_device_info), or 0 (since 0.1) */
  /* Since 0.1: every field below down to no_prefetch. */
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  /* NULL: the loader's vkGetInstanceProcAddr. Device functions are then
   * fetched with vkGetDeviceProcAddr. */
  PFN_vkGetInstanceProcAddr get_instance_proc_addr;
  /* Used for the device cache and every pipeline the context creates. */
  const VkAllocationCallbacks *allocator;
  /* Nonzero if the device was created with VK_EXT_pipeline_creation_feedback
   * enabled or is Vulkan 1.3: driver cache hits are then counted. */
  int creation_feedback;
  /* Nonzero: do not seed the cache from the daemon at creation. A miss
   * then looks in the app's shared-memory segment (the first miss its
   * snapshot covers loads that snapshot, which serves every covered miss;
   * others load their own blob), else asks the daemon for its state hash
   * (one round trip). $PCACHE_NO_PREFETCH=1 does the same. Meant for
   * measuring and for apps that build few of their pipelines per run. */
  int no_prefetch;
  /* Since 0.2. The apiVersion the app created the instance with
   * (VkApplicationInfo.apiVersion; VK_API_VERSION_1_0 when it passed none).
   * The library calls only what that version allows: below 1.1 it does not
   * call vkGetPhysicalDeviceProperties2 for the deviceUUID, below 1.2 not
   * for the driver's name; both are only shown by pcachectl. 0: unknown,
   * treated as 1.0. */
  uint32_t instance_api_version;
  /* Since 0.3: every field below. */
  /* Where pcache_device_create stores the VkResult of the Vulkan call that
   * failed when it returns PCACHE_EVULKAN (VK_SUCCESS otherwise). May be
   * NULL. */
  VkResult *ret_vk_result;
  /* Who owns the pipelines the context returns: PCACHE_PIPELINES_SHARED
   * (0) or PCACHE_PIPELINES_APP ("Pipelines and who owns them" below). */
  uint32_t pipeline_ownership;
  /* Nonzero: pass-through. Every pipeline call goes straight to the
   * driver (vkCreate*Pipelines with pipeline_cache, the context's
   * allocator), nothing is described, cached, fetched, uploaded or saved,
   * and no daemon is contacted; ownership is as above. $PCACHE_PASSTHROUGH=1
   * does the same. */
  int passthrough;
  /* The app's own VkPipelineCache, or VK_NULL_HANDLE. Its contents are
   * merged into the device cache at creation; pcache never writes into it
   * (no merge, so it never races the app's own use of it) and does not
   * keep it: the app may destroy it once pcache_device_create returns,
   * except in pass-through, where every pipeline is created with it. */
  VkPipelineCache pipeline_cache;
  /* A file of the app's choice that keeps the device cache between runs,
   * with or without a daemon: read at creation (checked first: its
   * checksum, length, device key and the driver's cache header; a file
   * that fails is ignored, see pcache_device_cache_file_status), written
   * at pcache_device_flush and pcache_device_destroy when the cache
   * changed (a temporary file renamed over it, so a crash never leaves a
   * half-written one). NULL: none. Copied. Not used in pass-through. */
  const char *cache_path;
  /* What a true miss of a complete graphics pipeline does (nothing from
   * the daemon, nothing built here): PCACHE_FAST_LINK_NEVER (0, compile it
   * in the caller's thread), PCACHE_FAST_LINK_THEN_OPTIMIZE or
   * PCACHE_FAST_LINK_WAIT (see the enum). Any other mode needs the app to
   * have enabled VK_EXT_graphics_pipeline_library (and VK_KHR_pipeline_
   * library) with its graphicsPipelineLibrary feature on the device, which
   * pcache cannot see: set it only then. A device without the feature or
   * without fast linking, or an instance below Vulkan 1.1, gets NEVER. */
  uint32_t fast_link;
  /* PCACHE_FAST_LINK_THEN_OPTIMIZE: how many background threads compile
   * optimized pipelines (0: 1; at most 8), and how many compiles they may
   * start per frame, between two pcache_device_end_frame calls (0: 4), so
   * a burst of misses cannot take the CPU from the frames. */
  uint32_t fast_link_threads;
  uint32_t fast_link_per_frame;
  /* Since 0.4. Nonzero if the device was created with the
   * pipelineCreationCacheControl feature enabled (Vulkan 1.3, or
   * VK_EXT_pipeline_creation_cache_control). A pipeline this context has
   * not built yet and did not prefetch is then first asked of the driver's
   * own caches (its in-memory and disk caches), with
   * VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT: a hit costs
   * what it costs without pcache, a miss a few microseconds, after which
   * the daemon's blob or a compile follows as before (docs/client.md,
   * "Driver first"). 0: the driver is not asked first. $PCACHE_DRIVER_FIRST=0
   * turns it off. */
  int cache_control;
  /* Since 0.4. Nonzero if the device was created with VK_KHR_pipeline_binary
   * and VK_KHR_maintenance5 enabled, with their pipelineBinaries and
   * maintenance5 features, on Vulkan 1.3 (instance and device). pcache then
   * stores each pipeline as the driver's pipeline binaries rather than as
   * VkPipelineCache data: a compile captures them, costing about 1% where a
   * compile into a cache of pcache's own cost 23% (on NVIDIA), and a daemon
   * hit creates the pipeline from them (docs/client.md, "Pipeline
   * binaries"). There is no start-up prefetch, mapped segment or snapshot
   * then: pair it with cache_control, whose driver-first probe serves warm
   * runs. Ignored with fast_link, and on RADV before Mesa 24.3 (its global
   * pipeline key was wrong). 0: VkPipelineCache data, as before.
   * $PCACHE_BINARIES=0 turns it off. */
  int pipeline_binary;
} pcache_device_info;

/* pcache_device_info.fast_link: graphics pipeline libraries on a miss
 * (docs/client.md, "Misses without a stall"). */
enum {
  PCACHE_FAST_LINK_NEVER = 0,
  /* The four part libraries (each found in the context by its content, or
   * built), linked without link-time optimization and returned at once;
   * the optimized pipeline (the same libraries linked with it) is compiled
   * in the background and takes the linked one's place at
   * pcache_device_end_frame. */
  PCACHE_FAST_LINK_THEN_OPTIMIZE = 1,
  /* The part libraries as above, linked with link-time optimization in the
   * caller's thread: no swap, but a new combination of known parts costs
   * only the link. */
  PCACHE_FAST_LINK_WAIT = 2,
};

/* pcache_device_info.pipeline_ownership */
enum {
  /* The context owns every pipeline it returns, and identical state gets
   * the same handle. pcache_release_pipeline frees one early; the rest go
   * with pcache_device_destroy. The app must not call vkDestroyPipeline on
   * them. */
  PCACHE_PIPELINES_SHARED = 0,
  /* Plain Vulkan: every successful call returns a new pipeline (built
   * through the same caches, so a repeat is a cache hit) that the app
   * owns and destroys with vkDestroyPipeline (or pcache_release_pipeline,
   * which does the same). The tiers are not available. */
  PCACHE_PIPELINES_APP = 1,
};

/*
 * pcache_device_create - the context for one VkDevice. Creates its
 * VkPipelineCache and seeds it with the daemon's Prefetch for (device, app)
 * (on NVIDIA with driver first, the device's upload thread does that from
 * the driver's first miss instead: docs/client.md "The start-up
 * prefetch"): each blob is checked (checksum, then header against this
 * device) before the driver sees it, loaded into its own cache and merged
 * separately, so a bad blob loses only itself and is reported. client may be NULL (local
 * only). Never fails because of the daemon, nor because of cache_path.
 * When get_instance_proc_addr is NULL, vkGetInstanceProcAddr is taken from
 * libvulkan.so.1, loaded with dlopen (libpcache does not link it and never
 * looks the name up among the program's globals, so a volk-style app's
 * variables named like Vulkan functions are never called).
 * Returns 0, -ENOMEM, -EINVAL, -ENOENT (no get_instance_proc_addr and no
 * libvulkan.so.1 to load), or PCACHE_EVULKAN when a Vulkan call failed: its
 * VkResult is then stored in *info->ret_vk_result (since 0.3; until 0.2
 * this was -EIO). Thread-safe with respect to other devices.
 */
PCACHE_API int pcache_device_create(pcache_client *client,
                                    const pcache_device_info *info,
                                    pcache_device **ret_device);

/*
 * pcache_device_destroy - destroy every pipeline the context owns (with
 * PCACHE_PIPELINES_SHARED: those not released; with PCACHE_PIPELINES_APP
 * none, they are the app's) and its VkPipelineCaches, after saving
 * cache_path and waiting up to the client's timeout for queued uploads.
 * Objects made with the wrappers below are the app's and stay alive.
 * Accepts NULL. Externally synchronized.
 */
PCACHE_API void pcache_device_destroy(pcache_device *device);

/*
 * pcache_device_pipeline_cache - a VkPipelineCache for pipelines the app
 * builds itself with vkCreate*Pipelines. It is made on the first call from
 * what the device cache holds then, and pcache never merges into it
 * afterwards: vkMergePipelineCaches needs its destination externally
 * synchronized, and the app has no lock to take, so the app may use this
 * cache from any number of threads while pcache works. Its contents join
 * cache_path when it is saved. Owned by the context (destroyed with it); in
 * pass-through, the info's pipeline_cache. VK_NULL_HANDLE when the driver
 * refused to make it (vkCreate*Pipelines accepts that too). Thread-safe.
 */
PCACHE_API VkPipelineCache pcache_device_pipeline_cache(const pcache_device *device);

/*
 * pcache_device_flush - wait until queued uploads have been acknowledged
 * by the daemon, or the client's timeout passes, then save cache_path if
 * the device has one and its cache changed. Returns 0 when the queue is
 * empty (always, when local only), -ETIMEDOUT otherwise, or the -errno of
 * writing cache_path. Thread-safe.
 */
PCACHE_API int pcache_device_flush(pcache_device *device);

/*
 * pcache_device_end_frame - publish pipelines created since the last call
 * so later hits on them take no lock, and reset the per-frame counter.
 * Call once a frame from one thread (externally synchronized with itself;
 * other threads may keep creating and looking up pipelines).
 */
PCACHE_API void pcache_device_end_frame(pcache_device *device);

/* Counters. New fields are only ever appended (pcache_device_get_stats). */
typedef struct pcache_stats {
  /* Since 0.1: every field below. */
  uint64_t hits_app_key;       /* tier hits by the app's integer keys */
  uint64_t hits_create_info;   /* tier hits by full create info (hashed) */
  uint64_t misses;             /* in-process misses (pipelines created) */
  uint64_t daemon_hits;        /* misses whose blob the daemon had */
  uint64_t driver_cache_hits;  /* creation feedback said the cache hit */
  uint64_t compiles;           /* pipelines the driver had to compile */
  uint64_t unhashable;         /* built without a state hash */
  uint64_t upload_queue;       /* pipelines waiting to be uploaded */
  uint64_t uploaded;           /* pipelines the daemon acknowledged */
  uint64_t prefetched;         /* blobs merged at creation */
  uint64_t rejected_blobs;     /* blobs refused before or by the driver */
  uint64_t pipelines_this_frame;
  uint64_t pipelines;          /* pipelines the context owns */
  uint64_t snapshot_loaded;    /* state hashes the (device, app) snapshot
                                  loaded at creation covered (0: none) */
  uint64_t snapshots_uploaded; /* snapshots the daemon acknowledged */
} pcache_stats;

/* Counters added in 0.3, in a struct of their own: apps built against 0.1
 * size pcache_stats by that header and check that the library writes
 * nothing past it (tests/abi), so pcache_stats keeps its 0.1 size. New
 * fields are only ever appended (pcache_device_get_counters). */
typedef struct pcache_counters {
  /* Since 0.3: every field below. */
  uint64_t released;          /* pipelines freed by pcache_release_pipeline */
  uint64_t reused_handles;    /* the driver returned the handle of a pipeline
                                 the context still owned: the app destroyed a
                                 context-owned pipeline itself ("Pipelines
                                 and who owns them") */
  uint64_t cache_file_loaded; /* bytes of cache data cache_path gave */
  uint64_t cache_file_saved;  /* times cache_path was written */
  /* Misses without a stall (pcache_device_info.fast_link): */
  uint64_t fast_links;        /* misses answered by a fast-linked pipeline */
  uint64_t optimized;         /* optimized pipelines compiled in the background */
  uint64_t swaps;             /* optimized pipelines swapped in at end_frame */
  uint64_t swap_ns_total;     /* sum over swaps of the time from the fast link to
                                 the swap (mean: swap_ns_total / swaps) */
  uint64_t swap_ns_max;       /* the longest of them */
  uint64_t swap_frames_total; /* sum over swaps of the end_frame calls from the
                                 fast link to the swap, the swap's included */
  uint64_t parts_made;        /* library parts the context built (fetched from the
                                 daemon or compiled), for a miss or a prepare */
  uint64_t links_only;        /* fast-linked misses whose four parts were all in
                                 the context already: a link and nothing else */
  uint64_t prepared;          /* pcache_prepare_graphics_pipeline calls that left
                                 every part in the context */
  /* Since 0.4: */
  uint64_t upload_dropped;    /* pipelines never uploaded: larger than any request
                                 the daemon takes, refused by it, or past the
                                 upload queue's bound (docs/client.md, "Uploads") */
  uint64_t driver_hits;       /* misses the driver's own caches answered when
                                 asked first (pcache_device_info.cache_control) */
  uint64_t staged;            /* pipelines uploaded as staged builds: a description
                                 the daemon's replayer builds the blob from
                                 (docs/client.md, "Staging") */
} pcache_counters;

/*
 * pcache_device_cache_file_status - what became of cache_path at creation:
 * 0 when it was loaded, or there was none or no file yet; else why the
 * file was refused and ignored (never handed to the driver): -errno from
 * reading it, PCACHE_ECACHE_FILE (not a pcache cache file, or another
 * format version), PCACHE_EBAD_SIZE (truncated or grown), PCACHE_ECHECKSUM,
 * PCACHE_EWRONG_DEVICE (another device or driver version), the driver
 * header's PCACHE_E* codes, or PCACHE_EVULKAN (the driver refused it). A
 * refused file is replaced at the next save. Thread-safe.
 */
PCACHE_API int pcache_device_cache_file_status(const pcache_device *device);

/*
 * pcache_device_get_stats - a snapshot of the counters. A macro: it passes
 * sizeof *ret_stats as the app compiled it, and the library fills only the
 * fields that fit, so an app built against an older header keeps working
 * with a newer library. Returns 0, or -EINVAL when device or ret_stats is
 * NULL or stats_size is smaller than the first version's struct.
 * Thread-safe. (The exported function of the same name, for callers
 * without the header, fills the first version's fields.)
 */
PCACHE_API int pcache_device_get_stats_sized(const pcache_device *device,
                                             pcache_stats *ret_stats, size_t stats_size);
PCACHE_API int pcache_device_get_stats(const pcache_device *device,
                                       pcache_stats *ret_stats);
#define pcache_device_get_stats(device, ret_stats)                                                 \
  pcache_device_get_stats_sized((device), (ret_stats), sizeof *(ret_stats))

/*
 * pcache_device_get_counters - pcache_counters, sized by the caller as
 * pcache_device_get_stats is (a macro passing sizeof *ret_counters).
 * Returns 0, or -EINVAL when device or ret_counters is NULL or the size is
 * smaller than the first version's. Thread-safe.
 */
PCACHE_API int pcache_device_get_counters_sized(const pcache_device *device,
                                                pcache_counters *ret_counters, size_t size);
#define pcache_device_get_counters(device, ret_counters)                                           \
  pcache_device_get_counters_sized((device), (ret_counters), sizeof *(ret_counters))

/* ------------------------------------------------------- object wrappers */

/*
 * Each wrapper creates the Vulkan object exactly as vkCreate* would and
 * remembers its content hash, so pipelines that point at it can be
 * described by content, never by handle. The object belongs to the app:
 * destroy it with the matching pcache_destroy_* (which forgets the hash).
 * Objects not made through a wrapper make pipelines that use them
 * unhashable (still built, never uploaded). Thread-safe.
 */
PCACHE_API VkResult pcache_create_shader_module(pcache_device *device,
                                                const VkShaderModuleCreateInfo *info,
                                                const VkAllocationCallbacks *allocator,
                                                VkShaderModule *ret_module);
PCACHE_API void pcache_destroy_shader_module(pcache_device *device, VkShaderModule module,
                                             const VkAllocationCallbacks *allocator);

PCACHE_API VkResult pcache_create_descriptor_set_layout(
    pcache_device *device, const VkDescriptorSetLayoutCreateInfo *info,
    const VkAllocationCallbacks *allocator, VkDescriptorSetLayout *ret_layout);
PCACHE_API void pcache_destroy_descriptor_set_layout(pcache_device *device,
                                                     VkDescriptorSetLayout layout,
                                                     const VkAllocationCallbacks *allocator);

PCACHE_API VkResult pcache_create_pipeline_layout(pcache_device *device,
                                                  const VkPipelineLayoutCreateInfo *info,
                                                  const VkAllocationCallbacks *allocator,
                                                  VkPipelineLayout *ret_layout);
PCACHE_API void pcache_destroy_pipeline_layout(pcache_device *device, VkPipelineLayout layout,
                                               const VkAllocationCallbacks *allocator);

PCACHE_API VkResult pcache_create_render_pass(pcache_device *device,
                                              const VkRenderPassCreateInfo *info,
                                              const VkAllocationCallbacks *allocator,
                                              VkRenderPass *ret_render_pass);
PCACHE_API VkResult pcache_create_render_pass2(pcache_device *device,
                                               const VkRenderPassCreateInfo2 *info,
                                               const VkAllocationCallbacks *allocator,
                                               VkRenderPass *ret_render_pass);
PCACHE_API void pcache_destroy_render_pass(pcache_device *device, VkRenderPass render_pass,
                                           const VkAllocationCallbacks *allocator);

PCACHE_API VkResult pcache_create_sampler(pcache_device *device,
                                          const VkSamplerCreateInfo *info,
                                          const VkAllocationCallbacks *allocator,
                                          VkSampler *ret_sampler);
PCACHE_API void pcache_destroy_sampler(pcache_device *device, VkSampler sampler,
                                       const VkAllocationCallbacks *allocator);

/* -------------------------------------------------------------- pipelines */

/*
 * Pipelines and who owns them (pcache_device_info.pipeline_ownership).
 *
 * PCACHE_PIPELINES_SHARED (the default): a pipeline belongs to the context.
 * Two calls with identical state (equal state hashes) return the same
 * handle, so per-handle bookkeeping (debug names, a map from handle to
 * material) sees one pipeline for both; choose PCACHE_PIPELINES_APP to get
 * a handle per call instead. pcache_release_pipeline destroys one early
 * (hot reload, streaming): for every holder of the handle, since it is one
 * pipeline, and every tier entry that pointed at it is forgotten, so the
 * next request of that state builds a new one (from the device cache,
 * without compiling). The cache data stays: releasing frees the pipeline,
 * not what the daemon or cache_path keep.
 *
 * PCACHE_PIPELINES_APP: plain Vulkan ownership. Each call returns a new
 * pipeline the app destroys with vkDestroyPipeline, as if it had called
 * vkCreate*Pipelines (which, with pass-through, it has). Code written for
 * this mode works unchanged with pcache on, off (pass-through) or removed.
 *
 * Misuse pcache can see: releasing a pipeline it does not own (twice, or
 * never its own) returns PCACHE_ENOT_FOUND and destroys nothing. A
 * context-owned pipeline that the app destroyed with vkDestroyPipeline is
 * invisible to pcache until the driver hands the same handle value out
 * again: pcache then forgets the dead pipeline's tier entries (so they do
 * not return a different pipeline) and counts it (reused_handles). What it
 * cannot see: a destroyed pipeline whose handle never comes back is
 * destroyed a second time by pcache_device_destroy, which the driver may
 * report as heap corruption; run with VK_LAYER_KHRONOS_validation to have
 * the first destroy named (VUID-vkDestroyPipeline-pipeline-parameter at
 * the second), or use PCACHE_PIPELINES_APP.
 */

/*
 * pcache_prepare_graphics_pipeline - ahead of a complete graphics
 * pipeline's first use, the four VK_EXT_graphics_pipeline_library parts a
 * fast-linked miss of it needs (vertex input, pre-rasterization shaders,
 * fragment shader, fragment output), each found in the context, fetched
 * from the daemon or compiled (and uploaded, keyed by its own part hash),
 * in the calling thread; nothing is linked and no pipeline is returned.
 * What ANGLE does when a program is linked, before any draw: call it from
 * a loading or worker thread once the shaders and state are known, and the
 * first pcache_get_graphics_pipeline of that state only links (or, with
 * the daemon's optimized blob, links with optimization from the cache).
 * A later pipeline that shares a part (the same fragment shader and state
 * under another blend) finds that part too. The context keeps the parts
 * until it is destroyed. Same create info rules as
 * pcache_get_graphics_pipeline; info->layout must outlive the call only.
 * Returns VK_SUCCESS when every part is in the context;
 * VK_ERROR_FEATURE_NOT_PRESENT when the context does not fast-link
 * (fast_link NEVER, the device lacks it, pass-through) or does not split
 * this create info (create flags, creation feedback, flags2, mesh
 * shaders, rasterizer discard, a pNext it cannot describe): nothing was
 * built, and its miss compiles as before; or the driver's error for a
 * part. Thread-safe.
 */
PCACHE_API VkResult pcache_prepare_graphics_pipeline(pcache_device *device,
                                                     const VkGraphicsPipelineCreateInfo *info);

/*
 * pcache_get_graphics_pipeline / pcache_get_compute_pipeline - the pipeline
 * for this create info: from the in-process tiers when it was built before
 * (a hit takes no lock), else fetched from the daemon if it has the blob,
 * else compiled and queued for upload. info->basePipelineHandle is honoured
 * but not hashed (a derivative is the same pipeline whatever its base);
 * the flags are hashed where they change what the driver builds or what
 * the app may do with the pipeline (docs/pipeline-desc.md). The owner is
 * the context or the app, as pipeline_ownership says. Concurrent calls
 * with the same state compile once; the others wait for that one.
 * Returns what vkCreate*Pipelines would. Thread-safe.
 */
PCACHE_API VkResult pcache_get_graphics_pipeline(pcache_device *device,
                                                 const VkGraphicsPipelineCreateInfo *info,
                                                 VkPipeline *ret_pipeline);
PCACHE_API VkResult pcache_get_compute_pipeline(pcache_device *device,
                                                const VkComputePipelineCreateInfo *info,
                                                VkPipeline *ret_pipeline);

/*
 * pcache_create_graphics_pipelines / pcache_create_compute_pipelines -
 * count pipelines at once, as vkCreate*Pipelines makes them: each as
 * pcache_get_*_pipeline would, in order, so an element that is a
 * derivative (VK_PIPELINE_CREATE_DERIVATIVE_BIT) may name an earlier one
 * by basePipelineIndex (it must be below its own index and that element
 * must allow derivatives, as Vulkan requires) or any pipeline by
 * basePipelineHandle. Every element is tried (all up to the first failure
 * with VK_PIPELINE_CREATE_EARLY_RETURN_ON_FAILURE_BIT); a failed one is
 * VK_NULL_HANDLE in ret_pipelines. One whose base (by index) failed is
 * built as a pipeline of its own: a derivative is only a hint. Returns VK_SUCCESS, or the first
 * failure's result (VK_PIPELINE_COMPILE_REQUIRED included); the elements that succeeded are valid
 * and owned as pipeline_ownership says, whatever the result. VK_ERROR_INITIALIZATION_FAILED for
 * NULL arguments or a basePipelineIndex out of range. Thread-safe.
 */
PCACHE_API VkResult pcache_create_graphics_pipelines(pcache_device *device, uint32_t count,
                                                     const VkGraphicsPipelineCreateInfo *infos,
                                                     VkPipeline *ret_pipelines);
PCACHE_API VkResult pcache_create_compute_pipelines(pcache_device *device, uint32_t count,
                                                    const VkComputePipelineCreateInfo *infos,
                                                    VkPipeline *ret_pipelines);

/*
 * pcache_release_pipeline - destroy a pipeline the context returned. With
 * PCACHE_PIPELINES_SHARED: for every holder of the handle, and the tiers
 * forget it (see "Pipelines and who owns them"); returns PCACHE_ENOT_FOUND,
 * destroying nothing, when the context does not own it (released already,
 * or not from this context). With PCACHE_PIPELINES_APP: vkDestroyPipeline
 * with the context's allocator, nothing checked, exactly as Vulkan.
 * VK_NULL_HANDLE is accepted (0). The app must not use the pipeline, nor
 * request its state or draw key from another thread, while this runs
 * (Vulkan's rule for vkDestroyPipeline). Returns 0, PCACHE_ENOT_FOUND or
 * -EINVAL (device NULL). Thread-safe otherwise.
 */
PCACHE_API int pcache_release_pipeline(pcache_device *device, VkPipeline pipeline);

/*
 * The app-key path. Tier 1 is the rarely changing global state (attachment
 * formats, samples, view mask, stencil mode) under a key the app chooses;
 * it selects a tier-2 table of per-draw state under the app's draw keys.
 * Select the tier once per pass, then look up per draw: a hit is one
 * lock-free probe, no hashing.
 *
 * The app promises that equal (global_key, draw_key) pairs mean equal
 * pipeline state; pcache cannot check that on the hit path.
 */
typedef struct pcache_tier pcache_tier;

/*
 * pcache_device_select_tier - the tier-2 table for global_key, created on
 * first use. Owned by the context, valid until it is destroyed.
 * Returns 0, -ENOMEM, or -EINVAL with PCACHE_PIPELINES_APP (a tier hands
 * the same pipeline to every lookup, which only the context may own).
 * Thread-safe.
 */
PCACHE_API int pcache_device_select_tier(pcache_device *device, uint64_t global_key,
                                         pcache_tier **ret_tier);

/*
 * pcache_tier_lookup - the pipeline under draw_key, or VK_NULL_HANDLE when
 * the tier has none yet. Never blocks, never hashes. Thread-safe.
 */
PCACHE_API VkPipeline pcache_tier_lookup(pcache_tier *tier, uint64_t draw_key);

/*
 * pcache_tier_get_graphics_pipeline / _compute_ - pcache_tier_lookup, and on
 * a miss the full create-info path (which may find the pipeline under its
 * state hash, fetch it from the daemon, or compile it), recorded under
 * draw_key for the next lookup. Thread-safe.
 */
PCACHE_API VkResult pcache_tier_get_graphics_pipeline(pcache_tier *tier, uint64_t draw_key,
                                                      const VkGraphicsPipelineCreateInfo *info,
                                                      VkPipeline *ret_pipeline);
PCACHE_API VkResult pcache_tier_get_compute_pipeline(pcache_tier *tier, uint64_t draw_key,
                                                     const VkComputePipelineCreateInfo *info,
                                                     VkPipeline *ret_pipeline);

#ifdef __cplusplus
}
#endif

#endif /* PCACHE_PCACHE_H */
