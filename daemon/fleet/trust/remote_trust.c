/* The fleet's trust (remote_trust.h): its files, its keys, signing and
 * checking values. The only user of libsodium.
 *
 * What is signed is a BLAKE2b-512 digest of a domain string, the length
 * and bytes of the key's name (less --remote-prefix: sites that copy
 * values between Redis instances under other prefixes keep them valid)
 * and every byte of the value but the signature. Signing a digest keeps
 * Ed25519's cost per value fixed (it would hash a long message twice to
 * sign it) and hashes the value once, at BLAKE2b's speed. */
#include "remote_trust.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "common/alloc.h"
#include "common/log.h"

/* Part of every digest: a value signed for anything else never verifies. */
static const char DOMAIN[] = "pcache fleet value";

/* DER heads of what openssl writes for Ed25519: a PKCS#8 private key
 * (then the 32-byte seed) and a SubjectPublicKeyInfo (then the key). */
static const uint8_t PKCS8_HEAD[16] = {0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06,
                                       0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20};
static const uint8_t SPKI_HEAD[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                      0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};

/* ------------------------------------------------------------------ files */

static const char *file_type(mode_t mode) {
  if (S_ISFIFO(mode))
    return "FIFO";
  if (S_ISDIR(mode))
    return "directory";
  if (S_ISSOCK(mode))
    return "socket";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "device";
  return "special file";
}

