#!/usr/bin/env python3
"""programs.py - run one real third-party Vulkan program without and with
pcache's implicit layer (VK_LAYER_PCACHE_pipeline_cache) and check that the
layer caches its pipelines and changes nothing else.

  programs.py --build DIR --program NAME [--pcached PATH] [--pcachectl PATH]
              [--no-layer-checks] [--layer-built 0|1] [--validation on|off]
              [--keep] [--env K=V]...
  programs.py --list

The runs, each in its own scratch directory (fresh HOME, XDG dirs and
MESA_SHADER_CACHE_DIR, the program's own caches there too):
  baseline     without the layer
  run1         with the layer and a fresh private pcached: it compiles and
               uploads every distinct pipeline: sum(compiles) +
               sum(local_hits) == sum(hashable) > 0, no daemon hit
  run2         same daemon: every distinct pipeline is a daemon hit:
               sum(daemon_hits) + sum(local_hits) == sum(hashable),
               compiles == 0 (local_hits: a pipeline the process creates
               again is served by what it built, not asked again)
  vvl-base     baseline under VK_LAYER_KHRONOS_validation
  vvl-miss     the layer, a fresh daemon, under validation
  vvl-hit      the layer, that daemon again, under validation
Each run's exit status, normalised stdout and stderr, and output files must
equal the baseline's; each validation run's set of messages (vvl_messages.py)
must equal vvl-base's. --no-layer-checks (until the layer is built) runs
baseline twice, vvl-base twice and a daemon start and stop instead, and
checks that the program and the message sets are deterministic.

Prints key=value lines, one "fail=..." line per failed check, and ends
with result=PASS, FAIL or SKIP. Exit 0 pass, 1 fail, 77 skipped (the layer
is not built, a program or a package is missing: reason= says which),
2 usage. Work files are removed unless --keep or a check failed."""
import argparse
import ctypes
import glob
import json
import os
import platform
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Run from the source tree: no __pycache__ beside the sources.
sys.dont_write_bytecode = True
import program_table  # noqa: E402
import vvl_messages  # noqa: E402

SKIP = 77
MANIFEST = 'share/vulkan/implicit_layer.d/VkLayer_pcache.json'
VVL_MANIFEST_DIRS = ['/usr/share/vulkan/explicit_layer.d', '/usr/local/share/vulkan/explicit_layer.d',
                     '/etc/vulkan/explicit_layer.d']
# Lines that differ between two runs of the same program however nothing
# changed: frame rates and timings.
COMMON_DROP = [r'\bFPS\b', r'\bfps=', r'^\s*\d+(\.\d+)?\s*s$']
RUN_TIMEOUT_S = 90


class Skip(Exception):
    pass


