/* pcache_strerror / pcache_err_name: one table, generated from the X-macro. */
#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

typedef struct err_text {
  int value;
  const char *name;
  const char *msg;
} err_text;

/* clang-format off */
static const err_text codes[] = {
    {0, "OK", "success"},
#define PCACHE__ERR_TEXT(name, value, msg) {value, "PCACHE_E" #name, msg},
    PCACHE_ERRNO_MAP(PCACHE__ERR_TEXT)
#undef PCACHE__ERR_TEXT
};
/* clang-format on */

/* Our codes' entry, NULL for anything else. */
static const err_text *find(int err) {
  for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
    if (codes[i].value == err)
      return &codes[i];
  return NULL;
}

/* strerror() is not thread-safe, and strerror_r's two flavours differ;
 * strerrordesc_np and strerrorname_np (glibc 2.32) return static strings
 * and never fail. */
static const char *libc_text(int err, const char *(*text)(int), const char *unknown) {
  const char *s = err < 0 && err > -4096 ? text(-err) : NULL;
  return s ? s : unknown;
}

PCACHE_API const char *pcache_strerror(int err) {
  const err_text *e = find(err);
  return e ? e->msg : libc_text(err, strerrordesc_np, "unknown error");
}

PCACHE_API const char *pcache_err_name(int err) {
  const err_text *e = find(err);
  return e ? e->name : libc_text(err, strerrorname_np, "UNKNOWN");
}

PCACHE_API const char *pcache_version_string(void) { return PCACHE_VERSION_STRING; }
