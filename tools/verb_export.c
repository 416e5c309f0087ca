/* pcachectl export: entries to a portable archive file. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "proto/archive.h"
#include "common/log.h"
#include "tools/ctl.h"

/* Several exports (one per device key a UUID names) joined into one
 * archive through the archive reader and writer. */
static int merge_device(void *ctx, const Pcachepb__DeviceInfo *info) {
  return pcache__archive_add_device(ctx, info);
}
static int merge_module(void *ctx, const pcache__hash *hash, const void *code, size_t size) {
  return pcache__archive_add_module(ctx, hash, code, size);
}
static int merge_entry(void *ctx, const pcache__archive_entry *entry) {
  return pcache__archive_add_entry(ctx, entry);
}
/* A program record may come once per export, as a module shared by two
 * devices does: the importer takes the first and passes over the rest. */
static int merge_program(void *ctx, const char *app, const char *exe) {
  return pcache__archive_add_program(ctx, app, exe);
}
static int merge_bad(void *ctx, uint64_t index, int err) {
  return err; /* the daemon just made it: damage means something is badly wrong */
}

static int write_all(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    data += n;
    size -= (size_t)n;
  }
  return 0;
}

/* Writes data to path atomically: a temp file beside it, fsync, rename. */
static int write_file_atomic(const char *path, const uint8_t *data, size_t size) {
  char tmp[4096];
  mode_t mask;
  int fd, r;
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
    return -ENAMETOOLONG;
  fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return -errno;
  /* An archive is meant to be shipped: the usual file mode, not mkstemp's
   * 0600. */
  mask = umask(0);
  umask(mask);
  if (fchmod(fd, 0666 & ~mask) < 0)
    goto out_errno;
  r = write_all(fd, data, size);
  if (r < 0)
    goto out_unlink;
  if (fsync(fd) < 0)
    goto out_errno;
  if (close(fd) < 0) {
    fd = -1;
    goto out_errno;
  }
  fd = -1;
  if (rename(tmp, path) < 0)
    goto out_errno;
  return 0;

out_errno:
  r = -errno;
out_unlink:
  if (fd >= 0)
    close(fd);
  unlink(tmp);
  return r;
}

static int export_one(ctl *c, const pcache__devkey *key, const char *app,
                      pcache__archive_writer *merge, pcache__reply *ret_reply,
                      const uint8_t **ret_data, size_t *ret_size, uint64_t *entries,
                      uint64_t *entry_bytes) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Export export = PCACHEPB__EXPORT__INIT;
  pcache__reply reply = {0};
  const Pcachepb__ExportReply *e;
  const uint8_t *data;
  size_t size;
  int r;

  request.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
  request.export = &export;
  if (key) {
    export.device_key.data = (uint8_t *)key->bytes;
    export.device_key.len = sizeof key->bytes;
  }
  export.app = (char *)(app ? app : "");
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_EXPORT, &reply);
  if (r != EXIT_OK)
    return r;
  e = reply.response->export;
  data = pcache__reply_bytes(&reply, e->archive, e->archive_offset, e->archive_size, &size);
  if (!data || size == 0) {
    log_error("pcached sent an export that does not fit its reply");
    pcache__reply_release(&reply);
    return EXIT_FAIL;
  }
  *entries += e->entries;
  *entry_bytes += e->entry_bytes;
  if (merge) {
    static const pcache__archive_visitor visitor = {merge_device, merge_module, merge_entry,
                                                    merge_bad, merge_program};
    r = pcache__archive_read(data, size, &visitor, merge);
    pcache__reply_release(&reply);
    if (r != 0) {
      log_error("cannot merge exports: %s", pcache_strerror(r));
      return EXIT_FAIL;
    }
    return EXIT_OK;
  }
  *ret_reply = reply;
  *ret_data = data;
  *ret_size = size;
  return EXIT_OK;
}

