/* A scratch store directory for the fuzz targets that run daemon code
 * against a real LMDB store: on tmpfs when there is one (the dispatch
 * target commits, and fsync there costs nothing), removed at exit. */
#ifndef PCACHE_FUZZ_SCRATCH_H
#define PCACHE_FUZZ_SCRATCH_H

/* Makes the directory (aborts on failure) and returns its path. */
const char *fuzz_scratch_dir(const char *name);

#endif
