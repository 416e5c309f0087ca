/* pcachectl doctor (docs/pcachectl.md, "doctor") against a real pcached,
 * in a private world: its own XDG_RUNTIME_DIR, cache home, and loader
 * search path (XDG_CONFIG_*, XDG_DATA_* point at scratch directories; the
 * build tree's manifest is the layer). It must
 *   - say "nothing to fix" and exit 0 on a healthy set-up;
 *   - find the daemon down, say where it looked and what starts it (4):
 *     the socket unit where a systemd user manager runs (a stand-in
 *     systemctl), pcached by hand where none does;
 *   - find XDG_RUNTIME_DIR unset, and name PCACHE_SOCKET as the fix (4);
 *   - find the layer's manifest missing from the search path: a problem
 *     when PCACHE_LAYER=1 asks for the layer (4), a warning otherwise (1);
 *   - catch a layer turned off by PCACHE_LAYER_DISABLE=0 (any value turns
 *     it off), a driver cache limited too far, a missing cache home;
 * and print, with --json, one document python3's json takes, whose
 * status and exit_code agree with the exit status. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl_util.h"
#include "test.h"

static test_env env;
static char out[65536];

/* Runs "pcachectl doctor ARGS" with the private world's environment plus
 * extra (VAR=VALUE words; an empty value is as unset for pcache); returns
 * its exit status, its output in out. */
static int doctor(const char *extra, const char *args) {
  char path[400], world[4096];
  FILE *f;
  size_t n;
  int status;
  snprintf(path, sizeof path, "%s/doctor.out", env.root);
  snprintf(world, sizeof world,
           "-u PCACHE_SOCKET -u PCACHE_LAYER -u PCACHE_LAYER_DISABLE -u VK_LOADER_LAYERS_DISABLE "
           "-u VK_LOADER_LAYERS_ENABLE -u __GL_SHADER_DISK_CACHE -u __GL_SHADER_DISK_CACHE_SIZE "
           "-u __GL_SHADER_DISK_CACHE_PATH -u MESA_SHADER_CACHE_DISABLE -u MESA_GLSL_CACHE_DISABLE "
           "-u MESA_SHADER_CACHE_MAX_SIZE -u MESA_SHADER_CACHE_DIR "
           "XDG_RUNTIME_DIR='%s' HOME='%s/home' XDG_CACHE_HOME='%s/cache' "
           "XDG_CONFIG_HOME='%s/config' XDG_CONFIG_DIRS='%s/config-dirs' "
           "XDG_DATA_HOME='%s' XDG_DATA_DIRS='%s/data-dirs'",
           env.runtime_dir, env.root, env.root, env.root, env.root, PCACHE_LAYER_DATA_HOME,
           env.root);
  status = ctl_sh("env %s %s '%s' doctor %s >'%s' 2>&1", world, extra, ctl_path(), args, path);
  f = fopen(path, "r");
  ASSERT_TRUE(f != NULL);
  n = fread(out, 1, sizeof out - 1, f);
  out[n] = '\0';
  fclose(f);
  fprintf(stderr, "$ %s pcachectl doctor %s -> %d\n%s\n", extra, args, status, out);
  /* Searched with the text's own line breaks and indents as single
   * spaces: doctor wraps its sentences for a terminal. */
  n = 0;
  for (char *p = out; *p; p++) {
    int space = *p == ' ' || *p == '\n';
    if (space && n && out[n - 1] == ' ')
      continue;
    out[n++] = space ? ' ' : *p;
  }
  out[n] = '\0';
  return status;
}

/* The same with --json: the document parses, and expr (python over d)
 * holds; its exit_code is the exit status. */
static void doctor_json(const char *extra, int status, const char *expr) {
  char path[400];
  ASSERT_EQ(doctor(extra, "--json"), status);
  snprintf(path, sizeof path, "%s/doctor.json", env.root);
  ctl_write_file(path, out, strlen(out));
  if (ctl_sh("python3 -c 'import json, sys\n"
             "d = json.load(open(sys.argv[1]))\n"
             "assert d[\"exit_code\"] == %d, d[\"exit_code\"]\n"
             "assert all(f[\"severity\"] in (\"ok\", \"note\", \"warning\", \"problem\") "
             "for f in d[\"findings\"])\n"
             "assert all(f[\"fix\"] for f in d[\"findings\"] "
             "if f[\"severity\"] in (\"warning\", \"problem\"))\n"
             "sys.exit(0 if (%s) else 1)' '%s'",
             status, expr, path) != 0)
    TEST_FAIL_("pcachectl --json doctor with %s: %s does not hold", extra, expr);
}

