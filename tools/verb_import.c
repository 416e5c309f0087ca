/* pcachectl import: load an archive into the store. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "tools/ctl.h"

static int read_all(int fd, uint8_t **ret_data, size_t *ret_size, size_t limit) {
  uint8_t *data = NULL, *bigger;
  size_t size = 0, cap = 0;
  for (;;) {
    ssize_t n;
    if (size == cap) {
      if (cap >= limit) {
        pcache__free(data);
        return -EFBIG;
      }
      cap = cap ? cap * 2 : 65536;
      bigger = pcache__realloc(data, cap);
      if (!bigger) {
        pcache__free(data);
        return -ENOMEM;
      }
      data = bigger;
    }
    n = read(fd, data + size, cap - size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      n = -errno;
      pcache__free(data);
      return (int)n;
    }
    if (n == 0)
      break;
    size += (size_t)n;
  }
  if (size > limit) {
    pcache__free(data);
    return -EFBIG;
  }
  *ret_data = data;
  *ret_size = size;
  return 0;
}

static int cmd_import(ctl *c, int argc, char **argv) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Import import = PCACHEPB__IMPORT__INIT;
  pcache__reply reply = {0};
  const Pcachepb__ImportReply *im;
  const Pcachepb__HelloReply *hello;
  uint8_t *data = NULL;
  size_t size = 0, limit;
  uint64_t present;
  const char *file;
  int fd, r;

  if ((r = ctl_parse(c, &ctl_verb_import, argc, argv, NULL, NULL)) <= 0)
    return -r;
  if (argc - optind != 1)
    return ctl_usage_error("import", "import wants one FILE (or - for stdin)");
  file = argv[optind];

  r = ctl_connect(c);
  if (r != EXIT_OK)
    return r;
  /* The archive travels in one request frame: the daemon's frame limit,
   * less room for the framing around it. */
  hello = pcache__transport_hello(c->transport);
  limit = hello && hello->max_frame ? (size_t)hello->max_frame : PCACHE_DEFAULT_MAX_FRAME;
  limit = limit > 4096 ? limit - 4096 : limit;

  if (strcmp(file, "-") == 0) {
    fd = STDIN_FILENO;
  } else {
    fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      log_error("cannot open %s: %s", file, strerror(errno));
      return EXIT_FAIL;
    }
  }
  r = read_all(fd, &data, &size, limit);
  if (fd != STDIN_FILENO)
    close(fd);
  if (r < 0) {
    if (r == -EFBIG)
      log_error("%s is larger than the daemon accepts in one request (%zu bytes); export it in "
                "parts (--device, --app)",
                file, limit);
    else
      log_error("reading %s: %s", file, pcache_strerror(r));
    return EXIT_FAIL;
  }

  request.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  request.import = &import;
  import.archive.data = data;
  import.archive.len = size;
  r = ctl_call_keep_refused(c, &request, PCACHEPB__RESPONSE__BODY_IMPORT, &reply);
  pcache__free(data);
  if (r != EXIT_OK)
    return r;
  im = reply.response->import;
  /* An older daemon does not count them: all new, as it used to say. */
  present = im->present <= im->accepted ? im->present : im->accepted;
  /* A damaged archive is refused as a whole, yet what came before the
   * damage was kept: say both. */
  if (reply.response->status != 0)
    ctl_print_refusal(&request, &reply);

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_string(&j, "file", file);
    ctl_json_kv_uint(&j, "accepted", im->accepted);
    ctl_json_kv_uint(&j, "new", im->accepted - present);
    ctl_json_kv_uint(&j, "present", present);
    ctl_json_kv_uint(&j, "refused", im->refused);
    ctl_print_problems(&j, im->problems, im->n_problems);
    if (reply.response->status != 0) {
      ctl_json_key(&j, "error");
      ctl_json_object_begin(&j);
      ctl_json_kv_int(&j, "status", reply.response->status);
      ctl_json_kv_string(&j, "error", pcache_err_name(reply.response->status));
      ctl_json_kv_string(&j, "message", reply.response->message ? reply.response->message : "");
      ctl_json_object_end(&j);
    }
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    ctl_print_problems(NULL, im->problems, im->n_problems);
    printf("%" PRIu64 " new %s imported, %" PRIu64 " already stored, %" PRIu64 " refused%s\n",
           im->accepted - present, im->accepted - present == 1 ? "entry" : "entries", present,
           im->refused, reply.response->status ? " (the archive is damaged)" : "");
  }
  r = im->refused || im->n_problems || reply.response->status ? EXIT_FAIL : EXIT_OK;
  pcache__reply_release(&reply);
  return r;
}

const ctl_command ctl_verb_import = {
    .name = "import",
    .run = cmd_import,
    .synopsis = "import FILE",
    .summary = "load an archive; every entry is checked like an upload",
    .help = "Load an archive (- reads stdin). The daemon checks every entry exactly as\n"
            "for a Put; refused entries are listed and the rest are kept. Says how many\n"
            "entries were new and how many the store already held (those are stored\n"
            "again, the archive's copy replacing the held one). Exits 1 when anything\n"
            "was refused.\n",
    .options = NULL,
    .short_options = NULL,
    .takes_arguments = 1,
};
