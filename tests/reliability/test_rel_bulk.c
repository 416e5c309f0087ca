/* Bulk replies stay within the client's --max-pending budget (issue 12,
 * section 1; docs/RELIABILITY.md 12.1):
 *  1. clients that pipeline Gets of a bulk-sized blob and never read hold
 *     one memfd each, not one per request;
 *  2. a Get naming one hash 2000 times gets one blob;
 *  3. a Get of more distinct bytes than the budget gets a page with `more`,
 *     and the rest on asking again;
 *  4. with a small RLIMIT_NOFILE (and, under root, no CAP_SYS_ADMIN or
 *     CAP_SYS_RESOURCE, which lift the kernel's limit on fds in flight),
 *     non-reading clients never make the daemon fail a well-behaved
 *     client's bulk reply;
 *  5. when the kernel refuses to pass a memfd anyway (fds in flight of
 *     another process of the uid), the client gets -ETOOMANYREFS, keeps
 *     its connection, and the refusal is logged;
 *  6. a client that reads each reply before it asks again is never
 *     parked (Stats.parked), however many memfds it takes; one that asks
 *     before reading is, and every request it pipelined is answered. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/frame.h"
#include "rel_util.h"
#include "test.h"

#define BLOB_SIZE 300000u /* over PCACHE_BULK_THRESHOLD: a memfd reply */
#define BUDGET (1u << 20) /* --max-pending */
#define N_HOSTILE 8
#define PIPELINED 24

static test_env env;
static pcache__devkey key;
static wire_item items[8];

static uint8_t *get_frame(const pcache__hash *h, size_t n, size_t *ret_size) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get g = PCACHEPB__GET__INIT;
  ProtobufCBinaryData *hb = calloc(n, sizeof *hb);
  uint8_t *buf;
  for (size_t i = 0; i < n; i++)
    hb[i] = (ProtobufCBinaryData){16, (uint8_t *)h[i].bytes};
  g.device_key = (ProtobufCBinaryData){32, key.bytes};
  g.state_hashes = hb;
  g.n_state_hashes = n;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &g;
  ASSERT_OK(pcache__request_encode(&req, UINT32_MAX, &buf, ret_size));
  free(hb);
  return buf;
}

/* A client that sends PIPELINED Gets of items[0] and reads nothing. */
static int hostile(void) {
  size_t size;
  uint8_t *frame = get_frame(&items[0].hash, 1, &size);
  int fd = wire_open(&env, "hostile");
  for (int i = 0; i < PIPELINED; i++)
    ASSERT_OK(wire_send_raw(fd, frame, size));
  free(frame);
  return fd;
}

/* Takes whatever fd's receive queue holds now, without waiting: the
 * memfds the daemon has passed and their bytes (what the client pins). */
static void drain(int fd, unsigned *ret_fds, uint64_t *ret_bytes) {
  *ret_fds = 0;
  *ret_bytes = 0;
  for (;;) {
    static uint8_t buf[65536];
    union {
      char b[CMSG_SPACE(16 * sizeof(int))];
      struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n <= 0)
      return;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
      size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; i++) {
        int passed;
        struct stat st;
        memcpy(&passed, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        if (fstat(passed, &st) == 0)
          *ret_bytes += (uint64_t)st.st_size;
        close(passed);
        (*ret_fds)++;
      }
    }
  }
}

/* The well-behaved client: its bulk Get is answered with the blob. */
static void witness_get(int fd) {
  wire_reply rep;
  wire_get(fd, &key, &items[0].hash, 1, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->get->n_blobs, 1);
  ASSERT_TRUE(rep.fd >= 0);
  wire_reply_free(&rep);
}

