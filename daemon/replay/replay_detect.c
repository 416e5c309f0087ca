/* The probe of the drivers installed (replay_detect.h): `pcache-replay
 * --list-keys` run on a thread of its own, so that neither a slow driver
 * load nor a hung one holds up a loop; its keys noted as a client's. */
#include "replay_detect.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/queue.h"
#include "remote.h"
#include "replay.h"
#include "server.h"
#include "store.h"
#include "writer.h"

extern char **environ;

/* pcache-replay --list-keys reports at most this many keys
 * (PCACHE_REPLAY_VK_MAX_KEYS, replay_vk.h): 16 devices, each with its
 * binary key too under --binary. */
#define MAX_DEVICES 32
/* What one line of its output may hold: a key, three driver strings of at
 * most 255 bytes each, tabs. */
#define OUT_MAX (MAX_DEVICES * 1024)
/* How long a killed probe may take to be reaped: one stuck in a driver
 * call may not die at once, and pcached's stop does not wait for it. */
#define REAP_MS 1000
/* How often a probe under way looks for pcached's stop. */
#define POLL_SLICE_MS 100
/* The replayer's exit code for "no Vulkan device" (replay.h). */
#define EXIT_NO_DEVICE PCD_REPLAY_EXIT_NO_DEVICE

typedef PCACHE_QUEUE(pcd_job) job_queue;

typedef struct probe_device {
  pcache__devkey key;
  char name[256], driver_name[256], driver_info[256];
} probe_device;

struct pcd_detect {
  pcd_server *srv;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  int started, stopping, off, at_start;
  uint64_t timeout_ms;
  /* Under lock. wanted: a probe is to begin; waiting: the jobs the next
   * probe to begin answers; riding: those the probe under way answers. */
  int wanted;
  job_queue waiting, riding;
  pid_t child; /* the probe under way, for a stop to kill; 0 when none */
  /* The thread's own: the last probe's result. */
  probe_device dev[MAX_DEVICES];
  unsigned n_dev;
  char error[4096 + 512]; /* the replayer's path and its last line fit */
  char out[OUT_MAX + 1], err_line[256];
  size_t out_len, err_len;
};

int pcd_detect_new(pcd_server *srv, pcd_detect **ret) {
  pcd_detect *d = pcache__calloc(1, sizeof *d);
  const char *at_start = getenv("PCACHE_REPLAY_DETECT");
  int r;
  if (!d)
    return -ENOMEM;
  if ((r = pthread_mutex_init(&d->lock, NULL)) != 0) {
    pcache__free(d);
    return -r;
  }
  if ((r = pthread_cond_init(&d->cond, NULL)) != 0) {
    pthread_mutex_destroy(&d->lock);
    pcache__free(d);
    return -r;
  }
  d->srv = srv;
  pcache_queue_init(&d->waiting);
  pcache_queue_init(&d->riding);
  d->at_start = !at_start || strcmp(at_start, "off") != 0;
  /* A driver loads in well under a second, but the probe runs at the
   * lowest priority there is, and at login the desktop takes the CPU. */
  d->timeout_ms = (uint64_t)pcache__env_ms("PCACHE_REPLAY_DETECT_MS", 30000, 100, 3600000);
  *ret = d;
  return 0;
}

/* ----------------------------------------------------------- the probe */

static int stopping(pcd_detect *d) {
  int s;
  pthread_mutex_lock(&d->lock);
  s = d->stopping;
  pthread_mutex_unlock(&d->lock);
  return s;
}

/* Takes what is readable on fd: stdout into d->out (bounded; the rest is
 * dropped), stderr's last line into d->err_line. Returns 0 at its end. */