def _child_setup():
    """Every process the driver starts: its own session (a run that hangs
    is killed with all it started), and killed if the driver dies (a ctest
    timeout must not leave an X server or a daemon behind)."""
    os.setsid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def terminate(proc):
    """SIGTERM, SIGKILL after 10 s; the exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def _base_env(**extra):
    return dict({'PATH': os.environ.get('PATH', '/usr/bin:/bin')}, **extra)


def say(key, value):
    print(f'{key}={value}', flush=True)


def lavapipe_icd(arg):
    if arg:
        return arg
    machine = platform.machine()
    for path in sorted(glob.glob('/usr/share/vulkan/icd.d/lvp_icd*.json')):
        if machine in os.path.basename(path):
            return path
    raise Skip('no lavapipe ICD (/usr/share/vulkan/icd.d/lvp_icd.*.json): mesa-vulkan-drivers')


def write_xauthority(path, cookie):
    """One MIT-MAGIC-COOKIE-1 entry, family FamilyWild and no display
    number: libXau gives it to a client for any display, and the server
    (-auth) takes every cookie of the file whatever its address."""
    def field(b):
        return len(b).to_bytes(2, 'big') + b
    entry = (0xffff).to_bytes(2, 'big') + field(b'') + field(b'') + \
        field(b'MIT-MAGIC-COOKIE-1') + field(cookie)
    with open(path, 'wb') as f:
        f.write(entry)
    os.chmod(path, 0o600)


class Xvfb:
    """A private X server for the programs that need a window. It gets an
    environment with nothing of the test's: Xvfb's GLX loads Mesa, and with
    GALLIUM_DRIVER=zink it would make a Vulkan instance of its own, load
    the layers the tests enable and write into the validation log."""

    def __init__(self, work):
        self.auth = os.path.join(work, 'Xauthority')
        write_xauthority(self.auth, os.urandom(16))
        rfd, wfd = os.pipe()
        self.log = open(os.path.join(work, 'xvfb.log'), 'wb')
        self.proc = subprocess.Popen(
            ['Xvfb', '-displayfd', str(wfd), '-auth', self.auth, '-nolisten', 'tcp',
             '-screen', '0', '1280x1024x24'],
            env=_base_env(), stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            pass_fds=[wfd], preexec_fn=_child_setup)
        os.close(wfd)
        got = b''
        deadline = time.monotonic() + 20
        while not got.endswith(b'\n') and time.monotonic() < deadline:
            ready, _, _ = select.select([rfd], [], [], 0.5)
            if ready:
                chunk = os.read(rfd, 16)
                if not chunk:
                    break
                got += chunk
        os.close(rfd)
        if not got.strip().isdigit():
            self.stop()
            raise RuntimeError('Xvfb did not start (see xvfb.log)')
        self.display = ':' + got.strip().decode()

    def stop(self):
        terminate(self.proc)
        self.log.close()


class Daemon:
    """A private pcached on the test's XDG_RUNTIME_DIR, as
    tests/common/harness.c starts one: scratch socket and data dir, debug
    log. Ready means pcachectl status is answered (pcached listens before
    its store is open)."""

    def __init__(self, args, runtime_dir, data_dir, log_path):
        self.args = args
        self.socket = os.path.join(runtime_dir, 'pcache', 'socket')
        self.log_path = log_path
        self.log = open(log_path, 'ab')
        self.proc = subprocess.Popen(
            [args.pcached, '--socket', self.socket, '--data-dir', data_dir, '--log-level', 'debug'],
            env=_base_env(XDG_RUNTIME_DIR=runtime_dir, HOME=runtime_dir), stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=_child_setup)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f'pcached exited during start-up ({self.proc.returncode}), '
                                   f'log: {log_path}')
            if self.ctl('status')[0] == 0:
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f'pcached did not answer within 10 s, log: {log_path}')

    def ctl(self, *verb):
        r = subprocess.run([self.args.pcachectl, '--socket', self.socket, '--timeout', '5'] +
                           list(verb), env=_base_env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
        return r.returncode, r.stdout

    def status(self):
        """The daemon's counters (pcachectl status --json) as key=value."""
        rc, out = self.ctl('--json', 'status')
        if rc != 0:
            return f'unreachable(pcachectl exit {rc})'
        st = json.loads(out)
        return ' '.join(f'{k}={st.get(k)}' for k in ('entries', 'hits', 'misses', 'puts',
                                                      'put_rejected', 'checksum_failures'))

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM, and the exit status (SIGKILL after 10 s: -9)."""
        rc = terminate(self.proc)
        self.log.close()
        return rc


def parse_stats(path):
    """Sums of the layer's per-device lines, the number of lines (devices),
    and {(reason, stype): count} of its unhashable lines."""
    sums = {k: 0 for k in ('pipelines', 'hashable', 'daemon_hits', 'local_hits', 'compiles',
                           'uploaded', 'unhashable')}
    devices, reasons, apps = 0, {}, set()
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        words = line.split()
        if not words:
            continue
        kv = dict(w.split('=', 1) for w in words[1:] if '=' in w)
        if words[0] == 'pcache-layer':
            devices += 1
            apps.add(kv.get('app', '?'))
            for k in sums:
                sums[k] += int(kv.get(k, 0))
        elif words[0] == 'pcache-layer-unhashable':
            key = (kv.get('reason', '?'), kv.get('stype', '?'))
            reasons[key] = reasons.get(key, 0) + int(kv.get('count', 0))
    return sums, devices, reasons, apps


class Test:
    def __init__(self, args, program):
        self.args = args
        self.p = program
        self.fails = []
        self.work = tempfile.mkdtemp(prefix=f'pcache-programs-{program.name}-',
                                     dir=os.environ.get('TMPDIR') or '/tmp')
        self.runtime = os.path.join(self.work, 'run')
        os.mkdir(self.runtime, 0o700)
        self.empty_data = os.path.join(self.work, 'no-layers')
        os.mkdir(self.empty_data)
        self.icd = lavapipe_icd(args.icd)
        self.x = None
        self.daemon = None
        self.daemons = 0
        self.subst = {}
        self.baseline = None

    def fail(self, why):
        self.fails.append(why)
        say('fail', why)

    # The environment: built from nothing, so nothing of the caller's
    # (DISPLAY, VK_*, a user's layers, PCACHE_*) reaches a run.
    def env(self, run_dir, layer, vvl_log=None):
        home = os.path.join(run_dir, 'home')
        os.makedirs(home, exist_ok=True)
        env = _base_env(**{
            'LC_ALL': 'C.UTF-8', 'HOME': home,
            'XDG_CONFIG_HOME': os.path.join(home, '.config'),
            'XDG_CACHE_HOME': os.path.join(home, '.cache'),
            'XDG_RUNTIME_DIR': self.runtime,
            'MESA_SHADER_CACHE_DIR': os.path.join(run_dir, 'mesa-shader-cache'),
            'VK_ICD_FILENAMES': self.icd,
            'XDG_DATA_HOME': self.empty_data,
            # Built once before the runs (gstreamer): no run scans plugins.
            'GST_REGISTRY': os.path.join(self.work, 'gst-registry.bin'),
            'GST_REGISTRY_UPDATE': 'no',
        })
        if self.x:
            env.update(DISPLAY=self.x.display, XAUTHORITY=self.x.auth)
        env.update(self.p.env)
        if layer:
            env.update(XDG_DATA_HOME=os.path.join(self.args.build, 'share'), PCACHE_LAYER='1',
                       PCACHE_SOCKET=self.daemon.socket,
                       PCACHE_LAYER_STATS_FILE=os.path.join(run_dir, 'layer-stats'))
        else:
            env['PCACHE_LAYER_DISABLE'] = '1'
        if vvl_log:
            settings = os.path.join(run_dir, 'vk_layer_settings.txt')
            with open(settings, 'w') as f:
                f.write(vvl_messages.settings_text(vvl_log))
            env.update(VK_INSTANCE_LAYERS='VK_LAYER_KHRONOS_validation',
                       VK_LAYER_SETTINGS_PATH=settings)
        for kv in self.args.env:
            k, _, v = kv.partition('=')
            env[k] = v
        return env

    def run(self, name, layer=False, vvl=False):
        """Runs the program once; returns its result (a dict)."""
        run_dir = os.path.join(self.work, name)
        os.mkdir(run_dir)
        vvl_log = os.path.join(run_dir, 'vvl.log') if vvl else None
        env = self.env(run_dir, layer, vvl_log)
        argv = [a.format(**self.subst) for a in self.p.argv]
        out_path, err_path = os.path.join(run_dir, 'stdout'), os.path.join(run_dir, 'stderr')
        t0 = time.monotonic()
        with open(out_path, 'wb') as out, open(err_path, 'wb') as err:
            proc = subprocess.Popen(argv, cwd=run_dir, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, preexec_fn=_child_setup)
            try:
                rc = proc.wait(RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = 'timeout'
        wall = time.monotonic() - t0
        say(f'{name}.rc', rc)
        say(f'{name}.wall_s', f'{wall:.1f}')
        res = {'name': name, 'rc': rc, 'wall': wall, 'dir': run_dir,
               'stdout': self.normalised(out_path), 'stderr': self.normalised(err_path)}
        both = '\n'.join(res['stdout'] + res['stderr'])
        for rx in self.p.expect:
            if not re.search(rx, both, re.M):
                self.fail(f'{name}: output lacks /{rx}/ (see {out_path}, {err_path})')
        if vvl:
            counts = vvl_messages.read_counts([vvl_log])
            active = counts.pop(vvl_messages.STATUS_VUID, 0)
            say(f'{name}.vvl_active', active)
            if not active:
                self.fail(f'{name}: the validation layer logged nothing to {vvl_log}: not loaded?')
            res['vvl'] = {}
            for m, n in counts.items():
                if m.split(' ', 1)[0] in self.p.vvl_racy:
                    say(f'{name}.vvl_racy', f'{n}x {m}')
                else:
                    res['vvl'][m] = n
        if layer:
            res['stats'] = parse_stats(env['PCACHE_LAYER_STATS_FILE'])
            if self.daemon.alive():
                say(f'{name}.daemon', self.daemon.status())
            else:
                self.fail(f'{name}: pcached died during the run (log: {self.daemon.log_path})')
        return res

    def normalised(self, path):
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = f.read().splitlines()
        drops = [re.compile(rx) for rx in COMMON_DROP + self.p.drop]
        return [ln for ln in lines if not any(rx.search(ln) for rx in drops)]

    def same_as(self, res, base):
        """The program's visible result equals base's."""
        ok = True
        if res['rc'] != base['rc']:
            self.fail(f"{res['name']}: exit status {res['rc']}, {base['name']} {base['rc']}")
            ok = False
        for stream in ('stdout', 'stderr'):
            if res[stream] != base[stream]:
                self.fail(f"{res['name']}: {stream} differs from {base['name']}'s: "
                          f"diff {base['dir']}/{stream} {res['dir']}/{stream}")
                ok = False
        for f in self.p.files:
            a, b = os.path.join(base['dir'], f), os.path.join(res['dir'], f)
            if not (os.path.exists(a) and os.path.exists(b)):
                self.fail(f"{res['name']}: {f} missing ({base['name']}: {os.path.exists(a)}, "
                          f"this run: {os.path.exists(b)})")
                ok = False
            elif not same_file(a, b):
                self.fail(f"{res['name']}: {f} differs from {base['name']}'s: cmp {a} {b}")
                ok = False
        say(f"{res['name']}.output", 'same' if ok else 'DIFFERENT')
        return ok

    def check_stats(self, res, run):
        sums, devices, reasons, apps = res['stats']
        name = res['name']
        say(f'{name}.devices', devices)
        say(f'{name}.apps', ','.join(sorted(apps)) or '-')
        for k, v in sums.items():
            say(f'{name}.{k}', v)
        for (reason, stype), n in sorted(reasons.items()):
            say(f'{name}.unhashable.{reason}.stype{stype}', n)
        if devices == 0:
            self.fail(f'{name}: the layer wrote no stats line: did it load? '
                      f'(manifest {os.path.join(self.args.build, MANIFEST)})')
            return
        if self.p.pipelines and sums['hashable'] == 0:
            self.fail(f"{name}: no hashable pipelines (of {sums['pipelines']})")
        distinct = sums['hashable'] - sums['local_hits']
        if run == 1 and (sums['compiles'] != distinct or sums['daemon_hits'] != 0):
            self.fail(f"{name}: compiles {sums['compiles']}, daemon_hits {sums['daemon_hits']}, "
                      f"distinct hashable {distinct} (a fresh daemon should miss every one)")
        if run == 2 and sums['daemon_hits'] != distinct:
            self.fail(f"{name}: daemon_hits {sums['daemon_hits']} != distinct hashable "
                      f"{distinct}")
        if run == 2 and sums['compiles'] != 0:
            self.fail(f"{name}: compiles {sums['compiles']} != 0 with a warm daemon")

    def same_messages(self, res, base):
        a, b = set(base['vvl']), set(res['vvl'])
        say(f"{res['name']}.vvl_messages", f"{len(b)} distinct, {sum(res['vvl'].values())} in all")
        if a == b:
            say(f"{res['name']}.vvl_set", 'same')
            return
        say(f"{res['name']}.vvl_set", 'DIFFERENT')
        for m in sorted(b - a):
            say(f"{res['name']}.vvl_new", m)
        for m in sorted(a - b):
            say(f"{res['name']}.vvl_gone", m)
        self.fail(f"{res['name']}: validation messages differ from {base['name']}'s "
                  f"({len(b - a)} new, {len(a - b)} gone)")

    def start_daemon(self):
        self.daemons += 1
        tag = f'pcached{self.daemons}'
        self.daemon = Daemon(self.args, self.runtime, os.path.join(self.work, tag),
                             os.path.join(self.work, tag + '.log'))
        say(f'{tag}.pid', self.daemon.proc.pid)

    def stop_daemon(self):
        tag = f'pcached{self.daemons}'
        say(f'{tag}.status', self.daemon.status())
        rc = self.daemon.stop()
        say(f'{tag}.exit', rc)
        if rc != 0:
            self.fail(f'{tag} exited with {rc} on SIGTERM (log: {self.daemon.log_path})')
        self.daemon = None

    def prepare(self):
        """What the program needs before its first run: an X server, the
        GStreamer registry, the lavapipe device's name (mpv)."""
        if self.p.x11:
            self.x = Xvfb(self.work)
            say('display', self.x.display)
        env = self.env(os.path.join(self.work, 'prepare'), layer=False)
        if self.p.probe:
            # Also builds the GStreamer registry the runs then use.
            why = self.p.probe(dict(env, GST_REGISTRY_UPDATE='yes'))
            if why:
                raise Skip(why)
        if any('{lavapipe_name}' in a for a in self.p.argv):
            # Three tries: under a loaded CI machine one vulkaninfo has been
            # seen to print no device list.
            m, r = None, None
            for _ in range(3):
                r = subprocess.run(['vulkaninfo', '--summary'], env=env, capture_output=True,
                                   text=True, stdin=subprocess.DEVNULL)
                m = re.search(r'deviceName\s*=\s*(llvmpipe[^\n]*)', r.stdout)
                if m:
                    break
                time.sleep(1)
            if not m:
                raise Skip('vulkaninfo names no llvmpipe device (vulkan-tools); it exited '
                           f'{r.returncode}: {r.stderr.strip()[-300:]}')
            self.subst['lavapipe_name'] = m.group(1).strip()
            say('lavapipe_name', self.subst['lavapipe_name'])

    def run_baseline(self, name, vvl=False):
        """A run without the layer, which must succeed: every program here
        exits 0 when nothing is wrong. One killed by a signal is run again,
        twice at most: mpv was seen to segfault now and then on lavapipe
        with no layer loaded, on a loaded machine, and that is the
        program's, not pcache's. A program that fails every time fails the
        test."""
        res = self.run(name, vvl=vvl)
        for attempt in (1, 2):
            if not (isinstance(res['rc'], int) and res['rc'] < 0):
                break
            say(f'{name}.crashed_without_layer', res['rc'])
            res = self.run(f'{name}-retry{attempt}', vvl=vvl)
        if res['rc'] != 0:
            self.fail(f"{name}: the program fails without the layer (exit {res['rc']}, "
                      f"see {res['dir']}/stderr)")
        return res

    def layer_runs(self):
        base = self.baseline = self.run_baseline('baseline')
        self.start_daemon()
        for n in (1, 2):
            res = self.run(f'run{n}', layer=True)
            self.check_stats(res, n)
            if not self.same_as(res, base):
                self.explain_difference()
        self.stop_daemon()
        if self.args.validation == 'on':
            vbase = self.run_baseline('vvl-base', vvl=True)
            self.print_messages(vbase)
            self.start_daemon()
            for name in ('vvl-miss', 'vvl-hit'):
                res = self.run(name, layer=True, vvl=True)
                # Only the exit status: under validation libplacebo logs
                # each message into mpv's output, a varying number of times.
                if res['rc'] != vbase['rc']:
                    self.fail(f"{name}: exit status {res['rc']}, vvl-base {vbase['rc']}")
                self.same_messages(res, vbase)
            self.stop_daemon()

    def plumbing_runs(self):
        """Without the layer: the program, the message set and the daemon's
        start and stop must work and be deterministic."""
        base = self.run_baseline('baseline')
        self.same_as(self.run('baseline2'), base)
        if self.args.validation == 'on':
            vbase = self.run_baseline('vvl-base', vvl=True)
            self.print_messages(vbase)
            self.same_messages(self.run('vvl-base2', vvl=True), vbase)
        self.start_daemon()
        self.stop_daemon()

    def explain_difference(self):
        """Is it the layer? Another baseline says whether the program is
        deterministic here at all."""
        if self.baseline.get('rechecked'):
            return
        self.baseline['rechecked'] = True
        again = self.run('baseline-again')
        say('baseline_deterministic', 'yes' if self.same_as(again, self.baseline) else 'NO')

    def print_messages(self, res):
        counts = res['vvl']
        say(f"{res['name']}.vvl_messages", f'{len(counts)} distinct, {sum(counts.values())} in all')
        for m in sorted(counts):
            say(f"{res['name']}.vvl", f'{counts[m]}x {m}')


