/* A connection's receive buffer (proto/rpc.h, pcache__rx), against frames
 * written here on a socketpair as the daemon writes them: several small
 * Responses that arrive in one read come out one by one, in order, and
 * the socket is read once for all of them; a descriptor goes to the frame
 * that brought it, even when a frame without one was read with it; a
 * descriptor on a frame that brings none, with nothing after it, is a
 * protocol error, as is a descriptor on one frame that the next frame
 * would take; a frame larger than the buffer, frames that straddle the
 * buffer's end (bodies of 3000, 1500, 4092 and 4093 bytes), a frame split
 * across reads, and a bulk reply read through it come out whole; a frame
 * cut off by a closed socket is -ECONNRESET; a peer that keeps sending a
 * frame never holds the reader past its deadline, with the buffer or
 * without; and no error leaves a descriptor open. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "proto/rpc.h"
#include "test.h"

#define MAX_FRAME (64u << 20)

/* A Get reply frame whose message is msg and whose one blob (if
 * blob_size) has blob_size bytes of (i * 13) & 0xff. */
static void get_frame(const char *msg, size_t blob_size, uint8_t **ret_buf, size_t *ret_size) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__GetReply g = PCACHEPB__GET_REPLY__INIT;
  Pcachepb__Blob b = PCACHEPB__BLOB__INIT, *bp = &b;
  uint8_t hash[16] = {7}, *bytes = NULL;
  resp.message = (char *)msg;
  resp.body_case = PCACHEPB__RESPONSE__BODY_GET;
  resp.get = &g;
  if (blob_size) {
    bytes = pcache__malloc(blob_size);
    ASSERT_TRUE(bytes);
    for (size_t i = 0; i < blob_size; i++)
      bytes[i] = (uint8_t)(i * 13);
    b.state_hash = (ProtobufCBinaryData){sizeof hash, hash};
    b.blob = (ProtobufCBinaryData){blob_size, bytes};
    g.n_blobs = 1;
    g.blobs = &bp;
  }
  ASSERT_OK(pcache__response_encode(&resp, MAX_FRAME, ret_buf, ret_size));
  pcache__free(bytes);
}

/* A Get reply frame whose body is exactly body bytes (its blob sized to
 * make it so). */
static void get_frame_exact(const char *msg, size_t body, uint8_t **ret_buf, size_t *ret_size) {
  for (size_t blob = body > 64 ? body - 64 : 1; blob < body; blob++) {
    get_frame(msg, blob, ret_buf, ret_size);
    if (*ret_size - PCACHE_FRAME_HEADER_SIZE == body)
      return;
    pcache__free(*ret_buf);
  }
  TEST_FAIL_("no blob size gives a body of %zu bytes", body);
}

static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  ASSERT_TRUE(d);
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

/* A ReplyWindowReply frame of size bytes (it brings one descriptor). */
static void window_frame(uint8_t **ret_buf, size_t *ret_size) {
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__ReplyWindowReply w = PCACHEPB__REPLY_WINDOW_REPLY__INIT;
  w.size = 4096;
  w.first_seq = 9;
  resp.body_case = PCACHEPB__RESPONSE__BODY_REPLY_WINDOW;
  resp.reply_window = &w;
  ASSERT_OK(pcache__response_encode(&resp, MAX_FRAME, ret_buf, ret_size));
}

/* Sends size bytes in one sendmsg, with fd attached when fd >= 0. */
static void send_frame(int sock, const uint8_t *buf, size_t size, int fd) {
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = size};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    struct cmsghdr *c;
    memset(&control, 0, sizeof control);
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ASSERT_EQ(sendmsg(sock, &msg, MSG_NOSIGNAL), (ssize_t)size);
}

static int unread(int sock) {
  int n = -1;
  ASSERT_EQ(ioctl(sock, FIONREAD, &n), 0);
  return n;
}

static int recv_one(int sock, pcache__rx *rx, pcache__reply *reply) {
  return pcache__rpc_recv_rx(sock, rx, PCACHEPB__RESPONSE__BODY__NOT_SET, MAX_FRAME, NULL,
                             pcache__mono_ms() + 5000, reply);
}

static void pair(int sv[2]) { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0); }

