/* The store's integrity checks (store_check.h). The overflow page header
 * checked here is LMDB's on-disk format (MDB_DATA_VERSION 1, all of 0.9):
 * the page number (a size_t), u16 padding, u16 flags, u32 page count, then
 * the value; 16 bytes of header on 64-bit builds. Free-list records are
 * size_t arrays: a count, then page numbers. */
#include "store_check.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define PGNO_SIZE sizeof(size_t)
#define FLAGS_AT (PGNO_SIZE + 2)
#define PAGES_AT (PGNO_SIZE + 4)
#define PAGE_HEADER (PGNO_SIZE + 8)
#define P_OVERFLOW 0x04
#define FREE_DBI 0
#define MAX_DBS 64
#define EXIT_DAMAGED 1
#define EXIT_NO_CHECK 3

/* ---------------------------------------------------------- store files */

/* 0 when the file at path is (now) a regular file of ours with one link,
 * 1 with why filled when it is something else, -errno when we cannot
 * tell. Absent files are created, so LMDB finds a regular file there. */
static int file_check(const char *path, char *why, size_t why_size) {
  struct stat st;
  int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0600);
  if (fd < 0) {
    if (errno == ELOOP)
      snprintf(why, why_size, "a symbolic link");
    else if (errno == EISDIR || errno == ENXIO || errno == ENODEV)
      snprintf(why, why_size, "not a regular file (%s)", strerror(errno));
    else
      return -errno;
    return 1;
  }
  if (fstat(fd, &st) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  close(fd);
  if (!S_ISREG(st.st_mode))
    snprintf(why, why_size, "not a regular file (mode %06o)", (unsigned)st.st_mode);
  else if (st.st_uid != geteuid())
    snprintf(why, why_size, "owned by uid %u, not by uid %u", (unsigned)st.st_uid,
             (unsigned)geteuid());
  else if (st.st_nlink != 1)
    snprintf(why, why_size, "a file with %ju hard links", (uintmax_t)st.st_nlink);
  else
    return 0;
  return 1;
}

int pcd_store_files_check(const char *dir, char *why, size_t why_size) {
  char path[4200];
  int r;
  snprintf(path, sizeof path, "%s/lock.mdb", dir);
  r = file_check(path, why, why_size);
  if (r == 1) {
    /* The lock file holds only reader slots: removing the entry (never
     * what it points to) loses nothing. */
    if (unlink(path) < 0 && errno != ENOENT) {
      log_error("store: %s is %s and cannot be removed: %s", path, why, strerror(errno));
      return -errno;
    }
    log_warn("store: removed %s: it was %s, not LMDB's lock file (a link's target is left "
             "alone)",
             path, why);
    r = file_check(path, why, why_size);
  }
  if (r != 0) {
    if (r == 1)
      log_error("store: %s is still %s after it was replaced", path, why);
    return r < 0 ? r : -EEXIST;
  }
  snprintf(path, sizeof path, "%s/data.mdb", dir);
  r = file_check(path, why, why_size);
  if (r == 1) {
    char what[200];
    snprintf(what, sizeof what, "%s", why);
    snprintf(why, why_size, "data.mdb is %s", what);
  }
  return r;
}

/* --------------------------------------------------------- value checks */

/* Where the mapping of data.mdb that holds p starts, or 0 when p is not in
 * it (a page this write transaction made lives in malloc'd memory). Found
 * once in /proc/self/maps and kept: LMDB maps the file once, at open. A
 * walking child forgets its parent's (forget_map) and finds its own. */
static struct {
  uintptr_t start, end;
  dev_t dev;
  ino_t ino;
} map;

static void forget_map(void) { memset(&map, 0, sizeof map); }

static uintptr_t map_start(const struct stat *file, uintptr_t p) {
  char line[512];
  FILE *f;
  if (map.end && map.dev == file->st_dev && map.ino == file->st_ino)
    return p >= map.start && p < map.end ? map.start : 0;
  f = fopen("/proc/self/maps", "re");
  if (!f)
    return 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long s, e, off, inode;
    unsigned maj, min;
    if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &s, &e, &off, &maj, &min, &inode) != 6)
      continue;
    if (off != 0 || inode != file->st_ino || makedev(maj, min) != file->st_dev || p < s || p >= e)
      continue;
    map.start = (uintptr_t)s;
    map.end = (uintptr_t)e;
    map.dev = file->st_dev;
    map.ino = file->st_ino;
    break;
  }
  fclose(f);
  return p >= map.start && p < map.end ? map.start : 0;
}

