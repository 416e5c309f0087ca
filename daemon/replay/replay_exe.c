/* Builds under the program's name (docs/replay.md). NVIDIA's driver keeps
 * its own disk cache in a file chosen by the basename of /proc/self/exe:
 * pcache-replay, building a program's pipelines, fills only its own file,
 * and the program's first launch after a driver update (or on a fleet's
 * new member) still writes its empty one, at 1.4-6.6 times a warm launch
 * (bench/RESULTS.md). So each app's program name is recorded, from the
 * executable of a client that names the app (/proc/PID/exe) or from the
 * fleet (`x:APP`, remote_sync.c), and the supervisor runs the replayer for
 * that app's items as a copy of itself under that name:
 * <data dir>/replayers/NAME/NAME (replay_supervise.c; the claims hand a
 * replayer only its name's items, ops_replay_claim.c). */
#include "replay_exe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "private_dir.h"
#include "server.h"
#include "writer.h"

/* The basename of s (a path), and its length. */
static const char *base_of(const char *s, size_t *ret_len) {
  const char *slash = strrchr(s, '/');
  const char *b = slash ? slash + 1 : s;
  *ret_len = strlen(b);
  return b;
}

void pcd_replay_exe_record(pcd_replay *rp, const char *app, const char *exe) {
  pcd_replay_exes *x;
  pcd_job *job;
  unsigned i;
  int known = 0;
  if (!rp || rp->disabled || !atomic_load(&rp->as_program) || !rp->srv->writer || !app || !*app ||
      strlen(app) > PCD_MAX_APP || !pcd_exe_name_ok(exe, strlen(exe)))
    return;
  x = &rp->exes;
  /* Once a run for each (app, name): every connection's Hello names its
   * app, and a write for each would cost the writer a transaction. */
  pthread_mutex_lock(&x->lock);
  for (i = 0; i < x->n && strcmp(x->v[i].app, app) != 0; i++)
    ;
  if (i < x->n && strcmp(x->v[i].exe, exe) == 0) {
    known = 1;
  } else {
    if (i == x->n) {
      /* A new app: a free slot, or the oldest taken over. */
      i = x->n < PCD_REPLAY_MAX_EXES ? x->n++ : x->next++ % PCD_REPLAY_MAX_EXES;
      snprintf(x->v[i].app, sizeof x->v[i].app, "%s", app);
    }
    snprintf(x->v[i].exe, sizeof x->v[i].exe, "%s", exe);
  }
  pthread_mutex_unlock(&x->lock);
  if (known || !(job = pcd_job_new(PCD_JOB_APP_EXE)))
    return;
  snprintf(job->app, sizeof job->app, "%s", app);
  snprintf(job->exe, sizeof job->exe, "%s", exe);
  log_debug("replay: app '%s' runs as '%s'", app, exe);
  pcd_writer_submit(rp->srv->writer, job);
}

void pcd_replay_exe_note(pcd_replay *rp, const char *app, uint32_t pid) {
  char path[64], exe[4096], own[sizeof rp->replayer_path];
  const char *base, *own_base;
  size_t len, own_len, dir_len;
  ssize_t n;
  if (!rp || !pid || !app || !*app || !atomic_load(&rp->as_program))
    return;
  /* The replayer's own connections name the apps it builds for: its
   * executable is no program of theirs. */
  if (pid == atomic_load(&rp->replayer_pid))
    return;
  snprintf(path, sizeof path, "/proc/%u/exe", pid);
  /* A process gone, another user's or one that is not dumpable: nothing
   * is recorded, and the replayer builds under its own name. */
  if ((n = readlink(path, exe, sizeof exe - 1)) <= 0)
    return;
  exe[n] = '\0';
  base = base_of(exe, &len);
  /* A replayer that outlived its turn (its pid is no longer the one
   * watched) is no program either: a copy under the data directory, or
   * pcache-replay itself. */
  snprintf(own, sizeof own, "%s", rp->replayer_path);
  own_base = base_of(own, &own_len);
  dir_len = strlen(rp->srv->data_dir);
  if ((len == own_len && memcmp(base, own_base, len) == 0) ||
      (strncmp(exe, rp->srv->data_dir, dir_len) == 0 &&
       strncmp(exe + dir_len, "/replayers/", 11) == 0))
    return;
  if (pcd_exe_name_ok(base, len))
    pcd_replay_exe_record(rp, app, base);
}