def same_file(a, b):
    with open(a, 'rb') as fa, open(b, 'rb') as fb:
        return fa.read() == fb.read()


def check_prerequisites(args, program):
    if not args.no_layer_checks:
        if args.layer_built == '0':
            raise Skip('the layer is not part of this build (no layer target yet)')
        if not os.path.exists(os.path.join(args.build, MANIFEST)):
            raise Skip(f'no layer manifest at {os.path.join(args.build, MANIFEST)}')
    missing = program_table.missing_executables(program)
    if program.x11 and not shutil.which('Xvfb'):
        missing.append('Xvfb')
    if missing:
        raise Skip(f'not installed: {" ".join(missing)} (scripts/setup-deps.sh)')
    if args.validation == 'on' and not any(
            os.path.exists(os.path.join(d, 'VkLayer_khronos_validation.json'))
            for d in VVL_MANIFEST_DIRS):
        raise Skip('no VK_LAYER_KHRONOS_validation (vulkan-validationlayers)')
    for path in (args.pcached, args.pcachectl):
        if not os.access(path, os.X_OK):
            raise Skip(f'{path} is not built')


def main(argv):
    ap = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', help='the build directory (its share/ holds the layer manifest)')
    ap.add_argument('--program', help='which program (--list)')
    ap.add_argument('--pcached', help='default BUILD/daemon/pcached')
    ap.add_argument('--pcachectl', help='default BUILD/tools/pcachectl')
    ap.add_argument('--no-layer-checks', action='store_true',
                    help='only the plumbing: baseline determinism, daemon, message sets')
    ap.add_argument('--layer-built', choices=['0', '1'],
                    help='whether the build has the layer target (CMake passes it)')
    ap.add_argument('--validation', choices=['on', 'off'], default='on',
                    help='the runs under VK_LAYER_KHRONOS_validation (default on)')
    ap.add_argument('--icd', help='lavapipe ICD manifest (default: found in /usr/share)')
    ap.add_argument('--keep', action='store_true', help='keep the work directory')
    ap.add_argument('--env', action='append', default=[], metavar='K=V',
                    help='add to every run\'s environment (e.g. VK_LOADER_DEBUG=layer)')
    ap.add_argument('--list', action='store_true', help='list the programs')
    args = ap.parse_args(argv[1:])
    if args.list:
        for p in program_table.PROGRAMS:
            print(f"{p.name}: {' '.join(p.argv)}")
        return 0
    if not args.build or not args.program:
        ap.error('--build and --program are required')
    program = program_table.find(args.program)
    if not program:
        ap.error(f'unknown program {args.program!r} (--list)')
    args.build = os.path.abspath(args.build)
    args.pcached = args.pcached or os.path.join(args.build, 'daemon', 'pcached')
    args.pcachectl = args.pcachectl or os.path.join(args.build, 'tools', 'pcachectl')
    say('program', program.name)
    say('mode', 'plumbing' if args.no_layer_checks else 'layer')
    t0 = time.monotonic()
    test, result = None, 'PASS'
    try:
        check_prerequisites(args, program)
        test = Test(args, program)
        say('work', test.work)
        test.prepare()
        if args.no_layer_checks:
            test.plumbing_runs()
        else:
            test.layer_runs()
    except Skip as e:
        say('reason', e)
        result = 'SKIP'
    except Exception as e:  # any failure of the plumbing fails the test
        if test is None:
            raise
        test.fail(f'{type(e).__name__}: {e}')
    if test and test.fails:
        result = 'FAIL'
    cleanup(test, keep=args.keep or result == 'FAIL')
    say('wall_s', f'{time.monotonic() - t0:.1f}')
    say('result', result)
    return {'PASS': 0, 'FAIL': 1, 'SKIP': SKIP}[result]


def cleanup(test, keep):
    if not test:
        return
    if test.daemon:
        test.daemon.stop()
    if test.x:
        test.x.stop()
    if keep:
        say('kept', test.work)
    else:
        shutil.rmtree(test.work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
