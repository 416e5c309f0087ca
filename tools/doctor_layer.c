/* pcachectl doctor: whether the Vulkan loader finds the layer's manifest,
 * what turns the layer on, whether it is on in this environment, and
 * where it sits among the other implicit layers.
 *
 * The loader's rules, as the loader Debian 12 ships (1.3.239) applies
 * them, checked with VK_LOADER_DEBUG=layer (docs/layer.md, "Other
 * layers"):
 *   - implicit-layer manifests are *.json files in, in this order:
 *     $XDG_CONFIG_HOME (~/.config), each of $XDG_CONFIG_DIRS (/etc/xdg),
 *     /etc, $XDG_DATA_HOME (~/.local/share), each of $XDG_DATA_DIRS
 *     (/usr/local/share:/usr/share), each + /vulkan/implicit_layer.d; in
 *     a directory, in the order the directory lists its files (not by
 *     name);
 *   - a layer is on when its enable_environment variable has exactly the
 *     value the manifest names, and off whenever its disable_environment
 *     variable is set, whatever its value; VK_LOADER_LAYERS_DISABLE can
 *     turn it off too;
 *   - the layers found first sit nearest the program; two manifests of
 *     one layer: the copy found last is used.
 * Only the manifests are read (a small JSON reader below): pcachectl does
 * not load Vulkan. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/vec.h"
#include "tools/doctor.h"

#define PCACHE_LAYER_NAME "VK_LAYER_PCACHE_pipeline_cache"
#define MANIFEST_MAX (256u << 10)

/* ------------------------------------------------------- a JSON reader */

/* Just what a layer manifest needs: objects, arrays, strings (escapes
 * kept as far as ASCII goes), and the rest skipped. */
typedef struct jr {
  const char *p, *end;
  int bad;
  int depth;
} jr;