static void has(const char *text) {
  if (!strstr(out, text))
    TEST_FAIL_("doctor does not say '%s'", text);
}

int main(void) {
  char dir[400], text[600];
  pcache__devkey key;
  test_env_init(&env, "ctl-doctor");
  for (const char *sub = "home config config-dirs data-dirs cache empty-data"; *sub;) {
    size_t len = strcspn(sub, " ");
    snprintf(dir, sizeof dir, "%s/%.*s", env.root, (int)len, sub);
    ASSERT_EQ(mkdir(dir, 0700), 0);
    sub += len + (sub[len] == ' ');
  }
  ctl_start(&env);
  ctl_key(0xd1, 100, &key);
  ctl_put(&env, &key, "Doctor GPU", "game", 1, 0, 4);

  /* Healthy. */
  ASSERT_EQ(doctor("PCACHE_LAYER=1", ""), 0);
  has("pcache doctor: nothing to fix");
  has("pcached " PCACHE_VERSION_STRING " answers at");
  has(env.socket_path);
  has("the Vulkan loader finds the layer");
  has("the layer is on for programs started from this environment: PCACHE_LAYER=1 turns it on");
  has("all 4 entries pass verification");
  has("Doctor GPU");
  ASSERT_TRUE(strstr(out, "PROBLEM") == NULL && strstr(out, "WARNING") == NULL);
  doctor_json("PCACHE_LAYER=1", 0,
              "d[\"status\"] == \"ok\" and d[\"socket\"][\"reachable\"] and "
              "d[\"socket\"][\"from\"] == \"XDG_RUNTIME_DIR\" and d[\"layer\"][\"enabled\"] and "
              "d[\"layer\"][\"manifests\"] == 1");
  /* The layer off (not asked for) is worth a note, not a warning. */
  ASSERT_EQ(doctor("", "--no-verify"), 0);
  has("the layer is off here: PCACHE_LAYER is not set");
  has("~/.config/environment.d/pcache.conf");

  /* The disable variable turns the layer off whatever its value. */
  ASSERT_EQ(doctor("PCACHE_LAYER=1 PCACHE_LAYER_DISABLE=0", "--no-verify"), 4);
  has("PCACHE_LAYER_DISABLE is set (to '0')");
  has("unset PCACHE_LAYER_DISABLE");

  /* The drivers' own caches. */
  ASSERT_EQ(doctor("PCACHE_LAYER=1 __GL_SHADER_DISK_CACHE_SIZE=1048576 "
                   "MESA_SHADER_CACHE_MAX_SIZE=2",
                   "--no-verify"),
            1);
  has("__GL_SHADER_DISK_CACHE_SIZE limits NVIDIA's own shader cache to 1.0 MiB");
  has("Mesa's own shader cache may hold 2.0 GiB");
  /* A cache home that is not there. */
  snprintf(text, sizeof text, "PCACHE_LAYER=1 XDG_CACHE_HOME='%s/no-such-cache'", env.root);
  ASSERT_EQ(doctor(text, "--no-verify"), 1);
  has("no-such-cache: No such file or directory");
  has("mkdir -p -m 0700");

  /* The layer's manifest missing from the search path. */
  snprintf(text, sizeof text, "PCACHE_LAYER=1 XDG_DATA_HOME='%s/empty-data'", env.root);
  ASSERT_EQ(doctor(text, "--no-verify"), 4);
  has("the Vulkan loader finds no manifest of VK_LAYER_PCACHE_pipeline_cache, although "
      "PCACHE_LAYER is set");
  has("empty-data/vulkan/implicit_layer.d");
  has("cmake --install");
  doctor_json(text, 4,
              "d[\"status\"] == \"problems\" and d[\"layer\"][\"manifests\"] == 0 and "
              "any(f[\"check\"] == \"layer\" and f[\"severity\"] == \"problem\" "
              "for f in d[\"findings\"])");
  snprintf(text, sizeof text, "XDG_DATA_HOME='%s/empty-data'", env.root);
  ASSERT_EQ(doctor(text, "--no-verify"), 1);

  /* XDG_RUNTIME_DIR unset, and nothing else names a socket. */
  ASSERT_EQ(doctor("PCACHE_LAYER=1 XDG_RUNTIME_DIR=", ""), 4);
  has("XDG_RUNTIME_DIR is not set");
  has("PCACHE_SOCKET=$HOME/.cache/pcache/socket");
  has("Without a systemd user manager");
  doctor_json("PCACHE_LAYER=1 XDG_RUNTIME_DIR=", 4,
              "any(f[\"check\"] == \"runtime_dir\" and f[\"severity\"] == \"problem\" "
              "for f in d[\"findings\"]) and d[\"socket\"][\"from\"] is None");
  /* ... but PCACHE_SOCKET names it: a note, and the daemon is found. */
  snprintf(text, sizeof text, "PCACHE_LAYER=1 XDG_RUNTIME_DIR= PCACHE_SOCKET='%s'",
           env.socket_path);
  ASSERT_EQ(doctor(text, "--no-verify"), 0);
  has("XDG_RUNTIME_DIR is not set; the socket is named otherwise (PCACHE_SOCKET)");
  has("answers at");

  /* The daemon down: where it looked, why, and what starts it. */
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  ASSERT_EQ(doctor("PCACHE_LAYER=1", ""), 4);
  snprintf(text, sizeof text, "no pcached answers at %s", env.socket_path);
  has(text);
  has("The socket path comes from XDG_RUNTIME_DIR");
  has("fix:");
  has("pcached");
  doctor_json("PCACHE_LAYER=1", 4,
              "not d[\"socket\"][\"reachable\"] and any(f[\"check\"] == \"daemon\" and "
              "f[\"severity\"] == \"problem\" and \"pcached\" in f[\"fix\"] "
              "for f in d[\"findings\"])");
  /* Where a systemd user manager runs (its private socket is there) and
   * the socket unit is installed but off, the fix is to enable it; where
   * the unit is not installed, to install it. A stand-in systemctl says
   * what the real one would. */
  {
    char bin[400], manager[400], fake[600], path_env[900];
    const char *path = getenv("PATH");
    snprintf(bin, sizeof bin, "%s/fakebin", env.root);
    snprintf(manager, sizeof manager, "%s/systemd", env.runtime_dir);
    ASSERT_EQ(mkdir(bin, 0700), 0);
    ASSERT_EQ(mkdir(manager, 0700), 0);
    ASSERT_EQ(
        ctl_sh("python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "
               "'%s/private'",
               manager),
        0);
    snprintf(fake, sizeof fake, "%s/systemctl", bin);
    ctl_write_file(fake,
                   "#!/bin/sh\ncase \"$*\" in\n*is-active*) echo inactive; exit 3;;\n"
                   "*is-enabled*) echo disabled; exit 1;;\nesac\nexit 1\n",
                   strlen("#!/bin/sh\ncase \"$*\" in\n*is-active*) echo inactive; exit 3;;\n"
                          "*is-enabled*) echo disabled; exit 1;;\nesac\nexit 1\n"));
    ASSERT_EQ(chmod(fake, 0755), 0);
    snprintf(path_env, sizeof path_env, "PCACHE_LAYER=1 PATH='%s:%s'", bin,
             path ? path : "/usr/bin:/bin");
    ASSERT_EQ(doctor(path_env, "--no-verify"), 4);
    has("pcached.socket is inactive and disabled");
    has("fix: systemctl --user enable --now pcached.socket");
    /* Not installed: systemctl says nothing on stdout for is-enabled. */
    ctl_write_file(
        fake, "#!/bin/sh\ncase \"$*\" in\n*is-active*) echo inactive; exit 3;;\nesac\nexit 1\n",
        strlen("#!/bin/sh\ncase \"$*\" in\n*is-active*) echo inactive; exit 3;;\nesac\nexit 1\n"));
    ASSERT_EQ(doctor(path_env, "--no-verify"), 4);
    has("pcached.socket is not installed for systemd --user");
    has("systemctl --user daemon-reload");
    ASSERT_EQ(ctl_sh("rm -r '%s' '%s'", manager, bin), 0);
  }

  /* A killed daemon's socket file left behind. */
  ctl_start(&env);
  ASSERT_EQ(test_daemon_stop(&env, SIGKILL) & 0x7f, SIGKILL);
  ASSERT_EQ(doctor("PCACHE_LAYER=1", ""), 4);
  has("a socket file is there but no daemon accepts on it");

  /* Usage errors stay 2, as for every command. */
  ASSERT_EQ(doctor("", "--bogus"), 2);
  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