static void test_small_frames_one_read(void) {
  int sv[2];
  pcache__rx *rx = pcache__rx_new();
  uint8_t *f[3], all[1024];
  size_t n[3], total = 0;
  const char *msgs[3] = {"one", "two", "three"};
  pair(sv);
  for (int i = 0; i < 3; i++) {
    get_frame(msgs[i], i == 1 ? 300 : 0, &f[i], &n[i]);
    memcpy(all + total, f[i], n[i]);
    total += n[i];
    pcache__free(f[i]);
  }
  send_frame(sv[1], all, total, -1);
  for (int i = 0; i < 3; i++) {
    pcache__reply reply;
    ASSERT_OK(recv_one(sv[0], rx, &reply));
    ASSERT_STREQ(reply.response->message, msgs[i]);
    ASSERT_EQ(reply.response->get->n_blobs, i == 1 ? 1u : 0u);
    if (i == 1) {
      ASSERT_EQ(reply.response->get->blobs[0]->blob.len, 300u);
      ASSERT_EQ(reply.response->get->blobs[0]->blob.data[299], (uint8_t)(299 * 13));
    }
    /* The first read took all three. */
    ASSERT_EQ(unread(sv[0]), 0);
    pcache__reply_release(&reply);
  }
  pcache__rx_free(rx);
  close(sv[0]);
  close(sv[1]);
}

static ino_t inode_of(int fd) {
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  return st.st_ino;
}

static void test_descriptor_goes_to_its_frame(void) {
  int sv[2], memfd = memfd_create("test-rx", MFD_CLOEXEC);
  pcache__rx *rx = pcache__rx_new();
  uint8_t *a, *b;
  size_t na, nb;
  pcache__reply reply;
  ASSERT_GE(memfd, 0);
  pair(sv);
  get_frame("first", 0, &a, &na);
  window_frame(&b, &nb);
  send_frame(sv[1], a, na, -1);
  send_frame(sv[1], b, nb, memfd);
  /* Both frames are in the socket: the first read takes them together. */
  ASSERT_OK(recv_one(sv[0], rx, &reply));
  ASSERT_STREQ(reply.response->message, "first");
  ASSERT_TRUE(!reply.has_passed_fd);
  pcache__reply_release(&reply);
  ASSERT_OK(recv_one(sv[0], rx, &reply));
  ASSERT_EQ(reply.response->body_case, PCACHEPB__RESPONSE__BODY_REPLY_WINDOW);
  ASSERT_TRUE(reply.has_passed_fd);
  ASSERT_EQ(inode_of(reply.passed_fd), inode_of(memfd));
  pcache__reply_release(&reply);

  /* A descriptor on a frame that brings none, nothing after it. */
  send_frame(sv[1], a, na, memfd);
  ASSERT_ERR(recv_one(sv[0], rx, &reply), PCACHE_EPROTO);
  ASSERT_TRUE(reply.response == NULL);
  pcache__reply_release(&reply);
  pcache__rx_free(rx);

  /* The same, with a frame that brings one behind it, without its own:
   * the first frame's descriptor is not the second's to take. */
  rx = pcache__rx_new();
  send_frame(sv[1], a, na, memfd);
  send_frame(sv[1], b, nb, -1);
  ASSERT_ERR(recv_one(sv[0], rx, &reply), PCACHE_EPROTO);
  pcache__reply_release(&reply);
  pcache__rx_free(rx);
  close(sv[0]);
  close(sv[1]);
  pair(sv);

  /* A frame that brings one, without it. */
  rx = pcache__rx_new();
  send_frame(sv[1], b, nb, -1);
  ASSERT_ERR(recv_one(sv[0], rx, &reply), PCACHE_EPROTO);
  pcache__reply_release(&reply);
  pcache__rx_free(rx);
  pcache__free(a);
  pcache__free(b);
  close(memfd);
  close(sv[0]);
  close(sv[1]);
}

