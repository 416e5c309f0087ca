/* Helpers for pcachectl's tests: fill a real daemon with crafted entries
 * (through the same transport pcachectl uses), run the real pcachectl
 * binary and look at what it printed. */
#ifndef PCACHE_TESTS_CTL_UTIL_H
#define PCACHE_TESTS_CTL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "proto/archive.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "harness.h"

/* A made-up device: UUID of 16 bytes `seed`, vendor 0x10005 (Mesa),
 * device 0x100 + seed, the given driver version, 64-bit ABI. */
void ctl_key(uint8_t seed, uint32_t driver_version, pcache__devkey *ret_key);

/* The UUID text of such a device. */
void ctl_uuid_text(uint8_t seed, char out[37]);

/* SPIR-V (a 5-word module header) unique to n. */
#define CTL_SPIRV_WORDS 5
void ctl_spirv(uint32_t n, uint32_t out[CTL_SPIRV_WORDS]);

/* A minimal valid description: format_version 1, kind, one shader stage
 * whose module is ctl_spirv(n) (so each n gives a distinct state hash).
 * Returns the size written to out. */
#define CTL_DESC_MAX 64
size_t ctl_desc(uint32_t kind, uint32_t n, uint8_t out[CTL_DESC_MAX]);

/* Adds entry n (its module first) to an archive: filed under key, its
 * blob's header made for blob_key (pass key itself for a valid one). */
void ctl_archive_add(pcache__archive_writer *w, const pcache__devkey *key,
                     const pcache__devkey *blob_key, uint32_t kind, uint32_t n, const char *app,
                     uint64_t created, uint64_t last_used);

/* A blob of size bytes (>= 32) whose header matches key. */
void ctl_blob(const pcache__devkey *key, uint32_t n, uint8_t *out, size_t size);

/* Puts `count` entries (n = first .. first+count-1) for key under app
 * through a Put request; aborts unless every one is stored. */
void ctl_put(const test_env *env, const pcache__devkey *key, const char *device_name,
             const char *app, uint32_t kind, uint32_t first, uint32_t count);

/* The same with the rest of the DeviceInfo given (its key is set to key). */
void ctl_put_info(const test_env *env, const pcache__devkey *key,
                  const Pcachepb__DeviceInfo *device, const char *app, uint32_t kind,
                  uint32_t first, uint32_t count);

/* The state hash ctl_put gives entry n. */
void ctl_state_hash(uint32_t kind, uint32_t n, pcache__hash *ret_hash);

/* Runs "pcachectl --socket <env's socket> <args>" through sh; args is a
 * printf format. Captured stdout and stderr are kept in ctl_out / ctl_err
 * (NUL-terminated, valid until the next run). Returns the exit status. */
extern char *ctl_out, *ctl_err;
int ctl_run(const test_env *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs "pcachectl --json <args>" (args as is, not a format), which must
 * exit with status and print one document a real parser takes (python3's
 * json); when expr is not NULL, that python expression over the document
 * (as d) must hold. */
void ctl_json_check(const test_env *env, int status, const char *args, const char *expr);

/* How many times needle occurs in haystack. */
size_t ctl_count(const char *haystack, const char *needle);

/* Runs a shell command; returns its exit status. */
int ctl_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes data to path; aborts on failure. Reads a whole file (malloc'ed). */
void ctl_write_file(const char *path, const void *data, size_t size);
uint8_t *ctl_read_file(const char *path, size_t *ret_size);

/* Starts env's daemon (test_daemon_start) and arranges that a failing
 * assertion (abort) or SIGTERM kills it and shows its log: a daemon left
 * behind would hold the test's stdout open and stall ctest. */
void ctl_start(test_env *env);

/* Path of the pcachectl binary under test. */
const char *ctl_path(void);

#endif
