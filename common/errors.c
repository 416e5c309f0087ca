/* pcache_strerror / pcache_err_name: one table, generated from the X-macro. */
#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

PCACHE_API const char *pcache_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
#define PCACHE__ERR_MSG(name, value, msg)                                                          \
  case value:                                                                                      \
    return msg;
    PCACHE_ERRNO_MAP(PCACHE__ERR_MSG)
#undef PCACHE__ERR_MSG
  default:
    break;
  }
  /* strerror() is not thread-safe, and strerror_r's two flavours differ;
   * strerrordesc_np (glibc 2.32) returns a static string and never fails. */
  if (err < 0 && err > -4096) {
    const char *s = strerrordesc_np(-err);
    if (s)
      return s;
  }
  return "unknown error";
}

PCACHE_API const char *pcache_err_name(int err) {
  switch (err) {
  case 0:
    return "OK";
#define PCACHE__ERR_NAME(name, value, msg)                                                         \
  case value:                                                                                      \
    return "PCACHE_E" #name;
    PCACHE_ERRNO_MAP(PCACHE__ERR_NAME)
#undef PCACHE__ERR_NAME
  default:
    break;
  }
  if (err < 0 && err > -4096) {
    const char *s = strerrorname_np(-err);
    if (s)
      return s;
  }
  return "UNKNOWN";
}

PCACHE_API const char *pcache_version_string(void) { return PCACHE_VERSION_STRING; }
