/* libpcache's messages. Libraries do not print on their own: a message
 * goes to the log function the app gave, and to stderr only when the user
 * asked with $PCACHE_LOG. The one message an app makes per frame without
 * knowing it (an uncached pipeline rebuilt every frame) must not flood
 * either, so such messages are limited per distinct message and in total
 * (log.h). */
#include "client/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/clock.h"

static const char *level_name(int level) {
  switch (level) {
  case PCACHE_SEVERITY_ERROR:
    return "error";
  case PCACHE_SEVERITY_WARNING:
    return "warning";
  case PCACHE_SEVERITY_INFO:
    return "info";
  default:
    return "debug";
  }
}

/* $PCACHE_LOG: a level's name or syslog number; 0 or unset: off. Any
 * other text turns warnings on, so a user who guessed "1" or "yes" still
 * sees what matters. */
static int env_level(void) {
  static const struct {
    const char *name;
    int level;
  } names[] = {{"error", PCACHE_SEVERITY_ERROR},
               {"warning", PCACHE_SEVERITY_WARNING},
               {"warn", PCACHE_SEVERITY_WARNING},
               {"info", PCACHE_SEVERITY_INFO},
               {"debug", PCACHE_SEVERITY_DEBUG}};
  const char *v = getenv("PCACHE_LOG");
  if (!v || !*v || strcmp(v, "0") == 0)
    return 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcasecmp(v, names[i].name) == 0)
      return names[i].level;
  if (v[0] >= '1' && v[0] <= '7' && v[1] == '\0')
    return v[0] - '0' < PCACHE_SEVERITY_ERROR ? PCACHE_SEVERITY_ERROR : v[0] - '0';
  return PCACHE_SEVERITY_WARNING;
}

int pcache__logger_init(pcache__logger *lg, pcache_log_func func, void *user_data, int level) {
  memset(lg, 0, sizeof *lg);
  lg->func = func;
  lg->user_data = user_data;
  lg->func_level = func ? (level ? level : PCACHE_SEVERITY_WARNING) : 0;
  lg->stderr_level = env_level();
  lg->stderr_unset = !getenv("PCACHE_LOG") || !*getenv("PCACHE_LOG");
  return pthread_mutex_init(&lg->lock, NULL) == 0 ? 0 : -ENOMEM;
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static pcache__logger default_logger;

static void default_init(void) {
  if (pcache__logger_init(&default_logger, NULL, NULL, 0) < 0)
    default_logger.stderr_level = 0; /* no lock: nothing is limited, so say nothing */
}

pcache__logger *pcache__logger_default(void) {
  pthread_once(&default_once, default_init);
  return &default_logger;
}

int pcache__log_wants(const pcache__logger *lg, int level) {
  return lg && (level <= lg->func_level || level <= lg->stderr_level);
}

/* One line to wherever it goes: stderr in one write, so lines of
 * concurrent threads and processes do not interleave. to_stderr: whether
 * stderr gets it whatever $PCACHE_LOG says. */
static void emit_to(pcache__logger *lg, int level, const char *text, int to_stderr) {
  if (level <= lg->func_level)
    lg->func(lg->user_data, (pcache_severity)level, text);
  if (to_stderr || level <= lg->stderr_level) {
    char line[640];
    int n = snprintf(line, sizeof line, "pcache[%ld] %s: %s\n", (long)getpid(), level_name(level),
                     text);
    if (n > (int)sizeof line - 1) {
      n = (int)sizeof line - 1;
      line[n - 1] = '\n';
    }
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0) {
      /* Nowhere else to say it. */
    }
  }
}

static void emit(pcache__logger *lg, int level, const char *text) { emit_to(lg, level, text, 0); }

void pcache__log(pcache__logger *lg, int level, const char *fmt, ...) {
  char text[512];
  va_list ap;
  if (!pcache__log_wants(lg, level))
    return;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  emit(lg, level, text);
}

void pcache__log_notice(pcache__logger *lg, int level, const char *fmt, ...) {
  char text[512];
  int by_default = lg && lg->stderr_unset && level <= PCACHE_SEVERITY_WARNING;
  va_list ap;
  if (!by_default && !pcache__log_wants(lg, level))
    return;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  emit_to(lg, level, text, by_default);
}

/* The slot for (site, k1, k2): its own, a free one, or the one given
 * longest ago (whose held repeats are then lost). Under the lock. */
static pcache__log_slot *find_slot(pcache__logger *lg, const void *site, uint64_t k1, uint64_t k2,
                                   int *ret_new) {
  pcache__log_slot *oldest = &lg->slots[0];
  for (size_t i = 0; i < PCACHE__LOG_SLOTS; i++) {
    pcache__log_slot *s = &lg->slots[i];
    if (s->site == site && s->k1 == k1 && s->k2 == k2) {
      *ret_new = 0;
      return s;
    }
    if (!s->site || (oldest->site && s->logged_ms < oldest->logged_ms))
      oldest = s;
  }
  *ret_new = 1;
  memset(oldest, 0, sizeof *oldest);
  oldest->site = site;
  oldest->k1 = k1;
  oldest->k2 = k2;
  return oldest;
}