static void start_args(const char *extra_nofile, const char *frame_timeout) {
  const char *args[] = {"--max-pending", "1M", "--threads", "1", NULL, NULL, NULL};
  if (frame_timeout) {
    args[4] = "--frame-timeout";
    args[5] = frame_timeout;
  }
  struct rlimit old, low;
  wire_reply rep;
  int fd;
  if (extra_nofile) {
    ASSERT_OK(getrlimit(RLIMIT_NOFILE, &old));
    low = old;
    low.rlim_cur = (rlim_t)atol(extra_nofile);
    ASSERT_OK(setrlimit(RLIMIT_NOFILE, &low));
  }
  test_daemon_start(&env, args);
  if (extra_nofile)
    ASSERT_OK(setrlimit(RLIMIT_NOFILE, &old));
  fd = wire_open(&env, "filler");
  wire_put(fd, &key, items, 8, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
  close(fd);
}

static void start(const char *extra_nofile) { start_args(extra_nofile, NULL); }

/* A client parked on an unread memfd with requests pipelined behind it is
 * not closed by the stall timeout: closing would not free the memfd in its
 * receive queue, and it could reconnect for another one, and another. It
 * keeps its one memfd and its slot, and is served again once it reads. */
static void parked_not_closed(void) {
  unsigned n, more;
  uint64_t bytes;
  char c;
  int fd;
  start_args(NULL, "1");
  fd = hostile();
  /* Past --frame-timeout 1 and the sweep that would apply it. */
  usleep(2500 * 1000);
  ASSERT_EQ(recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT), 1); /* a reply, not EOF */
  drain(fd, &n, &bytes);
  ASSERT_EQ(n, 1);
  /* Still open: nothing more to read, and no EOF. */
  errno = 0;
  ASSERT_EQ(recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT), -1);
  ASSERT_EQ(errno, EAGAIN);
  /* Taken: the next pipelined Get is answered within a few rechecks. */
  more = 0;
  for (int i = 0; i < 50 && more == 0; i++) {
    usleep(20 * 1000);
    drain(fd, &more, &bytes);
  }
  fprintf(stderr, "parked client: kept its connection past --frame-timeout, then %u more\n",
          more);
  ASSERT_GE(more, 1);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
}

static void budget_per_client(void) {
  int fds[N_HOSTILE], witness;
  unsigned worst_fds = 0;
  uint64_t worst_bytes = 0;
  start(NULL);
  witness = wire_open(&env, "witness");
  for (int i = 0; i < N_HOSTILE; i++)
    fds[i] = hostile();
  usleep(300 * 1000);
  for (int i = 0; i < 5; i++)
    witness_get(witness);
  for (int i = 0; i < N_HOSTILE; i++) {
    unsigned n;
    uint64_t bytes;
    drain(fds[i], &n, &bytes);
    if (n > worst_fds)
      worst_fds = n;
    if (bytes > worst_bytes)
      worst_bytes = bytes;
    close(fds[i]);
  }
  rel_figure("bulk_unread_memfds_per_client", "%u", worst_fds);
  rel_figure("bulk_unread_bytes_per_client", "%llu", (unsigned long long)worst_bytes);
  fprintf(stderr, "non-reading client holds %u memfds, %llu bytes (%d Gets pipelined)\n", worst_fds,
          (unsigned long long)worst_bytes, PIPELINED);
  /* One memfd, plus at most one more taken in the race with the drain. */
  ASSERT_GE(worst_fds, 1);
  ASSERT_LE(worst_fds, 2);
  ASSERT_LE(worst_bytes, 2ull * (BUDGET + BLOB_SIZE + 4096));
  witness_get(witness);
  close(witness);
  test_daemon_stop(&env, SIGTERM);
}

static void repeats_cost_nothing(void) {
  enum { N = 2000 };
  pcache__hash *h = calloc(N, sizeof *h);
  wire_reply rep;
  int fd;
  start(NULL);
  fd = wire_open(&env, "repeats");
  for (size_t i = 0; i < N; i++)
    h[i] = items[i % 2].hash;
  wire_get(fd, &key, h, N, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->get->n_blobs, 2);
  ASSERT_EQ(memcmp(rep.resp->get->blobs[0]->state_hash.data, items[0].hash.bytes, 16), 0);
  ASSERT_EQ(memcmp(rep.resp->get->blobs[1]->state_hash.data, items[1].hash.bytes, 16), 0);
  ASSERT_EQ(rep.resp->get->n_missing, 0);
  ASSERT_LE(rep.map_size, 2u * BLOB_SIZE + 4096);
  rel_figure("bulk_get_2000_repeats_bytes", "%zu", rep.map_size);
  wire_reply_free(&rep);
  free(h);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
}

