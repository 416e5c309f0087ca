/* The directories pcached keeps private things in (the store, the socket)
 * must be its own: a directory another user owns or may write to lets
 * that user swap the store or put an impostor's socket in place. */
#ifndef PCD_PRIVATE_DIR_H
#define PCD_PRIVATE_DIR_H

/*
 * pcd_private_dir - creates dir (0700, missing parents 0700) if it does
 * not exist, then refuses it, with an error naming the path and the fix,
 * unless it is a directory owned by the effective uid that no other user
 * may write to. An existing directory's mode is never changed. A parent
 * that would let another user replace dir is only warned about.
 * what names the directory in messages ("data directory"), option the
 * setting that picks another one ("--data-dir").
 * Returns 0 or -errno (-EPERM when refused).
 */
int pcd_private_dir(const char *dir, const char *what, const char *option);

#endif
