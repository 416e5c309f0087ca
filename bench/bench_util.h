/* Helpers every benchmark shares: a monotonic clock, key=value output,
 * percentiles, and small argument parsing. Benchmarks are programs: they
 * print results on stdout (one key=value per line) and problems on stderr. */
#ifndef PCACHE_BENCH_UTIL_H
#define PCACHE_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

uint64_t bench_now_ns(void);

/* key=value lines on stdout; prefix may be NULL ("get_c8_" + "p50_us"). */
void bench_kv_str(const char *prefix, const char *key, const char *value);
void bench_kv_u64(const char *prefix, const char *key, uint64_t value);
void bench_kv_f(const char *prefix, const char *key, double value);

/* Sorts v (n values) and returns the q-quantile (0 <= q <= 1), nearest rank. */
uint64_t bench_percentile(uint64_t *v, size_t n, double q);

/* Dies with a message on stderr (exit 1). */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Parses "1,8,16" into out (at most max values); returns the count. */
size_t bench_parse_list(const char *text, unsigned *out, size_t max);

/* Number of online CPUs (at least 1). */
unsigned bench_ncpus(void);

/* A pthread barrier wrapper for starting worker threads together. */
typedef struct bench_barrier bench_barrier;
bench_barrier *bench_barrier_new(unsigned count);
void bench_barrier_wait(bench_barrier *b);
void bench_barrier_free(bench_barrier *b);
/* Runs fn on each of n workers (worker i at (char *)workers + i * size),
 * a thread each, which wait on barrier (made for n + 1) before their
 * work; returns the ns from that start until the last has ended. Dies
 * when a thread cannot be made. */
uint64_t bench_run_threads(void *(*fn)(void *), void *workers, size_t size, unsigned n,
                           bench_barrier *barrier);

#endif