static void ws(jr *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static int take(jr *j, char c) {
  ws(j);
  if (j->p < j->end && *j->p == c) {
    j->p++;
    return 1;
  }
  return 0;
}

/* A string into out (cut to fit); 0, or -1 when there is none. */
static int string(jr *j, char *out, size_t size) {
  size_t n = 0;
  ws(j);
  if (j->p >= j->end || *j->p != '"')
    return j->bad = -1;
  for (j->p++; j->p < j->end && *j->p != '"'; j->p++) {
    char c = *j->p;
    if (c == '\\') {
      if (++j->p >= j->end)
        break;
      switch (*j->p) {
      case 'n':
        c = '\n';
        break;
      case 't':
        c = '\t';
        break;
      case 'u':
        c = '?';
        j->p += j->end - j->p > 4 ? 4 : j->end - j->p - 1;
        break;
      default:
        c = *j->p; /* \" \\ \/ and the rest as themselves */
      }
    }
    if (out && n + 1 < size)
      out[n++] = c;
  }
  if (out && size)
    out[n] = '\0';
  if (j->p >= j->end)
    return j->bad = -1;
  j->p++;
  return 0;
}

static void skip_value(jr *j);

static void skip_value(jr *j) {
  ws(j);
  if (j->p >= j->end || ++j->depth > 32) {
    j->bad = -1;
    return;
  }
  if (*j->p == '"') {
    string(j, NULL, 0);
  } else if (*j->p == '{' || *j->p == '[') {
    char close = *j->p == '{' ? '}' : ']';
    int object = *j->p == '{';
    j->p++;
    if (!take(j, close)) {
      do {
        if (object && (string(j, NULL, 0) < 0 || !take(j, ':'))) {
          j->bad = -1;
          break;
        }
        skip_value(j);
      } while (!j->bad && take(j, ','));
      if (!j->bad && !take(j, close))
        j->bad = -1;
    }
  } else {
    while (j->p < j->end && !strchr(",]} \t\r\n", *j->p))
      j->p++;
  }
  j->depth--;
}

typedef struct layer_info {
  char name[128];
  char library[1024];
  char enable_var[64], enable_value[64];
  char disable_var[64], disable_value[64];
  char manifest[4096];
  int dir; /* index of the directory it was found in */
} layer_info;

/* {"NAME": "VALUE"}: the first pair. */
static void env_pair(jr *j, char *var, size_t var_size, char *value, size_t value_size) {
  if (!take(j, '{')) {
    skip_value(j);
    return;
  }
  if (take(j, '}'))
    return;
  do {
    char k[64];
    if (string(j, k, sizeof k) < 0 || !take(j, ':'))
      return;
    ws(j);
    if (!var[0] && j->p < j->end && *j->p == '"') {
      snprintf(var, var_size, "%s", k);
      string(j, value, value_size);
    } else {
      skip_value(j);
    }
  } while (!j->bad && take(j, ','));
  if (!take(j, '}'))
    j->bad = -1;
}

static void layer_object(jr *j, layer_info *l) {
  if (!take(j, '{')) {
    j->bad = -1;
    return;
  }
  if (take(j, '}'))
    return;
  do {
    char k[64];
    if (string(j, k, sizeof k) < 0 || !take(j, ':'))
      return;
    if (strcmp(k, "name") == 0)
      string(j, l->name, sizeof l->name);
    else if (strcmp(k, "library_path") == 0)
      string(j, l->library, sizeof l->library);
    else if (strcmp(k, "enable_environment") == 0)
      env_pair(j, l->enable_var, sizeof l->enable_var, l->enable_value, sizeof l->enable_value);
    else if (strcmp(k, "disable_environment") == 0)
      env_pair(j, l->disable_var, sizeof l->disable_var, l->disable_value, sizeof l->disable_value);
    else
      skip_value(j);
  } while (!j->bad && take(j, ','));
  if (!take(j, '}'))
    j->bad = -1;
}

typedef PCACHE_VEC(layer_info) layer_list;

/* The layers of one manifest ("layer": {...} or "layers": [...]) onto
 * list; -1 when it is not one the loader could read. */
static int read_manifest(const char *path, int dir, layer_list *list) {
  char *text;
  struct stat st;
  FILE *f = fopen(path, "re");
  jr j;
  int r = 0;
  if (!f)
    return -1;
  if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > MANIFEST_MAX ||
      !(text = pcache__malloc((size_t)st.st_size + 1))) {
    fclose(f);
    return -1;
  }
  j = (jr){.p = text, .end = text + fread(text, 1, (size_t)st.st_size, f)};
  fclose(f);
  if (!take(&j, '{') || take(&j, '}')) {
    pcache__free(text);
    return -1;
  }
  do {
    char k[32];
    if (string(&j, k, sizeof k) < 0 || !take(&j, ':'))
      break;
    if (strcmp(k, "layer") == 0 || strcmp(k, "layers") == 0) {
      int array = take(&j, '[');
      do {
        layer_info l = {.dir = dir};
        layer_object(&j, &l);
        snprintf(l.manifest, sizeof l.manifest, "%s", path);
        if (!j.bad && l.name[0] && pcache_vec_push(list, l) < 0)
          r = -1;
      } while (array && !j.bad && take(&j, ','));
      if (array && !j.bad && !take(&j, ']'))
        j.bad = -1;
    } else {
      skip_value(&j);
    }
  } while (!j.bad && take(&j, ','));
  pcache__free(text);
  return j.bad || r < 0 ? -1 : 0;
}

/* ------------------------------------------------------ the search path */

typedef PCACHE_VEC(char *) dir_list;

static void add_dir(dir_list *dirs, const char *base, size_t len) {
  char *dir;
  if (len == 0)
    return;
  dir = doctor_printf("%.*s/vulkan/implicit_layer.d", (int)len, base);
  if (!dir)
    return;
  for (size_t i = 0; i < dirs->n; i++)
    if (strcmp(dirs->items[i], dir) == 0) {
      pcache__free(dir);
      return;
    }
  if (pcache_vec_push(dirs, dir) < 0)
    pcache__free(dir);
}

static void add_dirs(dir_list *dirs, const char *list) {
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ":");
    add_dir(dirs, p, n);
    p += n;
    if (*p == ':')
      p++;
  }
}

