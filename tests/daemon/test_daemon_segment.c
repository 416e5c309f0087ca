/* Shared-memory segments on a real pcached: a Segment reply brings a
 * sealed memfd holding the app's snapshot and blobs, shared by every
 * client of the app (one build), replaced (new generation, the old
 * mapping still whole) when the app's entries change, dropped when idle,
 * and bounded by --segment-memory with 64 apps alive, the socket serving
 * what a segment lacks. A segment damaged in each way the checker knows
 * (bad magic and version, truncated, tables out of bounds, overlapping
 * blobs, a table checksum mismatch, an unsealed memfd) is refused, and a
 * damaged blob fails its checksum. A segment replaced or dropped while a
 * client holds its lease stays counted (retired) until that client closes
 * the lease or dies, and counts against --segment-memory; --segment-max
 * bounds the segments held and the retired ones. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/bytes.h"
#include "proto/segment.h"
#include "test.h"
#include "wire.h"

static const char APP[] = "segapp";

typedef struct got_seg {
  wire_reply rep;
  int fd;
  pcache__seg_map m;
} got_seg;

/* One Segment request; with want, the segment is mapped and checked;
 * with lease, its lease is asked for and held by the mapping. */
static void segment_ex(int fd, const pcache__devkey *key, const char *app, int want, int lease,
                       got_seg *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Segment sg = PCACHEPB__SEGMENT__INIT;
  const char *why = "";
  memset(ret, 0, sizeof *ret);
  sg.device_key.data = (uint8_t *)key->bytes;
  sg.device_key.len = PCACHE_DEVKEY_SIZE;
  sg.app = (char *)app;
  sg.wait = 1; /* the registry's own behaviour; clients do not wait (test_client_segment) */
  sg.lease = lease;
  req.body_case = PCACHEPB__REQUEST__BODY_SEGMENT;
  req.segment = &sg;
  wire_call(fd, &req, &ret->rep);
  ASSERT_EQ(ret->rep.resp->status, 0);
  ASSERT_EQ(ret->rep.resp->body_case, PCACHEPB__RESPONSE__BODY_SEGMENT);
  ASSERT_EQ(ret->rep.reply.has_passed_fd, ret->rep.resp->segment->size > 0);
  ret->fd = ret->rep.reply.has_passed_fd ? ret->rep.reply.passed_fd : -1;
  if (!want) {
    ASSERT_EQ(ret->fd, -1);
    return;
  }
  ASSERT_GE(ret->fd, 0);
  ASSERT_EQ(pcache__seg_map_open(ret->fd, ret->rep.resp->segment->size, key, 0, &ret->m, &why), 0);
  ASSERT_EQ(ret->m.seg.generation, ret->rep.resp->segment->generation);
  ASSERT_EQ(ret->m.seg.n_entries, ret->rep.resp->segment->entries);
  ASSERT_EQ(ret->rep.resp->segment->lease, lease);
  ASSERT_EQ(ret->rep.reply.has_lease_fd, lease);
  if (lease) {
    ret->m.lease_fd = ret->rep.reply.lease_fd; /* closed with the mapping */
    ret->rep.reply.has_lease_fd = 0;
  }
}

static void segment(int fd, const pcache__devkey *key, const char *app, int want, got_seg *ret) {
  segment_ex(fd, key, app, want, 0, ret);
}

static void segment_free(got_seg *g) {
  pcache__seg_map_close(&g->m);
  wire_reply_free(&g->rep);
}

/* Every item is in the segment with the bytes that were put. */
static void expect_items(const pcache__seg *seg, wire_item *items, size_t n) {
  for (size_t i = 0; i < n; i++) {
    pcache__seg_blob b;
    ASSERT_EQ(pcache__seg_find(seg, items[i].hash.bytes, &b), 1);
    ASSERT_EQ(b.size, items[i].item.blob.len);
    ASSERT_EQ(memcmp(b.data, items[i].item.blob.data, b.size), 0);
    ASSERT_EQ(pcache__checksum64(b.data, b.size), b.checksum);
  }
}

static void put_items(int fd, const pcache__devkey *key, const char *app, wire_item *items,
                      size_t n, uint64_t salt, size_t size) {
  wire_put_msg m;
  wire_reply rep;
  for (size_t i = 0; i < n; i++)
    wire_item_make(&items[i], key, salt + i, size);
  wire_put_msg_init(&m, key, "segdev", items, n);
  m.put.app = (char *)app;
  wire_call(fd, &m.req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->put->stored, n);
  wire_reply_free(&rep);
  wire_put_msg_free(&m);
}

