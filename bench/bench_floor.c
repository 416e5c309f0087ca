/* bench_floor: what a request and its reply cost on this machine's Unix
 * sockets with no pcache code in the way, so that bench_delivery's Get
 * latency can be read against the floor it stands on (bench/RESULTS.md,
 * issue 18). Each client thread has a server thread of its own on a
 * socketpair; both wait as pcache's do (ask with MSG_DONTWAIT for --spin-us,
 * then sleep in poll). A request is 64 bytes; the reply is, by mode:
 *
 *   small  a 16-byte reply: the round trip alone (two sends, two wake-ups)
 *   sock   a 4-byte length and --size bytes of payload sent straight from
 *          a --region-mb region at a random offset (as a Get's blob from
 *          LMDB's map, out of cache), read by the client in two recvs as
 *          rpc.c did before its receive buffer (header, then body)
 *   shm    the server copies the payload into a buffer both map and sends
 *          16 bytes; the client copies it out (one copy each side, none
 *          through the kernel)
 *   rpc    as a Get's inline reply goes: the server reads the payload once
 *          (the checksum's pass), copies it into a frame on the heap and
 *          sends that; the client reads the header with recvmsg (room for
 *          descriptors, as rpc.c asks), the body into a fresh malloc, and
 *          copies it once more (protobuf-c's unpack of a bytes field):
 *          rpc.c's reads before its receive buffer (pcache__rx), which
 *          reads a small reply whole in one recvmsg.
 *          Also floor_rpc_c<clients>_body_recv_us: the body's recvmsg alone
 *
 *   bench_floor [--clients 1,8] [--iters N] [--size BYTES] [--spin-us US]
 *               [--region-mb MB]
 *
 * Prints floor_<mode>_c<clients>_{p50,p99}_us. */
#include <errno.h>
#include <getopt.h>
#include <stdatomic.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_util.h"

enum { REQ = 64, SMALL = 16, MAX_CLIENTS = 64 };
typedef enum { MODE_SMALL, MODE_SOCK, MODE_SHM, MODE_RPC } mode;
static const char *const mode_names[] = {"small", "sock", "shm", "rpc"};

static struct {
  unsigned clients[8];
  size_t n_clients;
  uint64_t iters;
  size_t size;
  uint64_t spin_ns;
  size_t region;
} opt = {.clients = {1, 8},
         .n_clients = 2,
         .iters = 20000,
         .size = 20480,
         .spin_ns = 50000,
         .region = 256u << 20};

static uint8_t *region;
static _Atomic uint64_t read_sink; /* the rpc server's read pass, kept */

typedef struct pair {
  pthread_t client, server;
  int fd[2]; /* [0] client's, [1] server's */
  uint8_t *shared;
  mode m;
  uint64_t *lat;
  uint64_t body_ns; /* rpc: time in the body's recvmsg, summed */
  bench_barrier *barrier;
} pair;

/* Exactly n bytes, asking with MSG_DONTWAIT for the spin, then in poll.
 * With control, as rpc.c reads: recvmsg with room for passed descriptors. */
static void recv_n(int fd, uint8_t *buf, size_t n, int spin, int control) {
  uint64_t until = spin ? bench_now_ns() + opt.spin_ns : 0;
  while (n) {
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int) * 4)];
    } cbuf;
    struct iovec iov = {buf, n};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t got;
    if (control) {
      msg.msg_control = cbuf.buf;
      msg.msg_controllen = sizeof cbuf.buf;
    }
    got = recvmsg(fd, &msg, MSG_DONTWAIT | (control ? MSG_CMSG_CLOEXEC : 0));
    if (got > 0) {
      buf += got;
      n -= (size_t)got;
      continue;
    }
    if (got == 0)
      bench_die("peer closed");
    if (errno != EAGAIN && errno != EINTR)
      bench_die("recvmsg: %s", strerror(errno));
    if (until && bench_now_ns() < until)
      continue;
    until = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, -1);
  }
}

static void send_iov(int fd, struct iovec *iov, int n) {
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
  size_t want = 0;
  for (int i = 0; i < n; i++)
    want += iov[i].iov_len;
  if (sendmsg(fd, &msg, 0) != (ssize_t)want)
    bench_die("sendmsg: short or failed (%s)", strerror(errno));
}

