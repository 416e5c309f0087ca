/* Fuzz target: request dispatch, the daemon's whole path from a frame on a
 * socket to the reply, against a real store in a scratch directory. Each
 * input is one Request body: it is framed and written into a socketpair
 * whose other end is a real pcd_conn on a real libuv loop, with the real
 * writer thread committing to LMDB. Read requests answer on the loop,
 * writes go through the writer (group commit) like in pcached. Every reply
 * must parse; a connection the daemon closes (undecodable frame) is
 * replaced. The store starts with a few valid entries on the device of
 * wire_devkey(1) so Get, Prefetch, List, Verify and Export find data, and
 * --max-size keeps it small whatever the fuzzer Puts or Imports. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "client_reports.h"
#include "common/alloc.h"
#include "common/log.h"
#include "connection.h"
#include "dispatch.h"
#include "proto/frame.h"
#include "scratch.h"
#include "server.h"
#include "wire.h"
#include "fuzz.h"

/* Largest input written into the socket in one go (libFuzzer -max_len). */
#define FUZZ_MAX_INPUT (1u << 20)

static pcd_config config;
static pcd_server srv;
static pcd_worker worker; /* on loop, no thread of its own */
static uv_loop_t loop;
static pcd_conn *conn;
static int peer = -1;
static uint8_t *rbuf;
static size_t rlen, rcap;

static void open_conn(void) {
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
  CHECK(pcd_worker_open_conn(&worker, sv[0], 0, &conn) == 0);
  /* Ours too: the daemon frees a connection it closes, and the harness
   * still looks at it after that. */
  pcd_conn_ref(conn);
  pcd_conn_registry_count_in(&srv.conns);
  /* Inputs need not start with Hello to reach the handlers. */
  conn->hello_done = 1;
  snprintf(conn->app, sizeof conn->app, "fuzz");
  peer = sv[1];
  rlen = 0;
}

/* Reads what the daemon sent; closes passed fds. Returns 1 at EOF. */
static int drain(void) {
  for (;;) {
    union {
      char buf[CMSG_SPACE(4 * sizeof(int))];
      struct cmsghdr align;
    } ctl;
    struct iovec iov;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = sizeof ctl.buf};
    ssize_t n;
    if (rcap - rlen < 65536) {
      rcap = rcap ? rcap * 2 : 1 << 20;
      CHECK((rbuf = realloc(rbuf, rcap)));
    }
    iov.iov_base = rbuf + rlen;
    iov.iov_len = rcap - rlen;
    n = recvmsg(peer, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      CHECK(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNRESET);
      return errno == ECONNRESET;
    }
    if (n == 0)
      return 1;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
        size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
          int fd;
          memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
          /* A passed memfd (a bulk reply's, a segment's, a reply
           * window's) must come sealed against shrinking and against our
           * writes: F_SEAL_WRITE, or for a window the daemon still writes
           * into through its own mapping, F_SEAL_FUTURE_WRITE. */
          int seals = fcntl(fd, F_GET_SEALS);
          CHECK(seals >= 0 && (seals & F_SEAL_SHRINK) &&
                (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)));
          close(fd);
        }
      }
    }
    rlen += (size_t)n;
  }
}

/* Consumes complete reply frames; each must parse. Returns how many. */
static int replies(void) {
  int got = 0;
  size_t off = 0;
  while (rlen - off >= PCACHE_FRAME_HEADER_SIZE) {
    uint32_t len;
    Pcachepb__Response *resp;
    CHECK(pcache__frame_length(rbuf + off, UINT32_MAX, &len) == 0);
    if (rlen - off - PCACHE_FRAME_HEADER_SIZE < len)
      break;
    CHECK(pcache__response_decode(rbuf + off + PCACHE_FRAME_HEADER_SIZE, len, &resp) == 0);
    /* A failure carries a code the error table knows. */
    CHECK(resp->status <= 0);
    pcache__response_free(resp);
    off += PCACHE_FRAME_HEADER_SIZE + len;
    got++;
  }
  memmove(rbuf, rbuf + off, rlen - off);
  rlen -= off;
  return got;
}

/* Sends one framed request and runs the loop until its reply is in, or the
 * daemon closed the connection. */
