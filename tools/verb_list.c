/* pcachectl list: devices, then entries by device and app. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "common/log.h"
#include "tools/ctl.h"
#include "tools/ctl_format.h"

/* The list filters, as for entries: a UUID selects every key with it. */
static int snapshot_matches(const Pcachepb__SnapshotRecord *s, const ctl_device_arg *dev,
                            const char *app) {
  if (dev && !ctl_device_matches(dev, &s->device_key))
    return 0;
  return !app || strcmp(s->app ? s->app : "", app) == 0;
}

static int compare_entries(const void *a, const void *b) {
  const Pcachepb__EntryRecord *x = *(Pcachepb__EntryRecord *const *)a;
  const Pcachepb__EntryRecord *y = *(Pcachepb__EntryRecord *const *)b;
  size_t n = x->device_key.len < y->device_key.len ? x->device_key.len : y->device_key.len;
  int r = n ? memcmp(x->device_key.data, y->device_key.data, n) : 0;
  if (r == 0 && x->device_key.len != y->device_key.len)
    r = x->device_key.len < y->device_key.len ? -1 : 1;
  if (r == 0)
    r = strcmp(x->app ? x->app : "", y->app ? y->app : "");
  if (r == 0 && x->last_used != y->last_used)
    r = x->last_used > y->last_used ? -1 : 1; /* most recently used first */
  if (r == 0 && x->state_hash.len == y->state_hash.len && x->state_hash.len)
    r = memcmp(x->state_hash.data, y->state_hash.data, x->state_hash.len);
  return r;
}

static const Pcachepb__DeviceRecord *find_device(const Pcachepb__ListReply *l,
                                                 const ProtobufCBinaryData *key) {
  for (size_t i = 0; i < l->n_devices; i++) {
    const Pcachepb__DeviceInfo *info = l->devices[i]->info;
    if (info && info->key.len == key->len && memcmp(info->key.data, key->data, key->len) == 0)
      return l->devices[i];
  }
  return NULL;
}

/* The deviceUUID a client reported (VkPhysicalDeviceIDProperties), as
 * text, or "-" when none did (a Vulkan 1.0 instance, an older client). */
static void device_uuid_text(const Pcachepb__DeviceInfo *info, char out[37]) {
  if (info && info->device_uuid.len == PCACHE_UUID_SIZE)
    pcache__uuid_format(info->device_uuid.data, out);
  else
    snprintf(out, 37, "-");
}

static void json_device(ctl_json *j, const Pcachepb__DeviceRecord *d, uint64_t n_entries,
                        uint64_t bytes) {
  const Pcachepb__DeviceInfo *info = d->info;
  pcache__devkey key;
  char uuid[37], device_uuid[37];
  ctl_json_object_begin(j);
  if (info && ctl_key_from_bytes(&info->key, &key) == 0) {
    pcache__uuid_format(pcache__devkey_uuid(&key), uuid);
    ctl_json_kv_hex(j, "key", key.bytes, sizeof key.bytes);
    ctl_json_kv_string(j, "uuid", uuid);
    ctl_json_kv_uint(j, "vendor_id", pcache__devkey_vendor(&key));
    ctl_json_kv_uint(j, "device_id", pcache__devkey_device(&key));
    ctl_json_kv_uint(j, "driver_version", pcache__devkey_driver_version(&key));
    ctl_json_kv_uint(j, "driver_abi", pcache__devkey_abi(&key));
  }
  ctl_json_key(j, "device_uuid");
  if (info && info->device_uuid.len == PCACHE_UUID_SIZE) {
    pcache__uuid_format(info->device_uuid.data, device_uuid);
    ctl_json_string(j, device_uuid);
  } else {
    ctl_json_null(j);
  }
  ctl_json_kv_string(j, "name", info ? info->name : "");
  ctl_json_kv_uint(j, "driver_id", info ? info->driver_id : 0);
  ctl_json_kv_string(j, "driver_name", info ? info->driver_name : "");
  ctl_json_kv_string(j, "driver_info", info ? info->driver_info : "");
  ctl_json_kv_uint(j, "api_version", info ? info->api_version : 0);
  /* Staged items (docs/replay.md "Staged builds"): descriptions waiting
   * for the replayer, filed under a key of their own, named for the
   * device key they are built for. */
  if (info && ctl_key_from_bytes(&info->key, &key) == 0 && pcache__devkey_is_staged(&key)) {
    pcache__devkey base;
    pcache__devkey_unstaged(&key, &base);
    ctl_json_kv_hex(j, "staged_for", base.bytes, sizeof base.bytes);
  }
  ctl_json_kv_uint(j, "entries", n_entries);
  ctl_json_kv_uint(j, "bytes", bytes);
  ctl_json_kv_uint(j, "first_seen", d->first_seen);
  ctl_json_kv_uint(j, "last_seen", d->last_seen);
  ctl_json_object_end(j);
}

