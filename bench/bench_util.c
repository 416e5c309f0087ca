#include "bench_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bench_kv_str(const char *prefix, const char *key, const char *value) {
  printf("%s%s=%s\n", prefix ? prefix : "", key, value);
  fflush(stdout);
}

void bench_kv_u64(const char *prefix, const char *key, uint64_t value) {
  printf("%s%s=%llu\n", prefix ? prefix : "", key, (unsigned long long)value);
  fflush(stdout);
}

void bench_kv_f(const char *prefix, const char *key, double value) {
  /* Enough digits for ns-scale values and for ratios alike. */
  printf("%s%s=%.4g\n", prefix ? prefix : "", key, value);
  fflush(stdout);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

uint64_t bench_percentile(uint64_t *v, size_t n, double q) {
  size_t rank;
  if (n == 0)
    return 0;
  qsort(v, n, sizeof *v, cmp_u64);
  rank = (size_t)(q * (double)n + 0.999999);
  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  return v[rank - 1];
}

void bench_die(const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "bench: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

size_t bench_parse_list(const char *text, unsigned *out, size_t max) {
  size_t n = 0;
  const char *p = text;
  while (*p && n < max) {
    char *end;
    unsigned long v = strtoul(p, &end, 10);
    if (end == p)
      bench_die("bad number list '%s'", text);
    out[n++] = (unsigned)v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',')
      bench_die("bad number list '%s'", text);
  }
  return n;
}

unsigned bench_ncpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

struct bench_barrier {
  pthread_barrier_t b;
};

bench_barrier *bench_barrier_new(unsigned count) {
  bench_barrier *b = malloc(sizeof *b);
  if (!b || pthread_barrier_init(&b->b, NULL, count) != 0)
    bench_die("barrier: %s", strerror(errno));
  return b;
}

void bench_barrier_wait(bench_barrier *b) { pthread_barrier_wait(&b->b); }

void bench_barrier_free(bench_barrier *b) {
  if (!b)
    return;
  pthread_barrier_destroy(&b->b);
  free(b);
}

uint64_t bench_run_threads(void *(*fn)(void *), void *workers, size_t size, unsigned n,
                           bench_barrier *barrier) {
  pthread_t *threads = calloc(n ? n : 1, sizeof *threads);
  uint64_t t0;
  if (!threads)
    bench_die("out of memory");
  for (unsigned i = 0; i < n; i++)
    if (pthread_create(&threads[i], NULL, fn, (char *)workers + i * size) != 0)
      bench_die("pthread_create: %s", strerror(errno));
  bench_barrier_wait(barrier);
  t0 = bench_now_ns();
  for (unsigned i = 0; i < n; i++)
    pthread_join(threads[i], NULL);
  free(threads);
  return bench_now_ns() - t0;
}
