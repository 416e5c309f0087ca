/* The fleet's trust model (docs/fleet.md "Who can do what") against a
 * real redis-server and real pcached, through the wire protocol:
 *
 * - a trusted writer's entries reach a fresh member and are served;
 * - a member with no signing key reads and publishes nothing;
 * - a member with Redis access that rewrites stored blob bodies (the
 *   public header kept, its own bytes appended, the XXH3 checksum fixed:
 *   the attack of issue 30) gets none of them accepted, each refusal
 *   counted; the same bodies signed by the trusted writer are accepted,
 *   so the signature is what refused them;
 * - an unsigned (format-1) value, a value signed by a key this member
 *   does not trust, and a signed value filed under another entry's key
 *   are refused and counted;
 * - a snapshot whose blob was grown in Redis, or copied under another
 *   app's key, is refused: none stored;
 * - a writer whose key openssl made (the libsodium-free way the docs
 *   give) is accepted by members that list its openssl public key;
 * - a member that trusts no one asks the fleet nothing and says so once;
 * - an app index that names one entry in 33 spellings (its hash in
 *   lowercase hex, and 32 with some letters upper case: a Redis set keeps
 *   them apart) makes a Prefetch fetch that value once, the other
 *   spellings refused as one count. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/bytes.h"
#include "common/clock.h"
#include "common/hash.h"
#include "proto/frame.h"
#include "proto/rpc.h"
#include "fleet_wire.h"
#include "redis_util.h"
#include "remote_trust.h"
#include "test.h"
#include "wire.h"

#define N_ITEMS 4
#define APPENDED 4096

/* A member of the fleet: signing with key (NULL: it only reads),
 * trusting the keys in trusted (NULL: no --remote-trusted-keys). */
static void member(test_env *env, const char *name, const char *url, const char *key,
                   const char *trusted) {
  const char *args[12] = {"--remote", url, "--remote-timeout", "2000"};
  int n = 4;
  if (key)
    args[n++] = "--remote-signing-key", args[n++] = key;
  if (trusted)
    args[n++] = "--remote-trusted-keys", args[n++] = trusted;
  test_env_init(env, name);
  test_daemon_start(env, args);
  wire_guard(env);
  fleet_wait_state(env, "trust", "up");
}

/* A Get of items on a fresh connection: how many blobs came back, and the
 * size of the first. */
static size_t get(const test_env *env, const pcache__devkey *key, const wire_item *items, size_t n,
                  size_t *ret_first_size) {
  pcache__hash hashes[N_ITEMS];
  wire_reply r;
  size_t got;
  int fd = wire_open(env, "trust");
  for (size_t i = 0; i < n; i++)
    hashes[i] = items[i].hash;
  wire_get(fd, key, hashes, n, &r);
  got = r.resp->get->n_blobs;
  if (ret_first_size && got)
    (void)wire_blob_data(&r, r.resp->get->blobs[0], ret_first_size);
  wire_reply_free(&r);
  close(fd);
  return got;
}

/* One Prefetch page of app's entries on a fresh connection. */
static void prefetch(const test_env *env, const char *app, const pcache__devkey *key,
                     uint32_t max_entries, int snapshot) {
  wire_reply r;
  int fd = wire_open(env, app);
  wire_prefetch(fd, key, max_entries, 0, snapshot, &r);
  wire_reply_free(&r);
  close(fd);
}

static void put(const test_env *env, const pcache__devkey *key, wire_item *items, size_t n) {
  wire_reply r;
  int fd = wire_open(env, "trust");
  wire_put(fd, key, items, n, &r);
  ASSERT_EQ(r.resp->put->stored, n);
  wire_reply_free(&r);
  close(fd);
}

static void sign_with(const char *key_file, const char *k, uint8_t *value, size_t size) {
  pcd_trust t;
  ASSERT_EQ(pcd_trust_load(&t, key_file, NULL), 0);
  pcd_trust_sign(&t, k + strlen("pcache:"), strlen(k) - strlen("pcache:"), value, size);
  pcd_trust_clear(&t);
}