static int drain(pcd_detect *d, int fd, int is_out) {
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0)
    return errno == EINTR || errno == EAGAIN ? 1 : 0;
  if (is_out) {
    size_t take = (size_t)n < OUT_MAX - d->out_len ? (size_t)n : OUT_MAX - d->out_len;
    memcpy(d->out + d->out_len, buf, take);
    d->out_len += take;
    return n > 0;
  }
  for (ssize_t i = 0; i < n; i++) {
    if (buf[i] == '\n') {
      if (d->err_len) {
        d->err_line[d->err_len] = '\0';
        log_debug("replay: pcache-replay --list-keys: %s", d->err_line);
      }
      d->err_len = 0;
    } else if (d->err_len + 1 < sizeof d->err_line) {
      d->err_line[d->err_len++] = buf[i];
    }
  }
  return n > 0;
}

/* The driver strings after the key, tab-separated (replay_vk.h).
 * whole_only: a probe killed or dead mid-line, or output cut at OUT_MAX,
 * leaves a part of a line after the last newline, which is dropped; a
 * probe that ended well may end its last line without one. */
static void parse(pcd_detect *d, int whole_only) {
  char *save = NULL;
  while (whole_only && d->out_len && d->out[d->out_len - 1] != '\n')
    d->out_len--;
  d->out[d->out_len] = '\0';
  for (char *line = strtok_r(d->out, "\n", &save); line && d->n_dev < MAX_DEVICES;
       line = strtok_r(NULL, "\n", &save)) {
    probe_device *dev = &d->dev[d->n_dev];
    char *field[4] = {line, NULL, NULL, NULL};
    for (int i = 1; i < 4 && field[i - 1]; i++)
      if ((field[i] = strchr(field[i - 1], '\t')) != NULL)
        *field[i]++ = '\0';
    if (strlen(field[0]) != 64 || pcache__devkey_parse(field[0], &dev->key) < 0)
      continue; /* not a key: the probe printed something else */
    snprintf(dev->name, sizeof dev->name, "%s", field[1] ? field[1] : "");
    snprintf(dev->driver_name, sizeof dev->driver_name, "%s", field[2] ? field[2] : "");
    snprintf(dev->driver_info, sizeof dev->driver_info, "%s", field[3] ? field[3] : "");
    d->n_dev++;
  }
}

/* Why the probe ended as it did, in d->error (empty: it listed, or found
 * no device). */
static void judge(pcd_detect *d, const char *path, int status, int timed_out) {
  const char *last = d->err_line;
  if (d->err_len) /* an unfinished last line */
    d->err_line[d->err_len] = '\0';
  else if (!*last)
    last = "nothing on stderr";
  if (timed_out)
    snprintf(d->error, sizeof d->error, "%s --list-keys gave no answer in %llu ms; killed it", path,
             (unsigned long long)d->timeout_ms);
  else if (WIFSIGNALED(status))
    snprintf(d->error, sizeof d->error, "%s --list-keys died of signal %d (%s)", path,
             WTERMSIG(status), last);
  else if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != EXIT_NO_DEVICE)
    snprintf(d->error, sizeof d->error, "%s --list-keys failed with exit status %d (%s)", path,
             WEXITSTATUS(status), last);
}

static int is_binary_device(void *ctx, const pcd_device *dev) {
  pcache__devkey key;
  (void)ctx;
  memcpy(key.bytes, dev->key, PCACHE_DEVKEY_SIZE);
  return dev->entries && (pcache__devkey_abi(&key) & PCACHE_DEVKEY_ABI_BINARY) &&
         !pcache__devkey_is_staged(&key);
}

/* Whether the store holds entries under a binary key (a device in binary
 * mode, docs/client.md "Pipeline binaries"): only then is the probe asked
 * for the binary keys (--binary), which costs a VkDevice per device that
 * has pipeline binaries: a binary key supersedes only binary keys
 * (ops_replay_start.c, same_device), so without one stored a listed
 * binary key would start nothing. A store that cannot be read is taken
 * to hold some: the probe then costs more, but misses nothing. */