static void search_path(dir_list *dirs) {
  const char *home = doctor_env("HOME");
  char buf[4096];
  if (doctor_env("XDG_CONFIG_HOME"))
    add_dirs(dirs, doctor_env("XDG_CONFIG_HOME"));
  else if (home && snprintf(buf, sizeof buf, "%s/.config", home) < (int)sizeof buf)
    add_dirs(dirs, buf);
  add_dirs(dirs, doctor_env("XDG_CONFIG_DIRS") ? doctor_env("XDG_CONFIG_DIRS") : "/etc/xdg");
  add_dirs(dirs, "/etc");
  if (doctor_env("XDG_DATA_HOME"))
    add_dirs(dirs, doctor_env("XDG_DATA_HOME"));
  else if (home && snprintf(buf, sizeof buf, "%s/.local/share", home) < (int)sizeof buf)
    add_dirs(dirs, buf);
  add_dirs(dirs, doctor_env("XDG_DATA_DIRS") ? doctor_env("XDG_DATA_DIRS")
                                             : "/usr/local/share:/usr/share");
}

static void scan(const dir_list *dirs, layer_list *layers) {
  for (size_t i = 0; i < dirs->n; i++) {
    DIR *dir = opendir(dirs->items[i]);
    struct dirent *e;
    if (!dir)
      continue;
    /* readdir's order is the loader's. */
    while ((e = readdir(dir))) {
      size_t len = strlen(e->d_name);
      char path[4096];
      if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
        continue;
      if (snprintf(path, sizeof path, "%s/%s", dirs->items[i], e->d_name) >= (int)sizeof path)
        continue;
      (void)read_manifest(path, (int)i, layers);
    }
    closedir(dir);
  }
}

/* --------------------------------------------------------- the verdict */

/* A VK_LOADER_LAYERS_* filter: comma-separated names or globs, or
 * ~all~ / ~implicit~. */
static int filter_names(const char *filter, const char *name) {
  char buf[1024];
  if (!filter)
    return 0;
  snprintf(buf, sizeof buf, "%s", filter);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (strcmp(t, "~all~") == 0 || strcmp(t, "~implicit~") == 0 || fnmatch(t, name, 0) == 0)
      return 1;
  }
  return 0;
}

/* Whether the loader turns l on in this environment; why into why. */
static int layer_on(const layer_info *l, char *why, size_t size) {
  const char *v;
  if (l->disable_var[0] && getenv(l->disable_var)) {
    snprintf(why, size,
             "%s is set (to '%s'), and the loader turns the layer off whenever it is "
             "set, whatever its value",
             l->disable_var, getenv(l->disable_var));
    return 0;
  }
  if (filter_names(doctor_env("VK_LOADER_LAYERS_DISABLE"), l->name) &&
      !filter_names(doctor_env("VK_LOADER_LAYERS_ENABLE"), l->name)) {
    snprintf(why, size, "VK_LOADER_LAYERS_DISABLE=%s turns it off",
             doctor_env("VK_LOADER_LAYERS_DISABLE"));
    return 0;
  }
  if (filter_names(doctor_env("VK_LOADER_LAYERS_ENABLE"), l->name)) {
    snprintf(why, size, "VK_LOADER_LAYERS_ENABLE=%s turns it on",
             doctor_env("VK_LOADER_LAYERS_ENABLE"));
    return 1;
  }
  if (!l->enable_var[0]) {
    snprintf(why, size, "its manifest turns it on for every program");
    return 1;
  }
  v = getenv(l->enable_var);
  if (v && strcmp(v, l->enable_value) == 0) {
    snprintf(why, size, "%s=%s turns it on", l->enable_var, l->enable_value);
    return 1;
  }
  if (v)
    snprintf(why, size, "%s is '%s'; only %s=%s turns it on", l->enable_var, v, l->enable_var,
             l->enable_value);
  else
    snprintf(why, size, "%s is not set; %s=%s turns it on", l->enable_var, l->enable_var,
             l->enable_value);
  return 0;
}

/* Whether the library the manifest names is there: 1 yes, 0 no, -1
 * cannot tell (a bare name the dynamic linker looks up, or $LIB). */
static int library_there(const layer_info *l, char *path, size_t size) {
  char dir[4096];
  const char *slash;
  if (!l->library[0])
    return 0;
  if (strchr(l->library, '$') || !strchr(l->library, '/')) {
    snprintf(path, size, "%s", l->library);
    return -1;
  }
  if (l->library[0] == '/') {
    snprintf(path, size, "%s", l->library);
  } else {
    /* Relative to the manifest. */
    snprintf(dir, sizeof dir, "%s", l->manifest);
    slash = strrchr(dir, '/');
    if (slash)
      dir[slash - dir] = '\0';
    if (snprintf(path, size, "%s/%s", dir, l->library) >= (int)size)
      return 0;
  }
  return access(path, R_OK) == 0;
}

