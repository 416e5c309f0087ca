/* pcached: wiring only. Each concern lives in its own file
 * (docs/architecture.md); the policies main() applies (the map size, for
 * one) are the config's. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include <pcache/pcache.h>

#include "activation.h"
#include "client_reports.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/paths.h"
#include "config.h"
#include "dispatch.h"
#include "remote.h"
#include "replay.h"
#include "replay_exe.h"
#include "replay_detect.h"
#include "segment.h"
#include "server.h"

/* The accepting loop's calls up (pcd_server.on_second, on_stopping). */
static void each_second(pcd_server *srv) { pcd_segments_expire(srv->segments, pcache__mono_us()); }

static void stopping(pcd_server *srv) {
  pcd_remote_stop(srv->remote);
  pcd_detect_stop(srv->detect);
}

/* The fleet's program names go to the replay (remote.h, pcd_remote_on_exe). */
static void record_exe(void *replay, const char *app, const char *exe) {
  pcd_replay_exe_record(replay, app, exe);
}

/* What the router tells the replay of its clients (pcd_server.on_note,
 * on_hello, on_import). */
static void note(pcd_server *srv, const uint8_t *device_key, size_t key_len, const char *app,
                 uint32_t pid, size_t pipelines) {
  pcd_replay_note(srv->replay, device_key, key_len, app, pid, pipelines);
}

static void hello(pcd_server *srv, const char *app, uint32_t pid) {
  pcd_replay_exe_note(srv->replay, app, pid);
}

static void import(pcd_server *srv) { pcd_replay_forget_keys(srv->replay); }

int main(int argc, char **argv) {
  pcd_config config;
  pcd_server srv;
  uv_loop_t loop;
  char status[512];
  int r;

  r = pcd_config_parse(argc, argv, &config);
  if (r != 0)
    return r > 0 ? 0 : 2;
  pcache__log_set_level(config.log_level);
  pcache__log_set_ident(NULL);
  /* A client that goes away mid-reply must not kill us. */
  signal(SIGPIPE, SIG_IGN);
  umask(0077);

  memset(&srv, 0, sizeof srv);
  srv.config = &config;
  srv.on_request = pcd_dispatch;
  srv.on_second = each_second;
  srv.on_stopping = stopping;
  srv.on_note = note;
  srv.on_hello = hello;
  srv.on_import = import;
  srv.put_hooks = &pcd_replay_job_hooks;
  srv.listen_fd = -1;
  r = pcache__data_dir(config.data_dir_arg, srv.data_dir, sizeof srv.data_dir);
  if (r < 0) {
    log_error("%s: pass --data-dir, or set PCACHE_DATA_DIR, XDG_CACHE_HOME or HOME",
              r == -ENOENT ? "no data directory (none of PCACHE_DATA_DIR, XDG_CACHE_HOME and HOME "
                             "is set)"
                           : "the data directory's path is too long");
    return 1;
  }
  if ((r = uv_loop_init(&loop)) < 0) {
    log_error("uv_loop_init: %s", uv_strerror(r));
    return 1;
  }
  srv.loop = &loop;
  if ((r = pcd_client_reports_new(&srv.client_reports)) < 0 ||
      (r = pcd_segments_new(&config, &srv.segments)) < 0) {
    log_error("cannot make room for client reports and segments: %s", strerror(-r));
    goto out_loop;
  }

  if ((r = pcd_server_listen(&srv)) < 0)
    goto out_loop;
  if ((r = pcd_store_open(srv.data_dir, pcd_config_map_size(&config), &srv.store)) < 0) {
    log_error("cannot open the store in %s: %s", srv.data_dir, pcache_strerror(r));
    goto out_listen;
  }
  r = pcd_writer_start(srv.store, &config, &srv.stats, pcd_dispatch_job_done, &srv.writer);
  if (r < 0) {
    log_error("cannot start the writer thread: %s", strerror(-r));
    goto out_store;
  }
  if ((r = pcd_replay_new(&srv, &srv.replay)) < 0 ||
      (r = pcd_replay_start(srv.replay, &loop)) < 0 ||
      (r = pcd_detect_new(&srv, &srv.detect)) < 0) {
    log_error("cannot set up replays: %s", strerror(-r));
    pcd_writer_stop(srv.writer);
    goto out_store;
  }
  if (config.remote_arg &&
      (r = pcd_remote_new(&config, &loop, srv.store, srv.writer, &srv.stats, pcd_dispatch_job_done,
                          &pcd_replay_job_hooks, srv.replay, &srv.remote)) < 0) {
    pcd_writer_stop(srv.writer);
    goto out_store;
  }
  pcd_remote_on_exe(srv.remote, record_exe);
  if ((r = pcd_server_start(&srv)) < 0) {
    log_error("cannot start serving: %s", pcache_strerror(r));
    pcd_remote_stop(srv.remote);
    uv_run(&loop, UV_RUN_NOWAIT);
    pcd_writer_stop(srv.writer);
    goto out_store;
  }
  /* After the server: the probe takes a while, and clients are served
   * meanwhile (one that names the new key first starts the replay). */
  if ((r = pcd_detect_start(srv.detect)) < 0)
    log_error("cannot start the probe of the installed drivers: %s; replays start when a "
              "program names its driver's key",
              strerror(-r));
  log_info("pcached %s listening on %s, store %s", PCACHE_VERSION_STRING, srv.socket_path,
           srv.data_dir);
  snprintf(status, sizeof status, "STATUS=serving %s", srv.socket_path);
  pcd_notify("READY=1");
  pcd_notify(status);

  uv_run(&loop, UV_RUN_DEFAULT);

  pcd_detect_stop(srv.detect); /* pcd_server_stop did, unless the loop ended otherwise */
  pcd_detect_free(srv.detect);
  pcd_replay_stop(srv.replay);
  pcd_replay_free(srv.replay);
  pcd_segments_stop(srv.segments); /* its builder reads the store */
  pcd_store_close(srv.store);
  uv_loop_close(&loop);
  pcd_remote_free(srv.remote);
  pcd_client_reports_free(srv.client_reports);
  pcd_segments_free(srv.segments);
  log_info("stopped");
  return 0;

out_store:
  pcd_detect_free(srv.detect);
  pcd_replay_stop(srv.replay);
  pcd_replay_free(srv.replay);
  pcd_segments_stop(srv.segments);
  pcd_store_close(srv.store);
  pcd_remote_free(srv.remote);
out_listen:
  if (srv.listen_fd >= 0)
    close(srv.listen_fd);
  /* A refused data dir, say: leave no socket behind that clients would
   * find and be refused by. */
  if (srv.listen_fd >= 0 && !srv.activated)
    unlink(srv.socket_path);
out_loop:
  pcd_client_reports_free(srv.client_reports);
  pcd_segments_free(srv.segments);
  uv_loop_close(&loop);
  return 1;
}
