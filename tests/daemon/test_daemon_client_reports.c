/* The layer's reports (ClientReport, ListClientReports): the daemon keeps
 * the newest 64, newest first, each exactly as sent (the app from Hello
 * when it sent none); a report at every limit is kept whole; every field
 * over a limit or not printable is refused with a message that names it,
 * and the connection, the kept reports and the daemon are unharmed. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

#define KEPT 64
#define MAX_REASONS 32

/* A report and the arrays it points into. */
typedef struct report_msg {
  Pcachepb__ClientReport rep;
  Pcachepb__UnhashableReason reasons[64];
  Pcachepb__UnhashableReason *reason_ptrs[64];
  char words[64][64];
  pcache__devkey key;
} report_msg;

/* Report number n: pid 1000 + n, counters n .. n + 7, one reason per
 * (n % 3) + 1, on device wire_devkey(n). */
static void report_make(report_msg *m, uint32_t n, const char *app) {
  memset(m, 0, sizeof *m);
  pcachepb__client_report__init(&m->rep);
  m->rep.pid = 1000 + n;
  m->rep.app = (char *)app;
  wire_devkey(n, &m->key);
  m->rep.device_key.data = m->key.bytes;
  m->rep.device_key.len = sizeof m->key.bytes;
  m->rep.device_name = (char *)"llvmpipe (LLVM 15.0.6, 256 bits)";
  m->rep.pipelines = n;
  m->rep.hashable = n + 1;
  m->rep.daemon_hits = n + 2;
  m->rep.local_hits = n + 3;
  m->rep.compiles = n + 4;
  m->rep.uploaded = n + 5;
  m->rep.unhashable = n + 6;
  m->rep.passed_through = n + 7;
  for (uint32_t i = 0; i < n % 3 + 1; i++) {
    pcachepb__unhashable_reason__init(&m->reasons[i]);
    if (i == 0)
      snprintf(m->words[i], sizeof m->words[i], "pnext");
    else
      snprintf(m->words[i], sizeof m->words[i], "reason_%u", i);
    m->reasons[i].reason = m->words[i];
    m->reasons[i].stype = 1000000000u + n * 10 + i;
    m->reasons[i].count = i + 1;
    m->reason_ptrs[i] = &m->reasons[i];
  }
  m->rep.reasons = m->reason_ptrs;
  m->rep.n_reasons = n % 3 + 1;
}

/* Sends the report; returns the reply's status, its message in msg. */
static int report_send(int fd, Pcachepb__ClientReport *rep, char *msg, size_t msg_size) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  wire_reply rep_;
  int status;
  req.body_case = PCACHEPB__REQUEST__BODY_CLIENT_REPORT;
  req.client_report = rep;
  wire_call(fd, &req, &rep_);
  status = rep_.resp->status;
  if (status == 0)
    ASSERT_EQ(rep_.resp->body_case, PCACHEPB__RESPONSE__BODY_CLIENT_REPORT);
  snprintf(msg, msg_size, "%s", rep_.resp->message ? rep_.resp->message : "");
  wire_reply_free(&rep_);
  return status;
}

static void report_ok(int fd, Pcachepb__ClientReport *rep) {
  char msg[256];
  int status = report_send(fd, rep, msg, sizeof msg);
  if (status != 0)
    TEST_FAIL_("report refused: %s (%s)", pcache_err_name(status), msg);
}

/* Sends a report that must be refused with status, its message holding
 * what. */
static void report_refused(int fd, Pcachepb__ClientReport *rep, int status, const char *what) {
  char msg[256];
  ASSERT_ERR(report_send(fd, rep, msg, sizeof msg), status);
  if (!strstr(msg, what))
    TEST_FAIL_("refusal message \"%s\" does not say \"%s\"", msg, what);
}

static void list(int fd, const char *app, wire_reply *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ListClientReports l = PCACHEPB__LIST_CLIENT_REPORTS__INIT;
  l.app = (char *)app;
  req.body_case = PCACHEPB__REQUEST__BODY_LIST_CLIENT_REPORTS;
  req.list_client_reports = &l;
  wire_call(fd, &req, ret);
  ASSERT_OK(ret->resp->status);
  ASSERT_EQ(ret->resp->body_case, PCACHEPB__RESPONSE__BODY_LIST_CLIENT_REPORTS);
  ASSERT_EQ(ret->resp->list_client_reports->capacity, KEPT);
}

