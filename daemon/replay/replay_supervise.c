/* The replayer process (replay.h), and what sets replays off: a client
 * naming a device key (pcd_replay_note, on an I/O thread, which queues
 * the job that looks for a key it supersedes). The process is started on
 * the accepting loop when a replay is under way, watched for hangs, and restarted after it ends
 * before the replay does. How it ended decides what the items it had in
 * flight become: a crash (a signal other than SIGKILL, or an exit code
 * that is not ours) with one item out makes that item bad; with several
 * out, they are handed out again one at a time, so the next crash names
 * its item; a SIGKILL, SIGTERM or SIGINT from elsewhere (a person, or a
 * driver ending its process), or an exit with items out and none
 * reported (a driver's exit()), hands them out again one at a time and
 * blames an item that does it alone PCD_REPLAY_OOM_RETRIES times, so no
 * item keeps the replay restarting for ever; a hang past PCACHE_REPLAY_HANG_MS is
 * killed here and makes its item bad. Its memory has a hard limit
 * (RLIMIT_DATA, set here as it starts); running out of it (its own exit 5,
 * or a SIGKILL while the OOM killer's count rose) hands the items out
 * again one at a time, and an item that does it alone
 * PCD_REPLAY_OOM_RETRIES times is bad.
 *
 * Its stderr is a pipe that pcached reads and writes into its own log,
 * line by line at the line's level: the replayer's messages reach the
 * journal with pcached's, and an orphaned replayer never holds open a
 * pipe of whoever started pcached (a test, a script reading its output).
 * Its stdout goes nowhere: it prints nothing there. */
#include "replay.h"
#include "replay_exe.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "server.h"

static void on_exit_cb(uv_process_t *proc, int64_t status, int term_signal);
static void restart_cb(uv_timer_t *t);

/* ------------------------------------------------------------- its log */

/* Longest line kept whole; a longer one is written in pieces. */
#define RELAY_LINE_MAX 1024

/* One per replayer process, freed when its pipe closes (which may be
 * before or after the process's exit is seen). */
typedef struct relay {
  uv_pipe_t pipe;
  pcd_replay *rp;
  size_t len;
  char buf[RELAY_LINE_MAX];
} relay;

static void relay_closed(uv_handle_t *h) { pcache__free(h->data); }

static void relay_close(relay *rl) {
  if (rl->rp->relay == rl)
    rl->rp->relay = NULL;
  uv_close((uv_handle_t *)&rl->pipe, relay_closed);
}

/* One line of the replayer's, as common/log.c writes it to a pipe
 * ("warning: text"; "<N>text" where its stderr is the journal), into
 * pcached's log at that level (pcached's --log-level applies). */
static void relay_line(const char *s, size_t n) {
  static const char *const words[] = {"emerg",   "alert",  "crit", "error",
                                      "warning", "notice", "info", "debug"};
  int level = PCACHE_LOG_INFO;
  if (n >= 3 && s[0] == '<' && s[1] >= '0' && s[1] <= '7' && s[2] == '>') {
    level = s[1] - '0';
    s += 3, n -= 3;
  } else {
    for (int i = 0; i < 8; i++) {
      size_t w = strlen(words[i]);
      if (n > w + 1 && memcmp(s, words[i], w) == 0 && s[w] == ':' && s[w + 1] == ' ') {
        level = i;
        s += w + 2, n -= w + 2;
        break;
      }
    }
  }
  if (n)
    pcache__log_at(level, "%.*s", (int)n, s);
}

static void relay_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  relay *rl = h->data;
  (void)hint;
  *buf = uv_buf_init(rl->buf + rl->len, (unsigned)(sizeof rl->buf - rl->len));
}