static void reply_is_bounded(void) {
  pcache__hash h[8];
  size_t n = 8, got = 0, calls = 0;
  int fd;
  start(NULL);
  fd = wire_open(&env, "pages");
  for (size_t i = 0; i < 8; i++)
    h[i] = items[i].hash;
  /* Ask for what is not answered yet until every blob came. */
  while (n && calls++ < 16) {
    wire_reply rep;
    size_t left = 0;
    pcache__hash rest[8];
    wire_get(fd, &key, h, n, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->get->n_missing, 0);
    ASSERT_GE(rep.resp->get->n_blobs, 1);
    ASSERT_LE(rep.resp->get->n_blobs * (uint64_t)BLOB_SIZE, BUDGET + BLOB_SIZE);
    ASSERT_EQ(rep.resp->get->more, rep.resp->get->n_blobs < n);
    for (size_t i = 0; i < n; i++) {
      int sent = 0;
      for (size_t j = 0; j < rep.resp->get->n_blobs; j++)
        sent |= memcmp(rep.resp->get->blobs[j]->state_hash.data, h[i].bytes, 16) == 0;
      if (!sent)
        rest[left++] = h[i];
    }
    got += n - left;
    memcpy(h, rest, left * sizeof *h);
    n = left;
    wire_reply_free(&rep);
  }
  ASSERT_EQ(got, 8);
  rel_figure("bulk_get_8x300k_calls", "%zu", calls);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
}

/* Parking is for a client that asks again before taking its memfd. One
 * that reads each reply first must never wait for the bulk timer. The
 * daemon once parked any client that had not read its memfd by the time
 * the daemon had finished sending it; the next request then waited for a
 * recheck (1-20 ms; per-miss fetches 9-11x slower). A client that takes
 * a while to read shows it every time; one that reads at once, sometimes. */
static void reader_not_parked(void) {
  enum { GETS = 20 };
  size_t size;
  uint8_t *frame = get_frame(&items[0].hash, 1, &size);
  uint8_t four[4 * 256];
  wire_reply rep;
  uint64_t parked;
  int fd;
  start(NULL);
  fd = wire_open(&env, "reader");
  for (int i = 0; i < GETS; i++) {
    ASSERT_OK(wire_send_raw(fd, frame, size));
    usleep(i % 2 ? 20 * 1000 : 0);
    ASSERT_OK(wire_recv(fd, &rep));
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->get->n_blobs, 1);
    ASSERT_TRUE(rep.fd >= 0);
    wire_reply_free(&rep);
  }
  parked = wire_stats_of(fd).parked;
  fprintf(stderr, "reading client: %d bulk Gets, parked %llu times\n", GETS,
          (unsigned long long)parked);
  ASSERT_EQ(parked, 0);
  /* Four Gets in one write, the replies read only later: each waits
   * behind the one before it, parked, and is answered once that memfd is
   * taken. The daemon once served the first two and left the rest read
   * ahead with nothing to wake it, then closed the client for making no
   * progress (--frame-timeout). */
  ASSERT_LE(4 * size, sizeof four);
  for (int i = 0; i < 4; i++)
    memcpy(four + i * size, frame, size);
  ASSERT_OK(wire_send_raw(fd, four, 4 * size));
  usleep(100 * 1000);
  for (int i = 0; i < 4; i++) {
    ASSERT_OK(wire_recv(fd, &rep));
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->get->n_blobs, 1);
    ASSERT_TRUE(rep.fd >= 0);
    wire_reply_free(&rep);
  }
  /* Once for the second at least; the later ones only when the daemon
   * looks again before the client has read (a slow daemon, as under TSan,
   * finds the memfd taken at once). */
  ASSERT_GE(wire_stats_of(fd).parked, 1);
  free(frame);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
}