/* The session-wide way (docs/layer.md): a line PCACHE_LAYER=1 in a file of
 * ~/.config/environment.d. Its path into out, or "". */
static void session_setting(const char *var, const char *value, char *out, size_t size) {
  const char *xdg = doctor_env("XDG_CONFIG_HOME"), *home = doctor_env("HOME");
  char dirpath[4096];
  DIR *dir;
  struct dirent *e;
  out[0] = '\0';
  if (xdg)
    snprintf(dirpath, sizeof dirpath, "%s/environment.d", xdg);
  else if (home)
    snprintf(dirpath, sizeof dirpath, "%s/.config/environment.d", home);
  else
    return;
  if (!(dir = opendir(dirpath)))
    return;
  while (!out[0] && (e = readdir(dir))) {
    char path[8192], line[512], want[256];
    FILE *f;
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".conf") != 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dirpath, e->d_name);
    snprintf(want, sizeof want, "%s=%s", var, value);
    if (!(f = fopen(path, "re")))
      continue;
    while (fgets(line, sizeof line, f)) {
      line[strcspn(line, "\r\n")] = '\0';
      if (strcmp(line, want) == 0) {
        if (snprintf(out, size, "%s", path) >= (int)size)
          out[0] = '\0';
        break;
      }
    }
    fclose(f);
  }
  closedir(dir);
}

/* Where the other implicit layers sit against pcache's, for pipelines
 * they make themselves (docs/layer.md, "Other layers"). */
static void stacking(doctor *d, const layer_list *layers, size_t ours) {
  char above[1024] = "", below[1024] = "";
  size_t na = 0, nb = 0;
  for (size_t i = 0; i < layers->n; i++) {
    const layer_info *l = &layers->items[i];
    char why[256];
    int later_copy = 0;
    if (strcmp(l->name, PCACHE_LAYER_NAME) == 0)
      continue;
    /* Only the copy that counts: the last one of each name. */
    for (size_t k = i + 1; k < layers->n; k++)
      later_copy |= strcmp(layers->items[k].name, l->name) == 0;
    if (later_copy || !layer_on(l, why, sizeof why))
      continue;
    if (i < ours) {
      size_t n = strlen(above);
      snprintf(above + n, sizeof above - n, "%s%s", na++ ? ", " : "", l->name);
    } else {
      size_t n = strlen(below);
      snprintf(below + n, sizeof below - n, "%s%s", nb++ ? ", " : "", l->name);
    }
  }
  if (!na && !nb)
    return;
  char *detail = doctor_printf(
      "The loader puts the implicit layers it finds first nearest the program. %s%s%s%s%s%s"
      "Explicit layers (VK_INSTANCE_LAYERS, the validation layer) always sit below the "
      "implicit ones.",
      na ? "Between the program and pcache: " : "", above,
      na ? " (pipelines they create go "
           "through pcache and are cached). "
         : "",
      nb ? "Between pcache and the driver: " : "", below,
      nb ? " (pipelines they create themselves never reach pcache and are not cached). " : "");
  doctor_add(d, "layer_order", DOCTOR_NOTE, detail,
             nb ? "nothing to do, unless you want their pipelines cached: docs/layer.md, "
                  "\"Other layers\", says how the order is decided"
                : NULL,
             "%zu other implicit layer%s on here: %zu above pcache, %zu below it", na + nb,
             na + nb == 1 ? " is" : "s are", na, nb);
  pcache__free(detail);
}