static void relay_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  relay *rl = s->data;
  size_t start = 0;
  (void)buf;
  if (n < 0) {
    if (rl->len)
      relay_line(rl->buf, rl->len);
    relay_close(rl);
    return;
  }
  rl->len += (size_t)n;
  for (size_t i = 0; i < rl->len; i++)
    if (rl->buf[i] == '\n') {
      relay_line(rl->buf + start, i - start);
      start = i + 1;
    }
  if (start == 0 && rl->len == sizeof rl->buf) {
    relay_line(rl->buf, rl->len); /* no end in sight: what there is */
    start = rl->len;
  }
  memmove(rl->buf, rl->buf + start, rl->len - start);
  rl->len -= start;
}

/* ------------------------------------------------------------- process */

static void submit(pcd_replay *rp, pcd_job_type type) {
  pcd_job *job;
  if (!rp->srv->writer || !(job = pcd_job_new(type)))
    return;
  job->ctx = rp;
  pcd_writer_submit(rp->srv->writer, job);
}

static void watch_cb(uv_timer_t *t) {
  pcd_replay *rp = t->data;
  uint64_t now;
  pthread_mutex_lock(&rp->lock);
  /* Read under the lock: an item claimed after an earlier reading would
   * start after "now", and the unsigned age below would wrap into a hang
   * (CI, TSan on a loaded machine: an item blamed as hung within seconds). */
  now = pcache__mono_us();
  unsigned oldest = rp->st.n_flight;
  /* The item out longest: a thread builds its items in the order it
   * claimed them, so the one it is stuck on was handed out before the
   * one it claimed while building it (replay/replayer.c), and before
   * anything its stuck build keeps it from claiming. */
  for (unsigned i = 0; i < rp->st.n_flight; i++)
    if (oldest == rp->st.n_flight || rp->st.flight[i].started_us < rp->st.flight[oldest].started_us)
      oldest = i;
  if (rp->running && !rp->hang_kill && oldest < rp->st.n_flight &&
      now > rp->st.flight[oldest].started_us &&
      now - rp->st.flight[oldest].started_us > rp->hang_us) {
    rp->hang_kill = 1;
    rp->hang_hash = rp->st.flight[oldest].hash;
    log_warn("replay: pid %u is stuck on one pipeline for over %llu ms; killing it", rp->pid,
             (unsigned long long)(rp->hang_us / 1000));
    uv_process_kill(&rp->proc, SIGKILL);
  }
  pthread_mutex_unlock(&rp->lock);
}

/* Where the OOM killer's kills are counted: pcached's own cgroup (v2
 * memory.events, whose oom_kill counts the processes in it that any OOM
 * killer took, the replayer included), else the whole system's
 * (/proc/vmstat). */
static void find_oom_counter(pcd_replay *rp) {
  char line[4096], path[sizeof rp->oom_path];
  FILE *f = fopen("/proc/self/cgroup", "r");
  snprintf(rp->oom_path, sizeof rp->oom_path, "/proc/vmstat");
  if (!f)
    return;
  while (fgets(line, sizeof line, f)) {
    size_t n = strcspn(line, "\n");
    line[n] = '\0';
    if (strncmp(line, "0::/", 4) == 0 &&
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.events", line + 3) <
            (int)sizeof path &&
        access(path, R_OK) == 0)
      memcpy(rp->oom_path, path, sizeof path);
  }
  fclose(f);
}

/* The count at oom_path ("oom_kill N" in both files); 0 when unreadable. */
static uint64_t oom_kills(const pcd_replay *rp) {
  char line[256];
  uint64_t n = 0;
  FILE *f = fopen(rp->oom_path, "r");
  if (!f)
    return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "oom_kill %" SCNu64, &n) == 1)
      break;
  fclose(f);
  return n;
}

/* The replayer's hard memory limit: RLIMIT_DATA, soft and hard, which
 * counts its private writable memory (heap, anonymous mappings, stacks)
 * and not the address space a GPU driver reserves or the device memory
 * it maps (docs/replay.md, "Its memory"). libuv has no hook between fork
 * and exec, so it is set on the new process here, under rp->lock: no item
 * is handed to it before (op_claim takes the lock, and checks its pid). */
