// pcache.h from C++ (issue 15): it compiles with every warning as an error
// under -pedantic, its functions link with C names, and PCACHE_STRUCT_INIT
// gives a zeroed struct of the right size (C++ has no compound literals).
#include <pcache/pcache.h>

#include <cstdio>
#include <cerrno>
#include <cstring>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (!(x)) {                                                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #x);                                 \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main() {
  pcache_client_options opts = PCACHE_STRUCT_INIT(pcache_client_options);
  pcache_device_info info = PCACHE_STRUCT_INIT(pcache_device_info);
  pcache_client *client = nullptr;
  CHECK(opts.struct_size == sizeof opts);
  CHECK(opts.socket_path == nullptr && opts.timeout_ms == 0);
  CHECK(info.struct_size == sizeof info);
  CHECK(info.pipeline_ownership == PCACHE_PIPELINES_SHARED && info.cache_path == nullptr);
  CHECK(std::strcmp(pcache_version_string(), PCACHE_VERSION_STRING) == 0);
  CHECK(std::strcmp(pcache_err_name(PCACHE_EVULKAN), "PCACHE_EVULKAN") == 0);
  opts.disable_daemon = 1;
  CHECK(pcache_client_open(&opts, &client) == 0);
  CHECK(pcache_client_connected(client) == 0);
  pcache_client_close(client);
  pcache_device_destroy(nullptr);
  CHECK(pcache_release_pipeline(nullptr, VK_NULL_HANDLE) == -EINVAL);
  std::printf("pcache.h from C++: ok\n");
  return 0;
}
