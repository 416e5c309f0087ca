/* bench_trust: what the fleet's signatures cost per value (docs/fleet.md
 * "Who can do what"), with the daemon's own code (daemon/fleet/trust/remote_trust.c):
 * signing a value as a publishing pcached does before each SET, and
 * checking one as every member does before it parses it, for values of
 * several sizes, and the check with the most keys a trusted-keys file may
 * list (the key is found by a scan of them). Single thread; key=value lines.
 *
 *   bench_trust [--reps N]      (each figure the median of 5 runs of N values)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/bytes.h"
#include "common/hash.h"
#include "remote_trust.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void die(const char *what) {
  fprintf(stderr, "bench_trust: %s\n", what);
  exit(1);
}

/* A trusted-keys file with n - 1 keys of no one (random bytes) before the
 * signer's own: a check scans past all of them. */
static void write_trusted(const char *path, const char *pub_file, int n) {
  FILE *out = fopen(path, "w"), *in = fopen(pub_file, "r");
  char line[256];
  if (!out || !in)
    die("cannot write the trusted-keys file");
  for (int i = 0; i < n - 1; i++) {
    uint8_t k[32];
    char hex[65];
    for (int b = 0; b < 32; b++)
      k[b] = (uint8_t)rand();
    pcache__hex(k, 32, hex);
    fprintf(out, "%s\n", hex);
  }
  while (fgets(line, sizeof line, in))
    fputs(line, out);
  fclose(in);
  fclose(out);
  chmod(path, 0644);
}

int main(int argc, char **argv) {
  static const size_t sizes[] = {1024, 4096, 16384, 65536, 262144, 1048576};
  char dir[] = "/tmp/pcache-bench-trust.XXXXXX", key[128], pub[128], few[128], many[128];
  char id[17], err[256], cmd[256];
  pcd_trust one, lots;
  int reps = 2000;
  const char *name = "e:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef:"
                     "0123456789abcdef0123456789abcdef";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else
      die("usage: bench_trust [--reps N]");
  }
  if (reps < 1 || !mkdtemp(dir))
    die("bad --reps, or no temporary directory");
  if (pcd_trust_keygen(dir, id, err, sizeof err) < 0)
    die(err);
  snprintf(key, sizeof key, "%s/fleet.key", dir);
  snprintf(pub, sizeof pub, "%s/fleet.pub", dir);
  snprintf(few, sizeof few, "%s/trusted-1", dir);
  snprintf(many, sizeof many, "%s/trusted-max", dir);
  write_trusted(few, pub, 1);
  write_trusted(many, pub, PCD_TRUST_MAX_KEYS);
  if (pcd_trust_load(&one, key, few) < 0 || pcd_trust_load(&lots, NULL, many) < 0)
    die("cannot load the keys");
  printf("bench=trust\nreps=%d\ntrusted_keys_max=%zu\n", reps, lots.n_keys);

  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    size_t size = PCD_FLEET_HEADER + sizes[s];
    uint8_t *v = malloc(size);
    double sign[5], check[5], check_many[5], xxh[5];
    if (!v)
      die("out of memory");
    for (size_t i = 0; i < size; i++)
      v[i] = (uint8_t)(i * 2654435761u >> 13);
    memcpy(v, PCD_FLEET_MAGIC, 4);
    for (int run = 0; run < 5; run++) {
      uint64_t t0 = now_ns(), sum = 0;
      for (int r = 0; r < reps; r++) {
        v[PCD_FLEET_HEADER] = (uint8_t)r; /* each value its own */
        pcd_trust_sign(&one, name, strlen(name), v, size);
      }
      uint64_t t1 = now_ns();
      for (int r = 0; r < reps; r++)
        if (pcd_trust_verify(&one, name, strlen(name), v, size) != PCD_FLEET_OK)
          die("a good signature did not verify");
      uint64_t t2 = now_ns();
      for (int r = 0; r < reps; r++)
        if (pcd_trust_verify(&lots, name, strlen(name), v, size) != PCD_FLEET_OK)
          die("a good signature did not verify against the long list");
      uint64_t t3 = now_ns();
      for (int r = 0; r < reps; r++)
        sum += pcache__checksum64(v + PCD_FLEET_HEADER, sizes[s]);
      uint64_t t4 = now_ns();
      if (sum == 42)
        putchar(' ');
      sign[run] = (double)(t1 - t0) / reps / 1e3;
      check[run] = (double)(t2 - t1) / reps / 1e3;
      check_many[run] = (double)(t3 - t2) / reps / 1e3;
      xxh[run] = (double)(t4 - t3) / reps / 1e3;
    }
    /* Tampering is caught: one byte of the payload changed. */
    v[size - 1] ^= 1;
    if (pcd_trust_verify(&one, name, strlen(name), v, size) != PCD_FLEET_BAD_SIGNATURE)
      die("a changed value verified");
    qsort(sign, 5, sizeof *sign, cmp_double);
    qsort(check, 5, sizeof *check, cmp_double);
    qsort(check_many, 5, sizeof *check_many, cmp_double);
    qsort(xxh, 5, sizeof *xxh, cmp_double);
    printf("payload_%zu_sign_us=%.2f\npayload_%zu_verify_us=%.2f\n"
           "payload_%zu_verify_%d_keys_us=%.2f\npayload_%zu_xxh3_us=%.2f\n",
           sizes[s], sign[2], sizes[s], check[2], sizes[s], PCD_TRUST_MAX_KEYS, check_many[2],
           sizes[s], xxh[2]);
    fflush(stdout);
    free(v);
  }
  pcd_trust_clear(&one);
  pcd_trust_clear(&lots);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    return 1;
  return 0;
}