static void put_snapshot(int fd, const pcache__devkey *key, const uint8_t *blob, size_t size,
                         const wire_item *items, size_t n) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__PutSnapshot ps = PCACHEPB__PUT_SNAPSHOT__INIT;
  Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
  ProtobufCBinaryData hashes[16];
  wire_reply rep;
  for (size_t i = 0; i < n; i++)
    hashes[i] = (ProtobufCBinaryData){16, (uint8_t *)items[i].hash.bytes};
  dev.key = (ProtobufCBinaryData){32, (uint8_t *)key->bytes};
  ps.device = &dev;
  ps.app = (char *)APP;
  ps.blob = (ProtobufCBinaryData){size, (uint8_t *)blob};
  ps.state_hashes = hashes;
  ps.n_state_hashes = n;
  req.body_case = PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT;
  req.put_snapshot = &ps;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
}

/* A copy of seg's bytes in a fresh memfd, changed by damage, sealed
 * unless unsealed; then the checker's verdict on it. */
typedef void (*damage_fn)(uint8_t *b, size_t *io_size);

static int check_damaged(const got_seg *g, const pcache__devkey *key, damage_fn damage,
                         int unsealed, const char **ret_why) {
  size_t size = g->m.map_size;
  uint8_t *copy = malloc(size);
  pcache__seg_map m = {0};
  int fd = memfd_create("damaged", MFD_ALLOW_SEALING | MFD_CLOEXEC), r;
  ASSERT_TRUE(copy && fd >= 0);
  memcpy(copy, g->m.map, size);
  damage(copy, &size);
  ASSERT_EQ(write(fd, copy, size), (ssize_t)size);
  if (!unsealed)
    ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
  *ret_why = "";
  r = pcache__seg_map_open(fd, size, key, 0, &m, ret_why);
  pcache__seg_map_close(&m);
  close(fd);
  free(copy);
  return r;
}

/* Re-signs the tables, as a forger (or a bug) would: each later check must
 * stand on its own. */
static void resign(uint8_t *b) {
  uint64_t n = pcache__le32(b + PCACHE_SEG_OFF_N_ENTRIES),
           ns = pcache__le32(b + PCACHE_SEG_OFF_N_SNAP_HASHES);
  pcache__put_le64(b + PCACHE_SEG_OFF_TABLE_SUM,
                   pcache__seg_table_checksum(b, PCACHE_SEG_HEADER_SIZE + n * 52 + ns * 16));
}

static void d_magic(uint8_t *b, size_t *s) { (void)s, b[0] ^= 1; }
static void d_version(uint8_t *b, size_t *s) {
  (void)s;
  pcache__put_le32(b + PCACHE_SEG_OFF_VERSION, 2);
}
static void d_truncate(uint8_t *b, size_t *s) { (void)b, *s -= 1; }
static void d_header_only(uint8_t *b, size_t *s) { (void)b, *s = 100; }
static void d_table_byte(uint8_t *b, size_t *s) {
  (void)s;
  b[PCACHE_SEG_HEADER_SIZE + 20] ^= 0x40; /* an index entry's offset */
}
static void d_index_oob(uint8_t *b, size_t *s) {
  pcache__put_le64(b + PCACHE_SEG_HEADER_SIZE + 16, *s - 4); /* entry 0 runs past the end */
  resign(b);
}
static void d_count(uint8_t *b, size_t *s) {
  (void)s;
  pcache__put_le32(b + PCACHE_SEG_OFF_N_ENTRIES, 0xffffffffu); /* checked before the sum */
}
static void d_overlap(uint8_t *b, size_t *s) {
  /* Entry 1's blob moved onto entry 0's. */
  (void)s;
  memcpy(b + PCACHE_SEG_HEADER_SIZE + 48 + 16, b + PCACHE_SEG_HEADER_SIZE + 16, 8);
  resign(b);
}
static void d_unsorted(uint8_t *b, size_t *s) {
  (void)s;
  memcpy(b + PCACHE_SEG_HEADER_SIZE + 48, b + PCACHE_SEG_HEADER_SIZE, 16); /* a hash twice */
  resign(b);
}
static void d_none(uint8_t *b, size_t *s) { (void)b, (void)s; }