void doctor_check_layer(doctor *d) {
  dir_list dirs = {0};
  layer_list layers = {0};
  size_t used = 0, copies = 0;
  char searched[8192] = "", why[512], lib[4096], session[4096], *detail = NULL, *fix = NULL;
  int there, on;
  search_path(&dirs);
  scan(&dirs, &layers);
  for (size_t i = 0; i < dirs.n; i++) {
    size_t n = strlen(searched);
    snprintf(searched + n, sizeof searched - n, "%s%s", i ? ", " : "", dirs.items[i]);
  }
  for (size_t i = 0; i < layers.n; i++)
    if (strcmp(layers.items[i].name, PCACHE_LAYER_NAME) == 0) {
      used = i;
      copies++;
    }
  d->manifests = (int)copies;
  d->layer_asked = getenv("PCACHE_LAYER") != NULL;
  if (!copies) {
    detail = doctor_printf("The loader looks for implicit layers in %s. Programs that do not "
                           "link libpcache get no cache without the layer.",
                           searched);
    doctor_add(d, "layer", d->layer_asked ? DOCTOR_PROBLEM : DOCTOR_WARNING, detail,
               "install pcache (sudo cmake --install build puts VkLayer_pcache.json in "
               "PREFIX/share/vulkan/implicit_layer.d); installed under another prefix, add "
               "PREFIX/share to XDG_DATA_DIRS",
               "the Vulkan loader finds no manifest of %s%s", PCACHE_LAYER_NAME,
               d->layer_asked ? ", although PCACHE_LAYER is set" : "");
    goto out;
  }
  const layer_info *l = &layers.items[used];
  snprintf(d->manifest, sizeof d->manifest, "%s", l->manifest);
  if (copies > 1) {
    char others[8192] = "";
    for (size_t i = 0; i < layers.n; i++)
      if (i != used && strcmp(layers.items[i].name, PCACHE_LAYER_NAME) == 0) {
        size_t n = strlen(others);
        snprintf(others + n, sizeof others - n, "%s%s", n ? ", " : "", layers.items[i].manifest);
      }
    detail = doctor_printf("The loader uses one of them (Debian 12's takes the last one it "
                           "finds: %s); the others are ignored: %s. A stale copy from an older "
                           "install may name a library that is gone or another version.",
                           l->manifest, others);
    doctor_add(d, "layer", DOCTOR_WARNING, detail,
               "keep one: remove the manifests of older installs", "%zu manifests name %s", copies,
               PCACHE_LAYER_NAME);
    pcache__free(detail);
    detail = NULL;
  }
  there = library_there(l, lib, sizeof lib);
  if (there == 0) {
    fix = doctor_printf("reinstall pcache, or remove %s", l->manifest);
    doctor_add(d, "layer", DOCTOR_PROBLEM,
               "The loader skips a layer whose library it cannot load: no program gets the "
               "cache through it.",
               fix, "the layer's manifest %s names %s, which is not there", l->manifest,
               lib[0] ? lib : "no library");
    goto out;
  }
  doctor_add(d, "layer", DOCTOR_OK, NULL, NULL,
             "the Vulkan loader finds the layer: %s (library %s)", l->manifest, lib);
  on = layer_on(l, why, sizeof why);
  d->layer_enabled = on;
  session_setting(l->enable_var[0] ? l->enable_var : "PCACHE_LAYER",
                  l->enable_value[0] ? l->enable_value : "1", session, sizeof session);
  if (on) {
    doctor_add(d, "layer_enabled", DOCTOR_OK, NULL, NULL,
               "the layer is on for programs started from this environment: %s", why);
  } else if (l->disable_var[0] && getenv(l->disable_var)) {
    fix = doctor_printf("unset %s", l->disable_var);
    doctor_add(d, "layer_enabled", d->layer_asked ? DOCTOR_PROBLEM : DOCTOR_WARNING, NULL, fix,
               "the layer is off here: %s", why);
  } else {
    detail = doctor_printf(
        "Programs started from here run without it (libpcache apps are not concerned). %s%s%s",
        session[0] ? "The session sets it in " : "", session,
        session[0] ? ", for programs started after the next login." : "");
    fix = doctor_printf("for one program: %s=%s PROGRAM; for every program of the session: a "
                        "line %s=%s in ~/.config/environment.d/pcache.conf, then log in again",
                        l->enable_var, l->enable_value, l->enable_var, l->enable_value);
    doctor_add(d, "layer_enabled", d->layer_asked ? DOCTOR_WARNING : DOCTOR_NOTE, detail, fix,
               "the layer is off here: %s", why);
  }
  stacking(d, &layers, used);
out:
  pcache__free(detail);
  pcache__free(fix);
  for (size_t i = 0; i < dirs.n; i++)
    pcache__free(dirs.items[i]);
  pcache_vec_free(&dirs);
  pcache_vec_free(&layers);
}