/* The kernel refuses to pass an fd (ETOOMANYREFS) once the sending uid
 * has more in flight than its RLIMIT_NOFILE, unless it has one of these. */
static void drop_fd_limit_caps(void) {
  if (geteuid() != 0)
    return;
  if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) < 0 ||
      prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) < 0)
    fprintf(stderr, "cannot drop capabilities (%s): the kernel limit may not apply\n",
            strerror(errno));
}

static void fds_in_flight(void) {
  int fds[N_HOSTILE], witness;
  drop_fd_limit_caps();
  start("64");
  witness = wire_open(&env, "witness");
  for (int i = 0; i < N_HOSTILE; i++)
    fds[i] = hostile();
  usleep(300 * 1000);
  /* N_HOSTILE x PIPELINED memfds would be far over 64 in flight. */
  for (int i = 0; i < 20; i++)
    witness_get(witness);
  for (int i = 0; i < N_HOSTILE; i++)
    close(fds[i]);
  witness_get(witness);
  close(witness);
  test_daemon_stop(&env, SIGTERM);
}

/* Fds of another process of the uid in flight: this test sends 100 over a
 * socketpair it does not read (its own capabilities lift its limit, not
 * the daemon's). The kernel then refuses every memfd the daemon passes;
 * the client must get an error it can retry, keep its connection, and be
 * served again once those fds are received. */
static void refused_by_kernel(void) {
  int pair[2], witness, logged;
  wire_reply rep;
  FILE *f;
  char line[1024];
  drop_fd_limit_caps();
  start("64");
  if (geteuid() != 0) {
    fprintf(stderr, "refused: not root, cannot hold fds in flight past the daemon's limit\n");
    test_daemon_stop(&env, SIGTERM);
    return;
  }
  witness = wire_open(&env, "witness");
  ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair));
  for (int i = 0; i < 100; i++) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    union {
      char b[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } ctl;
    char byte = 0;
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    ASSERT_EQ(sendmsg(pair[0], &msg, 0), 1);
    close(fd);
  }
  wire_get(witness, &key, &items[0].hash, 1, &rep);
  ASSERT_EQ(rep.resp->status, -ETOOMANYREFS);
  wire_reply_free(&rep);
  /* The other process takes its fds: the same client is served again. */
  {
    unsigned n;
    uint64_t bytes;
    drain(pair[1], &n, &bytes);
    ASSERT_EQ(n, 100);
  }
  witness_get(witness);
  close(pair[0]);
  close(pair[1]);
  close(witness);
  test_daemon_stop(&env, SIGTERM);
  f = fopen(env.log_path, "r");
  ASSERT_TRUE(f != NULL);
  logged = 0;
  while (fgets(line, sizeof line, f))
    logged |= strstr(line, "refused to pass") != NULL;
  fclose(f);
  ASSERT_TRUE(logged);
}

int main(int argc, char **argv) {
  test_env_init(&env, "rel-bulk");
  wire_guard(&env);
  wire_devkey(12, &key);
  for (unsigned i = 0; i < 8; i++)
    wire_item_make(&items[i], &key, i + 1, BLOB_SIZE);
  if (rel_part_wanted(argc, argv, "budget"))
    budget_per_client();
  if (rel_part_wanted(argc, argv, "repeats"))
    repeats_cost_nothing();
  if (rel_part_wanted(argc, argv, "bound"))
    reply_is_bounded();
  if (rel_part_wanted(argc, argv, "fds"))
    fds_in_flight();
  if (rel_part_wanted(argc, argv, "refused"))
    refused_by_kernel();
  if (rel_part_wanted(argc, argv, "parked"))
    parked_not_closed();
  if (rel_part_wanted(argc, argv, "reader"))
    reader_not_parked();
  for (unsigned i = 0; i < 8; i++)
    wire_item_free(&items[i]);
  test_env_cleanup(&env);
  return 0;
}
