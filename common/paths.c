#include "paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* out = a followed by b (b may be ""). */
static int copy_path(char *out, size_t out_size, const char *a, const char *b) {
  int n = snprintf(out, out_size, "%s%s", a, b);
  if (n < 0 || (size_t)n >= out_size)
    return -ENAMETOOLONG;
  return 0;
}

static const char *nonempty_env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

int pcache__socket_path(const char *explicit_path, char *out, size_t out_size) {
  struct sockaddr_un sun;
  const char *env;
  int r;
  if (out_size > sizeof sun.sun_path)
    out_size = sizeof sun.sun_path;
  if (explicit_path && *explicit_path)
    r = copy_path(out, out_size, explicit_path, "");
  else if ((env = nonempty_env("PCACHE_SOCKET")))
    r = copy_path(out, out_size, env, "");
  else if ((env = nonempty_env("XDG_RUNTIME_DIR")))
    r = copy_path(out, out_size, env, "/pcache/socket");
  else
    r = -ENOENT;
  return r;
}

int pcache__data_dir(const char *explicit_dir, char *out, size_t out_size) {
  const char *env;
  if (explicit_dir && *explicit_dir)
    return copy_path(out, out_size, explicit_dir, "");
  if ((env = nonempty_env("PCACHE_DATA_DIR")))
    return copy_path(out, out_size, env, "");
  if ((env = nonempty_env("XDG_CACHE_HOME")))
    return copy_path(out, out_size, env, "/pcache");
  if ((env = nonempty_env("HOME")))
    return copy_path(out, out_size, env, "/.cache/pcache");
  return -ENOENT;
}

int pcache__mkdir_p(const char *dir, unsigned mode) {
  char buf[4096];
  size_t len = strlen(dir);
  if (len == 0)
    return -EINVAL;
  if (len >= sizeof buf)
    return -ENAMETOOLONG;
  memcpy(buf, dir, len + 1);
  while (len > 1 && buf[len - 1] == '/')
    buf[--len] = '\0';
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0700) < 0 && errno != EEXIST)
      return -errno;
    *p = '/';
  }
  if (mkdir(buf, mode) < 0) {
    struct stat st;
    if (errno != EEXIST)
      return -errno;
    /* An existing directory keeps its mode: it may be shared (1777), and
     * whether we may use it is pcache__dir_check's call, not ours to fix. */
    if (stat(buf, &st) < 0)
      return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
  }
  return chmod(buf, mode) < 0 ? -errno : 0; /* mkdir's mode is masked by umask */
}

int pcache__dir_check(const char *dir, char *why, size_t why_size) {
  struct stat st;
  uid_t me = geteuid();
  if (stat(dir, &st) < 0) {
    snprintf(why, why_size, "%s", strerror(errno));
    return -errno;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, why_size, "not a directory");
    return -ENOTDIR;
  }
  if (st.st_uid != me) {
    snprintf(why, why_size, "owned by uid %u, not by uid %u", (unsigned)st.st_uid, (unsigned)me);
    return -EPERM;
  }
  if (st.st_mode & 022) {
    snprintf(why, why_size, "writable by other users (mode %04o)", (unsigned)(st.st_mode & 07777));
    return -EPERM;
  }
  return 0;
}

int pcache__dir_parents_check(const char *dir, char *ret_parent, size_t parent_size, char *why,
                              size_t why_size) {
  char real[PATH_MAX];
  uid_t me = geteuid();
  if (!realpath(dir, real))
    return -errno;
  /* From the parent up to "/": each one could rename dir away and put
   * another in its place if someone else owns it, or if others may write
   * to it and the sticky bit does not stop them renaming what is ours. */
  for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
    struct stat st;
    if (slash == real) {
      if (real[1] == '\0')
        break;
      real[1] = '\0';
    } else {
      *slash = '\0';
    }
    if (stat(real, &st) < 0)
      return -errno;
    if (st.st_uid != me && st.st_uid != 0)
      snprintf(why, why_size, "owned by uid %u", (unsigned)st.st_uid);
    else if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
      snprintf(why, why_size, "writable by other users without the sticky bit (mode %04o)",
               (unsigned)(st.st_mode & 07777));
    else
      continue;
    snprintf(ret_parent, parent_size, "%s", real);
    return 1;
  }
  return 0;
}

int pcache__dirname(const char *path, char *out, size_t out_size) {
  const char *slash = strrchr(path, '/');
  size_t n;
  if (!slash)
    return copy_path(out, out_size, ".", "");
  n = slash == path ? 1 : (size_t)(slash - path);
  if (n >= out_size)
    return -ENAMETOOLONG;
  memcpy(out, path, n);
  out[n] = '\0';
  return 0;
}