/* The attack of issue 30 on one stored value: its payload unpacked, its
 * blob's body grown by APPENDED bytes of the attacker's (the blob's public
 * header kept), packed again behind the same header (the writer's key id
 * and signature), and the XXH3 checksum fixed. Returns the new value
 * (malloc'ed) and its size. */
static uint8_t *tamper(const uint8_t *value, size_t size, size_t *ret_size) {
  Pcachepb__Request *req = NULL;
  Pcachepb__PutItem *it;
  uint8_t *grown, *kept, *out;
  size_t n;
  ASSERT_TRUE(size > PCD_FLEET_HEADER);
  ASSERT_EQ(memcmp(value, PCD_FLEET_MAGIC, 4), 0);
  ASSERT_OK(
      pcache__request_decode(value + PCD_FLEET_HEADER, size - PCD_FLEET_HEADER, 1u << 20, &req));
  ASSERT_EQ(req->body_case, PCACHEPB__REQUEST__BODY_PUT);
  it = req->put->items[0];
  grown = malloc(it->blob.len + APPENDED);
  ASSERT_TRUE(grown != NULL);
  memcpy(grown, it->blob.data, it->blob.len);
  memset(grown + it->blob.len, 0xCC, APPENDED); /* "machine code" of the attacker's */
  kept = it->blob.data;
  it->blob.data = grown;
  it->blob.len += APPENDED;
  n = pcachepb__request__get_packed_size(req);
  out = malloc(PCD_FLEET_HEADER + n);
  ASSERT_TRUE(out != NULL);
  memcpy(out, value, PCD_FLEET_HEADER);
  pcachepb__request__pack(req, out + PCD_FLEET_HEADER);
  pcache__put_le64(out + PCD_FLEET_CHECKSUM_AT, pcache__checksum64(out + PCD_FLEET_HEADER, n));
  it->blob.data = kept;
  it->blob.len -= APPENDED;
  free(grown);
  pcache__request_free(req);
  *ret_size = PCD_FLEET_HEADER + n;
  return out;
}

