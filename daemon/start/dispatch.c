/* The router: each decoded request is checked (Hello first, then
 * validate.c), then answered on this I/O thread (a reader, reads.h; the
 * layer's reports, kept in memory, client_reports.h) or queued for the
 * writer as a job whose reply comes back here. */
#include "dispatch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "client_reports.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "jobs.h"
#include "proto/frame.h"
#include "reads.h"
#include "remote.h"
#include "remote_serve.h"
#include "replay_detect.h"
#include "respond.h"
#include "server.h"
#include "validate.h"

/* ----------------------------------------------------------------- reads */

/* Between two notes of a connection's Gets to the replay. */
#define GET_NOTE_US 1000

/* Tells the replay (through the server's on_note, main.c) that a client
 * names key for `pipelines` pipelines. */
static void note(pcd_conn *c, const ProtobufCBinaryData *key, const char *app, size_t pipelines) {
  if (c->srv->on_note)
    c->srv->on_note(c->srv, key->data, key->len, app, c->pid, pipelines);
}

/* Tells the replay that this client asks for pipelines (a foreground app:
 * the replay makes way, replay.h), at most once a GET_NOTE_US for the same
 * key. The note takes a lock every I/O thread shares, and a busy client
 * asks many times a millisecond; the Gets in between go with its next
 * note, and the replay's rate spans seconds (PCACHE_REPLAY_QUIET_MS).
 * A connection's first Get, or one for another key, is noted at once. */
static void note_gets(pcd_conn *c, const ProtobufCBinaryData *key, size_t pipelines) {
  uint64_t now = pcache__mono_us();
  int same = key->len == PCACHE_DEVKEY_SIZE && c->get_note.us &&
             memcmp(c->get_note.key, key->data, PCACHE_DEVKEY_SIZE) == 0;
  c->get_note.unnoted += pipelines;
  if (same && now - c->get_note.us < GET_NOTE_US)
    return;
  note(c, key, c->app, c->get_note.unnoted);
  c->get_note.unnoted = 0;
  c->get_note.us = now;
  if (key->len == PCACHE_DEVKEY_SIZE)
    memcpy(c->get_note.key, key->data, PCACHE_DEVKEY_SIZE);
}

/* ---------------------------------------------------------------- writes */

static void finish_job(pcd_job *job);

/* A job for req, its reply to come back to c; NULL after answering with
 * an error. */
static pcd_job *job_for(pcd_conn *c, Pcachepb__Request *req, pcd_job_type type) {
  pcd_job *job = pcd_job_new(type);
  if (!job || !c->srv->writer) {
    pcd_job_free(job);
    pcache__request_free(req);
    pcd_respond_error(c, c->srv->writer ? -ENOMEM : PCACHE_EUNAVAILABLE, NULL);
    return NULL;
  }
  job->req = req;
  /* Only a member with a signing key publishes (remote.h). */
  job->remote = pcd_remote_publishes(c->srv->remote) ? c->srv->remote : NULL;
  job->push = pcd_remote_push;
  job->conn = c;
  job->ctx = c->srv->replay;
  job->hooks = c->srv->put_hooks;
  job->finish = finish_job;
  snprintf(job->app, sizeof job->app, "%s", c->app);
  job->peer_pid = c->pid;
  pcd_conn_ref(c);
  c->busy = 1;
  c->worker->inflight++;
  /* This thread's hits recorded so far go in first, so eviction sees
   * them. */
  pcd_worker_flush_touches(c->worker);
  return job;
}

static void to_writer(pcd_conn *c, Pcachepb__Request *req, pcd_job_type type) {
  pcd_job *job = job_for(c, req, type);
  if (job)
    pcd_writer_submit(c->srv->writer, job);
}

/* About how many bytes a job moved through malloc (its request, LMDB's
 * dirty pages, its reply): what decides a trim afterwards. */
static uint64_t job_bytes(const pcd_job *job) {
  uint64_t n = job->n_touches * 3u * 4096u + job->out.size;
  return n + (job->ops->bytes ? job->ops->bytes(job) : 0);
}

void pcd_dispatch_job_done(pcd_job *job) {
  pcd_conn *c = job->conn;
  uint64_t bytes;
  if (c) {
    /* conn->worker never changes, and the submit's lock ordered it. */
    pcd_worker_post(c->worker, job);
    return;
  }
  if (job->finish) {
    job->finish(job); /* a fleet sync's slice (remote_sync.c) */
    return;
  }
  bytes = job_bytes(job);
  pcd_job_free(job);
  pcd_server_trim(bytes);
}

/* On the connection's worker: sends the job's reply, reads on. */
static void finish_job(pcd_job *job) {
  pcd_conn *c = job->conn;
  uint64_t bytes = job_bytes(job);
  if (c) {
    if (!c->closed) {
      pcd_conn_send(c, &job->out);
      pcd_conn_resume(c);
    }
    pcd_conn_unref(c);
  }
  pcd_job_free(job);
  pcd_server_trim(bytes);
}

/* FleetSync: answered by the remote once the sync it starts, or the one
 * under way, has ended. */
