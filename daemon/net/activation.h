/* systemd integration: socket activation and readiness notification. Both
 * are no-ops outside systemd. */
#ifndef PCD_ACTIVATION_H
#define PCD_ACTIVATION_H

/* The listening fd systemd passed (LISTEN_PID/LISTEN_FDS) in *ret_fd, -1
 * when none was. Returns 0, -EINVAL when more than one was passed, or
 * sd_listen_fds's -errno. The variables are unset. */
int pcd_activation_listen_fd(int *ret_fd);

/* sd_notify(): "READY=1", "STOPPING=1", "STATUS=...". Ignored without
 * NOTIFY_SOCKET. */
void pcd_notify(const char *state);

#endif
