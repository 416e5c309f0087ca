/* pcachectl verify: check every entry, optionally remove the bad ones. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "tools/ctl.h"

static int verify_option(ctl *c, const ctl_command *cmd, int opt, const char *arg, void *state) {
  Pcachepb__Verify *verify = state;
  if (opt == CTL_OPT_REPAIR)
    verify->repair = 1;
  return 0;
}

static const struct option verify_options[] = {{"repair", no_argument, NULL, CTL_OPT_REPAIR}, {0}};

static int cmd_verify(ctl *c, int argc, char **argv) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Verify verify = PCACHEPB__VERIFY__INIT;
  pcache__reply reply = {0};
  const Pcachepb__VerifyReply *v;
  int r, unrepaired;

  if ((r = ctl_parse(c, &ctl_verb_verify, argc, argv, verify_option, &verify)) <= 0)
    return -r;

  request.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
  request.verify = &verify;
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_VERIFY, &reply);
  if (r != EXIT_OK)
    return r;
  v = reply.response->verify;
  unrepaired = v->n_problems > 0 && (!verify.repair || v->removed < v->n_problems);

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_uint(&j, "checked", v->checked);
    ctl_json_kv_bool(&j, "repair", verify.repair);
    ctl_json_kv_uint(&j, "removed", v->removed);
    ctl_json_kv_bool(&j, "ok", !unrepaired);
    ctl_print_problems(&j, v->problems, v->n_problems);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    ctl_print_problems(NULL, v->problems, v->n_problems);
    printf("checked %" PRIu64 " %s: %zu %s", v->checked, v->checked == 1 ? "entry" : "entries",
           v->n_problems, v->n_problems == 1 ? "problem" : "problems");
    if (verify.repair)
      printf(", %" PRIu64 " removed", v->removed);
    else if (v->n_problems)
      printf(" (run 'pcachectl verify --repair' to remove them)");
    printf("\n");
  }
  pcache__reply_release(&reply);
  return unrepaired ? EXIT_FAIL : EXIT_OK;
}

const ctl_command ctl_verb_verify = {
    .name = "verify",
    .run = cmd_verify,
    .synopsis = "verify [--repair]",
    .summary = "re-check every blob's checksum and header",
    .help = "Check every blob's checksum and header and every description. Problems are\n"
            "listed; --repair removes the entries that have them. Exits 1 when problems\n"
            "were found and not repaired.\n",
    .options = verify_options,
    .short_options = NULL,
};