/* The kept report rec is exactly report n of report_make, filed under app. */
static void expect_report(const Pcachepb__ClientReportRecord *rec, uint32_t n, const char *app) {
  const Pcachepb__ClientReport *r = rec->report;
  pcache__devkey key;
  time_t now = time(NULL);
  ASSERT_TRUE(r != NULL);
  ASSERT_EQ(r->pid, 1000 + n);
  ASSERT_STREQ(r->app, app);
  wire_devkey(n, &key);
  ASSERT_EQ(r->device_key.len, sizeof key.bytes);
  ASSERT_MEMEQ(r->device_key.data, key.bytes, sizeof key.bytes);
  ASSERT_STREQ(r->device_name, "llvmpipe (LLVM 15.0.6, 256 bits)");
  ASSERT_EQ(r->pipelines, n);
  ASSERT_EQ(r->hashable, n + 1);
  ASSERT_EQ(r->daemon_hits, n + 2);
  ASSERT_EQ(r->local_hits, n + 3);
  ASSERT_EQ(r->compiles, n + 4);
  ASSERT_EQ(r->uploaded, n + 5);
  ASSERT_EQ(r->unhashable, n + 6);
  ASSERT_EQ(r->passed_through, n + 7);
  ASSERT_EQ(r->n_reasons, n % 3 + 1);
  ASSERT_STREQ(r->reasons[0]->reason, "pnext");
  ASSERT_EQ(r->reasons[0]->stype, 1000000000u + n * 10);
  ASSERT_EQ(r->reasons[0]->count, 1);
  /* Real time, for display. */
  ASSERT_TRUE(rec->received + 60 >= (uint64_t)now && rec->received <= (uint64_t)now + 60);
}

/* Text that would forge a log or terminal line, or is not UTF-8. */
static const char *const unprintable[] = {
    "game\n<0>pcached: forged line",
    "\x1b[31mred",
    "game\x7f",
    "game\xff",
    "game\xc3",         /* a cut sequence */
    "game\xc0\xaf",     /* an overlong '/' */
    "game\xc2\x85",     /* NEL, a C1 control */
    "game\xe2\x80\xa8", /* LINE SEPARATOR */
    "game\xed\xa0\x80", /* a surrogate */
};

