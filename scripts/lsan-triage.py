#!/usr/bin/env python3
"""lsan-triage.py LOG SRC_DIR BUILD_DIR - after a failed ASan run, say of each
LeakSanitizer report in LOG (ctest's Testing/Temporary/LastTest.log) whether
pcache's code allocated it.

A leak counts as pcache's when any frame of its allocation stack lies in
SRC_DIR (symbolized source path) or in a module under BUILD_DIR. Any other
leak was allocated entirely outside pcache, most likely by the Vulkan driver
or a library it loads after a driver update; the message says so and how to
confirm it with vk_leak_probe, which runs the same Vulkan calls with no
pcache code. Prints nothing when LOG has no leak report. Exit 0 always: it
explains a failure, it does not judge one."""
import re
import sys


def reports(lines):
    """Yields (test, kind, size, frames) for each leak block."""
    test = "?"
    block = None
    for line in lines:
        m = re.match(r'^\d+/\d+ Testing: (\S+)', line) or re.match(r'^Test: (\S+)', line)
        if m:
            test = m.group(1)
        m = re.match(r'^(Direct|Indirect) leak of (\d+) byte', line)
        if m:
            if block:
                yield block
            block = (test, m.group(1), int(m.group(2)), [])
            continue
        if block is not None:
            if re.match(r'^\s+#\d+ ', line):
                block[3].append(line.strip())
            elif line.strip() == "" and block[3]:
                yield block
                block = None
    if block:
        yield block


def where(frame):
    m = re.search(r'\(([^()+]+)\+0x[0-9a-f]+\)', frame)
    if m:
        return m.group(1)
    if '<unknown module>' in frame:
        return '<unknown module>'
    m = re.search(r' in \S+ (\S+?):\d+', frame)
    return m.group(1) if m else frame


def main():
    if len(sys.argv) != 4:
        print(__doc__.split('\n\n')[0], file=sys.stderr)
        return 0
    log, src, build = sys.argv[1:]
    try:
        with open(log, errors='replace') as f:
            lines = f.read().splitlines()
    except OSError:
        return 0
    foreign = {}
    ours = 0
    for test, kind, size, frames in reports(lines):
        # Frame 0 is the sanitizer's own malloc interceptor.
        body = [fr for fr in frames if 'libsanitizer' not in fr and 'asan_' not in fr]
        if any(src + '/' in fr or build + '/' in fr for fr in body):
            ours += 1
            continue
        mods = sorted({where(fr) for fr in body}) or ['(no frames)']
        key = (test, ', '.join(mods))
        foreign[key] = foreign.get(key, 0) + size
    if not foreign:
        return 0
    print('\nlsan-triage: leaks allocated entirely outside pcache (no frame in %s):' % src)
    for (test, mods), size in sorted(foreign.items()):
        print('  %s: %d bytes, in %s' % (test, size, mods))
    if any('<unknown module>' in m for _, m in foreign):
        print('  "<unknown module>" means the module was unloaded before LeakSanitizer ran:\n'
              '  ASan builds keep modules mapped (tests/sanitize/keep_modules.c); check that\n'
              '  the failing program was linked with it (nm -D PROGRAM | grep dlclose).')
    print('  This is most likely the Vulkan driver or a library it loads (Mesa, LLVM),\n'
          '  not pcache. Confirm it with the same Vulkan calls and no pcache code:\n'
          '    ASAN_OPTIONS=detect_leaks=1 %s/tests/sanitize/vk_leak_probe\n'
          '  If the probe reports the same leak, the driver leaks: add its module (never a\n'
          '  pcache file or function) to scripts/lsan.supp, as docs/testing.md describes.'
          % build)
    if ours:
        print('  %d other leak report(s) do have a pcache frame: those are pcache bugs.' % ours)
    return 0


if __name__ == '__main__':
    sys.exit(main())
