/* pcachectl doctor: check the set-up, explain what is wrong and how to
 * fix it (doctor.h says which file checks what). Unlike every other
 * command it needs no daemon: an unreachable one is a finding. Exit codes
 * (docs/pcachectl.md): 0 nothing to fix, 1 warnings, 4 problems (pcache
 * does not work as set up), 2 a usage error as for every command. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <pcache/version.h>

#include "tools/doctor.h"

enum { OPT_NO_VERIFY = 0x300 };

static const struct option doctor_options[] = {{"no-verify", no_argument, NULL, OPT_NO_VERIFY},
                                               {0}};

static int doctor_option(ctl *c, const ctl_command *cmd, int opt, const char *arg, void *state) {
  doctor *d = state;
  (void)c, (void)cmd, (void)arg;
  if (opt == OPT_NO_VERIFY)
    d->verify = 0;
  return 0;
}

/* text from column col (0: a new line, indented first), wrapped at 78
 * columns, each further line indented by indent spaces. */
static void wrap(FILE *out, const char *text, int indent, int col) {
  const int width = 78;
  const char *p = text;
  if (col == 0) {
    fprintf(out, "%*s", indent, "");
    col = indent;
  }
  while (*p) {
    size_t word = strcspn(p, " ");
    if (p != text) {
      if (col + 1 + (int)word > width) {
        fprintf(out, "\n%*s", indent, "");
        col = indent;
      } else {
        fputc(' ', out);
        col++;
      }
    }
    fprintf(out, "%.*s", (int)word, p);
    col += (int)word;
    p += word;
    while (*p == ' ')
      p++;
  }
  fputc('\n', out);
}

static const char *label(doctor_severity s) {
  switch (s) {
  case DOCTOR_OK:
    return "ok";
  case DOCTOR_NOTE:
    return "note";
  case DOCTOR_WARNING:
    return "WARNING";
  default:
    return "PROBLEM";
  }
}

static void print_text(const doctor *d, size_t problems, size_t warnings) {
  printf("pcache doctor: ");
  if (problems)
    printf("%zu problem%s%s", problems, problems == 1 ? "" : "s", warnings ? ", " : "");
  if (warnings)
    printf("%zu warning%s", warnings, warnings == 1 ? "" : "s");
  if (!problems && !warnings)
    printf("nothing to fix");
  printf("\n\n");
  /* The worst first, in the order they were found within a severity. */
  for (int sev = DOCTOR_PROBLEM; sev >= DOCTOR_OK; sev--)
    for (size_t i = 0; i < d->n; i++) {
      const doctor_finding *f = &d->findings[i];
      char head[64];
      if ((int)f->severity != sev)
        continue;
      snprintf(head, sizeof head, "%-8s %s: ", label(f->severity), f->check);
      fputs(head, stdout);
      wrap(stdout, f->summary, 9, (int)strlen(head));
      if (f->detail)
        wrap(stdout, f->detail, 9, 0);
      if (f->fix) {
        printf("%9sfix: ", "");
        wrap(stdout, f->fix, 14, 14);
      }
    }
}

