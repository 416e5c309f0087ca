/* The store's LMDB environment: opening it (the checks before, moving a
 * damaged store aside, a fresh one made), closing it, and transactions,
 * with the spare read transactions every Get renews. What the records
 * are and how each database is written is in the other store*.c files
 * (store_internal.h lists them). */
#include "store_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/log.h"
#include "private_dir.h"
#include "store_check.h"

/* ------------------------------------------------------------ open / close */

static int open_dbis(pcd_store *s, int *ret_fresh) {
  MDB_txn *txn;
  MDB_val k = {6, "format"}, v;
  int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
  if (rc)
    return rc;
  if ((rc = mdb_dbi_open(txn, "info", MDB_CREATE, &s->info)) ||
      (rc = mdb_dbi_open(txn, "devices", MDB_CREATE, &s->devices)) ||
      (rc = mdb_dbi_open(txn, "entries", MDB_CREATE, &s->entries)) ||
      (rc = mdb_dbi_open(txn, "blobs", MDB_CREATE, &s->blobs)) ||
      (rc = mdb_dbi_open(txn, "descs", MDB_CREATE, &s->descs)) ||
      (rc = mdb_dbi_open(txn, "modules", MDB_CREATE, &s->modules)) ||
      (rc = mdb_dbi_open(txn, "lru", MDB_CREATE, &s->lru)) ||
      (rc = mdb_dbi_open(txn, "apps", MDB_CREATE, &s->apps)) ||
      (rc = mdb_dbi_open(txn, "snapshots", MDB_CREATE, &s->snapshots)) ||
      (rc = mdb_dbi_open(txn, "snapdata", MDB_CREATE, &s->snapdata)))
    goto out_abort;
  rc = mdb_get(txn, s->info, &k, &v);
  if (rc == MDB_NOTFOUND) {
    uint8_t fmt[4], created[8], zero[8] = {0};
    MDB_val fv = {4, fmt}, cv = {8, created}, ck = {7, "created"}, bk = {5, "bytes"},
            bv = {8, zero};
    pcache__put_le32(fmt, PCD_STORE_FORMAT);
    pcache__put_le64(created, (uint64_t)time(NULL));
    if ((rc = mdb_put(txn, s->info, &k, &fv, 0)) || (rc = mdb_put(txn, s->info, &ck, &cv, 0)) ||
        (rc = mdb_put(txn, s->info, &bk, &bv, 0)))
      goto out_abort;
    *ret_fresh = 1;
  } else if (rc) {
    goto out_abort;
  } else if (v.mv_size != 4 || pcache__le32(v.mv_data) != PCD_STORE_FORMAT) {
    rc = MDB_VERSION_MISMATCH;
    log_error("store: %s has format version %u, this pcached knows %u", s->dir,
              v.mv_size == 4 ? pcache__le32(v.mv_data) : 0, PCD_STORE_FORMAT);
    goto out_abort;
  }
  return mdb_txn_commit(txn);

out_abort:
  mdb_txn_abort(txn);
  return rc;
}

static int try_open(pcd_store *s, int *ret_fresh) {
  int rc = mdb_env_create(&s->env);
  if (rc)
    return rc;
  if ((rc = mdb_env_set_maxdbs(s->env, 16)) || (rc = mdb_env_set_mapsize(s->env, s->map_size)) ||
      (rc = mdb_env_set_assert(s->env, pcd_store_on_assert)) ||
      (rc = mdb_env_open(s->env, s->dir, MDB_NOTLS, 0600)) || (rc = open_dbis(s, ret_fresh))) {
    mdb_env_close(s->env);
    s->env = NULL;
    return rc;
  }
  return 0;
}

/* Moves data.mdb aside so a store we cannot trust is never served, and
 * drops the lock file that belonged to it. rename() moves a link itself,
 * never its target. */