/* The check itself, given the file's size and the page size. */
static int value_check(const struct stat *file, size_t psize, const MDB_val *v, char *why,
                       size_t why_size) {
  uintptr_t p = (uintptr_t)v->mv_data, base;
  uint64_t off, pg, want;
  size_t hdr_pgno;
  uint16_t flags;
  uint32_t pages;
  const uint8_t *hdr;
  /* A value in a leaf page follows its node header and key, so it never
   * starts right after a page header: only overflow values do (the map is
   * page-aligned). A leaf's value lies in its page, which LMDB has read. */
  if (p % psize != PAGE_HEADER || !(base = map_start(file, p)))
    return 0;
  off = p - base;
  if (off + v->mv_size > (uint64_t)file->st_size) {
    snprintf(why, why_size,
             "an overflow value at byte %" PRIu64 " runs past the end of data.mdb (%jd bytes)", off,
             (intmax_t)file->st_size);
    return 1;
  }
  pg = off / psize;
  hdr = (const uint8_t *)(p - PAGE_HEADER);
  memcpy(&hdr_pgno, hdr, PGNO_SIZE);
  memcpy(&flags, hdr + FLAGS_AT, 2);
  memcpy(&pages, hdr + PAGES_AT, 4);
  want = (PAGE_HEADER - 1 + (uint64_t)v->mv_size) / psize + 1;
  if (hdr_pgno != pg)
    snprintf(why, why_size, "overflow page %" PRIu64 " says it is page %zu", pg, hdr_pgno);
  else if (flags != P_OVERFLOW)
    snprintf(why, why_size, "overflow page %" PRIu64 " has flags 0x%x, not 0x%x", pg, flags,
             P_OVERFLOW);
  else if (pages != want)
    snprintf(why, why_size,
             "overflow page %" PRIu64 " says it spans %u pages, its %zu-byte value needs %" PRIu64,
             pg, pages, v->mv_size, want);
  else if ((pg + pages) * psize > (uint64_t)file->st_size)
    snprintf(why, why_size, "overflow pages %" PRIu64 "+%u run past the end of data.mdb", pg,
             pages);
  else
    return 0;
  return 1;
}

int pcd_store_check_value(MDB_env *env, const MDB_val *v, char *why, size_t why_size) {
  MDB_stat ms;
  struct stat st;
  int fd;
  if (mdb_env_stat(env, &ms) != 0 || mdb_env_get_fd(env, &fd) != 0 || fstat(fd, &st) < 0)
    return 0; /* nothing to check against; LMDB's own errors follow */
  return value_check(&st, ms.ms_psize, v, why, why_size);
}

void pcd_store_on_assert(MDB_env *env, const char *msg) {
  const char *path = NULL;
  mdb_env_get_path(env, &path);
  log_error("store: LMDB found %s damaged (%s) and aborts pcached; the next start checks the "
            "store and moves it aside",
            path ? path : "the store", msg);
}

/* Whether stderr is the journal, known before the handler can run: the
 * handler may only write (common/log.h says which prefix where). */
static volatile sig_atomic_t sigbus_to_journal;

#define SIGBUS_TEXT                                                                                \
  "store: SIGBUS: a page of data.mdb could not be read (the file was truncated or its disk "       \
  "failed); pcached dies now, and its next start checks the store and moves it aside\n"

static void on_sigbus(int sig) {
  static const char journal[] = "<3>" SIGBUS_TEXT, plain[] = "error: " SIGBUS_TEXT;
  (void)sig;
  if (sigbus_to_journal)
    (void)!write(STDERR_FILENO, journal, sizeof journal - 1);
  else
    (void)!write(STDERR_FILENO, plain, sizeof plain - 1);
  /* SA_RESETHAND: returning retries the access, which ends the process
   * with the default action (and a core, where enabled). */
}

void pcd_store_guard_faults(void) {
  struct sigaction sa = {.sa_handler = on_sigbus, .sa_flags = SA_RESETHAND};
  sigbus_to_journal = pcache__log_stderr_is_journal();
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, NULL);
}

/* ------------------------------------------------------- the child walk */

static int report_fd = -1;
static MDB_env *child_env; /* closed before the child exits: that frees its reader slot */

/* One line to the parent: progress ("walking X") or the verdict. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char buf[600];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof buf - 2)
    n = sizeof buf - 2;
  buf[n++] = '\n';
  (void)!write(report_fd, buf, (size_t)n);
}

static void child_assert(MDB_env *env, const char *msg) {
  (void)env;
  say("assert LMDB assertion failed: %s", msg);
}

typedef struct walk {
  MDB_txn *txn;
  struct stat file;
  size_t psize;
  uint64_t last_pgno;
} walk;

/* A free-list record: a count, then that many page numbers. */
static int free_record_check(const walk *w, const MDB_val *v) {
  size_t n, pg;
  if (v->mv_size < PGNO_SIZE || v->mv_size % PGNO_SIZE)
    return 1;
  memcpy(&n, v->mv_data, PGNO_SIZE);
  if (n != v->mv_size / PGNO_SIZE - 1)
    return 1;
  for (size_t i = 1; i <= n; i++) {
    memcpy(&pg, (const uint8_t *)v->mv_data + PGNO_SIZE * i, PGNO_SIZE);
    if (pg < 2 || pg > w->last_pgno)
      return 1;
  }
  return 0;
}