static void limit_memory(pcd_replay *rp) {
  struct rlimit rl = {(rlim_t)rp->mem_limit_mb << 20, (rlim_t)rp->mem_limit_mb << 20};
  if (!rp->mem_limit_mb || prlimit(rp->proc.pid, RLIMIT_DATA, &rl, NULL) == 0)
    return;
  log_warn("replay: cannot limit pcache-replay's memory to %" PRIu64 " MiB (%s): a pipeline that "
           "needs more is stopped only by the OOM killer, which is blamed on it all the same; "
           "PCACHE_REPLAY_MEM_LIMIT_MB=0 in pcached's environment asks for no limit",
           rp->mem_limit_mb, strerror(errno));
}

/* Builds under the program's name are off for the rest of the run: a
 * copy that cannot be made or started once would fail for every name. */
static void as_program_off(pcd_replay *rp, const char *what, const char *why) {
  atomic_store(&rp->as_program, 0);
  log_warn("replay: cannot %s a copy of pcache-replay named %s under %s/replayers (%s); building "
           "every program's pipelines as pcache-replay until pcached restarts, so NVIDIA's "
           "driver cache of each program starts empty (docs/replay.md \"Builds under the "
           "program's name\"): make room or allow executables there, or set "
           "PCACHE_REPLAY_AS_PROGRAM=0 in pcached's environment",
           what, rp->next_exe, rp->srv->data_dir, why);
  rp->exe_name[0] = rp->next_exe[0] = '\0';
}

static void spawn(pcd_replay *rp) {
  char key_hex[65], threads[16], copy[4096];
  pcache__devkey nk;
  const char *file = rp->replayer_path;
  const char *args[] = {file,    "--socket", rp->srv->socket_path, "--device", key_hex, "--threads",
                        threads, NULL};
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_IGNORE}, {.flags = UV_IGNORE}, {.flags = UV_IGNORE}};
  uv_process_options_t opt = {
      .exit_cb = on_exit_cb, .file = file, .args = (char **)args, .stdio_count = 3, .stdio = stdio};
  relay *rl;
  int r;
  /* The next items are a program's whose name is known (replay_exe.c). */
  rp->exe_name[0] = '\0';
  rp->switching = 0;
  if (atomic_load(&rp->as_program) && rp->next_exe[0]) {
    if ((r = pcd_replay_exe_copy(rp, rp->next_exe, copy, sizeof copy)) < 0) {
      as_program_off(rp, "make", strerror(-r));
    } else {
      snprintf(rp->exe_name, sizeof rp->exe_name, "%s", rp->next_exe);
      args[0] = opt.file = file = copy;
    }
  }
  rl = pcache__calloc(1, sizeof *rl);
  /* Without a pipe (no memory, no descriptor) it still runs; its
   * messages are lost. */
  if (rl && uv_pipe_init(rp->loop, &rl->pipe, 0) == 0) {
    rl->rp = rp;
    rl->pipe.data = rl;
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *)&rl->pipe;
  } else {
    pcache__free(rl);
    rl = NULL;
  }
  memcpy(nk.bytes, rp->st.rec.new_key, PCACHE_DEVKEY_SIZE);
  memcpy(rp->spawned_key, nk.bytes, PCACHE_DEVKEY_SIZE);
  pcache__devkey_format(&nk, key_hex);
  snprintf(threads, sizeof threads, "%u", rp->threads);
  rp->proc.data = rp;
  if (!rp->oom_path[0])
    find_oom_counter(rp);
  rp->oom_kills_at_spawn = oom_kills(rp);
  if ((r = uv_spawn(rp->loop, &rp->proc, &opt)) < 0 && rp->exe_name[0]) {
    /* A data directory mounted noexec, say: the plain replayer instead. */
    uv_close((uv_handle_t *)&rp->proc, NULL);
    if (rl)
      uv_close((uv_handle_t *)&rl->pipe, relay_closed);
    as_program_off(rp, "start", uv_strerror(r));
    /* The handle is reused once closed: the next turn of the loop. */
    uv_timer_start(&rp->watch, restart_cb, 0, 0);
    return;
  }
  if (r < 0) {
    log_error("replay: cannot start %s: %s", rp->replayer_path, uv_strerror(r));
    rp->gave_up = 1;
    snprintf(rp->gave_up_why, sizeof rp->gave_up_why, "cannot start pcache-replay");
    uv_close((uv_handle_t *)&rp->proc, NULL);
    if (rl)
      uv_close((uv_handle_t *)&rl->pipe, relay_closed);
    return;
  }
  limit_memory(rp);
  /* A replayer stuck in its driver must not keep pcached from stopping:
   * the loop ends without waiting for it (nor for its stderr), and
   * pcd_replay_stop kills it. */
  uv_unref((uv_handle_t *)&rp->proc);
  if (rl) {
    if (rp->relay)
      relay_close(rp->relay); /* the last one's orphan, if any, is not heard */
    rp->relay = rl;
    uv_unref((uv_handle_t *)&rl->pipe);
    if (uv_read_start((uv_stream_t *)&rl->pipe, relay_alloc, relay_read) < 0)
      relay_close(rl);
  }
  rp->running = 1;
  rp->pid = (uint32_t)rp->proc.pid;
  atomic_store(&rp->replayer_pid, rp->pid);
  rp->hang_kill = 0;
  rp->landed = 0;
  log_info("replay: started %s (pid %u, %u threads) for %s", file, rp->pid, rp->threads, key_hex);
  uv_timer_start(&rp->watch, watch_cb, 1000, 1000);
}