static void fleet_sync(pcd_conn *c, Pcachepb__Request *req) {
  pcd_job *job;
  if (!c->srv->remote) {
    pcache__request_free(req);
    pcd_respond_error(c, PCACHE_EUNAVAILABLE,
                      "pcached runs without --remote: there is no fleet to sync with "
                      "(docs/fleet.md)");
    return;
  }
  if (!(job = job_for(c, req, PCD_JOB_PUT)))
    return;
  /* Nothing of the request is needed, and a Put job's request is read as
   * a Put. */
  pcache__request_free(job->req);
  job->req = NULL;
  pcd_remote_sync_ask(c->srv->remote, job);
}

void pcd_dispatch(pcd_conn *c, Pcachepb__Request *req) {
  char msg[128];
  int r;
  log_debug("request: %s", pcache__request_kind_name(req));
  if (req->body_case != PCACHEPB__REQUEST__BODY_HELLO && !c->hello_done) {
    pcd_respond_error(c, PCACHE_ENOT_READY, "send Hello first");
    goto out_free;
  }
  if ((r = pcd_request_validate(req, c->srv->config, msg, sizeof msg)) < 0) {
    log_debug("request: %s refused: %s", pcache__request_kind_name(req), msg);
    pcd_respond_error(c, r, msg);
    goto out_free;
  }
  if (req->body_case == PCACHEPB__REQUEST__BODY_HELLO) {
    pcd_read_hello(c, req->hello);
    /* The program the app runs as: what the replayer builds its pipelines
     * under (replay_exe.c). Only Hello's app: libpcache's Puts and
     * Prefetches name that one too, and one that names another app is a
     * tool's (a script staging or uploading for a program), whose own
     * executable is not that program. */
    if (c->hello_done && c->srv->on_hello)
      c->srv->on_hello(c->srv, c->app, c->pid);
    goto out_free;
  }
  switch (req->body_case) {
  case PCACHEPB__REQUEST__BODY_GET:
    note_gets(c, &req->get->device_key, req->get->n_state_hashes);
    if (pcd_remote_serve(c, req))
      return; /* answered once the fleet was asked */
    pcd_read_get(c, req->get);
    break;
  case PCACHEPB__REQUEST__BODY_PREFETCH:
    note(c, &req->prefetch->device_key, *req->prefetch->app ? req->prefetch->app : c->app, 1);
    if (pcd_remote_serve(c, req))
      return;
    pcd_read_prefetch(c, req->prefetch);
    break;
  case PCACHEPB__REQUEST__BODY_SEGMENT:
    pcd_read_segment(c, req->segment);
    break;
  case PCACHEPB__REQUEST__BODY_REPLY_WINDOW:
    pcd_read_reply_window(c);
    break;
  case PCACHEPB__REQUEST__BODY_LIST:
    pcd_read_list(c, req->list);
    break;
  case PCACHEPB__REQUEST__BODY_STATS:
    pcd_read_stats(c);
    break;
  case PCACHEPB__REQUEST__BODY_CLIENT_REPORT:
    pcd_client_report_keep(c, req->client_report);
    break;
  case PCACHEPB__REQUEST__BODY_LIST_CLIENT_REPORTS:
    pcd_client_reports_list(c, req->list_client_reports);
    break;
  case PCACHEPB__REQUEST__BODY_PUT:
    if (req->put->device)
      note(c, &req->put->device->key, *req->put->app ? req->put->app : c->app, req->put->n_items);
    to_writer(c, req, PCD_JOB_PUT);
    return;
  case PCACHEPB__REQUEST__BODY_REPORT:
    to_writer(c, req, PCD_JOB_REPORT);
    return;
  case PCACHEPB__REQUEST__BODY_PURGE:
    to_writer(c, req, PCD_JOB_PURGE);
    return;
  case PCACHEPB__REQUEST__BODY_VERIFY:
    to_writer(c, req, PCD_JOB_VERIFY);
    return;
  case PCACHEPB__REQUEST__BODY_EXPORT:
    to_writer(c, req, PCD_JOB_EXPORT);
    return;
  case PCACHEPB__REQUEST__BODY_IMPORT:
    if (c->srv->on_import)
      c->srv->on_import(c->srv);
    to_writer(c, req, PCD_JOB_IMPORT);
    return;
  case PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT:
    to_writer(c, req, PCD_JOB_SNAPSHOT);
    return;
  case PCACHEPB__REQUEST__BODY_FLEET_SYNC:
    fleet_sync(c, req);
    return;
  case PCACHEPB__REQUEST__BODY_REPLAY_START:
    if (req->replay_start->detect) {
      /* To the writer once a probe of the drivers has ended. */
      pcd_job *job = job_for(c, req, PCD_JOB_REPLAY_START);
      if (job)
        pcd_detect_submit(c->srv->detect, job);
    } else {
      to_writer(c, req, PCD_JOB_REPLAY_START);
    }
    return;
  case PCACHEPB__REQUEST__BODY_REPLAY_CLAIM:
    to_writer(c, req, PCD_JOB_REPLAY_CLAIM);
    return;
  default:
    pcd_respond_error(c, PCACHE_EUNKNOWN_REQUEST, NULL);
    break;
  }
out_free:
  pcache__request_free(req);
}