static void test_large_frame_then_small(void) {
  int sv[2];
  pcache__rx *rx = pcache__rx_new();
  uint8_t *a, *b, *all;
  size_t na, nb;
  pcache__reply reply;
  pair(sv);
  get_frame("large", 20000, &a, &na);
  get_frame("small", 0, &b, &nb);
  all = pcache__malloc(na + nb);
  ASSERT_TRUE(all);
  memcpy(all, a, na);
  memcpy(all + na, b, nb);
  send_frame(sv[1], all, na + nb, -1);
  ASSERT_OK(recv_one(sv[0], rx, &reply));
  ASSERT_STREQ(reply.response->message, "large");
  ASSERT_EQ(reply.response->get->blobs[0]->blob.len, 20000u);
  for (size_t i = 0; i < 20000; i++)
    if (reply.response->get->blobs[0]->blob.data[i] != (uint8_t)(i * 13))
      TEST_FAIL_("a large frame's byte differs");
  pcache__reply_release(&reply);
  ASSERT_OK(recv_one(sv[0], rx, &reply));
  ASSERT_STREQ(reply.response->message, "small");
  pcache__reply_release(&reply);
  pcache__free(all);
  pcache__free(a);
  pcache__free(b);
  pcache__rx_free(rx);
  close(sv[0]);
  close(sv[1]);
}

typedef struct later {
  int sock;
  const uint8_t *buf;
  size_t size;
} later;

static void *write_later(void *arg) {
  later *l = arg;
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  send_frame(l->sock, l->buf, l->size, -1);
  return NULL;
}

static void test_split_frame_and_cut_off(void) {
  int sv[2];
  pcache__rx *rx = pcache__rx_new();
  uint8_t *a;
  size_t na;
  pcache__reply reply;
  pthread_t t;
  pair(sv);
  get_frame("split", 1000, &a, &na);
  /* Two bytes of the header now, the rest 50 ms later. */
  send_frame(sv[1], a, 2, -1);
  later l = {sv[1], a + 2, na - 2};
  ASSERT_EQ(pthread_create(&t, NULL, write_later, &l), 0);
  ASSERT_OK(recv_one(sv[0], rx, &reply));
  ASSERT_STREQ(reply.response->message, "split");
  ASSERT_EQ(reply.response->get->blobs[0]->blob.len, 1000u);
  pcache__reply_release(&reply);
  pthread_join(t, NULL);
  /* Half a frame, then the daemon goes away. */
  send_frame(sv[1], a, na / 2, -1);
  close(sv[1]);
  ASSERT_ERR(recv_one(sv[0], rx, &reply), -ECONNRESET);
  pcache__reply_release(&reply);
  pcache__free(a);
  pcache__rx_free(rx);
  close(sv[0]);
}

/* Bodies of 3000, 1500, 4092 (the most the buffer takes whole) and 4093
 * bytes and a small one, back to back: the buffer moves what it holds to
 * its front, and a header can end up split across its end. */
static void test_frames_across_the_end(void) {
  static const size_t bodies[] = {3000, 1500, 4092, 4093, 100, 4092, 7};
  enum { N = sizeof bodies / sizeof bodies[0] };
  int sv[2];
  pcache__rx *rx = pcache__rx_new();
  uint8_t *f[N], *all;
  size_t n[N], total = 0, at = 0;
  char msg[N][8];
  pair(sv);
  for (size_t i = 0; i < N; i++) {
    snprintf(msg[i], sizeof msg[i], "f%zu", i);
    if (bodies[i] < 64)
      get_frame(msg[i], 0, &f[i], &n[i]);
    else
      get_frame_exact(msg[i], bodies[i], &f[i], &n[i]);
    total += n[i];
  }
  all = pcache__malloc(total);
  ASSERT_TRUE(all);
  for (size_t i = 0; i < N; i++) {
    memcpy(all + at, f[i], n[i]);
    at += n[i];
  }
  send_frame(sv[1], all, total, -1);
  for (size_t i = 0; i < N; i++) {
    pcache__reply reply;
    ASSERT_OK(recv_one(sv[0], rx, &reply));
    ASSERT_STREQ(reply.response->message, msg[i]);
    if (reply.response->get->n_blobs) {
      const ProtobufCBinaryData *blob = &reply.response->get->blobs[0]->blob;
      for (size_t k = 0; k < blob->len; k++)
        if (blob->data[k] != (uint8_t)(k * 13))
          TEST_FAIL_("frame %zu: byte %zu differs", i, k);
    }
    pcache__reply_release(&reply);
    pcache__free(f[i]);
  }
  pcache__free(all);
  pcache__rx_free(rx);
  close(sv[0]);
  close(sv[1]);
}

typedef struct stream {
  int sock;
  size_t size; /* the frame's body */
} stream;

/* Sends one Get reply frame of s->size body bytes as fast as the socket
 * takes it, until it is all sent or the reader goes away. */