static void restart_cb(uv_timer_t *t) {
  pcd_replay *rp = t->data;
  pthread_mutex_lock(&rp->lock);
  rp->want_spawn = 1;
  pthread_mutex_unlock(&rp->lock);
  uv_async_send(&rp->wake);
}

/* Blames the one item out, or hands the items out again. */
static void settle_flight(pcd_replay *rp, int blame, const char *why) {
  if (blame && rp->st.n_flight == 1) {
    log_warn("replay: a pipeline ended the replayer (%s); recorded as bad, skipped from now on, "
             "and the app compiles it itself",
             why);
    pcd_replay_queue_bad(rp, &rp->st.flight[0].hash, why);
  } else {
    for (unsigned i = 0; i < rp->st.n_flight && rp->st.n_retry < PCD_REPLAY_MAX_RETRY; i++)
      rp->st.retry[rp->st.n_retry++] = rp->st.flight[i].hash;
  }
  rp->st.n_flight = 0;
  rp->st.retry_in_flight = 0;
}

/* The replayer ended in a way that may or may not be its item's fault: it
 * ran out of memory, something killed it, or it exited with items out and
 * nothing reported. Only an item handed out alone (a retry: nothing else
 * was built beside it) is blamed; the others go out again one at a time.
 * One that does it alone is handed out again, alone, until it has done so
 * PCD_REPLAY_OOM_RETRIES times: then it is bad, so that no item can keep
 * the replay starting replayers for ever, this run or after a restart.
 * advice: what the user can do, or NULL. */
static void settle_strikes(pcd_replay *rp, const char *why, const char *advice) {
  const pcache__hash *h = &rp->st.flight[0].hash;
  if (rp->st.n_flight != 1 || !rp->st.retry_in_flight) {
    log_warn("replay: pcache-replay ran %s with %u items in flight; handing them "
             "out one at a time to find the one to blame",
             why, rp->st.n_flight);
    settle_flight(rp, 0, why);
    return;
  }
  if (!rp->oom_strikes || memcmp(h->bytes, rp->oom_hash.bytes, PCACHE_HASH_SIZE) != 0) {
    rp->oom_hash = *h;
    rp->oom_strikes = 0;
  }
  if (++rp->oom_strikes >= PCD_REPLAY_OOM_RETRIES) {
    rp->oom_strikes = 0;
    settle_flight(rp, 1, why);
    if (advice)
      log_warn("replay: %s", advice);
    return;
  }
  log_warn("replay: a pipeline ran pcache-replay %s alone, %u of %u times; "
           "trying it again",
           why, rp->oom_strikes, PCD_REPLAY_OOM_RETRIES);
  settle_flight(rp, 0, why);
}