static void json_entry(ctl_json *j, const Pcachepb__EntryRecord *e) {
  char kind[16];
  ctl_json_object_begin(j);
  ctl_json_kv_hex(j, "device_key", e->device_key.data, e->device_key.len);
  ctl_json_kv_hex(j, "state_hash", e->state_hash.data, e->state_hash.len);
  ctl_json_kv_string(j, "app", e->app);
  ctl_json_kv_string(j, "kind", ctl_kind_name(e->kind, kind, sizeof kind));
  ctl_json_kv_uint(j, "size", e->size);
  ctl_json_kv_uint(j, "blob_size", e->blob_size);
  ctl_json_kv_uint(j, "desc_size", e->desc_size);
  {
    /* 64-bit values lose precision as JSON numbers in many parsers. */
    char checksum[17];
    snprintf(checksum, sizeof checksum, "%016" PRIx64, e->checksum);
    ctl_json_kv_string(j, "checksum", checksum);
  }
  ctl_json_kv_uint(j, "created", e->created);
  ctl_json_kv_uint(j, "last_used", e->last_used);
  ctl_json_kv_uint(j, "hits", e->hits);
  ctl_json_kv_uint(j, "compile_ns", e->compile_ns);
  ctl_json_object_end(j);
}

/* The device's totals: its entries listed (all of them, or with --app
 * the app's), each counted by its size (EntryRecord.size, the one
 * definition: docs/storage.md "Sizes"). */
static void device_totals(const Pcachepb__DeviceRecord *d,
                          const Pcachepb__EntryRecord *const *entries, size_t n_entries,
                          uint64_t *ret_entries, uint64_t *ret_bytes) {
  *ret_entries = *ret_bytes = 0;
  if (!d->info)
    return;
  for (size_t i = 0; i < n_entries; i++) {
    const Pcachepb__EntryRecord *e = entries[i];
    if (e->device_key.len == d->info->key.len &&
        memcmp(e->device_key.data, d->info->key.data, e->device_key.len) == 0) {
      (*ret_entries)++;
      *ret_bytes += e->size;
    }
  }
}

static void print_device_row(const Pcachepb__DeviceRecord *d, uint64_t n_entries, uint64_t bytes) {
  const Pcachepb__DeviceInfo *info = d->info;
  pcache__devkey key;
  char uuid[37] = "?", device_uuid[37], vendor_buf[16], version[32] = "?", size[32];
  const char *vendor = "?";
  uint32_t device_id = 0, abi = 0;
  if (info && ctl_key_from_bytes(&info->key, &key) == 0) {
    pcache__uuid_format(pcache__devkey_uuid(&key), uuid);
    vendor = ctl_vendor_name(pcache__devkey_vendor(&key), vendor_buf, sizeof vendor_buf);
    device_id = pcache__devkey_device(&key);
    ctl_format_driver_version(pcache__devkey_vendor(&key), pcache__devkey_driver_version(&key),
                              version, sizeof version);
    abi = pcache__devkey_abi(&key);
  }
  char name[256], staged[128] = "";
  device_uuid_text(info, device_uuid);
  ctl_fmt_size(bytes, size, sizeof size);
  if (abi & PCACHE_DEVKEY_ABI_STAGED) {
    /* Not a device of its own: the staged items of the device key it is
     * named for, which the replayer builds (docs/replay.md). */
    pcache__devkey base;
    char hex[65];
    pcache__devkey_unstaged(&key, &base);
    pcache__devkey_format(&base, hex);
    snprintf(staged, sizeof staged, "  (staged builds for %s)", hex);
  }
  printf("%-36s  %-36s  %-8s  0x%04" PRIx32 "  %-12s  %2" PRIu32 "-bit  %7" PRIu64 "  %10s  %s%s\n",
         uuid, device_uuid, vendor, device_id, version,
         (abi & ~(PCACHE_DEVKEY_ABI_BINARY | PCACHE_DEVKEY_ABI_STAGED)) * 8, n_entries, size,
         ctl_printable(info ? info->name : NULL, name, sizeof name), staged);
}

