/* pcachectl layer: what the Vulkan layer reported about each process
 * (ClientReport), as the daemon keeps them: the last few, newest first. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "proto/client_report.h"
#include "tools/ctl.h"
#include "tools/ctl_format.h"

static int layer_option(ctl *c, const ctl_command *cmd, int opt, const char *arg, void *state) {
  Pcachepb__ListClientReports *list = state;
  if (opt == 'a')
    list->app = (char *)arg;
  return 0;
}

static const struct option layer_options[] = {{"app", required_argument, NULL, 'a'}, {0}};

static void json_report(ctl_json *j, const Pcachepb__ClientReportRecord *rec) {
  const Pcachepb__ClientReport *r = rec->report;
  ctl_json_object_begin(j);
  ctl_json_kv_uint(j, "received", rec->received);
  ctl_json_kv_uint(j, "pid", r->pid);
  ctl_json_kv_string(j, "app", r->app);
  ctl_json_kv_hex(j, "device_key", r->device_key.data, r->device_key.len);
  ctl_json_kv_string(j, "device_name", r->device_name);
#define JSON_COUNTER(name) ctl_json_kv_uint(j, #name, r->name);
  PCACHE_CLIENT_REPORT_COUNTERS(JSON_COUNTER)
#undef JSON_COUNTER
  ctl_json_key(j, "reasons");
  ctl_json_array_begin(j);
  for (size_t i = 0; i < r->n_reasons; i++) {
    const Pcachepb__UnhashableReason *u = r->reasons[i];
    const char *name = ctl_stype_name(u->stype);
    ctl_json_object_begin(j);
    ctl_json_kv_string(j, "reason", u->reason);
    ctl_json_kv_uint(j, "stype", u->stype);
    ctl_json_key(j, "stype_name");
    if (name && u->stype)
      ctl_json_string(j, name);
    else
      ctl_json_null(j);
    ctl_json_kv_uint(j, "count", u->count);
    ctl_json_object_end(j);
  }
  ctl_json_array_end(j);
  ctl_json_object_end(j);
}

static void print_reports(Pcachepb__ClientReportRecord **recs, size_t n) {
  time_t now = time(NULL);
  size_t shown = 0;
  printf("%-16s  %8s  %-16s  %9s  %8s  %11s  %10s  %8s  %10s  %s\n", "TIME", "PID", "APP",
         "PIPELINES", "HASHABLE", "DAEMON HITS", "LOCAL HITS", "COMPILES", "UNHASHABLE", "DEVICE");
  for (size_t i = 0; i < n; i++) {
    const Pcachepb__ClientReport *r = recs[i]->report;
    char when[32], app[256], device[256];
    if (!r)
      continue;
    ctl_format_time(recs[i]->received, now, when, sizeof when);
    printf("%-16s  %8" PRIu32 "  %-16s  %9" PRIu64 "  %8" PRIu64 "  %11" PRIu64 "  %10" PRIu64
           "  %8" PRIu64 "  %10" PRIu64 "  %s\n",
           when, r->pid, ctl_printable(r->app, app, sizeof app), r->pipelines, r->hashable,
           r->daemon_hits, r->local_hits, r->compiles, r->unhashable,
           ctl_printable(r->device_name, device, sizeof device));
  }
  for (size_t i = 0; i < n; i++) {
    const Pcachepb__ClientReport *r = recs[i]->report;
    char app[256];
    for (size_t k = 0; r && k < r->n_reasons; k++) {
      const Pcachepb__UnhashableReason *u = r->reasons[k];
      const char *name = u->stype ? ctl_stype_name(u->stype) : NULL;
      if (shown++ == 0)
        printf("\nunhashable pipelines\n  %8s  %-16s  %-28s  %10s  %8s  %s\n", "PID", "APP",
               "REASON", "STYPE", "COUNT", "STRUCTURE");
      printf("  %8" PRIu32 "  %-16s  %-28s  %10" PRIu32 "  %8" PRIu64 "  %s\n", r->pid,
             ctl_printable(r->app, app, sizeof app), u->reason, u->stype, u->count,
             name ? name : "-");
    }
  }
}

static int cmd_layer(ctl *c, int argc, char **argv) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__ListClientReports list = PCACHEPB__LIST_CLIENT_REPORTS__INIT;
  pcache__reply reply = {0};
  const Pcachepb__ListClientReportsReply *l;
  int r;

  if ((r = ctl_parse(c, &ctl_verb_layer, argc, argv, layer_option, &list)) <= 0)
    return -r;
  request.body_case = PCACHEPB__REQUEST__BODY_LIST_CLIENT_REPORTS;
  request.list_client_reports = &list;
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_LIST_CLIENT_REPORTS, &reply);
  if (r != EXIT_OK)
    return r;
  l = reply.response->list_client_reports;

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_uint(&j, "capacity", l->capacity);
    ctl_json_key(&j, "reports");
    ctl_json_array_begin(&j);
    for (size_t i = 0; i < l->n_reports; i++)
      if (l->reports[i]->report)
        json_report(&j, l->reports[i]);
    ctl_json_array_end(&j);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else if (l->n_reports == 0) {
    printf("no layer reports%s\n", list.app && *list.app ? " match" : "");
  } else {
    print_reports(l->reports, l->n_reports);
  }
  pcache__reply_release(&reply);
  return EXIT_OK;
}

const ctl_command ctl_verb_layer = {
    .name = "layer",
    .run = cmd_layer,
    .synopsis = "layer [--app NAME]",
    .summary = "what the Vulkan layer did in each process",
    .help = "Show what the Vulkan layer did in each process, newest first: pipelines,\n"
            "how many were hashable, daemon hits, hits on what the process built itself,\n"
            "compiles, and the pipelines it could not describe with the reason and the\n"
            "structure (sType) that caused it. The daemon keeps the last 64 reports, in\n"
            "memory only. --app shows one application's.\n",
    .options = layer_options,
    .short_options = "a:",
};
