/* The findings of pcachectl doctor (doctor.h). */
#include "tools/doctor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/vec.h"

static char *vprintf_alloc(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *vprintf_alloc(const char *fmt, va_list ap) {
  va_list again;
  char *s;
  int n;
  va_copy(again, ap);
  n = vsnprintf(NULL, 0, fmt, again);
  va_end(again);
  if (n < 0 || !(s = pcache__malloc((size_t)n + 1)))
    return NULL;
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

char *doctor_printf(const char *fmt, ...) {
  va_list ap;
  char *s;
  va_start(ap, fmt);
  s = vprintf_alloc(fmt, ap);
  va_end(ap);
  return s;
}

void doctor_add(doctor *d, const char *check, doctor_severity severity, const char *detail,
                const char *fix, const char *fmt, ...) {
  doctor_finding f = {.check = check, .severity = severity};
  va_list ap;
  va_start(ap, fmt);
  f.summary = vprintf_alloc(fmt, ap);
  va_end(ap);
  f.detail = detail ? pcache__strdup(detail) : NULL;
  f.fix = fix ? pcache__strdup(fix) : NULL;
  if (!f.summary || (detail && !f.detail) || (fix && !f.fix) ||
      pcache__vec_reserve((void **)&d->findings, &d->cap, d->n + 1, sizeof *d->findings, 16) < 0) {
    pcache__free(f.summary);
    pcache__free(f.detail);
    pcache__free(f.fix);
    return;
  }
  d->findings[d->n++] = f;
}

void doctor_free(doctor *d) {
  for (size_t i = 0; i < d->n; i++) {
    pcache__free(d->findings[i].summary);
    pcache__free(d->findings[i].detail);
    pcache__free(d->findings[i].fix);
  }
  pcache__free(d->findings);
  d->findings = NULL;
  d->n = d->cap = 0;
}

const char *doctor_severity_name(doctor_severity s) {
  switch (s) {
  case DOCTOR_OK:
    return "ok";
  case DOCTOR_NOTE:
    return "note";
  case DOCTOR_WARNING:
    return "warning";
  default:
    return "problem";
  }
}

const char *doctor_env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}
