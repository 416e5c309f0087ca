/* Sizes and durations as people write them on command lines, and back. */
#ifndef PCACHE_COMMON_PARSE_H
#define PCACHE_COMMON_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* "1073741824", "64K", "512M", "1G", "2GiB", "1.5G" (binary units).
 * Returns 0 or -EINVAL / -ERANGE. */
int pcache__parse_size(const char *text, uint64_t *ret_bytes);

/* The longest duration a parser accepts: the daemon keeps times in
 * microseconds in 64 bits, so a longer one cannot be compared with them
 * (it would wrap into a short one). About 584,542 years. */
#define PCACHE_DURATION_MAX_S (UINT64_MAX / 1000000u)

/* "90", "90s", "15m", "12h", "30d", "2w" (plain number: seconds).
 * Returns 0 or -EINVAL / -ERANGE (over PCACHE_DURATION_MAX_S). */
int pcache__parse_duration(const char *text, uint64_t *ret_seconds);

/* Milliseconds from the environment variable name: its value when it is a
 * plain decimal number within [min_ms, max_ms], else default_ms (unset,
 * empty, malformed or out of range). */
uint32_t pcache__env_ms(const char *name, uint32_t default_ms, uint32_t min_ms, uint32_t max_ms);

/* "0 B", "812 B", "20.0 KiB", "1.5 GiB" */
void pcache__format_size(uint64_t bytes, char *out, size_t out_size);
/* "45s", "12m", "3h 5m", "30d" */
void pcache__format_duration(uint64_t seconds, char *out, size_t out_size);

#endif