static void on_exit_cb(uv_process_t *proc, int64_t status, int sig) {
  pcd_replay *rp = proc->data;
  uint64_t delay_ms = 0;
  int restart = 0, out_of_memory = 0;
  char why[96];
  uv_timer_stop(&rp->watch);
  uv_close((uv_handle_t *)proc, NULL);
  pthread_mutex_lock(&rp->lock);
  rp->running = 0;
  atomic_store(&rp->replayer_pid, 0);
  rp->st.paused[0] = '\0';
  if (!rp->hang_kill && sig == SIGKILL && oom_kills(rp) > rp->oom_kills_at_spawn) {
    out_of_memory = 1;
    snprintf(why, sizeof why, "out of memory (killed by the OOM killer)");
  } else if (!sig && status == PCD_REPLAY_EXIT_OUT_OF_MEMORY) {
    out_of_memory = 1;
    snprintf(why, sizeof why, "out of memory (limit %" PRIu64 " MiB)", rp->mem_limit_mb);
  }
  if (rp->hang_kill) {
    snprintf(why, sizeof why, "hung (over %llu ms)", (unsigned long long)(rp->hang_us / 1000));
    /* The stuck one is to blame whatever else was out. */
    pcd_replay_queue_bad(rp, &rp->hang_hash, why);
    pcd_replay_land(rp, &rp->hang_hash);
    settle_flight(rp, 0, why);
    rp->restarts++;
    restart = 1;
  } else if (!out_of_memory && (sig == SIGKILL || sig == SIGTERM || sig == SIGINT)) {
    /* Most likely a person, or pcached's own stop, and no item's fault;
     * but a driver can end its process so too, and the same item, alone,
     * every time is the one doing it. */
    log_warn("replay: pid %u was killed (signal %d); starting another", rp->pid, sig);
    snprintf(why, sizeof why, "killed (signal %d) while building it", sig);
    if (rp->closing || !rp->st.n_flight)
      settle_flight(rp, 0, "killed");
    else
      settle_strikes(rp, why, NULL);
    rp->restarts++;
    restart = 1;
    delay_ms = 1000;
  } else if (out_of_memory || sig ||
             (status != 0 && status != PCD_REPLAY_EXIT_NO_DEVICE &&
              status != PCD_REPLAY_EXIT_RECYCLE) ||
             (status == PCD_REPLAY_EXIT_NO_DEVICE && rp->st.n_flight)) {
    /* (No device with items out is not the replayer's own answer: it
     * says so before it claims anything. A driver that exited so is.) */
    if (!out_of_memory && sig)
      snprintf(why, sizeof why, "crashed (signal %d: %s)", sig, strsignal(sig));
    else if (!out_of_memory)
      snprintf(why, sizeof why, "crashed (exit status %lld)", (long long)status);
    if (!rp->st.n_flight)
      rp->failures_in_row++;
    if (out_of_memory)
      settle_strikes(rp, why,
                     "raise PCACHE_REPLAY_MEM_LIMIT_MB in pcached's environment if pipelines "
                     "that large are expected (pipelines already recorded as bad stay skipped)");
    else
      settle_flight(rp, 1, why);
    rp->restarts++;
    restart = 1;
    delay_ms = 250u << (rp->failures_in_row < 7 ? rp->failures_in_row : 7);
  } else if (status == PCD_REPLAY_EXIT_NO_DEVICE) {
    log_warn("replay: no Vulkan device here has the new key; that replay waits for a program "
             "on it, a pcachectl replay or a restart of pcached, and the others go on");
    settle_flight(rp, 0, "");
    /* The key it was started for: the replay loaded now may be another
     * (the newer build's, loaded while it ran), which the sync job below
     * keeps; it unloads this key's. */
    pcd_replay_no_device(rp, rp->spawned_key);
  } else {
    /* 0 (its threads ran out of items) or RECYCLE: whatever is left is
     * started afresh. One that reported nothing and yet left work behind
     * (a replayer that exits at once) is restarted as after a crash, with
     * the growing pause and the bound on failures in a row, never as fast
     * as it can exit. */
    /* Items out and none reported: it exited while building, as a driver
     * that calls exit() does; struck as a kill is. */
    if (!rp->landed && rp->st.n_flight) {
      snprintf(why, sizeof why, "exited (status %lld) while building it", (long long)status);
      settle_strikes(rp, why, NULL);
    } else {
      settle_flight(rp, 0, "");
    }
    restart = rp->st.active && !rp->st.finished_now;
    /* Told to finish for another program's name (ops_replay_claim.c): the next
     * replayer starts at once, under that name; one that built nothing
     * (the order moved between its start and its claim) counts as a
     * failure, so an order that keeps moving cannot start them for ever. */
    if (restart && rp->switching) {
      if (rp->landed) {
        rp->failures_in_row = 0;
      } else {
        rp->failures_in_row++;
        delay_ms = 250u << (rp->failures_in_row < 7 ? rp->failures_in_row : 7);
      }
      log_info("replay: pid %u finished its program's pipelines; the next ones are %s's", rp->pid,
               rp->next_exe[0] ? rp->next_exe : "pcache-replay");
    } else if (restart && !rp->landed) {
      log_warn("replay: pid %u exited (status %lld) without reporting a pipeline", rp->pid,
               (long long)status);
      rp->failures_in_row++;
      rp->restarts++;
      delay_ms = 250u << (rp->failures_in_row < 7 ? rp->failures_in_row : 7);
    } else {
      rp->failures_in_row = 0;
    }
  }
  if (rp->failures_in_row >= PCD_REPLAY_MAX_FAILURES && out_of_memory) {
    log_error("replay: pcache-replay ran out of memory %u times in a row before any pipeline; "
              "giving up: raise PCACHE_REPLAY_MEM_LIMIT_MB (now %" PRIu64 " MiB) in pcached's "
              "environment and restart pcached",
              rp->failures_in_row, rp->mem_limit_mb);
    rp->gave_up = 1;
    snprintf(rp->gave_up_why, sizeof rp->gave_up_why,
             "the replayer runs out of memory: raise PCACHE_REPLAY_MEM_LIMIT_MB");
    restart = 0;
  } else if (rp->failures_in_row >= PCD_REPLAY_MAX_FAILURES) {
    log_error("replay: pcache-replay failed %u times in a row before any pipeline; giving up "
              "until pcachectl replay or a restart of pcached",
              rp->failures_in_row);
    rp->gave_up = 1;
    snprintf(rp->gave_up_why, sizeof rp->gave_up_why, "the replayer keeps failing");
    restart = 0;
  }
  rp->want_sync = 1;
  /* The sync job queued next wakes a start when it commits: the pause
   * holds that one back too, and restart_cb starts it when it is over. */
  rp->spawn_after_ms = uv_now(rp->loop) + delay_ms;
  pthread_mutex_unlock(&rp->lock);
  if (rp->closing)
    return;
  uv_async_send(&rp->wake);
  if (restart)
    uv_timer_start(&rp->watch, restart_cb, delay_ms, 0);
}