static void print_json(const doctor *d, size_t problems, size_t warnings, int code) {
  ctl_json j;
  ctl_json_init(&j, stdout);
  ctl_json_object_begin(&j);
  ctl_json_kv_string(&j, "status", problems ? "problems" : warnings ? "warnings" : "ok");
  ctl_json_kv_int(&j, "exit_code", code);
  ctl_json_kv_uint(&j, "problems", problems);
  ctl_json_kv_uint(&j, "warnings", warnings);
  ctl_json_kv_string(&j, "pcachectl_version", PCACHE_VERSION_STRING);
  ctl_json_key(&j, "socket");
  ctl_json_object_begin(&j);
  ctl_json_kv_string(&j, "path", d->socket_path);
  ctl_json_key(&j, "from");
  if (d->socket_from)
    ctl_json_string(&j, d->socket_from);
  else
    ctl_json_null(&j);
  ctl_json_kv_bool(&j, "reachable", d->reachable);
  ctl_json_kv_string(&j, "daemon_version", d->daemon_version);
  ctl_json_object_end(&j);
  ctl_json_key(&j, "layer");
  ctl_json_object_begin(&j);
  ctl_json_kv_string(&j, "manifest", d->manifest);
  ctl_json_kv_uint(&j, "manifests", (uint64_t)d->manifests);
  ctl_json_kv_bool(&j, "enabled", d->layer_enabled);
  ctl_json_object_end(&j);
  ctl_json_key(&j, "findings");
  ctl_json_array_begin(&j);
  for (size_t i = 0; i < d->n; i++) {
    const doctor_finding *f = &d->findings[i];
    ctl_json_object_begin(&j);
    ctl_json_kv_string(&j, "check", f->check);
    ctl_json_kv_string(&j, "severity", doctor_severity_name(f->severity));
    ctl_json_kv_string(&j, "summary", f->summary);
    ctl_json_key(&j, "detail");
    if (f->detail)
      ctl_json_string(&j, f->detail);
    else
      ctl_json_null(&j);
    ctl_json_key(&j, "fix");
    if (f->fix)
      ctl_json_string(&j, f->fix);
    else
      ctl_json_null(&j);
    ctl_json_object_end(&j);
  }
  ctl_json_array_end(&j);
  ctl_json_object_end(&j);
  ctl_json_finish(&j);
}

static int cmd_doctor(ctl *c, int argc, char **argv) {
  doctor d = {.c = c, .verify = 1};
  size_t problems = 0, warnings = 0;
  int r, code;
  if ((r = ctl_parse(c, &ctl_verb_doctor, argc, argv, doctor_option, &d)) <= 0)
    return -r;
  doctor_check_runtime_dir(&d);
  doctor_check_daemon(&d);
  doctor_check_layer(&d);
  doctor_check_cache_home(&d);
  doctor_check_driver_caches(&d);
  for (size_t i = 0; i < d.n; i++) {
    problems += d.findings[i].severity == DOCTOR_PROBLEM;
    warnings += d.findings[i].severity == DOCTOR_WARNING;
  }
  code = problems ? DOCTOR_EXIT_PROBLEMS : warnings ? DOCTOR_EXIT_WARNINGS : DOCTOR_EXIT_OK;
  if (c->json)
    print_json(&d, problems, warnings, code);
  else
    print_text(&d, problems, warnings);
  doctor_free(&d);
  return code;
}

const ctl_command ctl_verb_doctor = {
    .name = "doctor",
    .run = cmd_doctor,
    .synopsis = "doctor [--no-verify]",
    .summary = "check the set-up and say what to fix",
    .help = "Check what pcache needs, as programs started from this environment meet it,\n"
            "and say for each finding how bad it is and what fixes it:\n"
            "  - whether the Vulkan loader finds the layer's manifest, what turns the\n"
            "    layer on and whether it is on here, and the other implicit layers\n"
            "    around it;\n"
            "  - where the daemon's socket is and why, whether pcached answers there,\n"
            "    and what starts it (the systemd socket unit, or by hand);\n"
            "  - XDG_RUNTIME_DIR: set, there, yours, mode 0700;\n"
            "  - the store: how full it is against --max-size and the disk, refused\n"
            "    uploads, and a verification of every entry (--no-verify skips it);\n"
            "  - the devices and drivers seen, and replays pending or running;\n"
            "  - the drivers' own shader caches: NVIDIA's __GL_SHADER_DISK_CACHE*,\n"
            "    Mesa's MESA_SHADER_CACHE_*, and the cache home they live in.\n"
            "Needs no running daemon. Exit status: 0 nothing to fix, 1 warnings only,\n"
            "4 problems (pcache does not work as set up), 2 usage error.\n",
    .options = doctor_options,
    .short_options = NULL,
};