static void *stream_frame(void *arg) {
  stream *st = arg;
  uint8_t header[PCACHE_FRAME_HEADER_SIZE], *chunk = pcache__calloc(1, 65536);
  size_t left = st->size;
  ASSERT_TRUE(chunk);
  pcache__frame_put_length(header, (uint32_t)st->size);
  if (send(st->sock, header, sizeof header, MSG_NOSIGNAL) == (ssize_t)sizeof header)
    while (left > 0) {
      ssize_t n = send(st->sock, chunk, left < 65536 ? left : 65536, MSG_NOSIGNAL);
      if (n <= 0)
        break;
      left -= (size_t)n;
    }
  pcache__free(chunk);
  return NULL;
}

static void test_deadline_while_streaming(void) {
  for (int with_rx = 0; with_rx < 2; with_rx++) {
    int sv[2];
    pthread_t t;
    stream st;
    pcache__reply reply;
    pcache__rx *rx = with_rx ? pcache__rx_new() : NULL;
    uint64_t t0;
    int r;
    pair(sv);
    st = (stream){sv[1], 48u << 20};
    ASSERT_EQ(pthread_create(&t, NULL, stream_frame, &st), 0);
    t0 = pcache__mono_ms();
    r = pcache__rpc_recv_rx(sv[0], rx, PCACHEPB__RESPONSE__BODY__NOT_SET, MAX_FRAME, NULL, t0 + 2,
                            &reply);
    /* 48 MiB arrive in far more than 2 ms; the call must not wait for them
     * all (a slow machine gets a margin). */
    ASSERT_ERR(r, -ETIMEDOUT);
    ASSERT_LT(pcache__mono_ms() - t0, 1000);
    pcache__reply_release(&reply);
    close(sv[0]);
    pthread_join(t, NULL);
    close(sv[1]);
    pcache__rx_free(rx);
  }
}

static void test_bulk_through_rx(void) {
  int sv[2], memfd = memfd_create("test-rx-bulk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  pcache__rx *rx = pcache__rx_new();
  uint8_t *inner, *outer_buf, *small;
  size_t ninner, nouter, nsmall;
  Pcachepb__Response outer = PCACHEPB__RESPONSE__INIT;
  Pcachepb__Bulk bulk = PCACHEPB__BULK__INIT;
  pcache__reply reply;
  ASSERT_GE(memfd, 0);
  pair(sv);
  get_frame("inside", 5000, &inner, &ninner);
  /* The memfd holds the inner Response's body (its header skipped). */
  ASSERT_EQ(write(memfd, inner + PCACHE_FRAME_HEADER_SIZE, ninner - PCACHE_FRAME_HEADER_SIZE),
            (ssize_t)(ninner - PCACHE_FRAME_HEADER_SIZE));
  ASSERT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW), 0);
  bulk.size = ninner - PCACHE_FRAME_HEADER_SIZE;
  bulk.response_offset = 0;
  bulk.response_size = bulk.size;
  outer.body_case = PCACHEPB__RESPONSE__BODY_BULK;
  outer.bulk = &bulk;
  ASSERT_OK(pcache__response_encode(&outer, MAX_FRAME, &outer_buf, &nouter));
  get_frame("after", 0, &small, &nsmall);
  send_frame(sv[1], outer_buf, nouter, memfd);
  send_frame(sv[1], small, nsmall, -1);
  ASSERT_OK(recv_one(sv[0], rx, &reply));
  ASSERT_STREQ(reply.response->message, "inside");
  ASSERT_EQ(reply.response->get->blobs[0]->blob.len, 5000u);
  pcache__reply_release(&reply);
  ASSERT_OK(recv_one(sv[0], rx, &reply));
  ASSERT_STREQ(reply.response->message, "after");
  pcache__reply_release(&reply);
  pcache__free(inner);
  pcache__free(outer_buf);
  pcache__free(small);
  pcache__rx_free(rx);
  close(memfd);
  close(sv[0]);
  close(sv[1]);
}

int main(void) {
  int fds_before = open_fds();
  test_small_frames_one_read();
  test_descriptor_goes_to_its_frame();
  test_large_frame_then_small();
  test_frames_across_the_end();
  test_split_frame_and_cut_off();
  test_deadline_while_streaming();
  test_bulk_through_rx();
  /* Every error above closed what it was given. */
  ASSERT_EQ(open_fds(), fds_before);
  return 0;
}