static void wake_cb(uv_async_t *a) {
  pcd_replay *rp = a->data;
  uint64_t now = uv_now(rp->loop);
  int spawn_now, sync;
  pthread_mutex_lock(&rp->lock);
  /* None for a key found with no device: the sync job unloads its replay
   * (a start asked for before that replayer's exit was seen). */
  spawn_now = rp->want_spawn && rp->st.active && !rp->running && !rp->gave_up && !rp->closing &&
              !rp->disabled && !rp->st.finished_now &&
              !pcd_replay_device_missing(rp, rp->st.rec.new_key);
  if (spawn_now && now < rp->spawn_after_ms) {
    /* In a restart's pause: started when it is over (the same clock as
     * the timer's, and armed again here, so no wake is lost). */
    spawn_now = 0;
    uv_timer_start(&rp->watch, restart_cb, rp->spawn_after_ms - now, 0);
  }
  rp->want_spawn = 0;
  sync = rp->want_sync;
  rp->want_sync = 0;
  if (spawn_now)
    spawn(rp);
  if (rp->closing)
    sync = 0; /* the writer may be gone */
  pthread_mutex_unlock(&rp->lock);
  if (sync)
    submit(rp, PCD_JOB_REPLAY_SYNC);
}

void pcd_replay_note(pcd_replay *rp, const uint8_t *key, size_t key_len, const char *app,
                     uint32_t pid, size_t pipelines) {
  pcd_job *job;
  int is_new = 1;
  if (!rp || key_len != PCACHE_DEVKEY_SIZE)
    return;
  if (pid && pid == atomic_load(&rp->replayer_pid))
    return; /* the replayer's own Puts are not the user's work */
  pthread_mutex_lock(&rp->fg.lock);
  pcd_replay_fg_note(rp, key, app, pipelines, pcache__mono_us());
  for (unsigned i = 0; i < rp->fg.n_seen && is_new; i++)
    is_new = memcmp(rp->fg.seen[i], key, PCACHE_DEVKEY_SIZE) != 0;
  if (is_new) {
    if (rp->fg.n_seen == PCD_REPLAY_MAX_SEEN)
      rp->fg.n_seen = 0; /* forget them all: a new look costs one short job */
    memcpy(rp->fg.seen[rp->fg.n_seen++], key, PCACHE_DEVKEY_SIZE);
  }
  pthread_mutex_unlock(&rp->fg.lock);
  if (!is_new || rp->disabled || !rp->srv->writer)
    return;
  if (!(job = pcd_job_new(PCD_JOB_REPLAY_START)))
    return;
  job->ctx = rp;
  memcpy(job->device_key, key, PCACHE_DEVKEY_SIZE);
  snprintf(job->app, sizeof job->app, "%s", app ? app : "");
  pcd_writer_submit(rp->srv->writer, job);
}

