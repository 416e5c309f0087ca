#include "activation.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#if PCACHE_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "common/log.h"

#define LISTEN_FDS_START 3

int pcd_activation_listen_fd(int *ret_fd) {
  int n;
#if PCACHE_HAVE_LIBSYSTEMD
  n = sd_listen_fds(1);
  if (n < 0)
    return n;
#else
  /* sd_listen_fds() by hand: the fds are ours only if LISTEN_PID is us. */
  const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
  char *end;
  long v;
  n = 0;
  if (pid && fds) {
    errno = 0;
    v = strtol(pid, &end, 10);
    if (!errno && *end == '\0' && v == (long)getpid()) {
      v = strtol(fds, &end, 10);
      if (!errno && *end == '\0' && v > 0 && v < 1024)
        n = (int)v;
    }
  }
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  for (int fd = LISTEN_FDS_START; fd < LISTEN_FDS_START + n; fd++)
    fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
  if (n > 1) {
    log_error("activation: %d sockets passed, expected one", n);
    return -EINVAL;
  }
  *ret_fd = n == 1 ? LISTEN_FDS_START : -1;
  return 0;
}

void pcd_notify(const char *state) {
#if PCACHE_HAVE_LIBSYSTEMD
  sd_notify(0, state);
#else
  const char *path = getenv("NOTIFY_SOCKET");
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  size_t len;
  int fd;
  if (!path || (path[0] != '/' && path[0] != '@'))
    return;
  len = strlen(path);
  if (len >= sizeof sun.sun_path)
    return;
  memcpy(sun.sun_path, path, len);
  if (sun.sun_path[0] == '@')
    sun.sun_path[0] = '\0'; /* abstract namespace */
  fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  (void)!sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
  close(fd);
#endif
}