/* Every record of one database. Returns the child's exit code. */
/* A failure to read the store: damage only when LMDB says its bytes are
 * bad; a resource LMDB could not get (memory for its map, a reader slot,
 * a descriptor) leaves the store unchecked, never called damaged. */
static int child_failed(const char *what, int rc) {
  if (pcd_store_rc_damaged(rc)) {
    say("damaged %s: %s", what, mdb_strerror(rc));
    return EXIT_DAMAGED;
  }
  say("unchecked %s: %s", what, mdb_strerror(rc));
  return EXIT_NO_CHECK;
}

static int walk_db(walk *w, MDB_dbi dbi, const char *name) {
  MDB_cursor *cur;
  MDB_stat ms;
  MDB_val k, v;
  char why[300];
  uint64_t n = 0;
  int rc;
  say("walking %s", name);
  if ((rc = mdb_stat(w->txn, dbi, &ms)) || (rc = mdb_cursor_open(w->txn, dbi, &cur))) {
    snprintf(why, sizeof why, "cannot read database %s", name);
    return child_failed(why, rc);
  }
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    n++;
    if (value_check(&w->file, w->psize, &k, why, sizeof why) ||
        value_check(&w->file, w->psize, &v, why, sizeof why)) {
      say("damaged database %s: %s", name, why);
      return EXIT_DAMAGED;
    }
    if (dbi == FREE_DBI && free_record_check(w, &v)) {
      say("damaged the free-page list names pages outside data.mdb");
      return EXIT_DAMAGED;
    }
  }
  mdb_cursor_close(cur);
  if (rc != MDB_NOTFOUND) {
    snprintf(why, sizeof why, "walking database %s", name);
    return child_failed(why, rc);
  }
  if (n != ms.ms_entries) {
    say("damaged database %s holds %" PRIu64 " records, its header says %zu", name, n,
        ms.ms_entries);
    return EXIT_DAMAGED;
  }
  return 0;
}

int pcd_store_rc_damaged(int rc) {
  return rc == MDB_CORRUPTED || rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ||
         rc == MDB_PAGE_NOTFOUND || rc == MDB_INCOMPATIBLE;
}

static int child_walk(const char *dir) {
  char names[MAX_DBS][512];
  MDB_env *env;
  MDB_envinfo info;
  MDB_stat ms;
  MDB_dbi main_dbi;
  MDB_cursor *cur;
  MDB_val k, v;
  walk w = {0};
  int n = 0, rc, fd;

  forget_map();
  if (mdb_env_create(&env))
    return EXIT_NO_CHECK;
  child_env = env;
  if (mdb_env_set_maxdbs(env, MAX_DBS) || mdb_env_set_assert(env, child_assert))
    return EXIT_NO_CHECK;
  say("opening");
  /* Read-only, with a reader slot: a daemon on another socket may share
   * the directory, and its writer must not reuse pages we are reading. */
  if ((rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOTLS, 0600)))
    return child_failed("LMDB cannot open it", rc);
  if (mdb_env_info(env, &info) || mdb_env_stat(env, &ms) || mdb_env_get_fd(env, &fd) ||
      fstat(fd, &w.file) < 0)
    return EXIT_NO_CHECK;
  w.psize = ms.ms_psize;
  w.last_pgno = info.me_last_pgno;
  /* LMDB maps the whole map size and trusts that the file holds every
   * page it reaches; past the end of the file a read is SIGBUS. A file
   * shorter than the last page in use is not damage by itself: a page a
   * transaction allocated and freed again ("loose") counts in the last
   * page but is never written, so a sound store can end a page or more
   * early. The walk below reads every reachable page; a truncation that
   * cut one crashes it, and the parent then says the store was short. */
  if ((uint64_t)w.file.st_size < (w.last_pgno + 1) * w.psize)
    say("short data.mdb is %jd bytes, but its last page in use (%" PRIu64 ") ends at byte %" PRIu64,
        (intmax_t)w.file.st_size, w.last_pgno, (w.last_pgno + 1) * w.psize);
  if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &w.txn)) ||
      (rc = mdb_dbi_open(w.txn, NULL, 0, &main_dbi)))
    return child_failed("cannot read it", rc);
  if ((rc = walk_db(&w, FREE_DBI, "free-page list")) || (rc = walk_db(&w, main_dbi, "main")))
    return rc;
  /* The named databases are the main database's records. */
  if ((rc = mdb_cursor_open(w.txn, main_dbi, &cur)))
    return EXIT_NO_CHECK;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && n < MAX_DBS;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size >= sizeof names[0] || memchr(k.mv_data, 0, k.mv_size))
      continue;
    memcpy(names[n], k.mv_data, k.mv_size);
    names[n++][k.mv_size] = '\0';
  }
  mdb_cursor_close(cur);
  for (int i = 0; i < n; i++) {
    MDB_dbi dbi;
    rc = mdb_dbi_open(w.txn, names[i], 0, &dbi);
    if (rc == MDB_INCOMPATIBLE)
      continue; /* a plain record, not a database */
    if (rc) {
      char what[600];
      snprintf(what, sizeof what, "cannot open database %s", names[i]);
      return child_failed(what, rc);
    }
    if ((rc = walk_db(&w, dbi, names[i])))
      return rc;
  }
  say("sound");
  return 0;
}

