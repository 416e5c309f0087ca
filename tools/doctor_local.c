/* pcachectl doctor: what this machine and this environment give pcache
 * and the drivers before any program runs: XDG_RUNTIME_DIR (where the
 * socket lives), the cache home (where the store and the drivers' own
 * shader caches live), and the drivers' own disk-cache settings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/parse.h"
#include "tools/doctor.h"

static const char no_runtime_fix[] =
    "log in through a session that sets it (pam_systemd makes /run/user/UID), or give pcached "
    "and every program the same socket: export PCACHE_SOCKET=$HOME/.cache/pcache/socket "
    "(docs/operations.md, \"Without a systemd user manager\")";

void doctor_check_runtime_dir(doctor *d) {
  const char *dir = doctor_env("XDG_RUNTIME_DIR"), *socket = doctor_env("PCACHE_SOCKET");
  struct stat st;
  char *fix;
  if (!dir) {
    if (socket || d->c->socket_arg)
      doctor_add(d, "runtime_dir", DOCTOR_NOTE,
                 "Programs find pcached through PCACHE_SOCKET alone then: each one needs the "
                 "same value in its environment.",
                 NULL, "XDG_RUNTIME_DIR is not set; the socket is named otherwise (%s)",
                 d->c->socket_arg ? "--socket" : "PCACHE_SOCKET");
    else
      doctor_add(d, "runtime_dir", DOCTOR_PROBLEM,
                 "Without it there is no default socket ($XDG_RUNTIME_DIR/pcache/socket): "
                 "pcached will not start without --socket, and the Vulkan layer and libpcache "
                 "cannot find a daemon.",
                 no_runtime_fix, "XDG_RUNTIME_DIR is not set");
    return;
  }
  if (stat(dir, &st) < 0) {
    fix = doctor_printf("log in again (the session makes it), or point XDG_RUNTIME_DIR at a "
                        "directory of your own: mkdir -m 0700 %s",
                        dir);
    doctor_add(d, "runtime_dir", DOCTOR_PROBLEM, NULL, fix, "XDG_RUNTIME_DIR=%s: %s", dir,
               strerror(errno));
    pcache__free(fix);
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    doctor_add(d, "runtime_dir", DOCTOR_PROBLEM, NULL, no_runtime_fix,
               "XDG_RUNTIME_DIR=%s is not a directory", dir);
    return;
  }
  if (st.st_uid != geteuid()) {
    doctor_add(d, "runtime_dir", DOCTOR_PROBLEM,
               "It is another user's: pcached refuses to put its socket there, and programs "
               "would look for another user's daemon. This happens after 'su' or 'sudo' without "
               "a login.",
               "use a login of your own ('su -l', 'machinectl shell USER@'), or export "
               "XDG_RUNTIME_DIR (or PCACHE_SOCKET) for this user",
               "XDG_RUNTIME_DIR=%s is owned by uid %u, not by you (uid %u)", dir,
               (unsigned)st.st_uid, (unsigned)geteuid());
    return;
  }
  if (st.st_mode & 077) {
    fix = doctor_printf("chmod 0700 %s", dir);
    doctor_add(d, "runtime_dir", (st.st_mode & 022) ? DOCTOR_PROBLEM : DOCTOR_WARNING,
               "systemd makes it 0700: only you may look into it. Others who may write to it "
               "could replace pcached's socket directory.",
               fix, "XDG_RUNTIME_DIR=%s has mode %04o", dir, (unsigned)(st.st_mode & 07777));
    pcache__free(fix);
    return;
  }
  doctor_add(d, "runtime_dir", DOCTOR_OK, NULL, NULL, "XDG_RUNTIME_DIR=%s is yours, mode 0700",
             dir);
}

/* A directory that must exist and be writable for caches to be kept. */
static void cache_dir(doctor *d, const char *check, const char *what, const char *path,
                      const char *why) {
  struct stat st;
  char *fix;
  if (stat(path, &st) < 0) {
    fix = doctor_printf("mkdir -p -m 0700 %s", path);
    doctor_add(d, check, errno == ENOENT ? DOCTOR_WARNING : DOCTOR_PROBLEM, why, fix, "%s %s: %s",
               what, path, strerror(errno));
  } else if (!S_ISDIR(st.st_mode)) {
    fix = doctor_printf("move %s away; mkdir -m 0700 %s", path, path);
    doctor_add(d, check, DOCTOR_PROBLEM, why, fix, "%s %s is not a directory", what, path);
  } else if (access(path, W_OK | X_OK) < 0) {
    fix = doctor_printf("chown $USER %s; chmod u+rwx %s", path, path);
    doctor_add(d, check, DOCTOR_PROBLEM, why, fix, "%s %s is not writable: %s", what, path,
               strerror(errno));
  } else {
    doctor_add(d, check, DOCTOR_OK, NULL, NULL, "%s %s exists and is writable", what, path);
    return;
  }
  pcache__free(fix);
}

