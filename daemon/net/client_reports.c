/* The layer's per-process reports: ClientReport copies one into the ring,
 * ListClientReports answers with what the ring holds, newest first. Both
 * run on the connection's I/O thread, under the ring's one mutex, which is
 * held only to copy slots: reports arrive on every I/O thread, and a copy
 * is far cheaper than anything else a request costs. */
#include "client_reports.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <pcache/pcache.h>

#include "common/arena.h"
#include "common/alloc.h"
#include "common/log.h"
#include "proto/client_report.h"
#include "respond.h"

typedef struct slot_reason {
  char word[PCD_MAX_REASON_WORD + 1];
  uint32_t stype;
  uint64_t count;
} slot_reason;

/* One report as kept: every string in a buffer of its limit. */
typedef struct slot {
  uint64_t received_s;
  uint32_t pid;
  int has_key;
  uint8_t device_key[PCACHE_DEVKEY_SIZE];
  char app[PCD_MAX_APP + 1];
  char device_name[PCD_MAX_DEVICE_STRING + 1];
#define SLOT_COUNTER(name) uint64_t name;
  PCACHE_CLIENT_REPORT_COUNTERS(SLOT_COUNTER)
#undef SLOT_COUNTER
  uint32_t n_reasons;
  slot_reason reasons[PCD_MAX_CLIENT_REASONS];
} slot;

struct pcd_client_reports {
  pthread_mutex_t lock;
  uint64_t kept; /* reports ever kept: the next one goes to slot kept % N */
  slot slots[PCD_CLIENT_REPORTS];
};

int pcd_client_reports_new(pcd_client_reports **ret_reports) {
  pcd_client_reports *r = pcache__calloc(1, sizeof *r);
  if (!r)
    return -ENOMEM;
  if (pthread_mutex_init(&r->lock, NULL) != 0) {
    pcache__free(r);
    return -ENOMEM;
  }
  *ret_reports = r;
  return 0;
}

void pcd_client_reports_free(pcd_client_reports *r) {
  if (!r)
    return;
  pthread_mutex_destroy(&r->lock);
  pcache__free(r);
}

/* The report as a slot. validate.c has bounded every field; the copies are
 * bounded again so that the slot never depends on it. */
static void fill_slot(slot *s, const Pcachepb__ClientReport *rep, const char *hello_app) {
  memset(s, 0, sizeof *s);
  s->received_s = pcd_now_us() / 1000000;
  s->pid = rep->pid;
  s->has_key = rep->device_key.len == PCACHE_DEVKEY_SIZE;
  if (s->has_key)
    memcpy(s->device_key, rep->device_key.data, PCACHE_DEVKEY_SIZE);
  snprintf(s->app, sizeof s->app, "%s", rep->app && *rep->app ? rep->app : hello_app);
  snprintf(s->device_name, sizeof s->device_name, "%s", rep->device_name ? rep->device_name : "");
#define TO_SLOT(name) s->name = rep->name;
  PCACHE_CLIENT_REPORT_COUNTERS(TO_SLOT)
#undef TO_SLOT
  for (size_t i = 0; i < rep->n_reasons && i < PCD_MAX_CLIENT_REASONS; i++) {
    snprintf(s->reasons[i].word, sizeof s->reasons[i].word, "%s",
             rep->reasons[i]->reason ? rep->reasons[i]->reason : "");
    s->reasons[i].stype = rep->reasons[i]->stype;
    s->reasons[i].count = rep->reasons[i]->count;
    s->n_reasons++;
  }
}

void pcd_client_report_keep(pcd_conn *c, const Pcachepb__ClientReport *rep) {
  pcd_client_reports *r = c->srv->client_reports;
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__ClientReportReply ack = PCACHEPB__CLIENT_REPORT_REPLY__INIT;
  slot s;
  if (!r) {
    pcd_respond_error(c, PCACHE_EUNAVAILABLE, "this daemon keeps no client reports");
    return;
  }
  /* Filled outside the lock: only the copy into the ring holds it. */
  fill_slot(&s, rep, c->app);
  pthread_mutex_lock(&r->lock);
  r->slots[r->kept++ % PCD_CLIENT_REPORTS] = s;
  pthread_mutex_unlock(&r->lock);
  log_debug("client report: pid %u app '%s': %llu pipelines, %llu unhashable", s.pid, s.app,
            (unsigned long long)s.pipelines, (unsigned long long)s.unhashable);
  resp.body_case = PCACHEPB__RESPONSE__BODY_CLIENT_REPORT;
  resp.client_report = &ack;
  pcd_respond(c, &resp);
}