int main(void) {
  test_redis rs = {0};
  test_env root, a, reader, fresh, m3, m5, o, m4, lone, spell;
  test_fleet_key ka, kx;
  pcache__devkey dev;
  wire_item items[N_ITEMS], mine[2], extra[3], from_o;
  redisContext *c;
  remote_view v;
  char dir[400], trusted[400], okey[400], opub[400], a_id[17];
  int have_openssl;

  redis_require();
  signal(SIGPIPE, SIG_IGN);
  test_env_init(&root, "fleet-trust");
  snprintf(dir, sizeof dir, "%s/redis", root.root);
  redis_start(&rs, dir);
  c = redis_connect(&rs);

  /* Keys: A, the trusted writer; X, a stranger's; O, made by openssl. */
  snprintf(dir, sizeof dir, "%s/keys-a", root.root);
  fleet_keygen(&ka, dir);
  snprintf(dir, sizeof dir, "%s/keys-x", root.root);
  fleet_keygen(&kx, dir);
  snprintf(trusted, sizeof trusted, "%s/trusted", root.root);
  fleet_trust_file(trusted, &ka, 1);
  snprintf(okey, sizeof okey, "%s/openssl.key", root.root);
  snprintf(opub, sizeof opub, "%s/openssl.pub", root.root);
  have_openssl = fleet_sh("command -v openssl >/dev/null 2>&1") == 0;
  if (have_openssl) {
    /* The commands docs/fleet.md gives: the private key as openssl writes
     * it, and its public key's PEM appended to the trusted-keys file. */
    ASSERT_EQ(fleet_sh("(umask 077; openssl genpkey -algorithm ed25519 -out '%s')", okey), 0);
    ASSERT_EQ(fleet_sh("openssl pkey -in '%s' -pubout >> '%s'", okey, trusted), 0);
  } else {
    fprintf(stderr, "openssl not installed: its keys are not tried\n");
  }

  /* A writes four entries: each is pushed, signed with its key. */
  member(&a, "trust-a", rs.url, ka.key, trusted);
  v = fleet_view(&a, "trust");
  ASSERT_TRUE(strlen(v.signing_key) == 16);
  memcpy(a_id, v.signing_key, sizeof a_id);
  wire_devkey(5, &dev);
  for (int i = 0; i < N_ITEMS; i++)
    wire_item_make(&items[i], &dev, 200 + (unsigned)i, 8192);
  put(&a, &dev, items, N_ITEMS);
  fleet_wait_pushed(&a, "trust", N_ITEMS);
  ASSERT_EQ(redis_count_keys(c, "pcache:e:*"), N_ITEMS);
  {
    redisReply *val = redis_get(c, fleet_entry_key(dev.bytes, items[0].hash.bytes));
    char id[17];
    ASSERT_EQ(memcmp(val->str, "pcf2", 4), 0);
    pcache__hex(val->str + PCD_FLEET_KEY_ID_AT, PCD_FLEET_KEY_ID_SIZE, id);
    ASSERT_EQ(strcmp(id, a_id), 0);
    freeReplyObject(val);
  }

  /* A fresh member that trusts A and has no signing key: A's entries
   * reach it and are served; what its own clients upload stays local. */
  member(&reader, "trust-reader", rs.url, NULL, trusted);
  v = fleet_view(&reader, "trust");
  ASSERT_EQ(v.signing_key[0], 0);
  ASSERT_EQ(v.trusted_keys, have_openssl ? 2u : 1u);
  ASSERT_EQ(get(&reader, &dev, items, N_ITEMS, NULL), N_ITEMS);
  v = fleet_view(&reader, "trust");
  ASSERT_EQ(v.stored, N_ITEMS);
  ASSERT_EQ(v.refused, 0);
  ASSERT_EQ(v.entries, N_ITEMS);
  for (int i = 0; i < 2; i++)
    wire_item_make(&mine[i], &dev, 300 + (unsigned)i, 4096);
  put(&reader, &dev, mine, 2);
  fleet_sleep_ms(500);
  v = fleet_view(&reader, "trust");
  ASSERT_EQ(v.pushed, 0);
  ASSERT_EQ(v.push_dropped, 0);
  ASSERT_EQ(redis_count_keys(c, "pcache:e:*"), N_ITEMS);
  ASSERT_EQ(redis_count_keys(c, "pcache:a:*"), 1); /* A's app index, no other */
  ASSERT_EQ(fleet_sh("'%s' --socket '%s' status | grep -q 'reads only'", PCACHECTL_PATH,
                     reader.socket_path),
            0);

  /* A member with Redis access rewrites every stored blob's body. A fresh
   * member refuses all four: none stored, none served, each counted. */
  for (int i = 0; i < N_ITEMS; i++) {
    redisReply *val = redis_get(c, fleet_entry_key(dev.bytes, items[i].hash.bytes));
    size_t n;
    uint8_t *bad = tamper((const uint8_t *)val->str, val->len, &n);
    redis_set(c, fleet_entry_key(dev.bytes, items[i].hash.bytes), bad, n);
    free(bad);
    freeReplyObject(val);
  }
  member(&fresh, "trust-fresh", rs.url, NULL, trusted);
  ASSERT_EQ(get(&fresh, &dev, items, N_ITEMS, NULL), 0);
  v = fleet_view(&fresh, "trust");
  ASSERT_EQ(v.fetched, N_ITEMS);
  ASSERT_EQ(v.stored, 0);
  ASSERT_EQ(v.entries, 0);
  ASSERT_EQ(v.refused, N_ITEMS);
  ASSERT_EQ(v.refused_signature, N_ITEMS);
  /* Logged at the 1st, 2nd and 4th. */
  ASSERT_EQ(fleet_log_count(&fresh, "signature does not hold"), 3);
  ASSERT_EQ(fleet_sh("'%s' --socket '%s' status | grep -q '%d with bad signatures'", PCACHECTL_PATH,
                     fresh.socket_path, N_ITEMS),
            0);
  ASSERT_EQ(fleet_sh("'%s' --socket '%s' --json status | grep -q '\"refused_signature\": %d'",
                     PCACHECTL_PATH, fresh.socket_path, N_ITEMS),
            0);
  /* The same bodies signed by A pass every other check and are served,
   * appended bytes and all: the signature alone refused them (and a
   * trusted writer that is itself compromised can do this: docs/fleet.md
   * says what signatures do not protect). */
  for (int i = 0; i < N_ITEMS; i++) {
    redisReply *val = redis_get(c, fleet_entry_key(dev.bytes, items[i].hash.bytes));
    sign_with(ka.key, fleet_entry_key(dev.bytes, items[i].hash.bytes), (uint8_t *)val->str,
              val->len);
    redis_set(c, fleet_entry_key(dev.bytes, items[i].hash.bytes), val->str, val->len);
    freeReplyObject(val);
  }
  {
    size_t first = 0;
    ASSERT_EQ(get(&fresh, &dev, items, N_ITEMS, &first), N_ITEMS);
    ASSERT_EQ(first, items[0].item.blob.len + APPENDED);
    ASSERT_EQ(fleet_view(&fresh, "trust").stored, N_ITEMS);
  }

  /* An unsigned value (format 1, as a pcached before signatures wrote
   * it) and one signed by a key this member does not trust: refused. */
  for (int i = 0; i < 2; i++)
    wire_item_make(&extra[i], &dev, 400 + (unsigned)i, 4096);
  put(&a, &dev, extra, 2);
  fleet_wait_pushed(&a, "trust", N_ITEMS + 2);
  {
    redisReply *val = redis_get(c, fleet_entry_key(dev.bytes, extra[0].hash.bytes));
    size_t n = val->len - PCD_FLEET_HEADER;
    uint8_t *old = malloc(12 + n);
    ASSERT_TRUE(old != NULL);
    memcpy(old, "pcf1", 4);
    memcpy(old + 12, val->str + PCD_FLEET_HEADER, n);
    pcache__put_le64(old + 4, pcache__checksum64(old + 12, n));
    redis_set(c, fleet_entry_key(dev.bytes, extra[0].hash.bytes), old, 12 + n);
    free(old);
    freeReplyObject(val);
    val = redis_get(c, fleet_entry_key(dev.bytes, extra[1].hash.bytes));
    sign_with(kx.key, fleet_entry_key(dev.bytes, extra[1].hash.bytes), (uint8_t *)val->str,
              val->len);
    redis_set(c, fleet_entry_key(dev.bytes, extra[1].hash.bytes), val->str, val->len);
    freeReplyObject(val);
  }
  /* And a value A signed for one entry, filed under another's key: the
   * signature covers the key's name. */
  wire_item_make(&extra[2], &dev, 402, 4096);
  {
    redisReply *val = redis_get(c, fleet_entry_key(dev.bytes, items[0].hash.bytes));
    redis_set(c, fleet_entry_key(dev.bytes, extra[2].hash.bytes), val->str, val->len);
    freeReplyObject(val);
  }
  member(&m3, "trust-m3", rs.url, NULL, trusted);
  ASSERT_EQ(get(&m3, &dev, extra, 3, NULL), 0);
  v = fleet_view(&m3, "trust");
  ASSERT_EQ(v.fetched, 3);
  ASSERT_EQ(v.stored, 0);
  ASSERT_EQ(v.entries, 0);
  ASSERT_EQ(v.refused, 3);
  ASSERT_EQ(v.refused_unsigned, 1);
  ASSERT_EQ(v.refused_untrusted, 1);
  ASSERT_EQ(v.refused_signature, 1);
  ASSERT_EQ(fleet_log_count(&m3, "is unsigned"), 1);
  {
    /* The log names the stranger's key id: the first 16 hex digits of its
     * public key, as fleet.pub has it. */
    char pub[80] = "", line[80];
    FILE *f = fopen(kx.pub, "r");
    ASSERT_TRUE(f != NULL && fgets(pub, sizeof pub, f) != NULL);
    fclose(f);
    snprintf(line, sizeof line, "is signed by key %.16s, which this daemon does not trust", pub);
    ASSERT_EQ(fleet_log_count(&m3, line), 1);
  }

  /* Snapshots are signed too. A's snapshot of app "trust", its blob
   * body grown in Redis under a fixed checksum, and the same snapshot
   * copied, untouched, under another app's key: both refused. */
  {
    Pcachepb__DeviceInfo di = PCACHEPB__DEVICE_INFO__INIT;
    ProtobufCBinaryData hashes[N_ITEMS];
    uint8_t *blob = wire_blob(&dev, 4096, 9);
    char sk[256], other[256], hex[65];
    wire_reply r, pr;
    int fd = wire_open(&a, "trust");
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__PutSnapshot ps = PCACHEPB__PUT_SNAPSHOT__INIT;
    di.key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, dev.bytes};
    for (int i = 0; i < N_ITEMS; i++)
      hashes[i] = (ProtobufCBinaryData){PCACHE_HASH_SIZE, items[i].hash.bytes};
    ps.device = &di;
    ps.blob = (ProtobufCBinaryData){4096, blob};
    ps.state_hashes = hashes;
    ps.n_state_hashes = N_ITEMS;
    req.body_case = PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT;
    req.put_snapshot = &ps;
    wire_call(fd, &req, &r);
    ASSERT_EQ(r.resp->status, 0);
    wire_reply_free(&r);
    close(fd);
    free(blob);
    fleet_wait_pushed(&a, "trust", N_ITEMS + 3);
    pcache__hex(dev.bytes, 32, hex);
    snprintf(sk, sizeof sk, "pcache:s:%s:trust", hex);
    snprintf(other, sizeof other, "pcache:s:%s:other", hex);
    redisReply *val = redis_get(c, sk);
    redis_set(c, other, val->str, val->len);
    {
      Pcachepb__Request *snap = NULL;
      uint8_t *grown, *kept, *out;
      size_t n;
      ASSERT_OK(pcache__request_decode((uint8_t *)val->str + PCD_FLEET_HEADER,
                                       val->len - PCD_FLEET_HEADER, 1u << 20, &snap));
      ASSERT_EQ(snap->body_case, PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT);
      grown = malloc(snap->put_snapshot->blob.len + APPENDED);
      ASSERT_TRUE(grown != NULL);
      memcpy(grown, snap->put_snapshot->blob.data, snap->put_snapshot->blob.len);
      memset(grown + snap->put_snapshot->blob.len, 0xCC, APPENDED);
      kept = snap->put_snapshot->blob.data;
      snap->put_snapshot->blob.data = grown;
      snap->put_snapshot->blob.len += APPENDED;
      n = pcachepb__request__get_packed_size(snap);
      out = malloc(PCD_FLEET_HEADER + n);
      ASSERT_TRUE(out != NULL);
      memcpy(out, val->str, PCD_FLEET_HEADER);
      pcachepb__request__pack(snap, out + PCD_FLEET_HEADER);
      pcache__put_le64(out + PCD_FLEET_CHECKSUM_AT, pcache__checksum64(out + PCD_FLEET_HEADER, n));
      redis_set(c, sk, out, PCD_FLEET_HEADER + n);
      snap->put_snapshot->blob.data = kept;
      snap->put_snapshot->blob.len -= APPENDED;
      free(grown);
      free(out);
      pcache__request_free(snap);
    }
    freeReplyObject(val);

    member(&m5, "trust-m5", rs.url, NULL, trusted);
    prefetch(&m5, "other", &dev, 0, 1);
    ASSERT_EQ(fleet_view(&m5, "trust").refused_signature, 1);
    fd = wire_open(&m5, "trust");
    wire_prefetch(fd, &dev, 0, 0, 1, &pr);
    wire_reply_free(&pr);
    close(fd);
    v = fleet_view(&m5, "trust");
    ASSERT_EQ(v.refused_signature, 2); /* the snapshot; extra[2] is in no index */
    fd = wire_open(&m5, "trust");
    ASSERT_EQ(wire_stats_of(fd).snapshots, 0);
    close(fd);
    test_env_cleanup(&m5);
  }

  /* A writer whose key openssl made: its entry reaches a member that
   * lists its openssl public key. */
  if (have_openssl) {
    member(&o, "trust-o", rs.url, okey, trusted);
    wire_item_make(&from_o, &dev, 500, 4096);
    put(&o, &dev, &from_o, 1);
    fleet_wait_pushed(&o, "trust", 1);
    member(&m4, "trust-m4", rs.url, NULL, trusted);
    ASSERT_EQ(get(&m4, &dev, &from_o, 1, NULL), 1);
    ASSERT_EQ(fleet_view(&m4, "trust").stored, 1);
    wire_item_free(&from_o);
    test_env_cleanup(&m4);
    test_env_cleanup(&o);
  }

  /* A member with neither a signing key nor trusted keys: it says so once
   * at start, with the fix, and asks the fleet nothing. */
  member(&lone, "trust-lone", rs.url, NULL, NULL);
  ASSERT_EQ(fleet_log_count(&lone, "no writer is trusted"), 1);
  ASSERT_EQ(fleet_log_count(&lone, "--remote-trusted-keys FILE"), 1);
  ASSERT_EQ(get(&lone, &dev, items, N_ITEMS, NULL), 0);
  v = fleet_view(&lone, "trust");
  ASSERT_EQ(v.asks, 0);
  ASSERT_EQ(v.trusted_keys, 0);
  ASSERT_EQ(v.stored, 0);

  /* One entry named 33 ways in an app's index. */
  {
    char dev_hex[65], h[33], idx[256], m[33];
    int at[6], letters = 0, spellings;
    pcache__hex(dev.bytes, 32, dev_hex);
    pcache__hex(items[0].hash.bytes, 16, h);
    snprintf(idx, sizeof idx, "pcache:a:%s:spell", dev_hex);
    /* Its own spelling, then up to 32 more: upper case on a subset of
     * its first six letters. */
    for (int j = 0; j < 32 && letters < 6; j++)
      if (h[j] >= 'a' && h[j] <= 'f')
        at[letters++] = j;
    ASSERT_GE(letters, 3);
    spellings = (1 << letters) - 1 < 32 ? (1 << letters) - 1 : 32;
    for (int i = 0; i <= spellings; i++) {
      const char *argv[3] = {"SADD", idx, m};
      size_t len[3] = {4, strlen(idx), 32};
      redisReply *added;
      memcpy(m, h, sizeof m);
      for (int b = 0; b < letters; b++)
        if (i & (1 << b))
          m[at[b]] = (char)(m[at[b]] - 'a' + 'A');
      added = redis_cmd(c, 3, argv, len);
      ASSERT_EQ(added->integer, 1);
      freeReplyObject(added);
    }
    member(&spell, "trust-spell", rs.url, NULL, trusted);
    prefetch(&spell, "spell", &dev, 100, 0);
    v = fleet_view(&spell, "trust");
    ASSERT_EQ(v.fetched, 1);
    ASSERT_EQ(v.stored + v.refused_signature + v.refused_unsigned + v.refused_untrusted, 1);
    ASSERT_EQ(fleet_log_count(&spell, "not a state hash in lowercase hex"), 1);
    test_env_cleanup(&spell);
  }

  for (int i = 0; i < N_ITEMS; i++)
    wire_item_free(&items[i]);
  for (int i = 0; i < 2; i++)
    wire_item_free(&mine[i]);
  for (int i = 0; i < 3; i++)
    wire_item_free(&extra[i]);
  redisFree(c);
  test_env_cleanup(&lone);
  test_env_cleanup(&m3);
  test_env_cleanup(&fresh);
  test_env_cleanup(&reader);
  test_env_cleanup(&a);
  redis_kill(&rs);
  test_env_cleanup(&root);
  return 0;
}