static void roundtrip(const uint8_t *data, size_t size) {
  uint8_t hdr[PCACHE_FRAME_HEADER_SIZE];
  size_t sent = 0, total = size + sizeof hdr;
  int eof = 0;
  pcache__frame_put_length(hdr, (uint32_t)size);
  while (!eof) {
    while (sent < total) {
      struct iovec iov[2];
      struct msghdr msg = {.msg_iov = iov};
      ssize_t n;
      if (sent < sizeof hdr) {
        iov[0] = (struct iovec){hdr + sent, sizeof hdr - sent};
        iov[1] = (struct iovec){(void *)data, size};
        msg.msg_iovlen = 2;
      } else {
        iov[0] = (struct iovec){(void *)(data + sent - sizeof hdr), total - sent};
        msg.msg_iovlen = 1;
      }
      n = sendmsg(peer, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EPIPE || errno == ECONNRESET)
          sent = total;
        break;
      }
      sent += (size_t)n;
    }
    /* Block in the loop only while a write job is out (its completion
     * wakes the loop); otherwise poll once. */
    uv_run(&loop, conn->busy ? UV_RUN_ONCE : UV_RUN_NOWAIT);
    eof = drain();
    if (replies() > 0 && sent == total && !conn->busy && pcache_queue_empty(&conn->out))
      break;
    if (conn->closed)
      eof = 1;
  }
  if (eof || conn->closed) {
    pcd_conn_close(conn);
    uv_run(&loop, UV_RUN_NOWAIT);
    pcd_conn_unref(conn);
    close(peer);
    open_conn();
  }
}

static void seed_store(void) {
  pcache__devkey key;
  wire_item items[4];
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Put put = PCACHEPB__PUT__INIT;
  Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
  Pcachepb__PutItem *ptrs[4];
  uint8_t *buf;
  size_t size;
  wire_devkey(1, &key);
  for (int i = 0; i < 4; i++) {
    wire_item_make(&items[i], &key, (uint64_t)i + 1, i == 3 ? 100000 : 256);
    ptrs[i] = &items[i].item;
  }
  dev.key.data = key.bytes;
  dev.key.len = sizeof key.bytes;
  dev.name = "fuzz device";
  put.device = &dev;
  put.items = ptrs;
  put.n_items = 4;
  req.body_case = PCACHEPB__REQUEST__BODY_PUT;
  req.put = &put;
  CHECK(pcache__request_encode(&req, UINT32_MAX, &buf, &size) == 0);
  roundtrip(buf + PCACHE_FRAME_HEADER_SIZE, size - PCACHE_FRAME_HEADER_SIZE);
  pcache__free(buf);
  for (int i = 0; i < 4; i++)
    wire_item_free(&items[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char *args[] = {"pcached", "--max-size", "2M", "--max-blob", "256K", "--max-hashes", "64",
                  "--max-pending", "64M", NULL};
  const char *dir;
  (void)argc;
  (void)argv;
  pcache__log_set_level(0); /* refusals are logged, and are the point */
  CHECK(pcd_config_parse(9, args, &config) == 0);
  dir = fuzz_scratch_dir("dispatch");
  CHECK(uv_loop_init(&loop) == 0);
  srv.loop = &loop;
  srv.config = &config;
  srv.on_request = pcd_dispatch;
  srv.listen_fd = -1;
  srv.start_us = pcache__mono_us();
  snprintf(srv.data_dir, sizeof srv.data_dir, "%s", dir);
  snprintf(srv.socket_path, sizeof srv.socket_path, "%s/socket", dir);
  CHECK(pcd_store_open(dir, 16ull << 20, &srv.store) == 0);
  CHECK(pcd_client_reports_new(&srv.client_reports) == 0);
  CHECK(pcd_writer_start(srv.store, &config, &srv.stats, pcd_dispatch_job_done, &srv.writer) ==
        0);
  CHECK(pcd_worker_init(&worker, &srv, &loop) == 0);
  open_conn();
  seed_store();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A zero-length frame only closes the connection: nothing to fuzz. */
  if (size == 0 || size > FUZZ_MAX_INPUT)
    return 0;
  roundtrip(data, size);
  /* Hits go to the writer now and then, as the sweep timer would do. */
  if (worker.touches.n > 256)
    pcd_worker_flush_touches(&worker);
  return 0;
}