static int move_aside(pcd_store *s, const char *why) {
  char from[4200], to[4300], lock[4200];
  snprintf(from, sizeof from, "%s/data.mdb", s->dir);
  snprintf(to, sizeof to, "%s/data.mdb.corrupt-%lld", s->dir, (long long)time(NULL));
  /* Never over an earlier one moved aside in the same second. */
  for (unsigned i = 1; access(to, F_OK) == 0 && i < 1000; i++)
    snprintf(to, sizeof to, "%s/data.mdb.corrupt-%lld.%u", s->dir, (long long)time(NULL), i);
  snprintf(lock, sizeof lock, "%s/lock.mdb", s->dir);
  if (rename(from, to) < 0 && errno != ENOENT) {
    log_error("store: cannot move %s aside: %s", from, strerror(errno));
    return -errno;
  }
  unlink(lock);
  log_warn("store: %s could not be used (%s); moved it to %s and started a fresh store", from, why,
           to);
  return 0;
}

/* LMDB could not open a store that is not known to be damaged: it is
 * left as it is, and the log says what to change. LMDB's system errors
 * are positive errno values. */
static int open_failed(const pcd_store *s, int rc) {
  char map[300];
  const char *fix;
  switch (rc) {
  case ENOMEM:
    snprintf(map, sizeof map,
             "its map of %llu MiB did not fit this process's address space: raise the limit "
             "pcached runs under (ulimit -v; LimitAS= in its systemd unit) or lower --max-size "
             "(or --map-size when given), then start pcached again",
             (unsigned long long)(s->map_size >> 20));
    fix = map;
    break;
  case EMFILE:
  case ENFILE:
  case EAGAIN:
    fix = "this process or the system is out of descriptors or processes: raise ulimit -n / "
          "ulimit -u (LimitNOFILE= / LimitNPROC= in its systemd unit) or close what holds "
          "them, then start pcached again";
    break;
  case ENOSPC:
  case EDQUOT:
    fix = "the file system holding the store is full: free space there (or give --data-dir "
          "another file system), then start pcached again";
    break;
  case EACCES:
  case EPERM:
  case EROFS:
    fix = "this user cannot write the store's files: make the data directory and its "
          "data.mdb and lock.mdb writable by this user, then start pcached again";
    break;
  case MDB_READERS_FULL:
    fix = "LMDB's reader table is full of readers that are still alive: stop the programs "
          "holding the store open (pcachectl, a replay), then start pcached again";
    break;
  default:
    fix = "fix the cause above, then start pcached again";
  }
  log_error("store: cannot open %s/data.mdb: %s. The store was left as it is (it is not known "
            "to be damaged): %s",
            s->dir, mdb_strerror(rc), fix);
  return rc > 0 ? -rc : PCACHE_ESTORE;
}

/* Before LMDB maps the store: the files are regular files of ours (LMDB
 * opens them by path, following links), and the store is walked in a
 * child process, so a damaged one is moved aside here instead of faulting
 * or aborting the daemon later, at every restart. Always, not only after
 * an unclean stop: the damage may have come while no daemon ran. */
static int check_before_open(pcd_store *s) {
  char why[600];
  int r = pcd_store_files_check(s->dir, why, sizeof why);
  if (r < 0) {
    log_error("store: cannot open the store files in %s: %s", s->dir, strerror(-r));
    return r;
  }
  if (r == 0) {
    why[0] = '\0';
    r = pcd_store_check_dir(s->dir, why, sizeof why);
    if (r < 0)
      log_warn("store: could not check %s/data.mdb (%s); opening it unchecked", s->dir,
               why[0] ? why : strerror(-r));
  }
  if (r <= 0)
    return 0;
  if ((r = move_aside(s, why)) < 0)
    return r;
  r = pcd_store_files_check(s->dir, why, sizeof why);
  return r > 0 ? -EEXIST : r;
}

/* One daemon a data directory: LMDB would let a second one share the
 * store, and then two writers' caps, evictions and replays would fight
 * over it unseen. An flock on pcached.lock, held while the store is open
 * (the descriptor is close-on-exec: replay children do not keep it; a
 * forked store check shares it and holds nothing after it exits). The
 * lock file is never removed: removing it would let a third daemon lock a
 * new file beside the one the first still holds. */
