/* libpcache's messages (pcache.h, "Logging"): to the app's log function
 * and, with $PCACHE_LOG, to stderr. Messages that an app can trigger once
 * a frame (a pipeline that cannot be cached, a refused blob) go through
 * pcache__log_limited, which gives each distinct one once and then holds
 * its repeats back. */
#ifndef PCACHE_CLIENT_LOG_H
#define PCACHE_CLIENT_LOG_H

#include <pthread.h>
#include <stdint.h>

#include <pcache/pcache.h>

#include "client/desc.h"

/* Distinct limited messages remembered at once; a new one past this
 * takes the slot of the one logged longest ago. */
#define PCACHE__LOG_SLOTS 64
/* A repeat is given at most once in this long, with its count. */
#define PCACHE__LOG_REPEAT_MS 10000u
/* Limited messages of all kinds given in one such period; the rest are
 * counted and the count given when the next period starts. */
#define PCACHE__LOG_BURST 20u

typedef struct pcache__log_slot {
  const void *site; /* NULL: free */
  uint64_t k1, k2;
  uint64_t logged_ms; /* when it was last given */
  uint64_t held;      /* repeats since */
  int level;
  char text[200]; /* as last given, for the count at close */
} pcache__log_slot;

typedef struct pcache__logger {
  pcache_log_func func; /* NULL: none */
  void *user_data;
  int func_level;       /* least severe level func gets */
  int stderr_level;     /* from $PCACHE_LOG; 0: off */
  int stderr_unset;     /* $PCACHE_LOG is unset or empty (not "0"): the default */
  pthread_mutex_t lock; /* the slots and the burst count */
  pcache__log_slot slots[PCACHE__LOG_SLOTS];
  uint64_t burst_start_ms;
  uint32_t burst_n;
  uint64_t burst_held;
} pcache__logger;

/* func may be NULL; level 0 means PCACHE_SEVERITY_WARNING. Reads $PCACHE_LOG.
 * Returns 0 or -ENOMEM. */
int pcache__logger_init(pcache__logger *lg, pcache_log_func func, void *user_data, int level);
/* Gives the repeats still held back, then frees. */
void pcache__logger_fini(pcache__logger *lg);
/* The logger for a device context without a client: $PCACHE_LOG only. */
pcache__logger *pcache__logger_default(void);

/* Whether a message of this level goes anywhere (so callers skip making
 * it). */
int pcache__log_wants(const pcache__logger *lg, int level);

void pcache__log(pcache__logger *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A message the user must see although they set no $PCACHE_LOG (the
 * Vulkan layer saying it is inactive): as pcache__log, and to stderr at
 * PCACHE_SEVERITY_WARNING or more severe also while $PCACHE_LOG is unset.
 * PCACHE_LOG=0, or a level that leaves warnings out, still silences it. */
void pcache__log_notice(pcache__logger *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A message that may repeat: (site, k1, k2) says which repeats are the
 * same message (site a static string, the keys what tells instances
 * apart). Given the first time, then at most once every
 * PCACHE__LOG_REPEAT_MS with the count of repeats held back. */
void pcache__log_limited(pcache__logger *lg, int level, const void *site, uint64_t k1, uint64_t k2,
                         const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Why a pipeline could not be cached, from the reason its description
 * recorded (desc.h): the object no wrapper made, or the struct's sType. */
void pcache__log_unhashable(pcache__logger *lg, const pcache__desc_buf *buf);

#endif
