#include "private_dir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"

int pcd_private_dir(const char *dir, const char *what, const char *option) {
  char why[256], parent[4096];
  int r = pcache__mkdir_p(dir, 0700);
  if (r < 0) {
    log_error("cannot create the %s %s: %s", what, dir, strerror(-r));
    return r;
  }
  r = pcache__dir_check(dir, why, sizeof why);
  if (r == -EPERM) {
    log_error("refusing the %s %s: it is %s, so another user could read or replace what "
              "pcached keeps there. Pass %s with a directory of your own, or fix this one "
              "(chown %u %s; chmod go-w %s)",
              what, dir, why, option, (unsigned)geteuid(), dir, dir);
    return r;
  }
  if (r < 0) {
    log_error("cannot use the %s %s: %s", what, dir, why);
    return r;
  }
  if (pcache__dir_parents_check(dir, parent, sizeof parent, why, sizeof why) == 1)
    log_warn("the %s %s is inside %s, which is %s: another user could replace it", what, dir,
             parent, why);
  return 0;
}