static int store_has_binary(pcd_detect *d) {
  pcd_txn *txn;
  int r;
  if (!d->srv->store || pcd_txn_begin(d->srv->store, 0, &txn) < 0)
    return 1;
  r = pcd_devices_foreach(txn, is_binary_device, NULL);
  pcd_txn_abort(txn);
  return r != 0;
}

/* Runs the probe to its end, its deadline, or pcached's stop; the result
 * in d->dev, d->n_dev and d->error. */
static void probe(pcd_detect *d, int binary) {
  const char *path = d->srv->replay->replayer_path;
  char *const argv[] = {(char *)path, "--list-keys", binary ? "--binary" : NULL, NULL};
  int out[2] = {-1, -1}, err[2] = {-1, -1}, status = 0, timed_out = 0, r;
  struct pollfd fds[2];
  posix_spawn_file_actions_t fa;
  uint64_t deadline = pcache__mono_ms() + d->timeout_ms;
  pid_t pid;
  d->n_dev = 0;
  d->error[0] = d->err_line[0] = '\0';
  d->out_len = d->err_len = 0;
  if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
    snprintf(d->error, sizeof d->error, "no pipe for %s: %s", path, strerror(errno));
    goto out_pipes;
  }
  if ((r = posix_spawn_file_actions_init(&fa)) != 0) {
    snprintf(d->error, sizeof d->error, "cannot start %s: %s", path, strerror(r));
    goto out_pipes;
  }
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  pthread_mutex_lock(&d->lock);
  /* Found through PATH when it is a bare name, as the replayer's start
   * (uv_spawn) finds it. */
  r = d->stopping ? ECANCELED : posix_spawnp(&pid, path, &fa, NULL, argv, environ);
  d->child = r == 0 ? pid : 0;
  pthread_mutex_unlock(&d->lock);
  posix_spawn_file_actions_destroy(&fa);
  if (r != 0) {
    snprintf(d->error, sizeof d->error, "cannot start %s: %s", path, strerror(r));
    goto out_pipes;
  }
  close(out[1]);
  close(err[1]);
  out[1] = err[1] = -1;
  fds[0] = (struct pollfd){.fd = out[0], .events = POLLIN};
  fds[1] = (struct pollfd){.fd = err[0], .events = POLLIN};
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    uint64_t now = pcache__mono_ms();
    if (now >= deadline) {
      timed_out = 1;
      break;
    }
    /* In slices, for a stop to be seen even if something the probe
     * started holds its pipes open after it was killed. */
    if (stopping(d))
      break;
    if (poll(fds, 2, deadline - now < POLL_SLICE_MS ? (int)(deadline - now) : POLL_SLICE_MS) < 0 &&
        errno != EINTR)
      break;
    for (int i = 0; i < 2; i++)
      if (fds[i].fd >= 0 && fds[i].revents && !drain(d, fds[i].fd, i == 0))
        fds[i].fd = -1; /* poll skips it */
  }
  pthread_mutex_lock(&d->lock);
  d->child = 0;
  pthread_mutex_unlock(&d->lock);
  if (fds[0].fd >= 0 || fds[1].fd >= 0)
    kill(pid, SIGKILL);
  /* A probe killed in a driver call may die late: reaped if it does soon,
   * else left to init once pcached exits. */
  for (uint64_t until = pcache__mono_ms() + REAP_MS;
       (r = (int)waitpid(pid, &status, WNOHANG)) == 0 && pcache__mono_ms() < until;)
    usleep(10000);
  /* What reached the pipe since the last poll, without waiting: whatever
   * still holds it open (the killed probe, a child of its driver) writes
   * nothing more worth a wait. */
  if (fds[0].fd >= 0 && fcntl(out[0], F_SETFL, O_NONBLOCK) == 0) {
    int more;
    do {
      errno = 0; /* drain answers 1 to EAGAIN too: poll's way, not this */
      more = drain(d, out[0], 1);
    } while (more && errno != EAGAIN);
  }
  /* A failed probe's lines too: pcache-replay writes each device's as it
   * is made, so one driver that hangs or crashes does not hide the
   * devices listed before it (report says it failed all the same). */
  if (r != pid) {
    parse(d, 1);
    snprintf(d->error, sizeof d->error, "%s --list-keys did not end when killed", path);
    goto out_pipes;
  }
  judge(d, path, status, timed_out);
  parse(d, d->error[0] || d->out_len == OUT_MAX);

