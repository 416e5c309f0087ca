/* Where the socket and the store live, resolved the same way by pcached,
 * libpcache and pcachectl (DESIGN.md "Protocol" and "Storage"). */
#ifndef PCACHE_COMMON_PATHS_H
#define PCACHE_COMMON_PATHS_H

#include <stddef.h>

/*
 * pcache__socket_path - explicit if non-NULL and non-empty, else
 * $PCACHE_SOCKET, else $XDG_RUNTIME_DIR/pcache/socket. Writes into out.
 * Returns 0, -ENOENT when nothing names a path (no XDG_RUNTIME_DIR), or
 * -ENAMETOOLONG when it does not fit a sockaddr_un.
 */
int pcache__socket_path(const char *explicit_path, char *out, size_t out_size);

/*
 * pcache__data_dir - explicit, else $PCACHE_DATA_DIR, else
 * $XDG_CACHE_HOME/pcache, else $HOME/.cache/pcache.
 * Returns 0, -ENOENT or -ENAMETOOLONG.
 */
int pcache__data_dir(const char *explicit_dir, char *out, size_t out_size);

/*
 * pcache__mkdir_p - creates dir and its missing parents; the last component
 * gets mode (parents 0700). An existing directory is left as it is (never
 * chmod'ed): pcache__dir_check says whether it may be used.
 * Returns 0 or -errno (-ENOTDIR when dir exists and is something else).
 */
int pcache__mkdir_p(const char *dir, unsigned mode);

/*
 * pcache__dir_check - whether dir may hold private files: a directory
 * (symbolic links followed) owned by the effective uid and writable by no
 * one else (root is not exempt: a directory another user owns is theirs).
 * Returns 0, -EPERM (wrong owner or mode), -ENOTDIR or -errno of stat;
 * on failure why says what is wrong in words.
 */
int pcache__dir_check(const char *dir, char *why, size_t why_size);

/*
 * pcache__dir_parents_check - whether some directory above dir (after
 * realpath) lets another user replace dir: owned by a uid other than ours
 * and root, or writable by others without the sticky bit. Returns 0 when
 * none does, 1 with ret_parent and why filled for the first one that does,
 * or -errno.
 */
int pcache__dir_parents_check(const char *dir, char *ret_parent, size_t parent_size, char *why,
                              size_t why_size);

/* Copies the directory part of path into out ("." when none). */
int pcache__dirname(const char *path, char *out, size_t out_size);

#endif
