/* The fleet's trust (docs/fleet.md "Who can do what"): which writers this
 * daemon accepts fleet values from, and the key it signs its own with.
 *
 * Every value in Redis is signed with Ed25519 by the daemon that pushed
 * it; the signature covers every byte of the value but itself, and the
 * name of the key it is filed under (less --remote-prefix), and the value
 * names the key that signed it (its key id). A daemon accepts a value only
 * when that key is one it trusts (--remote-trusted-keys, and its own) and
 * the signature holds; a daemon without a signing key
 * (--remote-signing-key) reads and never pushes.
 *
 * This file, and pcachectl's `fleet keygen` through it, are the only users
 * of libsodium; its own static library (daemon/CMakeLists.txt) so that
 * pcachectl and the tests link it without the rest of the daemon. It
 * reads the fleet's small files (the keys, and --remote-auth for
 * remote_conn.c) without ever blocking on them. */
#ifndef PCD_REMOTE_TRUST_H
#define PCD_REMOTE_TRUST_H

#include <stddef.h>
#include <stdint.h>

/* A value in Redis, format 2 (docs/fleet.md "What is in Redis"):
 *
 *   "pcf2" | key id (8) | XXH3-64 of the payload, LE (8) | signature (64) | payload
 *
 * The key id is the first 8 bytes of the signer's public key. The checksum
 * tells damage in Redis from a forgery before any signature is checked;
 * the signature (Ed25519 over a BLAKE2b-512 digest, pcd_trust_sign) covers
 * the magic, the key id, the checksum, the payload and the key's name.
 * Format 1 ("pcf1" | checksum | payload) had no signature: it is refused
 * as unsigned. */
#define PCD_FLEET_MAGIC "pcf2"
#define PCD_FLEET_MAGIC_V1 "pcf1"
#define PCD_FLEET_KEY_ID_AT 4
#define PCD_FLEET_KEY_ID_SIZE 8
#define PCD_FLEET_CHECKSUM_AT 12
#define PCD_FLEET_SIGNATURE_AT 20
#define PCD_FLEET_SIGNATURE_SIZE 64
#define PCD_FLEET_HEADER 84

#define PCD_TRUST_PUBLIC_SIZE 32
#define PCD_TRUST_SECRET_SIZE 64
/* Most keys a --remote-trusted-keys file may list, and its most bytes. */
#define PCD_TRUST_MAX_KEYS 1024
#define PCD_TRUST_FILE_MAX (256u << 10)

/* What a fleet value is, as far as its header and signature go. */
typedef enum pcd_fleet_verdict {
  PCD_FLEET_OK = 0,
  PCD_FLEET_DAMAGED,       /* too short, no magic known, or the checksum is wrong */
  PCD_FLEET_UNSIGNED,      /* format 1: no signature */
  PCD_FLEET_UNTRUSTED,     /* signed by a key not trusted here */
  PCD_FLEET_BAD_SIGNATURE, /* the signature does not hold over the value */
} pcd_fleet_verdict;

typedef struct pcd_trust {
  int signs;                                 /* a signing key was given */
  uint8_t secret[PCD_TRUST_SECRET_SIZE];     /* libsodium's: seed, then public key */
  uint8_t public_key[PCD_TRUST_PUBLIC_SIZE]; /* its public key */
  int have_file;                             /* --remote-trusted-keys was given */
  uint8_t (*keys)[PCD_TRUST_PUBLIC_SIZE];    /* trusted: the file's, then our own */
  size_t n_keys;
} pcd_trust;

/* How a small file of the fleet's options must be held. */
typedef enum pcd_file_kind {
  PCD_FILE_SECRET, /* the user's own, mode 0600 or less: a password, a signing key */
  PCD_FILE_PUBLIC, /* the user's or root's, writable by no one else: the trusted keys */
} pcd_file_kind;

/*
 * pcd_trust_read_file - reads the file option names (at most cap - 1
 * bytes, NUL-terminated in buf) without blocking: opened with O_NONBLOCK
 * and O_NOFOLLOW, and refused unless it is a regular file held as kind
 * says. Returns the length, or -errno / -EINVAL after logging what is
 * wrong and how to fix it.
 */
long pcd_trust_read_file(const char *option, const char *path, pcd_file_kind kind, char *buf,
                         size_t cap);

/*
 * pcd_trust_load - reads --remote-signing-key (signing_file, may be NULL:
 * this daemon then only reads) and --remote-trusted-keys (trusted_file,
 * may be NULL: then only our own key is trusted, or none). Returns 0, or
 * -EINVAL / -errno after logging what is wrong.
 */
int pcd_trust_load(pcd_trust *trust, const char *signing_file, const char *trusted_file);

/* Forgets the keys, the secret one wiped. */
void pcd_trust_clear(pcd_trust *trust);

/* The key id of a public key as text: 16 hex digits and a NUL. */
void pcd_trust_key_id(const uint8_t *public_key, char out[2 * PCD_FLEET_KEY_ID_SIZE + 1]);

/*
 * pcd_trust_sign - signs a value whose magic, checksum and payload are in
 * place (remote_pack.c), to be filed under name (the Redis key less the
 * prefix): writes the key id and the signature. trust must sign.
 */
void pcd_trust_sign(const pcd_trust *trust, const char *name, size_t name_len, uint8_t *value,
                    size_t size);

/*
 * pcd_trust_verify - whether a value that carries the format-2 magic and a
 * right checksum, fetched under name, was signed over these very bytes by
 * a key trusted here. Returns PCD_FLEET_OK, _UNTRUSTED or _BAD_SIGNATURE.
 */
pcd_fleet_verdict pcd_trust_verify(const pcd_trust *trust, const char *name, size_t name_len,
                                   const uint8_t *value, size_t size);

/*
 * pcd_trust_keygen - makes a key pair in dir (made 0700 when missing):
 * dir/fleet.key, the signing key (mode 0600), and dir/fleet.pub, its
 * public key on one line for the members' --remote-trusted-keys. Never
 * replaces a file. Returns 0 with the key id in ret_id, or -errno /
 * -EEXIST with why in err.
 */
int pcd_trust_keygen(const char *dir, char ret_id[2 * PCD_FLEET_KEY_ID_SIZE + 1], char *err,
                     size_t err_size);

#endif
