/* Fuzz target: archive import, the path `pcachectl import FILE` feeds with
 * a file from anywhere. The bytes go through the archive reader (every
 * record visited, every pointer it hands out read in full), then through
 * the daemon's own Import (pcd_job_import.run) inside a write transaction on a
 * real scratch store. The transaction is aborted, so each input starts from
 * the same empty store and the run stays fast. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "proto/archive.h"
#include "common/log.h"
#include "config.h"
#include "ops.h"
#include "scratch.h"
#include "store.h"
#include "writer.h"
#include "fuzz.h"

typedef struct walk {
  uint64_t sum, bad;
} walk;

/* What the reader hands out (copies or pointers into the input) must be
 * readable in full: ASan flags a length that runs past its buffer. */
static void touch(walk *w, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    w->sum += b[i];
}

static int on_device(void *ctx, const Pcachepb__DeviceInfo *info) {
  walk *w = ctx;
  w->sum += info->key.len;
  return 0;
}

static int on_module(void *ctx, const pcache__hash *hash, const void *code, size_t size) {
  touch(ctx, code, size);
  (void)hash;
  return 0;
}

static int on_entry(void *ctx, const pcache__archive_entry *e) {
  walk *w = ctx;
  touch(w, e->blob, e->blob_size);
  touch(w, e->desc, e->desc_size);
  if (e->app)
    w->sum += strlen(e->app);
  return 0;
}

static int on_program(void *ctx, const char *app, const char *exe) {
  walk *w = ctx;
  w->sum += strlen(app) + strlen(exe);
  return 0;
}

static int on_bad(void *ctx, uint64_t index, int err) {
  walk *w = ctx;
  CHECK(err < 0);
  w->bad++;
  (void)index;
  return 0;
}

static pcd_store *store;
static pcd_config config;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char *args[] = {"pcached", "--max-size", "4M", "--max-blob", "1M", NULL};
  (void)argc;
  (void)argv;
  pcache__log_set_level(0); /* the importer logs every refusal */
  CHECK(pcd_config_parse(5, args, &config) == 0);
  CHECK(pcd_store_open(fuzz_scratch_dir("archive"), 64ull << 20, &store) == 0);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pcache__archive_visitor v = {on_device, on_module, on_entry, on_bad, on_program};
  walk w = {0, 0};
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Import imp = PCACHEPB__IMPORT__INIT;
  pcd_job *job;
  pcd_txn *txn;
  int r = pcache__archive_read(data, size, &v, &w);
  CHECK(r == 0 || r == PCACHE_EARCHIVE || r == PCACHE_EARCHIVE_VERSION);

  imp.archive.data = (uint8_t *)data;
  imp.archive.len = size;
  req.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  req.import = &imp;
  job = pcd_job_new(PCD_JOB_IMPORT);
  CHECK(job);
  job->req = &req;
  snprintf(job->app, sizeof job->app, "fuzz");
  CHECK(pcd_txn_begin(store, 1, &txn) == 0);
  /* Every slice, in the one transaction (the writer commits between
   * them; nothing here is kept). */
  do {
    r = job->ops->run(txn, &config, job);
    if (r == 0 && job->more)
      job->ops->committed(job);
  } while (r == 0 && job->more);
  CHECK(r == 0 || r == PCACHE_EFULL);
  if (r == 0 && job->resp.status == 0) {
    CHECK(job->resp.body_case == PCACHEPB__RESPONSE__BODY_IMPORT);
    /* Every entry the reader saw is either accepted or refused; the
     * reply lists the first PCD_IMPORT_MAX_PROBLEMS refusals. */
    CHECK(job->resp.import->n_problems ==
          (job->resp.import->refused < PCD_IMPORT_MAX_PROBLEMS ? job->resp.import->refused
                                                                : PCD_IMPORT_MAX_PROBLEMS));
  }
  pcd_txn_abort(txn);
  job->req = NULL; /* ours, on the stack */
  pcd_job_free(job);
  return 0;
}