out_pipes:
  for (int i = 0; i < 2; i++) {
    if (out[i] >= 0)
      close(out[i]);
    if (err[i] >= 0)
      close(err[i]);
  }
}

/* -------------------------------------------------------------- the jobs */

/* What the probe found, for the held job's reply (the ReplayStart's run
 * adds the count of replays pending, ops_replay_start.c): the first n_dev
 * of d->dev (0 from other threads than the probe's), and error, if any.
 * Built in a scratch arena and unpacked into a message the job owns,
 * since the writer resets a job's arena before each run. */
static void answer(pcd_detect *d, pcd_job *job, const char *error, unsigned n_dev) {
  Pcachepb__ReplayStartReply reply = PCACHEPB__REPLAY_START_REPLY__INIT;
  Pcachepb__DeviceInfo info[MAX_DEVICES], *infos[MAX_DEVICES];
  uint8_t *packed;
  size_t size;
  reply.detect_error = (char *)(error ? error : "");
  for (unsigned i = 0; i < n_dev; i++) {
    pcachepb__device_info__init(&info[i]);
    info[i].key.data = d->dev[i].key.bytes;
    info[i].key.len = PCACHE_DEVKEY_SIZE;
    info[i].name = d->dev[i].name;
    info[i].driver_name = d->dev[i].driver_name;
    info[i].driver_info = d->dev[i].driver_info;
    infos[reply.n_detected++] = &info[i];
  }
  reply.detected = infos;
  size = pcachepb__replay_start_reply__get_packed_size(&reply);
  /* Without memory the reply says nothing of the probe; the count comes. */
  if ((packed = pcache__malloc(size ? size : 1)) != NULL) {
    pcachepb__replay_start_reply__pack(&reply, packed);
    job->detected = pcachepb__replay_start_reply__unpack(&pcache__pb_allocator, size, packed);
    pcache__free(packed);
  }
  pcd_writer_submit(d->srv->writer, job);
}

static void answer_all(pcd_detect *d, job_queue *q, const char *error, unsigned n_dev) {
  pcd_job *job;
  while ((job = pcache_queue_pop(q)) != NULL)
    answer(d, job, error, n_dev);
}

/* The probe's findings: logged, each key noted as a client's (the same
 * job a client's first Get of it queues), then the jobs that waited. */
static void report(pcd_detect *d, job_queue *jobs) {
  uint8_t keys[MAX_DEVICES][PCACHE_DEVKEY_SIZE];
  if (d->error[0] && d->n_dev) {
    log_warn("replay: cannot list the Vulkan devices: %s. The keys listed before that (%u) are "
             "used; for the devices after, replays start when a program names its driver's key; "
             "run pcache-replay --list-keys to see why",
             d->error, d->n_dev);
  } else if (d->error[0]) {
    log_warn("replay: cannot list the Vulkan devices: %s. Replays start when a program names "
             "its driver's key; run pcache-replay --list-keys to see why",
             d->error);
  } else if (!d->n_dev) {
    log_info("replay: pcache-replay --list-keys found no Vulkan device");
  }
  for (unsigned i = 0; i < d->n_dev; i++) {
    char hex[65];
    pcache__devkey_format(&d->dev[i].key, hex);
    log_info("replay: installed: %s (%s %s), %skey %s", d->dev[i].name, d->dev[i].driver_name,
             d->dev[i].driver_info,
             pcache__devkey_abi(&d->dev[i].key) & PCACHE_DEVKEY_ABI_BINARY ? "binary " : "", hex);
    pcd_replay_note(d->srv->replay, d->dev[i].key.bytes, PCACHE_DEVKEY_SIZE, "", 0, 0);
    memcpy(keys[i], d->dev[i].key.bytes, PCACHE_DEVKEY_SIZE);
  }
  /* What the fleet has for these devices is pulled and staged for the
   * replayer now, before a program asks (docs/fleet.md "Sync"). */
  if (d->n_dev)
    pcd_remote_sync_devices(d->srv->remote, keys[0], d->n_dev);
  answer_all(d, jobs, d->error[0] ? d->error : NULL, d->n_dev);
}