int pcd_replay_start(pcd_replay *rp, uv_loop_t *loop) {
  int r;
  rp->loop = loop;
  if ((r = uv_async_init(loop, &rp->wake, wake_cb)) < 0)
    return pcd_uv_err(r);
  if ((r = uv_timer_init(loop, &rp->watch)) < 0) {
    uv_close((uv_handle_t *)&rp->wake, NULL);
    return pcd_uv_err(r);
  }
  rp->wake.data = rp->watch.data = rp;
  /* They must not keep the loop running once the server has stopped. */
  uv_unref((uv_handle_t *)&rp->wake);
  uv_unref((uv_handle_t *)&rp->watch);
  rp->handles_ready = 1;
  /* A replay the last run left pending goes on. */
  if (!rp->disabled)
    submit(rp, PCD_JOB_REPLAY_SYNC);
  return 0;
}

void pcd_replay_stop(pcd_replay *rp) {
  if (!rp || !rp->handles_ready)
    return;
  pthread_mutex_lock(&rp->lock);
  rp->closing = 1;
  pthread_mutex_unlock(&rp->lock);
  if (rp->running) {
    /* SIGKILL, not a request: a replayer stuck in a driver call would
     * outlive pcached otherwise, and it holds nothing to save (what it
     * built is Put; the rest is handed out again at the next start). */
    uv_process_kill(&rp->proc, SIGKILL);
    uv_close((uv_handle_t *)&rp->proc, NULL);
    rp->running = 0;
    atomic_store(&rp->replayer_pid, 0);
  }
  if (rp->relay)
    relay_close(rp->relay);
  uv_close((uv_handle_t *)&rp->wake, NULL);
  uv_close((uv_handle_t *)&rp->watch, NULL);
  uv_run(rp->loop, UV_RUN_NOWAIT);
  rp->handles_ready = 0;
}