long pcd_trust_read_file(const char *option, const char *path, pcd_file_kind kind, char *buf,
                         size_t cap) {
  struct stat st;
  size_t got = 0;
  int e, bad;
  /* O_NONBLOCK: a FIFO (or a device) opens at once rather than waiting
   * for a writer; fstat then refuses it before anything is read. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    e = errno;
    if (e == ELOOP)
      log_error("remote: %s %s is a symbolic link; name the file itself", option, path);
    else
      log_error("remote: cannot open %s %s: %s", option, path, strerror(e));
    return -e;
  }
  if (fstat(fd, &st) < 0) {
    e = errno;
    close(fd);
    log_error("remote: cannot stat %s %s: %s", option, path, strerror(e));
    return -e;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    log_error("remote: %s %s is not a regular file (it is a %s); give a regular file", option, path,
              file_type(st.st_mode));
    return -EINVAL;
  }
  if (kind == PCD_FILE_SECRET)
    bad = st.st_uid != geteuid() || (st.st_mode & 077);
  else
    bad = (st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022);
  if (bad) {
    close(fd);
    if (kind == PCD_FILE_SECRET)
      log_error("remote: %s %s must be a regular file of yours that no one else may read or write "
                "(chown it to uid %u; chmod 600; it is uid %u, mode %04o)",
                option, path, (unsigned)geteuid(), (unsigned)st.st_uid,
                (unsigned)(st.st_mode & 07777));
    else
      log_error(
          "remote: %s %s must be a regular file of yours (or root's) that no one else may write "
          "(chmod go-w; it is uid %u, mode %04o)",
          option, path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    return -EINVAL;
  }
  if ((uint64_t)st.st_size >= cap) {
    close(fd);
    log_error("remote: %s %s is too large (%llu bytes; at most %zu)", option, path,
              (unsigned long long)st.st_size, cap - 1);
    return -EFBIG;
  }
  while (got < cap - 1) {
    ssize_t n = read(fd, buf + got, cap - 1 - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      e = errno;
      close(fd);
      log_error("remote: cannot read %s %s: %s", option, path, strerror(e));
      return -e;
    }
    if (n == 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  buf[got] = 0;
  return (long)got;
}

/* ------------------------------------------------------------------- keys */

/* Decodes one token: 2n hex digits, or base64 (padded or not). Returns
 * the length, or -1. */
static long decode(const char *tok, size_t len, uint8_t *out, size_t cap) {
  size_t n = 0;
  int hex = len % 2 == 0;
  for (size_t i = 0; hex && i < len; i++)
    hex = (tok[i] >= '0' && tok[i] <= '9') || (tok[i] >= 'a' && tok[i] <= 'f') ||
          (tok[i] >= 'A' && tok[i] <= 'F');
  /* 64 or 128 hex digits are hex, though they are base64 too. */
  if (hex && (len == 64 || len == 128))
    return sodium_hex2bin(out, cap, tok, len, NULL, &n, NULL) == 0 && n == len / 2 ? (long)n : -1;
  if (sodium_base642bin(out, cap, tok, len, NULL, &n, NULL, sodium_base64_VARIANT_ORIGINAL) == 0 ||
      sodium_base642bin(out, cap, tok, len, NULL, &n, NULL,
                        sodium_base64_VARIANT_ORIGINAL_NO_PADDING) == 0)
    return (long)n;
  return -1;
}

/* The next line of text at *at holding a key: comments (from '#') and
 * space trimmed, blank lines and PEM armour ("-----BEGIN ...") skipped.
 * Returns its token (in place, NUL-terminated) or NULL at the end; *line
 * counts lines; *extra is set when the line has more than one word. */
static char *next_token(char **at, unsigned *line, int *extra) {
  while (**at) {
    char *s = *at, *end = s + strcspn(s, "\n"), *hash, *tok, *rest;
    *at = *end ? end + 1 : end;
    *end = 0;
    ++*line;
    if ((hash = strchr(s, '#')))
      *hash = 0;
    tok = s + strspn(s, " \t\r");
    if (!*tok || strncmp(tok, "-----", 5) == 0)
      continue;
    rest = tok + strcspn(tok, " \t\r");
    *extra = rest[strspn(rest, " \t\r")] != 0;
    *rest = 0;
    return tok;
  }
  return NULL;
}

/* A public key from a token: 32 bytes (hex or base64), or the base64 of
 * its SubjectPublicKeyInfo (the line `openssl pkey -pubout` writes). */
static int public_from(const char *tok, uint8_t out[PCD_TRUST_PUBLIC_SIZE]) {
  uint8_t b[64];
  long n = decode(tok, strlen(tok), b, sizeof b);
  if (n == PCD_TRUST_PUBLIC_SIZE)
    memcpy(out, b, PCD_TRUST_PUBLIC_SIZE);
  else if (n == (long)sizeof SPKI_HEAD + PCD_TRUST_PUBLIC_SIZE &&
           memcmp(b, SPKI_HEAD, sizeof SPKI_HEAD) == 0)
    memcpy(out, b + sizeof SPKI_HEAD, PCD_TRUST_PUBLIC_SIZE);
  else
    return -EINVAL;
  return 0;
}

/* A signing key from a token: a 32-byte seed (hex or base64; what
 * pcachectl fleet keygen writes), libsodium's 64-byte secret key, or the
 * base64 of a PKCS#8 key (the line `openssl genpkey -algorithm ed25519`
 * writes). */
static int secret_from(const char *tok, pcd_trust *t) {
  uint8_t b[96], pk[PCD_TRUST_PUBLIC_SIZE];
  long n = decode(tok, strlen(tok), b, sizeof b);
  int r = -EINVAL;
  if (n == 32) {
    r = crypto_sign_ed25519_seed_keypair(t->public_key, t->secret, b);
  } else if (n == (long)sizeof PKCS8_HEAD + 32 && memcmp(b, PKCS8_HEAD, sizeof PKCS8_HEAD) == 0) {
    r = crypto_sign_ed25519_seed_keypair(t->public_key, t->secret, b + sizeof PKCS8_HEAD);
  } else if (n == PCD_TRUST_SECRET_SIZE) {
    /* seed | public key: the public half must be the seed's. */
    r = crypto_sign_ed25519_seed_keypair(pk, t->secret, b);
    if (r == 0 && sodium_memcmp(pk, b + 32, sizeof pk) != 0)
      r = -EINVAL;
    memcpy(t->public_key, pk, sizeof pk);
  }
  sodium_memzero(b, sizeof b);
  return r == 0 ? 0 : -EINVAL;
}

void pcd_trust_key_id(const uint8_t *public_key, char out[2 * PCD_FLEET_KEY_ID_SIZE + 1]) {
  sodium_bin2hex(out, 2 * PCD_FLEET_KEY_ID_SIZE + 1, public_key, PCD_FLEET_KEY_ID_SIZE);
}

static int load_signing(pcd_trust *t, const char *path) {
  char *buf = pcache__malloc(4096), *at = buf, *tok;
  unsigned line = 0;
  int extra = 0, r = -EINVAL;
  long n;
  if (!buf)
    return -ENOMEM;
  if ((n = pcd_trust_read_file("--remote-signing-key", path, PCD_FILE_SECRET, buf, 4096)) < 0) {
    pcache__free(buf);
    return (int)n;
  }
  tok = next_token(&at, &line, &extra);
  if (tok && !extra && secret_from(tok, t) == 0 && !next_token(&at, &line, &extra))
    r = 0;
  sodium_memzero(buf, 4096);
  pcache__free(buf);
  if (r < 0) {
    log_error("remote: --remote-signing-key %s must hold one Ed25519 signing key: the file "
              "`pcachectl fleet keygen DIR` writes (DIR/fleet.key), or the one `openssl genpkey "
              "-algorithm ed25519` writes (docs/fleet.md)",
              path);
    return r;
  }
  t->signs = 1;
  return 0;
}

/* Whether key is in t's list already (by key id: two trusted keys may not
 * share one, or a value could not name its signer). */
static int id_taken(const pcd_trust *t, const uint8_t *key) {
  for (size_t i = 0; i < t->n_keys; i++)
    if (memcmp(t->keys[i], key, PCD_FLEET_KEY_ID_SIZE) == 0)
      return memcmp(t->keys[i], key, PCD_TRUST_PUBLIC_SIZE) == 0 ? 1 : 2;
  return 0;
}

/* Room for the most a file may list, and our own key (32 KiB). */
static int add_key(pcd_trust *t, const uint8_t *key) {
  if (!t->keys && !(t->keys = pcache__malloc((PCD_TRUST_MAX_KEYS + 1) * sizeof *t->keys)))
    return -ENOMEM;
  memcpy(t->keys[t->n_keys++], key, PCD_TRUST_PUBLIC_SIZE);
  return 0;
}

static int load_trusted(pcd_trust *t, const char *path) {
  char *buf = pcache__malloc(PCD_TRUST_FILE_MAX), *at = buf, *tok;
  unsigned line = 0;
  int extra = 0, r = 0;
  long n;
  if (!buf)
    return -ENOMEM;
  if ((n = pcd_trust_read_file("--remote-trusted-keys", path, PCD_FILE_PUBLIC, buf,
                               PCD_TRUST_FILE_MAX)) < 0) {
    pcache__free(buf);
    return (int)n;
  }
  while (r == 0 && (tok = next_token(&at, &line, &extra))) {
    uint8_t key[PCD_TRUST_PUBLIC_SIZE];
    char id[2 * PCD_FLEET_KEY_ID_SIZE + 1];
    if (extra || public_from(tok, key) < 0) {
      log_error(
          "remote: --remote-trusted-keys %s line %u: not a public key: one per line, as 64 hex "
          "digits (pcachectl fleet keygen's fleet.pub), the base64 of the 32-byte key, "
          "or the base64 line of `openssl pkey -pubout`; '#' starts a comment",
          path, line);
      r = -EINVAL;
    } else if (t->n_keys >= PCD_TRUST_MAX_KEYS) {
      log_error("remote: --remote-trusted-keys %s: more than %d keys", path, PCD_TRUST_MAX_KEYS);
      r = -EINVAL;
    } else if (id_taken(t, key) == 2) {
      pcd_trust_key_id(key, id);
      log_error(
          "remote: --remote-trusted-keys %s line %u: two keys share key id %s; a value could not "
          "name its signer. Make a new key pair for one of them",
          path, line, id);
      r = -EINVAL;
    } else if (!id_taken(t, key)) {
      r = add_key(t, key);
    }
  }
  pcache__free(buf);
  t->have_file = 1;
  return r;
}

int pcd_trust_load(pcd_trust *t, const char *signing_file, const char *trusted_file) {
  int r;
  memset(t, 0, sizeof *t);
  if (sodium_init() < 0) {
    log_error("remote: libsodium failed to start");
    return -EIO;
  }
  if (signing_file && (r = load_signing(t, signing_file)) < 0)
    goto fail;
  if (trusted_file && (r = load_trusted(t, trusted_file)) < 0)
    goto fail;
  /* What this daemon signed, it could have uploaded itself. */
  if (t->signs && id_taken(t, t->public_key) == 2) {
    char id[2 * PCD_FLEET_KEY_ID_SIZE + 1];
    pcd_trust_key_id(t->public_key, id);
    log_error(
        "remote: --remote-trusted-keys %s lists another key with this daemon's key id %s; make "
        "a new key pair",
        trusted_file, id);
    r = -EINVAL;
    goto fail;
  }
  if (t->signs && !id_taken(t, t->public_key) && (r = add_key(t, t->public_key)) < 0)
    goto fail;
  return 0;
fail:
  pcd_trust_clear(t);
  return r;
}

void pcd_trust_clear(pcd_trust *t) {
  sodium_memzero(t->secret, sizeof t->secret);
  pcache__free(t->keys);
  t->keys = NULL;
  t->n_keys = 0;
  t->signs = 0;
}

/* -------------------------------------------------------------- signatures */

/* The digest signed for value filed under name. */
static void digest(const char *name, size_t name_len, const uint8_t *value, size_t size,
                   uint8_t out[crypto_generichash_BYTES_MAX]) {
  crypto_generichash_state st;
  uint8_t len[4] = {(uint8_t)name_len, (uint8_t)(name_len >> 8), (uint8_t)(name_len >> 16),
                    (uint8_t)(name_len >> 24)};
  crypto_generichash_init(&st, NULL, 0, crypto_generichash_BYTES_MAX);
  crypto_generichash_update(&st, (const uint8_t *)DOMAIN, sizeof DOMAIN);
  crypto_generichash_update(&st, len, sizeof len);
  crypto_generichash_update(&st, (const uint8_t *)name, name_len);
  crypto_generichash_update(&st, value, PCD_FLEET_SIGNATURE_AT);
  crypto_generichash_update(&st, value + PCD_FLEET_HEADER, size - PCD_FLEET_HEADER);
  crypto_generichash_final(&st, out, crypto_generichash_BYTES_MAX);
}

void pcd_trust_sign(const pcd_trust *t, const char *name, size_t name_len, uint8_t *value,
                    size_t size) {
  uint8_t d[crypto_generichash_BYTES_MAX];
  memcpy(value + PCD_FLEET_KEY_ID_AT, t->public_key, PCD_FLEET_KEY_ID_SIZE);
  digest(name, name_len, value, size, d);
  crypto_sign_ed25519_detached(value + PCD_FLEET_SIGNATURE_AT, NULL, d, sizeof d, t->secret);
}

pcd_fleet_verdict pcd_trust_verify(const pcd_trust *t, const char *name, size_t name_len,
                                   const uint8_t *value, size_t size) {
  uint8_t d[crypto_generichash_BYTES_MAX];
  const uint8_t *key = NULL;
  if (size < PCD_FLEET_HEADER)
    return PCD_FLEET_DAMAGED;
  for (size_t i = 0; i < t->n_keys && !key; i++)
    if (memcmp(t->keys[i], value + PCD_FLEET_KEY_ID_AT, PCD_FLEET_KEY_ID_SIZE) == 0)
      key = t->keys[i];
  if (!key)
    return PCD_FLEET_UNTRUSTED;
  digest(name, name_len, value, size, d);
  return crypto_sign_ed25519_verify_detached(value + PCD_FLEET_SIGNATURE_AT, d, sizeof d, key) == 0
             ? PCD_FLEET_OK
             : PCD_FLEET_BAD_SIGNATURE;
}

/* ----------------------------------------------------------------- keygen */

/* Writes text to a new file path of mode; never replaces one. */
static int write_new(const char *path, mode_t mode, const char *text, char *err, size_t err_size) {
  size_t len = strlen(text), done = 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode), e;
  if (fd < 0) {
    e = errno;
    snprintf(err, err_size, "cannot create %s: %s%s", path, strerror(e),
             e == EEXIST ? " (a key pair is never replaced: remove it, or give another DIR)" : "");
    return -e;
  }
  if (fchmod(fd, mode) < 0)
    goto fail;
  while (done < len) {
    ssize_t n = write(fd, text + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      goto fail;
    done += (size_t)n;
  }
  if (fsync(fd) < 0)
    goto fail;
  close(fd);
  return 0;
fail:
  e = errno ? errno : EIO;
  close(fd);
  unlink(path);
  snprintf(err, err_size, "cannot write %s: %s", path, strerror(e));
  return -e;
}

int pcd_trust_keygen(const char *dir, char ret_id[2 * PCD_FLEET_KEY_ID_SIZE + 1], char *err,
                     size_t err_size) {
  uint8_t seed[32], pk[PCD_TRUST_PUBLIC_SIZE], sk[PCD_TRUST_SECRET_SIZE];
  char key_path[PATH_MAX], pub_path[PATH_MAX], seed_hex[65], pk_hex[65], when[32], host[64] = "";
  char text[512];
  time_t now = time(NULL);
  struct tm tm;
  struct stat st;
  int r;
  if (sodium_init() < 0) {
    snprintf(err, err_size, "libsodium failed to start");
    return -EIO;
  }
  if ((size_t)snprintf(key_path, sizeof key_path, "%s/fleet.key", dir) >= sizeof key_path ||
      (size_t)snprintf(pub_path, sizeof pub_path, "%s/fleet.pub", dir) >= sizeof pub_path) {
    snprintf(err, err_size, "%s: name too long", dir);
    return -ENAMETOOLONG;
  }
  if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
    r = -errno;
    snprintf(err, err_size, "cannot make %s: %s", dir, strerror(-r));
    return r;
  }
  if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, err_size, "%s is not a directory", dir);
    return -ENOTDIR;
  }
  randombytes_buf(seed, sizeof seed);
  crypto_sign_ed25519_seed_keypair(pk, sk, seed);
  sodium_bin2hex(seed_hex, sizeof seed_hex, seed, sizeof seed);
  sodium_bin2hex(pk_hex, sizeof pk_hex, pk, sizeof pk);
  pcd_trust_key_id(pk, ret_id);
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%d", &tm);
  (void)gethostname(host, sizeof host - 1);
  for (char *c = host; *c; c++)
    if (*c == '#' || *c < ' ' || *c > '~')
      *c = '?';
  snprintf(text, sizeof text,
           "# pcache fleet signing key (Ed25519 seed, hex), key id %s, made %s on %s.\n"
           "# Secret: keep it mode 0600. pcached --remote-signing-key FILE signs with it;\n"
           "# its public key is %s.\n"
           "%s\n",
           ret_id, when, host, pk_hex, seed_hex);
  r = write_new(key_path, 0600, text, err, err_size);
  sodium_memzero(text, sizeof text);
  sodium_memzero(seed_hex, sizeof seed_hex);
  sodium_memzero(seed, sizeof seed);
  sodium_memzero(sk, sizeof sk);
  if (r < 0)
    return r;
  snprintf(text, sizeof text, "%s # pcache fleet key %s, %s, %s\n", pk_hex, ret_id, host, when);
  if ((r = write_new(pub_path, 0644, text, err, err_size)) < 0) {
    unlink(key_path);
    return r;
  }
  return 0;
}