int main(void) {
  test_env env;
  wire_reply rep;
  report_msg m;
  char long_text[512];
  int fd;

  test_env_init(&env, "client-reports");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  fd = wire_open(&env, "hello-app");

  /* Nothing yet. */
  list(fd, "", &rep);
  ASSERT_EQ(rep.resp->list_client_reports->n_reports, 0);
  wire_reply_free(&rep);

  /* No app, no device: the Hello's app, no key. */
  report_make(&m, 0, "");
  m.rep.device_key.len = 0;
  report_ok(fd, &m.rep);
  list(fd, NULL, &rep);
  ASSERT_EQ(rep.resp->list_client_reports->n_reports, 1);
  ASSERT_STREQ(rep.resp->list_client_reports->reports[0]->report->app, "hello-app");
  ASSERT_EQ(rep.resp->list_client_reports->reports[0]->report->device_key.len, 0);
  wire_reply_free(&rep);

  /* N + 10 reports: the newest N stay, newest first, exactly as sent. */
  for (uint32_t n = 1; n <= KEPT + 10; n++) {
    report_make(&m, n, n % 2 ? "odd" : "even");
    report_ok(fd, &m.rep);
  }
  list(fd, "", &rep);
  ASSERT_EQ(rep.resp->list_client_reports->n_reports, KEPT);
  for (uint32_t i = 0; i < KEPT; i++) {
    uint32_t n = KEPT + 10 - i;
    expect_report(rep.resp->list_client_reports->reports[i], n, n % 2 ? "odd" : "even");
  }
  wire_reply_free(&rep);
  /* One app's, still newest first. */
  list(fd, "odd", &rep);
  ASSERT_EQ(rep.resp->list_client_reports->n_reports, KEPT / 2);
  for (uint32_t i = 0; i < KEPT / 2; i++)
    expect_report(rep.resp->list_client_reports->reports[i], KEPT + 9 - 2 * i, "odd");
  wire_reply_free(&rep);
  list(fd, "nobody", &rep);
  ASSERT_EQ(rep.resp->list_client_reports->n_reports, 0);
  wire_reply_free(&rep);

  /* Every field at its limit is kept whole: a 200-byte app of two-byte
   * characters, a 255-byte device name, 32 reasons of 48 bytes, counters
   * at their largest. */
  report_make(&m, 100, "");
  for (int i = 0; i < 100; i++)
    memcpy(long_text + 2 * i, "\xc3\xa9", 2); /* é */
  long_text[200] = '\0';
  m.rep.app = long_text;
  {
    char name[256];
    memset(name, 'n', 255);
    name[255] = '\0';
    m.rep.device_name = name;
    for (int i = 0; i < MAX_REASONS; i++) {
      pcachepb__unhashable_reason__init(&m.reasons[i]);
      memset(m.words[i], 'a' + i % 26, 48);
      m.words[i][47] = '0' + i % 10;
      m.words[i][48] = '\0';
      m.reasons[i].reason = m.words[i];
      m.reasons[i].stype = UINT32_MAX - (uint32_t)i;
      m.reasons[i].count = UINT64_MAX;
      m.reason_ptrs[i] = &m.reasons[i];
    }
    m.rep.n_reasons = MAX_REASONS;
    m.rep.pipelines = m.rep.passed_through = UINT64_MAX;
    report_ok(fd, &m.rep);
    list(fd, "", &rep);
    {
      const Pcachepb__ClientReport *r = rep.resp->list_client_reports->reports[0]->report;
      ASSERT_EQ(rep.resp->list_client_reports->n_reports, KEPT);
      ASSERT_STREQ(r->app, long_text);
      ASSERT_STREQ(r->device_name, name);
      ASSERT_EQ(r->pipelines, UINT64_MAX);
      ASSERT_EQ(r->passed_through, UINT64_MAX);
      ASSERT_EQ(r->n_reasons, MAX_REASONS);
      for (int i = 0; i < MAX_REASONS; i++) {
        ASSERT_STREQ(r->reasons[i]->reason, m.words[i]);
        ASSERT_EQ(r->reasons[i]->stype, UINT32_MAX - (uint32_t)i);
        ASSERT_EQ(r->reasons[i]->count, UINT64_MAX);
      }
      /* The oldest of the N + 10 went to make room. */
      expect_report(rep.resp->list_client_reports->reports[KEPT - 1], 12, "even");
    }
    wire_reply_free(&rep);
  }

  /* Hostile fields, one at a time, each refused with what was wrong. */
  report_make(&m, 200, "game");
  memset(long_text, 'x', 201);
  long_text[201] = '\0';
  m.rep.app = long_text;
  report_refused(fd, &m.rep, PCACHE_EBAD_SIZE, "app name longer than 200 bytes");
  m.rep.app = (char *)"game";
  memset(long_text, 'd', 256);
  long_text[256] = '\0';
  m.rep.device_name = long_text;
  report_refused(fd, &m.rep, PCACHE_EBAD_SIZE, "device name longer than 255 bytes");
  for (size_t i = 0; i < sizeof unprintable / sizeof unprintable[0]; i++) {
    m.rep.app = (char *)unprintable[i];
    m.rep.device_name = (char *)"llvmpipe";
    report_refused(fd, &m.rep, PCACHE_EPROTO, "app name is not printable UTF-8");
    m.rep.app = (char *)"game";
    m.rep.device_name = (char *)unprintable[i];
    report_refused(fd, &m.rep, PCACHE_EPROTO, "device name is not printable UTF-8");
  }
  m.rep.device_name = (char *)"llvmpipe";
  m.rep.device_key.len = 31;
  report_refused(fd, &m.rep, PCACHE_EBAD_KEY, "device key is not 32 bytes");
  m.rep.device_key.len = 32;
  for (int i = 0; i < 33; i++) {
    pcachepb__unhashable_reason__init(&m.reasons[i]);
    m.reasons[i].reason = (char *)"pnext";
    m.reason_ptrs[i] = &m.reasons[i];
  }
  m.rep.n_reasons = 33;
  report_refused(fd, &m.rep, PCACHE_EBAD_SIZE, "33 unhashable reasons, the limit is 32");
  m.rep.n_reasons = 1;
  memset(long_text, 'r', 49);
  long_text[49] = '\0';
  m.reasons[0].reason = long_text;
  report_refused(fd, &m.rep, PCACHE_EBAD_SIZE, "unhashable reason longer than 48 bytes");
  m.reasons[0].reason = (char *)"PNext";
  report_refused(fd, &m.rep, PCACHE_EPROTO, "not a word of [a-z0-9_]");
  m.reasons[0].reason = (char *)"";
  report_refused(fd, &m.rep, PCACHE_EPROTO, "not a word of [a-z0-9_]");
  m.reasons[0].reason = (char *)"pnext\n";
  report_refused(fd, &m.rep, PCACHE_EPROTO, "not a word of [a-z0-9_]");
  {
    /* Far more reasons than kept: the frame decodes, the report does not
     * pass. */
    static Pcachepb__UnhashableReason many[20000], *many_ptrs[20000];
    for (int i = 0; i < 20000; i++) {
      pcachepb__unhashable_reason__init(&many[i]);
      many[i].reason = (char *)"pnext";
      many_ptrs[i] = &many[i];
    }
    m.rep.reasons = many_ptrs;
    m.rep.n_reasons = 20000;
    report_refused(fd, &m.rep, PCACHE_EBAD_SIZE, "20000 unhashable reasons");
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__ListClientReports l = PCACHEPB__LIST_CLIENT_REPORTS__INIT;
    memset(long_text, 'x', 201);
    long_text[201] = '\0';
    l.app = long_text;
    req.body_case = PCACHEPB__REQUEST__BODY_LIST_CLIENT_REPORTS;
    req.list_client_reports = &l;
    wire_call(fd, &req, &rep);
    ASSERT_ERR(rep.resp->status, PCACHE_EBAD_SIZE);
    wire_reply_free(&rep);
  }

  /* Unharmed: the same connection still works, nothing refused was kept,
   * and the daemon still serves. */
  list(fd, "", &rep);
  ASSERT_EQ(rep.resp->list_client_reports->n_reports, KEPT);
  ASSERT_EQ(rep.resp->list_client_reports->reports[0]->report->pid, 1100);
  wire_reply_free(&rep);
  list(fd, "game", &rep);
  ASSERT_EQ(rep.resp->list_client_reports->n_reports, 0);
  wire_reply_free(&rep);
  ASSERT_EQ(kill(env.daemon_pid, 0), 0);
  (void)wire_stats_of(fd);
  close(fd);

  test_env_cleanup(&env);
  printf("test_daemon_client_reports: ok\n");
  return 0;
}