void doctor_check_cache_home(doctor *d) {
  static const char why[] =
      "pcached's store (~/.cache/pcache) and the drivers' own shader caches (Mesa's "
      "mesa_shader_cache, NVIDIA's nvidia/GLCache) live under it by default; pcached makes "
      "what it needs, but a driver that cannot make it keeps no disk cache.";
  const char *xdg = doctor_env("XDG_CACHE_HOME"), *home = doctor_env("HOME");
  char path[4096];
  if (xdg) {
    cache_dir(d, "cache_home", "XDG_CACHE_HOME", xdg, why);
    return;
  }
  if (!home) {
    doctor_add(d, "cache_home", DOCTOR_PROBLEM, why,
               "set HOME, or XDG_CACHE_HOME and PCACHE_DATA_DIR",
               "neither XDG_CACHE_HOME nor HOME is set: there is no cache home");
    return;
  }
  snprintf(path, sizeof path, "%s/.cache", home);
  cache_dir(d, "cache_home", "the cache home", path, why);
}

/* A size as Mesa reads MESA_SHADER_CACHE_MAX_SIZE (util/disk_cache):
 * a number and K, M or G, where no suffix means G. */
static int mesa_size(const char *v, uint64_t *ret) {
  char *end;
  unsigned long long n;
  errno = 0;
  n = strtoull(v, &end, 10);
  if (end == v || errno)
    return -EINVAL;
  switch (*end) {
  case 'K':
  case 'k':
    *ret = n << 10;
    break;
  case 'M':
  case 'm':
    *ret = n << 20;
    break;
  default:
    *ret = n << 30;
  }
  return 0;
}

/* NVIDIA's __GL_SHADER_DISK_CACHE_SIZE: bytes. */
static int nvidia_size(const char *v, uint64_t *ret) {
  char *end;
  errno = 0;
  *ret = strtoull(v, &end, 10);
  return end == v || *end || errno ? -EINVAL : 0;
}

/* A size limit in the environment, and the smallest that is not a
 * warning: a limit under it makes the driver's cache evict what a large
 * program compiles in one run. */
static void size_limit(doctor *d, const char *var, const char *driver,
                       int (*parse)(const char *, uint64_t *), uint64_t at_least,
                       const char *unset_means) {
  const char *v = doctor_env(var);
  uint64_t bytes;
  char have[32], want[32], *fix, *detail;
  if (!v)
    return;
  if (parse(v, &bytes) < 0) {
    fix = doctor_printf("unset %s (%s), or give a size such as 1G", var, unset_means);
    doctor_add(d, "driver_cache", DOCTOR_WARNING, NULL, fix, "%s=%s is not a size %s reads", var, v,
               driver);
    pcache__free(fix);
    return;
  }
  pcache__format_size(bytes, have, sizeof have);
  pcache__format_size(at_least, want, sizeof want);
  if (bytes >= at_least) {
    doctor_add(d, "driver_cache", DOCTOR_OK, NULL, NULL, "%s's own shader cache may hold %s (%s)",
               driver, have, var);
    return;
  }
  fix = doctor_printf("unset %s (%s), or raise it to %s or more", var, unset_means, want);
  detail = doctor_printf(
      "pcache keeps pipelines whatever the driver's cache holds, but the driver's cache "
      "also serves what pcache does not see (OpenGL, programs without the layer); one that "
      "small evicts what one large program compiles in a run.");
  doctor_add(d, "driver_cache", DOCTOR_WARNING, detail, fix,
             "%s limits %s's own shader cache to %s", var, driver, have);
  pcache__free(fix);
  pcache__free(detail);
}

