/* Helpers shared by the reliability tests (tests/reliability/). */
#ifndef PCACHE_TESTS_REL_UTIL_H
#define PCACHE_TESTS_REL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/archive.h"
#include "wire.h"

/* Sanitizer builds keep freed memory in quarantine and shadow it: memory
 * bounds are measured and reported there, asserted only without them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define REL_SANITIZED 1
#endif
#endif
#ifndef REL_SANITIZED
#define REL_SANITIZED 0
#endif

/* Monotonic milliseconds. */
uint64_t rel_now_ms(void);
/* Resident set of a process in KiB (VmRSS), or -1. */
long rel_rss_kb(pid_t pid);
/* Its anonymous part (RssAnon): the heap, without the mapped store. */
long rel_anon_kb(pid_t pid);
/* An integer from the environment, or def. */
long rel_env_long(const char *name, long def);
/* 1 when fd has nothing to read and is still open after ms. */
int rel_still_open(int fd, int ms);
/* Stats of the daemon; aborts on error. */
void rel_stats(int fd, uint64_t *ret_entries, uint64_t *ret_bytes, uint64_t *ret_devices,
               uint64_t *ret_modules);
/* Verify (no repair): the number of problems; aborts on error. */
uint64_t rel_verify(int fd);
/* For tests made of parts: 1 when no part is named on the command line
 * (run them all) or argv[1] names this one. */
int rel_part_wanted(int argc, char **argv, const char *name);
/* Writes the line "name value" to $PCACHE_REL_FIGURES when set, so
 * scripts/reliability.sh can collect the figures. */
void rel_figure(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));



/* Thread-safe, non-aborting client side for tests whose daemon dies under
 * them (crash, load). */

/* Makes a valid item (wire_item_make under a lock: it shares buffers). */
void rel_item_make(wire_item *it, const pcache__devkey *key, uint64_t salt, size_t blob_size);
/* Puts items on key; returns the number stored, or a negative code
 * (transport failure or a request-level status). */
int rel_put(int fd, const pcache__devkey *key, wire_item *items, size_t n);
/* Adds to w an entry of app "imported" for key: blob (made for key), and
 * a description, unique to salt, naming module. Aborts on failure. */
void rel_archive_entry(pcache__archive_writer *w, const pcache__devkey *key, uint64_t salt,
                       const uint8_t *blob, size_t blob_size, const pcache__hash *module);

#endif
