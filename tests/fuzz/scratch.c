#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void remove_dir(void) {
  static const char *const files[] = {"data.mdb", "lock.mdb"};
  char path[300];
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

const char *fuzz_scratch_dir(const char *name) {
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, sizeof dir, "%s/pcache-fuzz-%s-XXXXXX", base, name);
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    abort();
  }
  atexit(remove_dir);
  return dir;
}