/* ------------------------------------------------------------ the parent */

/* The child's last line that starts with prefix, without it (or NULL). */
static const char *last_line(char *buf, const char *prefix) {
  const char *found = NULL;
  size_t plen = strlen(prefix);
  char *save = NULL;
  for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    if (strncmp(line, prefix, plen) == 0)
      found = line + plen;
  return found;
}

int pcd_store_check_dir(const char *dir, char *why, size_t why_size) {
  char path[4200], out[8192], copy[8192];
  const char *damaged, *assert_msg, *short_msg, *where;
  struct stat st;
  struct timespec t0, t1;
  size_t used = 0;
  int pipefd[2], status;
  pid_t pid;

  snprintf(path, sizeof path, "%s/data.mdb", dir);
  if (stat(path, &st) < 0)
    return errno == ENOENT ? 0 : -errno;
  if (st.st_size == 0)
    return 0; /* a new store LMDB has not written yet */
  if (pipe2(pipefd, O_CLOEXEC) < 0)
    return -errno;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid = fork();
  if (pid < 0) {
    int e = errno;
    close(pipefd[0]);
    close(pipefd[1]);
    return -e;
  }
  if (pid == 0) {
    /* Whatever LMDB does to this process on a bad page ends here. */
    signal(SIGBUS, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
    close(pipefd[0]);
    report_fd = pipefd[1];
    status = child_walk(dir);
    if (child_env)
      mdb_env_close(child_env);
    _exit(status);
  }
  close(pipefd[1]);
  for (;;) {
    ssize_t n = read(pipefd[0], out + used, sizeof out - 1 - used);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    used += (size_t)n;
    if (used == sizeof out - 1) {
      /* Keep the tail: the verdict comes last. */
      memmove(out, out + used / 2, used - used / 2);
      used -= used / 2;
    }
  }
  out[used] = '\0';
  close(pipefd[0]);
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -errno;

  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    log_info("store: walked %s (%jd KiB) in %lld ms: sound", path, (intmax_t)(st.st_size >> 10),
             (long long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
    return 0;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_NO_CHECK) {
    const char *unchecked;
    memcpy(copy, out, used + 1);
    unchecked = last_line(copy, "unchecked ");
    snprintf(why, why_size, "%s", unchecked ? unchecked : "");
    return -EIO;
  }
  memcpy(copy, out, used + 1);
  damaged = last_line(copy, "damaged ");
  if (damaged) {
    snprintf(why, why_size, "%s", damaged);
    return 1;
  }
  memcpy(copy, out, used + 1);
  assert_msg = last_line(copy, "assert ");
  snprintf(why, why_size, "%s", assert_msg ? assert_msg : "");
  memcpy(copy, out, used + 1);
  short_msg = last_line(copy, "short ");
  if (short_msg)
    snprintf(why + strlen(why), why_size - strlen(why), "%s%s", *why ? "; " : "", short_msg);
  memcpy(copy, out, used + 1);
  where = last_line(copy, "walking ");
  if (WIFSIGNALED(status))
    snprintf(why + strlen(why), why_size - strlen(why), "%sreading it crashed (%s) %s%s",
             *why ? "; " : "", strsignal(WTERMSIG(status)),
             where ? "walking database " : "opening it", where ? where : "");
  else
    snprintf(why + strlen(why), why_size - strlen(why), "%sthe check exited with status %d",
             *why ? "; " : "", WEXITSTATUS(status));
  return 1;
}