int main(void) {
  static const char *const args[] = {"--segment-idle", "2", "--segment-max", "3", NULL};
  static const char *const small[] = {"--segment-memory", "64K", NULL};
  test_env env;
  pcache__devkey key, other;
  wire_item items[40], more[5], big[40];
  uint8_t *snap;
  got_seg a, b, c;
  Pcachepb__StatsReply st;
  const char *why;
  int fd, fd2;

  test_env_init(&env, "segment");
  wire_guard(&env);
  test_daemon_start(&env, args);
  wire_devkey(1, &key);
  wire_devkey(2, &other);
  fd = wire_open(&env, APP);
  fd2 = wire_open(&env, APP);

  /* No entries, no segment: the socket serves. */
  segment(fd, &key, APP, 0, &a);
  segment_free(&a);

  put_items(fd, &key, APP, items, 40, 100, 300);
  snap = wire_blob(&key, 5000, 7);
  put_snapshot(fd, &key, snap, 5000, items, 10);
  segment(fd, &key, APP, 1, &a);
  ASSERT_EQ(a.m.seg.n_entries, 40);
  ASSERT_EQ(a.m.seg.n_snap_hashes, 10);
  ASSERT_EQ(a.m.seg.n_uncovered, 30);
  ASSERT_EQ(a.m.seg.flags & PCACHE_SEG_COMPLETE, PCACHE_SEG_COMPLETE);
  ASSERT_TRUE(a.rep.resp->segment->complete);
  ASSERT_EQ(a.m.seg.snapshot_size, 5000);
  ASSERT_EQ(memcmp(a.m.seg.snapshot, snap, 5000), 0);
  expect_items(&a.m.seg, items, 40);
  /* Sealed: nobody, the daemon included, can change a byte. */
  ASSERT_EQ(write(a.fd, "x", 1), -1);
  ASSERT_EQ(mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, a.fd, 0), MAP_FAILED);

  /* A second client of the app gets the same segment: one build. */
  segment(fd2, &key, APP, 1, &b);
  ASSERT_EQ(b.m.seg.generation, a.m.seg.generation);
  st = wire_stats_of(fd);
  ASSERT_EQ(st.segment_builds, 1);
  ASSERT_EQ(st.segments, 1);
  ASSERT_EQ(st.segment_sent, 2);
  ASSERT_EQ(st.segment_bytes, a.m.map_size);
  segment_free(&b);

  /* Another app's or device's Put leaves it current (almost surely: the
   * change counters are hashed). */
  put_items(fd, &other, APP, more, 5, 900, 200);
  segment(fd2, &key, APP, 1, &b);
  ASSERT_EQ(b.m.seg.generation, a.m.seg.generation);
  segment_free(&b);
  for (size_t i = 0; i < 5; i++)
    wire_item_free(&more[i]);

  /* The app's entries change: a new segment, while the old mapping stays
   * whole and checked for the client that holds it. */
  put_items(fd, &key, APP, more, 5, 500, 250);
  segment(fd2, &key, APP, 1, &b);
  ASSERT_NE(b.m.seg.generation, a.m.seg.generation);
  ASSERT_EQ(b.m.seg.n_entries, 45);
  expect_items(&b.m.seg, more, 5);
  expect_items(&a.m.seg, items, 40);
  ASSERT_EQ(pcache__seg_check(a.m.map, a.m.map_size, &key, &a.m.seg, &why), 0);
  st = wire_stats_of(fd);
  ASSERT_EQ(st.segments, 1);
  ASSERT_EQ(st.segment_builds, 2);
  ASSERT_EQ(st.segment_bytes, b.m.map_size);

  /* Damage: each check refuses on its own, never reading out of bounds. */
  ASSERT_EQ(check_damaged(&a, &key, d_none, 0, &why), 0);
  ASSERT_EQ(check_damaged(&a, &key, d_none, 1, &why), PCACHE_EPROTO);
  ASSERT_STREQ(why, "its memfd is not sealed");
  ASSERT_EQ(check_damaged(&a, &key, d_magic, 0, &why), PCACHE_EPROTO);
  ASSERT_STREQ(why, "not a segment (bad magic)");
  ASSERT_EQ(check_damaged(&a, &key, d_version, 0, &why), PCACHE_EPROTO);
  ASSERT_EQ(check_damaged(&a, &key, d_truncate, 0, &why), PCACHE_EPROTO);
  ASSERT_STREQ(why, "its size is not the memfd's (truncated?)");
  ASSERT_EQ(check_damaged(&a, &key, d_header_only, 0, &why), PCACHE_EPROTO);
  ASSERT_STREQ(why, "shorter than its header");
  ASSERT_EQ(check_damaged(&a, &key, d_table_byte, 0, &why), PCACHE_EPROTO);
  ASSERT_STREQ(why, "its tables fail their checksum");
  ASSERT_EQ(check_damaged(&a, &key, d_index_oob, 0, &why), PCACHE_EPROTO);
  ASSERT_EQ(check_damaged(&a, &key, d_count, 0, &why), PCACHE_EPROTO);
  ASSERT_STREQ(why, "counts out of bounds");
  ASSERT_EQ(check_damaged(&a, &key, d_overlap, 0, &why), PCACHE_EPROTO);
  ASSERT_EQ(check_damaged(&a, &key, d_unsorted, 0, &why), PCACHE_EPROTO);
  ASSERT_STREQ(why, "its index is not sorted, or names a hash twice");
  {
    pcache__seg bad;
    pcache__seg_blob sb;
    uint8_t *copy = malloc(a.m.map_size);
    ASSERT_EQ(pcache__seg_check(a.m.map, a.m.map_size, &other, &bad, &why), PCACHE_EPROTO);
    ASSERT_STREQ(why, "made for another device");
    /* A damaged blob passes the table checks (they never read blobs) and
     * fails its own checksum, which every client checks before use. */
    ASSERT_TRUE(copy != NULL);
    memcpy(copy, a.m.map, a.m.map_size);
    ASSERT_EQ(pcache__seg_find(&a.m.seg, items[3].hash.bytes, &sb), 1);
    copy[sb.offset + sb.size / 2] ^= 0x10;
    ASSERT_EQ(pcache__seg_check(copy, a.m.map_size, &key, &bad, &why), 0);
    ASSERT_EQ(pcache__seg_find(&bad, items[3].hash.bytes, &sb), 1);
    ASSERT_NE(pcache__checksum64(sb.data, sb.size), sb.checksum);
    free(copy);
  }
  segment_free(&a);
  segment_free(&b);

  /* Leases. A segment replaced while a client holds its lease stays
   * counted, as retired, until the client lets go; so does one held by a
   * client that is then killed, until it dies. */
  {
    wire_item two[2], three[2];
    int ready[2];
    pid_t child;
    char byte;
    segment_ex(fd, &key, APP, 1, 1, &a);
    ASSERT_GE(a.m.lease_fd, 0);
    put_items(fd, &key, APP, two, 2, 700, 250);
    segment(fd2, &key, APP, 1, &b); /* the replacement */
    ASSERT_NE(b.m.seg.generation, a.m.seg.generation);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segment_retired, 1);
    ASSERT_EQ(st.segment_retired_bytes, a.m.map_size);
    ASSERT_EQ(st.segment_bytes, b.m.map_size);
    expect_items(&a.m.seg, items, 40); /* still whole for its holder */
    segment_free(&a);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segment_retired, 0);
    ASSERT_EQ(st.segment_retired_bytes, 0);
    segment_free(&b);
    /* A client killed while it holds a lease. */
    ASSERT_EQ(pipe(ready), 0);
    child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int cfd = wire_open(&env, APP);
      segment_ex(cfd, &key, APP, 1, 1, &c);
      (void)!write(ready[1], "r", 1);
      for (;;)
        pause();
    }
    close(ready[1]);
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    put_items(fd, &key, APP, three, 2, 800, 250);
    segment(fd2, &key, APP, 1, &b);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segment_retired, 1);
    kill(child, SIGKILL);
    ASSERT_EQ(waitpid(child, NULL, 0), child);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segment_retired, 0);
    ASSERT_EQ(st.segment_retired_bytes, 0);
    segment_free(&b);
    for (size_t i = 0; i < 2; i++) {
      wire_item_free(&two[i]);
      wire_item_free(&three[i]);
    }
  }

  /* --segment-max 3: at most three held (the least recently handed out
   * go), and with three replaced ones still mapped, no new one is held
   * (the socket serves) until their holders let go. */
  {
    got_seg held[3], x;
    wire_item it[3][2], re[3][2];
    char app[16];
    for (int i = 0; i < 3; i++) {
      snprintf(app, sizeof app, "maxapp%d", i);
      put_items(fd, &key, app, it[i], 2, 40000 + (uint64_t)i * 10, 300);
      segment(fd, &key, app, 1, &x);
      segment_free(&x);
    }
    segment(fd, &key, APP, 1, &x); /* a fourth: the least recent goes */
    segment_free(&x);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segments, 3);
    for (int i = 0; i < 3; i++) {
      snprintf(app, sizeof app, "maxapp%d", i);
      segment_ex(fd, &key, app, 1, 1, &held[i]);
    }
    for (int i = 0; i < 3; i++) {
      snprintf(app, sizeof app, "maxapp%d", i);
      put_items(fd, &key, app, re[i], 2, 41000 + (uint64_t)i * 10, 300);
      segment(fd, &key, app, i < 2, &x); /* the third finds 3 retired */
      segment_free(&x);
    }
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segment_retired, 3);
    ASSERT_LE(st.segments, 3);
    for (int i = 0; i < 3; i++)
      segment_free(&held[i]);
    segment(fd, &key, "maxapp2", 1, &x);
    segment_free(&x);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segment_retired, 0);
    for (int i = 0; i < 3; i++)
      for (int k = 0; k < 2; k++) {
        wire_item_free(&it[i][k]);
        wire_item_free(&re[i][k]);
      }
  }

  /* Idle: dropped within --segment-idle and the timer's second. */
  sleep(4);
  st = wire_stats_of(fd);
  ASSERT_EQ(st.segments, 0);
  ASSERT_EQ(st.segment_bytes, 0);
  ASSERT_GE(st.segment_drops, 2);
  close(fd);
  close(fd2);
  test_daemon_stop(&env, SIGTERM);

  /* --segment-memory 64K with 64 apps' segments asked for: the daemon
   * holds at most the limit, least recently used dropped first. */
  test_daemon_start(&env, small);
  fd = wire_open(&env, APP);
  for (unsigned i = 0; i < 64; i++) {
    char app[32];
    wire_item few[4];
    snprintf(app, sizeof app, "app%02u", i);
    put_items(fd, &key, app, few, 4, 10000 + i * 10, 2048);
    segment(fd, &key, app, 1, &c);
    expect_items(&c.m.seg, few, 4);
    segment_free(&c);
    for (size_t k = 0; k < 4; k++)
      wire_item_free(&few[k]);
    st = wire_stats_of(fd);
    ASSERT_LE(st.segment_bytes, 64 << 10);
  }
  st = wire_stats_of(fd);
  ASSERT_EQ(st.segment_builds, 64);
  ASSERT_GT(st.segments, 0);
  ASSERT_LT(st.segments, 64);

  /* An app whose blobs outgrow the limit: a partial segment, most recent
   * first, and the socket serves the rest. */
  put_items(fd, &key, "bigapp", big, 40, 20000, 4096);
  segment(fd, &key, "bigapp", 1, &c);
  ASSERT_TRUE(!c.rep.resp->segment->complete);
  ASSERT_GT(c.m.seg.n_entries, 0);
  ASSERT_LT(c.m.seg.n_entries, 40);
  {
    size_t in_seg = 0, by_socket = 0;
    for (size_t i = 0; i < 40; i++) {
      pcache__seg_blob sb;
      wire_reply rep;
      if (pcache__seg_find(&c.m.seg, big[i].hash.bytes, &sb)) {
        ASSERT_EQ(memcmp(sb.data, big[i].item.blob.data, sb.size), 0);
        in_seg++;
        continue;
      }
      wire_get(fd, &key, &big[i].hash, 1, &rep);
      ASSERT_EQ(rep.resp->status, 0);
      ASSERT_EQ(rep.resp->get->n_blobs, 1);
      wire_reply_free(&rep);
      by_socket++;
    }
    ASSERT_EQ(in_seg, c.m.seg.n_entries);
    ASSERT_EQ(in_seg + by_socket, 40);
  }
  segment_free(&c);
  st = wire_stats_of(fd);
  ASSERT_LE(st.segment_bytes, 64 << 10);

  /* A held lease counts against the limit: with bigapp's segment (most
   * of the 64K) mapped by a client, its replacement does not fit beside
   * it (a build is cut to the room left beside it: here not one blob),
   * and the socket serves. Once the client lets go, it fits. */
  {
    wire_item two[2];
    got_seg d;
    segment_ex(fd, &key, "bigapp", 1, 1, &c);
    put_items(fd, &key, "bigapp", two, 2, 30000, 4096);
    segment(fd, &key, "bigapp", 0, &d);
    segment_free(&d);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segment_retired, 1);
    ASSERT_EQ(st.segment_retired_bytes, c.m.map_size);
    ASSERT_LE(st.segment_bytes + st.segment_retired_bytes, 64 << 10);
    segment_free(&c);
    segment(fd, &key, "bigapp", 1, &d);
    segment_free(&d);
    st = wire_stats_of(fd);
    ASSERT_EQ(st.segment_retired, 0);
    ASSERT_LE(st.segment_bytes, 64 << 10);
    for (size_t i = 0; i < 2; i++)
      wire_item_free(&two[i]);
  }
  for (size_t i = 0; i < 40; i++) {
    wire_item_free(&items[i]);
    wire_item_free(&big[i]);
  }
  for (size_t i = 0; i < 5; i++)
    wire_item_free(&more[i]);
  free(snap);
  close(fd);
  test_env_cleanup(&env);
  return 0;
}
