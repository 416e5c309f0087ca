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
 * gets mode (parents 0700). An existing last component is chmod'ed to mode
 * if it is ours. Returns 0 or -errno.
 */
int pcache__mkdir_p(const char *dir, unsigned mode);

/* Copies the directory part of path into out ("." when none). */
int pcache__dirname(const char *path, char *out, size_t out_size);

#endif