static int lock_dir(pcd_store *s) {
  char path[4200], pid[32] = "";
  ssize_t n;
  snprintf(path, sizeof path, "%s/pcached.lock", s->dir);
  s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (s->lock_fd < 0) {
    log_error("store: cannot open %s: %s", path, strerror(errno));
    return -errno;
  }
  if (flock(s->lock_fd, LOCK_EX | LOCK_NB) == 0) {
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(s->lock_fd, 0) < 0 || pwrite(s->lock_fd, pid, (size_t)len, 0) != len)
      log_warn("store: cannot write this pid to %s: %s", path, strerror(errno));
    return 0;
  }
  if (errno != EWOULDBLOCK) {
    log_error("store: cannot lock %s: %s", path, strerror(errno));
    close(s->lock_fd);
    s->lock_fd = -1;
    return -ENOLCK;
  }
  n = pread(s->lock_fd, pid, sizeof pid - 1, 0);
  pid[n > 0 ? n : 0] = '\0';
  pid[strcspn(pid, "\n")] = '\0';
  log_error("store: %s is already served by another pcached (pid %s); one data directory is "
            "served by one daemon at a time: use that daemon (its socket), stop it first "
            "(systemctl --user stop pcached.service pcached.socket, or kill %s), or give this one "
            "another --data-dir",
            s->dir, pid[0] ? pid : "unknown", pid[0] ? pid : "it");
  close(s->lock_fd);
  s->lock_fd = -1;
  return -EBUSY;
}

int pcd_store_open(const char *dir, uint64_t map_size, pcd_store **ret_store) {
  pcd_store *s;
  int fresh = 0, r, rc;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);

  if (strlen(dir) >= sizeof s->dir)
    return -ENAMETOOLONG;
  if ((r = pcd_private_dir(dir, "data directory", "--data-dir")) < 0)
    return r;
  s = pcache__calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  strcpy(s->dir, dir);
  s->map_size = (map_size + page - 1) / page * page;
  if ((r = lock_dir(s)) < 0)
    goto out_free;
  if ((r = check_before_open(s)) < 0)
    goto out_unlock;
  pcd_store_guard_faults();
  rc = try_open(s, &fresh);
  if (rc && !pcd_store_rc_damaged(rc)) {
    /* The machine's fault, not the store's: moving a sound store aside
     * for it would lose every entry. */
    r = open_failed(s, rc);
    goto out_unlock;
  }
  if (rc) {
    r = move_aside(s, mdb_strerror(rc));
    if (r < 0)
      goto out_unlock;
    rc = try_open(s, &fresh);
    if (rc) {
      log_error("store: cannot open a fresh store in %s: %s", dir, mdb_strerror(rc));
      r = PCACHE_ESTORE;
      goto out_unlock;
    }
  }
  if (fresh)
    log_info("store: created %s/data.mdb (format %u)", dir, PCD_STORE_FORMAT);
  *ret_store = s;
  return 0;

out_unlock:
  close(s->lock_fd);
out_free:
  pcache__free(s);
  return r;
}

int pcd_store_check(pcd_txn *txn, char *why, size_t why_size) {
  int dead, r = pcd_store_check_dir(txn->store->dir, why, why_size);
  /* A child that crashed left its reader slot behind, which would keep
   * pages from reuse until the next start. */
  mdb_reader_check(txn->store->env, &dead);
  return r;
}

void pcd_store_close(pcd_store *store) {
  if (!store)
    return;
  for (int i = 0; i < PCD_SPARE_TXNS; i++) {
    pcd_txn *spare = atomic_exchange(&store->spare[i], NULL);
    if (spare) {
      mdb_txn_abort(spare->txn);
      pcache__free(spare);
    }
  }
  if (store->env)
    mdb_env_close(store->env);
  close(store->lock_fd); /* the last: the store is closed when another may open it */
  pcache__free(store);
}

/* ------------------------------------------------------------ transactions */

/* This thread's spare slot, handed out on first use. */
static unsigned spare_slot(void) {
  static atomic_uint next;
  static _Thread_local unsigned slot;
  static _Thread_local int have;
  if (!have) {
    slot = atomic_fetch_add(&next, 1) % PCD_SPARE_TXNS;
    have = 1;
  }
  return slot;
}

int pcd_txn_begin(pcd_store *store, int write, pcd_txn **ret_txn) {
  pcd_txn *t = write ? NULL : atomic_exchange(&store->spare[spare_slot()], NULL);
  int rc;
  if (t) {
    rc = mdb_txn_renew(t->txn);
    if (rc == 0) {
      t->err = 0;
      *ret_txn = t;
      return 0;
    }
    mdb_txn_abort(t->txn);
    pcache__free(t);
  }
  t = pcache__calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  t->store = store;
  t->write = write;
  rc = mdb_txn_begin(store->env, NULL, write ? 0 : MDB_RDONLY, &t->txn);
  if (rc) {
    pcache__free(t);
    return pcd_db_err(NULL, rc, "begin");
  }
  *ret_txn = t;
  return 0;
}