static void *server_main(void *arg) {
  pair *p = arg;
  uint8_t req[REQ];
  uint64_t x = (uint64_t)(uintptr_t)p;
  for (uint64_t k = 0; k < opt.iters; k++) {
    recv_n(p->fd[1], req, REQ, 1, 0);
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint8_t *payload = region + ((x >> 20) % (opt.region - opt.size) & ~(size_t)63);
    if (p->m == MODE_SOCK) {
      uint32_t len = (uint32_t)opt.size;
      struct iovec iov[2] = {{&len, sizeof len}, {(void *)payload, opt.size}};
      send_iov(p->fd[1], iov, 2);
    } else if (p->m == MODE_RPC) {
      /* Read once (a checksum's pass), packed into a frame, sent. */
      static __thread uint8_t *frame;
      uint64_t sum = 0;
      if (!frame && !(frame = malloc(opt.size + 4)))
        bench_die("out of memory");
      for (size_t i = 0; i < opt.size; i += 64)
        sum += payload[i];
      uint32_t len = (uint32_t)opt.size;
      atomic_fetch_add_explicit(&read_sink, sum, memory_order_relaxed);
      memcpy(frame, &len, 4);
      memcpy(frame + 4, payload, opt.size);
      struct iovec iov = {frame, opt.size + 4};
      struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
      if (sendmsg(p->fd[1], &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(opt.size + 4))
        bench_die("sendmsg: short or failed");
    } else {
      uint8_t small[SMALL] = {0};
      struct iovec iov = {small, sizeof small};
      if (p->m == MODE_SHM)
        memcpy(p->shared, payload, opt.size);
      send_iov(p->fd[1], &iov, 1);
    }
  }
  return NULL;
}

static void *client_main(void *arg) {
  pair *p = arg;
  uint8_t req[REQ] = {1};
  uint8_t *body = malloc(opt.size);
  if (!body)
    bench_die("out of memory");
  bench_barrier_wait(p->barrier);
  for (uint64_t k = 0; k < opt.iters; k++) {
    uint64_t t0 = bench_now_ns();
    struct iovec iov = {req, sizeof req};
    send_iov(p->fd[0], &iov, 1);
    if (p->m == MODE_SOCK) {
      uint32_t len;
      recv_n(p->fd[0], (uint8_t *)&len, sizeof len, 1, 0);
      recv_n(p->fd[0], body, len, 0, 0);
    } else if (p->m == MODE_RPC) {
      uint32_t len;
      recv_n(p->fd[0], (uint8_t *)&len, sizeof len, 1, 1);
      uint64_t b0 = bench_now_ns();
      uint8_t *fresh = malloc(len), *copy;
      if (!fresh)
        bench_die("out of memory");
      recv_n(p->fd[0], fresh, len, 0, 1);
      p->body_ns += bench_now_ns() - b0;
      if (!(copy = malloc(len)))
        bench_die("out of memory");
      memcpy(copy, fresh, len); /* protobuf-c's unpack of the bytes */
      free(fresh);
      free(copy);
    } else {
      uint8_t small[SMALL];
      recv_n(p->fd[0], small, sizeof small, 1, 0);
      if (p->m == MODE_SHM)
        memcpy(body, p->shared, opt.size);
    }
    p->lat[k] = bench_now_ns() - t0;
  }
  free(body);
  return NULL;
}

static void run(mode m, unsigned clients) {
  pair *p = calloc(clients, sizeof *p);
  uint64_t *all = malloc(clients * opt.iters * sizeof *all);
  bench_barrier *barrier = bench_barrier_new(clients);
  char prefix[64];
  if (!p || !all)
    bench_die("out of memory");
  for (unsigned i = 0; i < clients; i++) {
    p[i].m = m;
    p[i].lat = all + i * opt.iters;
    p[i].barrier = barrier;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p[i].fd) < 0)
      bench_die("socketpair: %s", strerror(errno));
    p[i].shared = mmap(NULL, opt.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p[i].shared == MAP_FAILED)
      bench_die("mmap: %s", strerror(errno));
    if (pthread_create(&p[i].server, NULL, server_main, &p[i]) ||
        pthread_create(&p[i].client, NULL, client_main, &p[i]))
      bench_die("pthread_create failed");
  }
  for (unsigned i = 0; i < clients; i++) {
    pthread_join(p[i].client, NULL);
    pthread_join(p[i].server, NULL);
    close(p[i].fd[0]);
    close(p[i].fd[1]);
    munmap(p[i].shared, opt.size);
  }
  snprintf(prefix, sizeof prefix, "floor_%s_c%u_", mode_names[m], clients);
  bench_kv_f(prefix, "p50_us", (double)bench_percentile(all, clients * opt.iters, 0.50) / 1e3);
  bench_kv_f(prefix, "p99_us", (double)bench_percentile(all, clients * opt.iters, 0.99) / 1e3);
  if (m == MODE_RPC) {
    uint64_t sum = 0;
    for (unsigned i = 0; i < clients; i++)
      sum += p[i].body_ns;
    bench_kv_f(prefix, "body_recv_us", (double)sum / (double)(clients * opt.iters) / 1e3);
  }
  bench_barrier_free(barrier);
  free(all);
  free(p);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"clients", required_argument, NULL, 'c'},   {"iters", required_argument, NULL, 'i'},
      {"size", required_argument, NULL, 's'},      {"spin-us", required_argument, NULL, 'p'},
      {"region-mb", required_argument, NULL, 'r'}, {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'c':
      opt.n_clients = bench_parse_list(optarg, opt.clients, 8);
      break;
    case 'i':
      opt.iters = strtoull(optarg, NULL, 10);
      break;
    case 's':
      opt.size = strtoull(optarg, NULL, 10);
      break;
    case 'p':
      opt.spin_ns = strtoull(optarg, NULL, 10) * 1000;
      break;
    case 'r':
      opt.region = strtoull(optarg, NULL, 10) << 20;
      break;
    default:
      fprintf(stderr, "usage: bench_floor [--clients 1,8] [--iters N] [--size BYTES] "
                      "[--spin-us US] [--region-mb MB]\n");
      return 2;
    }
  }
  if (!opt.iters || !opt.size || opt.size > (64u << 20) || opt.region < 2 * opt.size)
    bench_die("bad --iters, --size or --region-mb");
  for (size_t i = 0; i < opt.n_clients; i++)
    if (!opt.clients[i] || opt.clients[i] > MAX_CLIENTS)
      bench_die("--clients: 1 to %d", MAX_CLIENTS);
  region = malloc(opt.region);
  if (!region)
    bench_die("out of memory");
  memset(region, 0x5a, opt.region); /* its pages made, as a store's are */
  for (mode m = MODE_SMALL; m <= MODE_RPC; m++)
    for (size_t i = 0; i < opt.n_clients; i++)
      run(m, opt.clients[i]);
  free(region);
  return 0;
}
