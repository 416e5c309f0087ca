/* Whether an LMDB store can be trusted (docs/storage.md "Checks and
 * recovery"). LMDB has no page checksums and trusts every page it reads: a
 * truncated file faults (SIGBUS), a zeroed page trips an assertion, a bad
 * overflow page header aborts the transaction that frees it. So the whole
 * store is walked in a child process, where any of those only ends the
 * child, and values are checked in process before LMDB frees them.
 * Part of the store: only store*.c include this. */
#ifndef PCD_STORE_CHECK_H
#define PCD_STORE_CHECK_H

#include <lmdb.h>
#include <stddef.h>

/*
 * pcd_store_files_check - makes data.mdb and lock.mdb in dir safe for LMDB
 * to open by path: each is opened without following links (and created,
 * 0600, when absent) and must be a regular file of ours with one link.
 * A bad lock.mdb (it holds nothing) is removed; a bad data.mdb is reported
 * for the caller to move aside. The link itself is touched, never its
 * target. Returns 0, 1 (data.mdb is bad; why says how) or -errno.
 */
int pcd_store_files_check(const char *dir, char *why, size_t why_size);

/*
 * pcd_store_rc_damaged - 1 when an LMDB return code says the store's own
 * bytes are bad (MDB_CORRUPTED, MDB_INVALID, MDB_VERSION_MISMATCH, which
 * pcache also uses for its format record, MDB_PAGE_NOTFOUND,
 * MDB_INCOMPATIBLE): only then may a store be moved aside. Anything else
 * (ENOMEM, EAGAIN, EMFILE, ENOSPC, EACCES, a full reader table...) is
 * the machine's, not the store's: 0.
 */
int pcd_store_rc_damaged(int rc);

/*
 * pcd_store_check_dir - walks the store in dir in a child process: the file
 * size against the last page the meta page records, every record of every
 * database (the free list and the main database included), each record
 * count against its database's header, and each overflow page header.
 * The store must not be written meanwhile (the writer thread calls it, or
 * start-up before the writer runs). Returns 0 (sound, or no data.mdb),
 * 1 (damaged; why says how) or -errno (the check itself could not run;
 * why says why when the child could, else it is empty).
 */
int pcd_store_check_dir(const char *dir, char *why, size_t why_size);

/*
 * pcd_store_check_value - in process, for a value about to be freed: one
 * on overflow pages must have the header LMDB will trust when freeing it
 * (its own page number, the overflow flag alone, the page count its size
 * needs) and lie inside the file. Returns 0, or 1 with why filled.
 */
int pcd_store_check_value(MDB_env *env, const MDB_val *v, char *why, size_t why_size);

/* An MDB_assert_func: logs LMDB's assertion as the store's fault, in one
 * line, before LMDB aborts. The next start walks the store and moves it
 * aside if it is damaged, so a restart does not abort again. */
void pcd_store_on_assert(MDB_env *env, const char *msg);

/* Installs a SIGBUS handler that logs, in one line, that a page of the
 * store's file could not be read (the file was truncated under the daemon,
 * or its disk failed) before the daemon dies of it; the next start walks
 * the store and moves it aside. LMDB maps the store, so that is where a
 * SIGBUS comes from. */
void pcd_store_guard_faults(void);

#endif