static int env_true(const char *v) {
  return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

/* A cache directory a driver was pointed at must be one it can write. */
static void dir_var(doctor *d, const char *var, const char *driver) {
  const char *v = doctor_env(var);
  struct stat st;
  char *fix;
  if (!v)
    return;
  if (stat(v, &st) == 0 && S_ISDIR(st.st_mode) && access(v, W_OK | X_OK) == 0)
    return;
  fix = doctor_printf("mkdir -p -m 0700 %s, or unset %s", v, var);
  doctor_add(d, "driver_cache", DOCTOR_WARNING,
             "A driver that cannot write its cache directory keeps no disk cache.", fix,
             "%s=%s (%s's shader cache) is not a writable directory", var, v, driver);
  pcache__free(fix);
}

void doctor_check_driver_caches(doctor *d) {
  const char *nv = doctor_env("__GL_SHADER_DISK_CACHE");
  int said = 0;
  size_t before = d->n;
  if (nv && strcmp(nv, "0") == 0) {
    doctor_add(d, "driver_cache", DOCTOR_NOTE,
               "pcache still caches Vulkan pipelines; what the driver's own cache would have "
               "kept (OpenGL, programs without the layer) compiles every time. The demo's "
               "measurements turn it off on purpose (README).",
               "unset __GL_SHADER_DISK_CACHE unless you mean it",
               "NVIDIA's own shader disk cache is off (__GL_SHADER_DISK_CACHE=0)");
    said = 1;
  }
  /* NVIDIA's variable is in bytes; its default is 128 MiB or more,
   * depending on the driver. */
  size_limit(d, "__GL_SHADER_DISK_CACHE_SIZE", "NVIDIA", nvidia_size, 128ull << 20,
             "the driver's default");
  dir_var(d, "__GL_SHADER_DISK_CACHE_PATH", "NVIDIA");
  if (env_true(doctor_env("MESA_SHADER_CACHE_DISABLE")) ||
      env_true(doctor_env("MESA_GLSL_CACHE_DISABLE"))) {
    doctor_add(d, "driver_cache", DOCTOR_NOTE,
               "pcache still caches Vulkan pipelines; Mesa compiles every shader it is not "
               "handed a pipeline cache for (OpenGL, programs without the layer). Tests "
               "turn it off on purpose.",
               "unset MESA_SHADER_CACHE_DISABLE unless you mean it",
               "Mesa's own shader cache is off (%s)",
               env_true(doctor_env("MESA_SHADER_CACHE_DISABLE")) ? "MESA_SHADER_CACHE_DISABLE"
                                                                 : "MESA_GLSL_CACHE_DISABLE");
    said = 1;
  }
  size_limit(d, "MESA_SHADER_CACHE_MAX_SIZE", "Mesa", mesa_size, 256ull << 20,
             "Mesa's default, 1G");
  dir_var(d, "MESA_SHADER_CACHE_DIR", "Mesa");
  if (!said && d->n == before)
    doctor_add(d, "driver_cache", DOCTOR_OK, NULL, NULL,
               "the drivers' own shader caches are at their defaults (no __GL_SHADER_DISK_CACHE* "
               "or MESA_SHADER_CACHE_* set)");
}