/* Where a bare replayer name is found: the first executable of that name
 * in PATH, as uv_spawn would find it. */
static int resolve(const char *name, char *out, size_t size) {
  const char *path = getenv("PATH");
  if (strchr(name, '/')) {
    snprintf(out, size, "%s", name);
    return 0;
  }
  for (const char *p = path ? path : ""; *p;) {
    size_t n = strcspn(p, ":");
    if (n && (size_t)snprintf(out, size, "%.*s/%s", (int)n, p, name) < size &&
        access(out, X_OK) == 0)
      return 0;
    p += n + (p[n] == ':');
  }
  return -ENOENT;
}

/* Copies src (its size and times in st) to the new file tmp, 0700. */
static int copy_file(const char *src, const struct stat *st, const char *tmp) {
  char buf[65536];
  struct timespec times[2] = {st->st_atim, st->st_mtim};
  int in = open(src, O_RDONLY | O_CLOEXEC), out, r = 0;
  ssize_t n;
  if (in < 0)
    return -errno;
  out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0700);
  if (out < 0) {
    r = -errno;
    close(in);
    return r;
  }
  while ((n = read(in, buf, sizeof buf)) > 0)
    for (ssize_t done = 0, w; done < n; done += w)
      if ((w = write(out, buf + done, (size_t)(n - done))) < 0) {
        r = -errno;
        goto out;
      }
  if (n < 0)
    r = -errno;
  /* Its times are the source's: how the next start tells it is current. */
  if (r == 0 && futimens(out, times) < 0)
    r = -errno;
out:
  close(in);
  /* Closed before it is run: a file open for writing cannot be executed
   * (ETXTBSY). */
  if (close(out) < 0 && r == 0)
    r = -errno;
  if (r < 0)
    unlink(tmp);
  return r;
}

int pcd_replay_exe_copy(pcd_replay *rp, const char *name, char *out, size_t size) {
  char src[4096], dir[4096], tmp[4200];
  struct stat s, c;
  int r;
  if (!pcd_exe_name_ok(name, strlen(name)))
    return -EINVAL;
  if ((r = resolve(rp->replayer_path, src, sizeof src)) < 0)
    return r;
  if (stat(src, &s) < 0)
    return -errno;
  if ((size_t)snprintf(dir, sizeof dir, "%s/replayers", rp->srv->data_dir) >= sizeof dir)
    return -ENAMETOOLONG;
  if ((r = pcd_private_dir(dir, "replayers' directory", "--data-dir")) < 0)
    return r;
  if ((size_t)snprintf(dir, sizeof dir, "%s/replayers/%s", rp->srv->data_dir, name) >= sizeof dir ||
      (size_t)snprintf(out, size, "%s/%s", dir, name) >= size)
    return -ENAMETOOLONG;
  if ((r = pcd_private_dir(dir, "replayer's directory", "--data-dir")) < 0)
    return r;
  /* The same size and modification time as the replayer's: the copy of
   * this pcache-replay (a hard link is the same file). An update of
   * pcache-replay makes it anew. */
  if (lstat(out, &c) == 0 && S_ISREG(c.st_mode) && c.st_uid == geteuid() &&
      c.st_size == s.st_size && c.st_mtim.tv_sec == s.st_mtim.tv_sec &&
      c.st_mtim.tv_nsec == s.st_mtim.tv_nsec)
    return 0;
  snprintf(tmp, sizeof tmp, "%s/.%s.%ld", dir, name, (long)getpid());
  unlink(tmp);
  /* A hard link costs no disk, where the file system and its owner allow
   * it (the same file system; protected_hardlinks lets a user link only
   * files they own); a copy otherwise. */
  if (link(src, tmp) < 0 && (r = copy_file(src, &s, tmp)) < 0)
    return r;
  if (rename(tmp, out) < 0) {
    r = -errno;
    unlink(tmp);
    return r;
  }
  log_info("replay: made %s, a copy of %s for the builds of the programs named %s", out, src, name);
  return 0;
}
