/* A main() for fuzz targets built without libFuzzer: replays corpus files
 * (or directories of them) through LLVMFuzzerTestOneInput once each, so
 * ctest's fuzz-smoke tests run every seed under the normal (or sanitizer)
 * build. A crash or assertion in the target fails the test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf;
  long n;
  if (!f)
    return -1;
  if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
    fclose(f);
    return -1;
  }
  buf = malloc(n > 0 ? (size_t)n : 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(buf);
    return -1;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, (size_t)n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0;
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    struct stat st;
    DIR *dir;
    struct dirent *e;
    if (stat(argv[i], &st) < 0) {
      fprintf(stderr, "replay: cannot stat %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[i]) < 0) {
        fprintf(stderr, "replay: cannot read %s\n", argv[i]);
        return 1;
      }
      files++;
      continue;
    }
    if (!(dir = opendir(argv[i]))) {
      fprintf(stderr, "replay: cannot open %s\n", argv[i]);
      return 1;
    }
    while ((e = readdir(dir))) {
      char path[4096];
      if (e->d_name[0] == '.')
        continue;
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (run_file(path) < 0) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        closedir(dir);
        return 1;
      }
      files++;
    }
    closedir(dir);
  }
  printf("replay: %d inputs, no crash\n", files);
  /* An empty corpus would make the smoke test pass without testing anything. */
  return files > 0 ? 0 : 1;
}