static int cmd_list(ctl *c, int argc, char **argv) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  pcache__reply reply = {0};
  const Pcachepb__ListReply *l;
  const Pcachepb__EntryRecord **entries = NULL;
  const Pcachepb__DeviceRecord **devices = NULL;
  size_t n_entries = 0, n_devices = 0;
  ctl_device_arg dev;
  int have_dev = 0, r;
  const char *app = NULL;
  ctl_entry_filter filter = {0};
  time_t now = time(NULL);
  uint64_t total = 0;

  if ((r = ctl_parse(c, &ctl_verb_list, argc, argv, ctl_filter_option, &filter)) <= 0)
    return -r;
  dev = filter.dev;
  have_dev = filter.have_dev;
  app = filter.app;

  request.body_case = PCACHEPB__REQUEST__BODY_LIST;
  request.list = &list;
  list.entries = 1;
  if (have_dev && dev.whole_key) {
    list.device_key.data = dev.key.bytes;
    list.device_key.len = sizeof dev.key.bytes;
  }
  list.app = (char *)(app ? app : "");
  r = ctl_call(c, &request, PCACHEPB__RESPONSE__BODY_LIST, &reply);
  if (r != EXIT_OK)
    return r;
  l = reply.response->list;

  /* Filters are applied here too: a UUID is not something the daemon can
   * filter on, and the daemon's device list is not filtered by app. */
  entries = pcache__calloc(l->n_entries + 1, sizeof *entries);
  devices = pcache__calloc(l->n_devices + 1, sizeof *devices);
  if (!entries || !devices) {
    r = EXIT_FAIL;
    goto out;
  }
  for (size_t i = 0; i < l->n_entries; i++) {
    const Pcachepb__EntryRecord *e = l->entries[i];
    if (have_dev && !ctl_device_matches(&dev, &e->device_key))
      continue;
    if (app && strcmp(e->app ? e->app : "", app) != 0)
      continue;
    entries[n_entries++] = e;
  }
  qsort(entries, n_entries, sizeof *entries, compare_entries);
  for (size_t i = 0; i < l->n_devices; i++) {
    const Pcachepb__DeviceRecord *d = l->devices[i];
    int used = 0;
    if (!d->info || (have_dev && !ctl_device_matches(&dev, &d->info->key)))
      continue;
    if (app) {
      for (size_t k = 0; k < n_entries && !used; k++)
        used = entries[k]->device_key.len == d->info->key.len &&
               memcmp(entries[k]->device_key.data, d->info->key.data, d->info->key.len) == 0;
      if (!used)
        continue;
    }
    devices[n_devices++] = d;
  }

  if (c->json) {
    ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_object_begin(&j);
    ctl_json_key(&j, "devices");
    ctl_json_array_begin(&j);
    for (size_t i = 0; i < n_devices; i++) {
      uint64_t dev_entries, dev_bytes;
      device_totals(devices[i], entries, n_entries, &dev_entries, &dev_bytes);
      json_device(&j, devices[i], dev_entries, dev_bytes);
    }
    ctl_json_array_end(&j);
    ctl_json_key(&j, "entries");
    ctl_json_array_begin(&j);
    for (size_t i = 0; i < n_entries; i++)
      json_entry(&j, entries[i]);
    ctl_json_array_end(&j);
    ctl_json_key(&j, "snapshots");
    ctl_json_array_begin(&j);
    for (size_t i = 0; i < l->n_snapshots; i++) {
      const Pcachepb__SnapshotRecord *s = l->snapshots[i];
      char keyhex[2 * PCACHE_DEVKEY_SIZE + 1] = "";
      if (!snapshot_matches(s, have_dev ? &dev : NULL, app))
        continue;
      if (s->device_key.len == PCACHE_DEVKEY_SIZE)
        pcache__hex(s->device_key.data, PCACHE_DEVKEY_SIZE, keyhex);
      ctl_json_object_begin(&j);
      ctl_json_kv_string(&j, "device_key", keyhex);
      ctl_json_kv_string(&j, "app", s->app);
      ctl_json_kv_uint(&j, "blob_size", s->blob_size);
      ctl_json_kv_uint(&j, "hashes", s->hashes);
      ctl_json_kv_uint(&j, "checksum", s->checksum);
      ctl_json_kv_uint(&j, "created", s->created);
      ctl_json_object_end(&j);
    }
    ctl_json_array_end(&j);
    ctl_json_object_end(&j);
    ctl_json_finish(&j);
    r = EXIT_OK;
    goto out;
  }

  if (n_devices == 0 && n_entries == 0) {
    printf("no entries%s\n", have_dev || app ? " match" : "");
    r = EXIT_OK;
    goto out;
  }
  printf("%-36s  %-36s  %-8s  %-6s  %-12s  %-6s  %7s  %10s  %s\n", "PIPELINE CACHE UUID",
         "DEVICE UUID", "VENDOR", "DEVICE", "DRIVER", "ABI", app ? "APP'S" : "ENTRIES", "SIZE",
         "NAME");
  for (size_t i = 0; i < n_devices; i++) {
    uint64_t dev_entries, dev_bytes;
    device_totals(devices[i], entries, n_entries, &dev_entries, &dev_bytes);
    print_device_row(devices[i], dev_entries, dev_bytes);
  }

  for (size_t i = 0; i < n_entries; i++) {
    const Pcachepb__EntryRecord *e = entries[i];
    int new_device =
        i == 0 || entries[i - 1]->device_key.len != e->device_key.len ||
        memcmp(entries[i - 1]->device_key.data, e->device_key.data, e->device_key.len) != 0;
    int new_app = new_device || strcmp(entries[i - 1]->app, e->app) != 0;
    char hash[2 * PCACHE_HASH_SIZE + 1] = "?", kind[16], size[32], created[32], used[32];
    if (new_device) {
      const Pcachepb__DeviceRecord *d = find_device(l, &e->device_key);
      char uuid[37], keyhex[2 * PCACHE_DEVKEY_SIZE + 1] = "?", name[256];
      ctl_uuid_text(&e->device_key, uuid);
      if (e->device_key.len == PCACHE_DEVKEY_SIZE)
        pcache__hex(e->device_key.data, PCACHE_DEVKEY_SIZE, keyhex);
      printf("\ndevice %s  %s\n  key %s\n", uuid,
             ctl_printable(d && d->info ? d->info->name : NULL, name, sizeof name), keyhex);
    }
    if (new_app) {
      char app_text[256];
      printf("  app %s\n    %-32s  %-11s  %10s  %-16s  %-16s  %6s\n",
             *e->app ? ctl_printable(e->app, app_text, sizeof app_text) : "(none)", "STATE HASH",
             "KIND", "SIZE", "CREATED", "LAST USED", "HITS");
    }
    if (e->state_hash.len == PCACHE_HASH_SIZE)
      pcache__hex(e->state_hash.data, PCACHE_HASH_SIZE, hash);
    ctl_fmt_size(e->size, size, sizeof size);
    total += e->size;
    ctl_format_time(e->created, now, created, sizeof created);
    ctl_format_time(e->last_used, now, used, sizeof used);
    printf("    %-32s  %-11s  %10s  %-16s  %-16s  %6" PRIu64 "\n", hash,
           ctl_kind_name(e->kind, kind, sizeof kind), size, created, used, e->hits);
  }
  if (n_entries) {
    char size[32];
    ctl_fmt_size(total, size, sizeof size);
    printf("\n%zu %s, %s: each entry's blob, description and index records (SPIR-V modules, "
           "device records and snapshots are counted apart: pcachectl status)\n",
           n_entries, n_entries == 1 ? "entry" : "entries", size);
  }
  for (size_t i = 0, shown = 0; i < l->n_snapshots; i++) {
    const Pcachepb__SnapshotRecord *s = l->snapshots[i];
    char uuid[37], size[32], created[32], app_text[256];
    if (!snapshot_matches(s, have_dev ? &dev : NULL, app))
      continue;
    if (shown++ == 0)
      printf("\nsnapshots\n  %-36s  %-24s  %10s  %7s  %s\n", "PIPELINE CACHE UUID", "APP", "SIZE",
             "HASHES", "CREATED");
    ctl_uuid_text(&s->device_key, uuid);
    ctl_fmt_size(s->blob_size, size, sizeof size);
    ctl_format_time(s->created, now, created, sizeof created);
    printf("  %-36s  %-24s  %10s  %7" PRIu64 "  %s\n", uuid,
           *s->app ? ctl_printable(s->app, app_text, sizeof app_text) : "(none)", size, s->hashes,
           created);
  }
  r = EXIT_OK;

out:
  pcache__free(entries);
  pcache__free(devices);
  pcache__reply_release(&reply);
  return r;
}

const ctl_command ctl_verb_list = {
    .name = "list",
    .run = cmd_list,
    .synopsis = "list [--device UUID|KEY] [--app NAME]",
    .summary = "devices, then entries by device and app",
    .help = "List devices, then entries grouped by device and app (most recently used\n"
            "first). --device takes a UUID (every driver build with it) or a whole\n"
            "64-hex device key; --app an application name.\n",
    .options = ctl_filter_options,
    .short_options = CTL_FILTER_SHORT,
};