static int cmd_export(ctl *c, int argc, char **argv) {
  pcache__reply reply = {0};
  pcache__archive_writer *merge = NULL;
  pcache__devkey *keys = NULL;
  size_t n_keys = 0, size = 0;
  const uint8_t *data = NULL;
  uint8_t *merged = NULL;
  uint64_t entries = 0, entry_bytes = 0;
  ctl_device_arg dev;
  const char *app = NULL, *file;
  int have_dev = 0, r, to_stdout;
  ctl_entry_filter filter = {0};

  if ((r = ctl_parse(c, &ctl_verb_export, argc, argv, ctl_filter_option, &filter)) <= 0)
    return -r;
  dev = filter.dev;
  have_dev = filter.have_dev;
  app = filter.app;
  if (argc - optind != 1)
    return ctl_usage_error("export", "export wants one FILE (or - for stdout)");
  file = argv[optind];
  to_stdout = strcmp(file, "-") == 0;
  if (to_stdout && isatty(STDOUT_FILENO)) {
    log_error("refusing to write an archive to a terminal");
    return EXIT_FAIL;
  }

  if (!have_dev) {
    r = export_one(c, NULL, app, NULL, &reply, &data, &size, &entries, &entry_bytes);
  } else {
    r = ctl_resolve_devices(c, &dev, &keys, &n_keys);
    if (r != EXIT_OK)
      return r;
    if (n_keys == 1) {
      r = export_one(c, &keys[0], app, NULL, &reply, &data, &size, &entries, &entry_bytes);
    } else if (n_keys == 0) {
      log_error("no device matches the --device given");
      r = EXIT_FAIL;
    } else {
      r = pcache__archive_writer_new(&merge) < 0 ? EXIT_FAIL : EXIT_OK;
      for (size_t i = 0; i < n_keys && r == EXIT_OK; i++)
        r = export_one(c, &keys[i], app, merge, NULL, NULL, NULL, &entries, &entry_bytes);
      if (r == EXIT_OK && pcache__archive_finish(merge, &merged, &size) < 0)
        r = EXIT_FAIL;
      data = merged;
    }
    pcache__free(keys);
  }
  if (r != EXIT_OK)
    goto out;

  if (to_stdout) {
    int w = write_all(STDOUT_FILENO, data, size);
    if (w < 0) {
      log_error("writing the archive to stdout: %s", pcache_strerror(w));
      r = EXIT_FAIL;
      goto out;
    }
  } else {
    int w = write_file_atomic(file, data, size);
    if (w < 0) {
      log_error("writing %s: %s", file, pcache_strerror(w));
      r = EXIT_FAIL;
      goto out;
    }
  }

  /* With "-" the archive owns stdout, so the summary goes to stderr. */
  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, to_stdout ? stderr : stdout);
    ctl_json_object_begin(&j);
    ctl_json_kv_string(&j, "file", file);
    ctl_json_kv_uint(&j, "entries", entries);
    ctl_json_kv_uint(&j, "entry_bytes", entry_bytes);
    ctl_json_kv_uint(&j, "bytes", size);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
  } else {
    char human[32], ent[32];
    ctl_fmt_size(size, human, sizeof human);
    ctl_fmt_size(entry_bytes, ent, sizeof ent);
    /* The entries' size is list's; the archive adds their SPIR-V
     * modules and device records, once each. */
    fprintf(to_stdout ? stderr : stdout,
            "exported %" PRIu64 " %s, %s, to %s (an archive of %s with their SPIR-V modules and "
            "devices)\n",
            entries, entries == 1 ? "entry" : "entries", ent, to_stdout ? "stdout" : file, human);
  }
  r = EXIT_OK;

out:
  pcache__free(merged);
  pcache__archive_writer_free(merge);
  pcache__reply_release(&reply);
  return r;
}

const ctl_command ctl_verb_export = {
    .name = "export",
    .run = cmd_export,
    .synopsis = "export FILE [--device UUID|KEY] [--app NAME]",
    .summary = "write entries to a portable, checksummed archive",
    .help = "Write entries, their descriptions and SPIR-V to a portable, checksummed\n"
            "archive (docs/archive.md). FILE is replaced atomically; - writes to stdout\n"
            "(the summary then goes to stderr).\n",
    .options = ctl_filter_options,
    .short_options = CTL_FILTER_SHORT,
    .takes_arguments = 1,
};
