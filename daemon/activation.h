/* systemd integration: socket activation and readiness notification. Both
 * are no-ops outside systemd. */
#ifndef PCD_ACTIVATION_H
#define PCD_ACTIVATION_H

/* The listening fd systemd passed (LISTEN_PID/LISTEN_FDS), or -1 when none.
 * Returns -EINVAL when more than one was passed. The variables are unset. */
int pcd_activation_listen_fd(void);

/* sd_notify(): "READY=1", "STOPPING=1", "STATUS=...". Ignored without
 * NOTIFY_SOCKET. */
void pcd_notify(const char *state);

#endif
