#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int parse_scaled(const char *text, const char *const units[], const uint64_t scales[],
                        size_t n_units, uint64_t *ret) {
  char *end;
  double v;
  if (!text || !*text || isspace((unsigned char)*text) || *text == '-')
    return -EINVAL;
  errno = 0;
  v = strtod(text, &end);
  if (errno || end == text || !isfinite(v) || v < 0)
    return -EINVAL;
  while (*end == ' ')
    end++;
  for (size_t i = 0; i < n_units; i++) {
    if (strcasecmp(end, units[i]) == 0) {
      double r = v * (double)scales[i];
      if (r >= 18446744073709551615.0)
        return -ERANGE;
      /* Less than one unit would become 0: "0.5s" must not mean "older
       * than nothing", which purges everything. */
      if (r > 0 && r < 1)
        return -EINVAL;
      *ret = (uint64_t)r;
      return 0;
    }
  }
  return -EINVAL;
}

int pcache__parse_size(const char *text, uint64_t *ret_bytes) {
  static const char *const units[] = {"", "b", "k", "kb", "kib", "m", "mb", "mib",
                                      "g", "gb", "gib", "t", "tb", "tib"};
  static const uint64_t K = 1024;
  static const uint64_t scales[] = {1, 1, K, K, K, K * K, K * K, K * K,
                                    K * K * K, K * K * K, K * K * K,
                                    K * K * K * K, K * K * K * K, K * K * K * K};
  return parse_scaled(text, units, scales, sizeof units / sizeof *units, ret_bytes);
}

int pcache__parse_duration(const char *text, uint64_t *ret_seconds) {
  static const char *const units[] = {"", "s", "m", "min", "h", "d", "w"};
  static const uint64_t scales[] = {1, 1, 60, 60, 3600, 86400, 604800};
  uint64_t s;
  int r = parse_scaled(text, units, scales, sizeof units / sizeof *units, &s);
  if (r < 0)
    return r;
  if (s > PCACHE_DURATION_MAX_S)
    return -ERANGE;
  *ret_seconds = s;
  return 0;
}

void pcache__format_size(uint64_t bytes, char *out, size_t out_size) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  size_t u = 0;
  if (bytes < 1024) {
    snprintf(out, out_size, "%llu B", (unsigned long long)bytes);
    return;
  }
  while (v >= 1024 && u + 1 < sizeof units / sizeof *units) {
    v /= 1024;
    u++;
  }
  snprintf(out, out_size, "%.1f %s", v, units[u]);
}

void pcache__format_duration(uint64_t s, char *out, size_t out_size) {
  if (s < 60)
    snprintf(out, out_size, "%llus", (unsigned long long)s);
  else if (s < 3600)
    snprintf(out, out_size, "%llum", (unsigned long long)(s / 60));
  else if (s < 86400)
    snprintf(out, out_size, "%lluh %llum", (unsigned long long)(s / 3600),
             (unsigned long long)(s % 3600 / 60));
  else
    snprintf(out, out_size, "%llud %lluh", (unsigned long long)(s / 86400),
             (unsigned long long)(s % 86400 / 3600));
}

uint32_t pcache__env_ms(const char *name, uint32_t default_ms, uint32_t min_ms, uint32_t max_ms) {
  const char *v = getenv(name);
  char *end;
  unsigned long ms;
  if (!v || !*v)
    return default_ms;
  errno = 0;
  ms = strtoul(v, &end, 10);
  if (errno || *end || ms < min_ms || ms > max_ms)
    return default_ms;
  return (uint32_t)ms;
}
