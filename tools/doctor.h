/* pcachectl doctor (verb_doctor.c): checks the set-up a user's programs
 * meet and says, for each thing that matters, what was found, how bad it
 * is and what fixes it. The checks are grouped by what they look at:
 *   doctor_layer.c   the Vulkan loader's implicit-layer manifests
 *   doctor_local.c   XDG_RUNTIME_DIR, the cache home, the drivers' own caches
 *   doctor_daemon.c  the socket, the daemon, its store, devices and replays
 * and each adds findings to one list (doctor.c). */
#ifndef PCACHE_TOOLS_DOCTOR_H
#define PCACHE_TOOLS_DOCTOR_H

#include <stddef.h>
#include <stdint.h>

#include "tools/ctl.h"

typedef enum doctor_severity {
  DOCTOR_OK = 0,      /* as it should be */
  DOCTOR_NOTE = 1,    /* worth knowing, nothing to fix */
  DOCTOR_WARNING = 2, /* pcache works, but less well than it could */
  DOCTOR_PROBLEM = 3, /* pcache does not work as set up */
} doctor_severity;

/* The exit codes (docs/pcachectl.md, "doctor"). 2 and 3 keep the meaning
 * they have for every command (usage error, and unreachable is a finding
 * here, not a failure of the command). */
enum { DOCTOR_EXIT_OK = 0, DOCTOR_EXIT_WARNINGS = 1, DOCTOR_EXIT_PROBLEMS = 4 };

typedef struct doctor_finding {
  const char *check; /* "layer", "daemon", ...: a static string */
  doctor_severity severity;
  char *summary; /* one sentence */
  char *detail;  /* more, or NULL */
  char *fix;     /* what to do, or NULL (none for ok and most notes) */
} doctor_finding;

/* What the checks learn that later checks and --json need. */
typedef struct doctor {
  ctl *c;
  int verify; /* run Verify on the store (not --no-verify) */
  doctor_finding *findings;
  size_t n, cap;
  /* The socket (doctor_daemon.c). */
  char socket_path[108];
  const char *socket_from; /* "--socket", "PCACHE_SOCKET", "XDG_RUNTIME_DIR" or NULL */
  int reachable;
  char daemon_version[64];
  /* The layer (doctor_layer.c). */
  char manifest[4096]; /* the manifest the loader uses, or "" */
  int manifests;       /* how many name the layer */
  int layer_enabled;   /* in this environment */
  int layer_asked;     /* PCACHE_LAYER (its enable variable) is set at all */
} doctor;

/* Adds a finding; summary is a printf format. detail and fix may be NULL.
 * Out of memory: the finding is lost, and nothing else. */
void doctor_add(doctor *d, const char *check, doctor_severity severity, const char *detail,
                const char *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Like asprintf; NULL when out of memory. Freed with pcache__free. */
char *doctor_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void doctor_free(doctor *d);
const char *doctor_severity_name(doctor_severity s);
/* An environment variable's value; NULL when unset or empty (as pcache
 * reads its own). */
const char *doctor_env(const char *name);

void doctor_check_runtime_dir(doctor *d);
void doctor_check_cache_home(doctor *d);
void doctor_check_driver_caches(doctor *d);
void doctor_check_layer(doctor *d);
/* The daemon, then (when it answers) its store, devices and replays. */
void doctor_check_daemon(doctor *d);

#endif