static unsigned app_bucket(const uint8_t *devkey, const char *app) {
  uint8_t key[PCACHE_DEVKEY_SIZE + PCD_MAX_APP];
  size_t n = strnlen(app, PCD_MAX_APP);
  memcpy(key, devkey, PCACHE_DEVKEY_SIZE);
  memcpy(key + PCACHE_DEVKEY_SIZE, app, n);
  return (unsigned)(pcache__checksum64(key, PCACHE_DEVKEY_SIZE + n) % PCD_APP_GEN_BUCKETS);
}

uint64_t pcd_store_app_gen(pcd_store *store, const uint8_t device_key[PCACHE_DEVKEY_SIZE],
                           const char *app) {
  /* Both only grow, so their sum changes whenever either does. */
  return atomic_load(&store->app_gens[app_bucket(device_key, app)]) +
         atomic_load(&store->all_changes);
}

void pcd_txn_note_change(pcd_txn *t, const uint8_t *devkey, const char *app) {
  unsigned b;
  if (!app || t->n_changed == PCD_TXN_CHANGES) {
    t->changed_all = 1;
    return;
  }
  b = app_bucket(devkey, app);
  for (unsigned i = 0; i < t->n_changed; i++)
    if (t->changed[i] == b)
      return;
  t->changed[t->n_changed++] = (uint16_t)b;
}

/* After a commit: readers that copied a changed pair before it now see
 * another number (pcd_store_app_gen). */
static void bump_changes(const pcd_txn *t) {
  if (t->changed_all)
    atomic_fetch_add(&t->store->all_changes, 1);
  for (unsigned i = 0; i < t->n_changed; i++)
    atomic_fetch_add(&t->store->app_gens[t->changed[i]], 1);
}

int pcd_store_disk_low(const pcd_store *store) {
  struct statvfs fs;
  return statvfs(store->dir, &fs) == 0 && fs.f_bavail * fs.f_frsize < (1u << 20);
}

/* Whether a failed commit's write error is the file system being full:
 * ENOSPC, or the EIO LMDB makes of a short write when the disk is nearly
 * full. */
static int disk_full(const pcd_store *s, int rc) {
  return rc == ENOSPC || (rc == EIO && pcd_store_disk_low(s));
}

int pcd_txn_commit(pcd_txn *txn) {
  int r;
  if (txn->err) {
    r = txn->err;
    mdb_txn_abort(txn->txn);
  } else {
    int rc = mdb_txn_commit(txn->txn);
    if (rc == 0)
      bump_changes(txn);
    /* data.mdb could not grow: the writer makes room and says so once
     * (writer.c), so not an error line at every commit. */
    if (rc && disk_full(txn->store, rc)) {
      log_debug("store: commit: %s: the file system holding %s is full", mdb_strerror(rc),
                txn->store->dir);
      r = -ENOSPC;
    } else {
      r = pcd_db_err(NULL, rc, "commit");
    }
  }
  pcache__free(txn);
  return r;
}

void pcd_txn_abort(pcd_txn *txn) {
  pcd_txn *none = NULL;
  if (!txn)
    return;
  if (!txn->write) {
    /* Reset drops the snapshot (old pages can be reused by writers) and
     * keeps the reader slot for the renew. */
    mdb_txn_reset(txn->txn);
    if (atomic_compare_exchange_strong(&txn->store->spare[spare_slot()], &none, txn))
      return;
  }
  mdb_txn_abort(txn->txn);
  pcache__free(txn);
}

int pcd_store_nudge(pcd_store *store) {
  pcd_txn *t = NULL; /* set by a successful begin; -O3 cannot see it */
  uint8_t fmt[4];
  int r = pcd_txn_begin(store, 1, &t);
  if (r < 0)
    return r;
  pcache__put_le32(fmt, PCD_STORE_FORMAT);
  if ((r = pcd_db_put(t, store->info, "format", 6, fmt, 4, "format")) < 0) {
    pcd_txn_abort(t);
    return r;
  }
  return pcd_txn_commit(t);
}