void pcache__log_limited(pcache__logger *lg, int level, const void *site, uint64_t k1, uint64_t k2,
                         const char *fmt, ...) {
  char text[sizeof lg->slots[0].text], line[sizeof text + 96], held_line[96] = "";
  pcache__log_slot *s;
  uint64_t now, since_ms, held = 0;
  int fresh;
  va_list ap;
  if (!pcache__log_wants(lg, level))
    return;
  now = pcache__mono_ms();
  pthread_mutex_lock(&lg->lock);
  s = find_slot(lg, site, k1, k2, &fresh);
  if (!fresh && now - s->logged_ms < PCACHE__LOG_REPEAT_MS) {
    s->held++;
    pthread_mutex_unlock(&lg->lock);
    return;
  }
  if (now - lg->burst_start_ms >= PCACHE__LOG_REPEAT_MS) {
    if (lg->burst_held)
      snprintf(held_line, sizeof held_line,
               "%" PRIu64 " more messages were held back (over %u in %u s)", lg->burst_held,
               PCACHE__LOG_BURST, PCACHE__LOG_REPEAT_MS / 1000);
    lg->burst_start_ms = now;
    lg->burst_n = 0;
    lg->burst_held = 0;
  }
  if (lg->burst_n >= PCACHE__LOG_BURST) {
    /* Counted, and given whole once the burst is over. */
    lg->burst_held++;
    s->held++;
    pthread_mutex_unlock(&lg->lock);
    return;
  }
  lg->burst_n++;
  held = s->held;
  since_ms = s->logged_ms;
  s->held = 0;
  s->logged_ms = now;
  s->level = level;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  memcpy(s->text, text, sizeof text);
  pthread_mutex_unlock(&lg->lock);
  if (held_line[0])
    emit(lg, level, held_line);
  if (held)
    snprintf(line, sizeof line, "%s (and %" PRIu64 " times more in the last %" PRIu64 " s)", text,
             held, (now - since_ms) / 1000);
  emit(lg, level, held ? line : text);
}

void pcache__logger_fini(pcache__logger *lg) {
  if (!lg)
    return;
  for (size_t i = 0; i < PCACHE__LOG_SLOTS; i++) {
    const pcache__log_slot *s = &lg->slots[i];
    char line[sizeof s->text + 64];
    if (!s->site || !s->held)
      continue;
    snprintf(line, sizeof line, "%s (and %" PRIu64 " times more, not shown)", s->text, s->held);
    emit(lg, s->level, line);
  }
  pthread_mutex_destroy(&lg->lock);
}

/* What each reason word (docs/layer.md) means, said to a reader who does
 * not know pcache's insides. */
static const struct {
  const char *reason;
  const char *text;
} reasons[] = {
    {"bad_specialization", "its specialization info is malformed"},
    {"too_many_stages", "it has more shader stages than a pipeline can"},
    {"too_many_dynamic_states", "it lists more dynamic states than pcache describes"},
    {"no_rasterization_state", "it has no rasterization state"},
    {"bad_color_write", "its color write enables do not match its attachments"},
    {"library_depth", "it links libraries that link libraries that link libraries"},
    {"too_many_libraries", "it links more pipeline libraries than pcache describes"},
    {"empty_library", "it is a pipeline library of no parts"},
    {"library_parts", "its libraries' parts overlap or are unknown"},
    {"bad_library", "a library it links has a description pcache cannot read"},
};

static const char *object_name(uint32_t type) {
  switch (type) {
  case VK_OBJECT_TYPE_SHADER_MODULE:
    return "shader module";
  case VK_OBJECT_TYPE_PIPELINE_LAYOUT:
    return "pipeline layout";
  case VK_OBJECT_TYPE_RENDER_PASS:
    return "render pass";
  case VK_OBJECT_TYPE_PIPELINE:
    return "pipeline library";
  default:
    return "object";
  }
}

static const char *object_wrapper(uint32_t type) {
  switch (type) {
  case VK_OBJECT_TYPE_SHADER_MODULE:
    return "pcache_create_shader_module";
  case VK_OBJECT_TYPE_PIPELINE_LAYOUT:
    return "pcache_create_pipeline_layout";
  case VK_OBJECT_TYPE_RENDER_PASS:
    return "pcache_create_render_pass";
  default:
    return "pcache_get_graphics_pipeline";
  }
}

void pcache__log_unhashable(pcache__logger *lg, const pcache__desc_buf *buf) {
  static const char site[] = "unhashable";
  const char *reason = buf->unhashable_reason ? buf->unhashable_reason : "unknown";
  const char *text = NULL;
  uint64_t k1 = (uint64_t)buf->unhashable_stype << 32 | buf->unhashable_object;
  if (!pcache__log_wants(lg, PCACHE_SEVERITY_WARNING))
    return;
  /* Reasons are static strings: the pointer is part of the key, the
   * handle tells objects apart. */
  if (buf->unhashable_object) {
    pcache__log_limited(lg, PCACHE_SEVERITY_WARNING, reason, k1, buf->unhashable_handle,
                        "pipeline not cached (%s): it names %s 0x%" PRIx64
                        ", which pcache does not know: made without %s, or one pcache could "
                        "not describe",
                        reason, object_name(buf->unhashable_object), buf->unhashable_handle,
                        object_wrapper(buf->unhashable_object));
    return;
  }
  if (buf->unhashable_stype) {
    pcache__log_limited(
        lg, PCACHE_SEVERITY_WARNING, reason, k1, 0,
        "pipeline not cached (%s): its create info chains a struct of sType %" PRIu32
        " that pcache cannot describe",
        reason, buf->unhashable_stype);
    return;
  }
  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    if (strcmp(reasons[i].reason, reason) == 0)
      text = reasons[i].text;
  pcache__log_limited(lg, PCACHE_SEVERITY_WARNING, buf->unhashable_reason ? reason : site, k1, 0,
                      "pipeline not cached (%s): %s", reason,
                      text ? text : "pcache cannot describe its state");
}
