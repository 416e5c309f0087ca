/* Logging for programs only (pcached, pcachectl, examples, benches):
 * libraries never print. When stderr is the journal ($JOURNAL_STREAM names
 * it), lines carry sd-daemon's "<N>" priority prefix so journald files
 * them at the right level; anywhere else (a terminal, a pipe, a file) the
 * level is a word ("warning: "). */
#ifndef PCACHE_COMMON_LOG_H
#define PCACHE_COMMON_LOG_H

#include <stddef.h>
#include <stdint.h>

enum pcache__log_level {
  PCACHE_LOG_ERR = 3,
  PCACHE_LOG_WARNING = 4,
  PCACHE_LOG_NOTICE = 5,
  PCACHE_LOG_INFO = 6,
  PCACHE_LOG_DEBUG = 7,
};

void pcache__log_set_level(int level);
int pcache__log_get_level(void);
/* "error", "warn", "info", "debug" -> level; -EINVAL if unknown. */
int pcache__log_parse_level(const char *name);
void pcache__log_set_ident(const char *ident);
/* 1 when stderr is the stream systemd connected to the journal
 * ($JOURNAL_STREAM is its device:inode), else 0. */
int pcache__log_stderr_is_journal(void);

void pcache__log_at(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) pcache__log_at(PCACHE_LOG_ERR, __VA_ARGS__)
#define log_warn(...) pcache__log_at(PCACHE_LOG_WARNING, __VA_ARGS__)
#define log_notice(...) pcache__log_at(PCACHE_LOG_NOTICE, __VA_ARGS__)
#define log_info(...) pcache__log_at(PCACHE_LOG_INFO, __VA_ARGS__)
#define log_debug(...) pcache__log_at(PCACHE_LOG_DEBUG, __VA_ARGS__)

/*
 * pcache__utf8_decode - the length of the well-formed UTF-8 sequence at s
 * (at most n bytes, n > 0; ASCII is 1), its code point in *ret_cp; 0 when
 * there is none there: a stray or cut sequence, an overlong form, a
 * surrogate, past U+10FFFF. The log's escaping and pcachectl's JSON both
 * judge what clients send with it.
 */
size_t pcache__utf8_decode(const unsigned char *s, size_t n, uint32_t *ret_cp);

/*
 * pcache__utf8_printable - 1 when the n bytes at s are well-formed UTF-8
 * with no control character (C0, DEL, C1) and no line or paragraph
 * separator: text the log would write unescaped, which can neither end a
 * line nor steer a terminal. 0 otherwise. The daemon refuses client text
 * it keeps for display (daemon/net/validate.c) unless it passes.
 */
int pcache__utf8_printable(const char *s, size_t n);

#endif