static void *detect_main(void *arg) {
  pcd_detect *d = arg;
  job_queue jobs;
  pthread_mutex_lock(&d->lock);
  while (!d->stopping) {
    if (!d->wanted) {
      pthread_cond_wait(&d->cond, &d->lock);
      continue;
    }
    /* The jobs that came before this probe begins ride on it; those that
     * come while it runs wait for the next: a driver installed meanwhile
     * may be after what this one saw. */
    d->wanted = 0;
    pcache_queue_append(&d->riding, &d->waiting);
    pthread_mutex_unlock(&d->lock);
    {
      /* A driver that crashes or hangs making a binary device, or in
       * vkGetPipelineKeyKHR, must not cost the VkPipelineCache keys of
       * every device: listed again without the binary keys. */
      int binary = store_has_binary(d);
      probe(d, binary);
      if (binary && d->error[0] && !stopping(d)) {
        log_warn("replay: cannot list the binary keys (%s); listing the devices without them",
                 d->error);
        probe(d, 0);
      }
    }
    pthread_mutex_lock(&d->lock);
    /* A stop that came meanwhile took (and answered) them. */
    pcache_queue_init(&jobs);
    pcache_queue_append(&jobs, &d->riding);
    if (d->stopping)
      break;
    pthread_mutex_unlock(&d->lock);
    report(d, &jobs);
    pthread_mutex_lock(&d->lock);
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

int pcd_detect_start(pcd_detect *d) {
  int r;
  if (!d || d->srv->replay->disabled)
    return 0;
  pthread_mutex_lock(&d->lock);
  d->wanted |= d->at_start; /* or a request that came first */
  pthread_mutex_unlock(&d->lock);
  if ((r = pthread_create(&d->thread, NULL, detect_main, d)) != 0)
    return -r;
  d->started = 1;
  return 0;
}

void pcd_detect_submit(pcd_detect *d, pcd_job *job) {
  const char *why = NULL;
  pthread_mutex_lock(&d->lock);
  if (d->srv->replay->disabled)
    why = "replay is off (PCACHE_REPLAY=off in pcached's environment); remove it and restart "
          "pcached to turn it on";
  else if (d->stopping)
    why = "pcached is stopping; run it again once pcached has started";
  if (!why) {
    pcache_queue_push(&d->waiting, job);
    d->wanted = 1;
    pthread_cond_signal(&d->cond);
  }
  pthread_mutex_unlock(&d->lock);
  if (why)
    answer(d, job, why, 0);
}

void pcd_detect_stop(pcd_detect *d) {
  job_queue jobs;
  if (!d)
    return;
  pcache_queue_init(&jobs);
  pthread_mutex_lock(&d->lock);
  d->stopping = 1;
  if (d->child)
    kill(d->child, SIGKILL);
  pcache_queue_append(&jobs, &d->riding);
  pcache_queue_append(&jobs, &d->waiting);
  pthread_cond_signal(&d->cond);
  pthread_mutex_unlock(&d->lock);
  answer_all(d, &jobs, "pcached is stopping; run it again once pcached has started", 0);
  if (d->started)
    pthread_join(d->thread, NULL);
  d->started = 0;
}

void pcd_detect_free(pcd_detect *d) {
  if (!d)
    return;
  pthread_cond_destroy(&d->cond);
  pthread_mutex_destroy(&d->lock);
  pcache__free(d);
}