/* Copies the kept reports filed under app (NULL or empty: all), newest
 * first, into *ret_slots (pcache__malloc'ed, NULL when none). Returns how
 * many, or -ENOMEM. */
static ssize_t copy_slots(pcd_client_reports *r, const char *app, slot **ret_slots) {
  slot *out = pcache__malloc(sizeof *out * PCD_CLIENT_REPORTS);
  size_t n = 0;
  if (!out)
    return -ENOMEM;
  pthread_mutex_lock(&r->lock);
  for (uint64_t i = r->kept; i > 0 && r->kept - i < PCD_CLIENT_REPORTS; i--) {
    const slot *s = &r->slots[(i - 1) % PCD_CLIENT_REPORTS];
    if (!app || !*app || strcmp(s->app, app) == 0)
      out[n++] = *s;
  }
  pthread_mutex_unlock(&r->lock);
  *ret_slots = out;
  return (ssize_t)n;
}

/* A slot as a record of the reply; every pointer is into s or the arena. */
static Pcachepb__ClientReportRecord *record_of(pcache__arena *a, slot *s) {
  Pcachepb__ClientReportRecord *rec = pcache__arena_alloc(a, sizeof *rec);
  Pcachepb__ClientReport *rep = pcache__arena_alloc(a, sizeof *rep);
  Pcachepb__UnhashableReason **reasons =
      pcache__arena_alloc(a, sizeof *reasons * (s->n_reasons ? s->n_reasons : 1));
  if (!rec || !rep || !reasons)
    return NULL;
  pcachepb__client_report_record__init(rec);
  pcachepb__client_report__init(rep);
  rec->report = rep;
  rec->received = s->received_s;
  rep->pid = s->pid;
  rep->app = s->app;
  if (s->has_key) {
    rep->device_key.data = s->device_key;
    rep->device_key.len = PCACHE_DEVKEY_SIZE;
  }
  rep->device_name = s->device_name;
#define FROM_SLOT(name) rep->name = s->name;
  PCACHE_CLIENT_REPORT_COUNTERS(FROM_SLOT)
#undef FROM_SLOT
  for (uint32_t i = 0; i < s->n_reasons; i++) {
    Pcachepb__UnhashableReason *u = pcache__arena_alloc(a, sizeof *u);
    if (!u)
      return NULL;
    pcachepb__unhashable_reason__init(u);
    u->reason = s->reasons[i].word;
    u->stype = s->reasons[i].stype;
    u->count = s->reasons[i].count;
    reasons[i] = u;
  }
  rep->reasons = reasons;
  rep->n_reasons = s->n_reasons;
  return rec;
}

void pcd_client_reports_list(pcd_conn *c, const Pcachepb__ListClientReports *req) {
  pcd_client_reports *r = c->srv->client_reports;
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__ListClientReportsReply reply = PCACHEPB__LIST_CLIENT_REPORTS_REPLY__INIT;
  pcache__arena arena = {0};
  slot *slots = NULL;
  ssize_t n;
  if (!r) {
    pcd_respond_error(c, PCACHE_EUNAVAILABLE, "this daemon keeps no client reports");
    return;
  }
  n = copy_slots(r, req->app, &slots);
  if (n < 0) {
    pcd_respond_error(c, (int)n, NULL);
    return;
  }
  reply.capacity = PCD_CLIENT_REPORTS;
  reply.reports = pcache__arena_alloc(&arena, sizeof *reply.reports * (n ? (size_t)n : 1));
  for (ssize_t i = 0; i < n && reply.reports; i++) {
    if (!(reply.reports[i] = record_of(&arena, &slots[i])))
      break;
    reply.n_reports++;
  }
  if (arena.failed) {
    resp.status = -ENOMEM;
  } else {
    resp.body_case = PCACHEPB__RESPONSE__BODY_LIST_CLIENT_REPORTS;
    resp.list_client_reports = &reply;
  }
  pcd_respond(c, &resp);
  pcache__arena_free(&arena);
  pcache__free(slots);
}
