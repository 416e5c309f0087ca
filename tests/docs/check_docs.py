#!/usr/bin/env python3
"""check_docs.py CHECK [ROOT]: checks that keep the docs and the tree's
shape true (docs/architecture.md "Checks on the tree's shape"). ROOT is
the top of the source tree (default: two folders up). CHECK is one of:

  links     every relative link in README.md, CONTRIBUTING.md, docs/*.md
            and bench/**/*.md names a file that exists, and a #anchor a
            heading of that file (GitHub's slugs)
  sizes     no .c/.h file of the code folders is over 600 lines, unless its
            opening comment has a line "Over 600 lines: WHY" or it is in
            tests/docs/oversize.txt
  layering  an #include from one folder into another keeps the layers
            (LAYERS below)
  rooms     a daemon room includes headers only of the rooms its CMake
            target links, the links go round in no circle, and only the
            store links LMDB, only the fleet hiredis (ROOMS below)
  sources   docs/architecture.md names every .c file of the code folders
  env       every PCACHE_* variable the code reads is named in the docs
  logs      every benchmark log bench/RESULTS.md and bench/HISTORY.md name
            exists, and bench/results/README.md is up to date

tests/docs/test_check_docs.py shows that each of them can fail.

Each prints what is wrong and how to fix it, and exits 1; 0 when all is
well, with a line saying how much it checked (so a check that checked
nothing shows)."""
import os
import re
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "install"))
import doc_links  # noqa: E402  (the installed tree's link check; one slug rule)

# The folders whose code the size, sources and env checks read, recursively
# (daemon/ may get sub-folders).
CODE_DIRS = ["include", "common", "proto", "client", "daemon", "tools", "layer", "replay",
             "examples", "bench"]
LIMIT = 600
OVERSIZE = os.path.join("tests", "docs", "oversize.txt")

# The layers (docs/architecture.md "The layers"), as data. A file may
# include a header of its own folder or of a folder of lower rank: never
# one of higher rank, nor one of another folder of the same rank (client/
# and daemon/ share only what common/ and proto/ hold). A file's folder is
# the first part of its path, so daemon/store/x.c is in daemon.
LAYERS = {
    "include": 0,
    "common": 1,
    "proto": 2,
    "client": 3, "daemon": 3, "tools": 3,
    "layer": 4, "replay": 4,
}
# Folders that may include anything: they exercise or show the code.
INCLUDE_ANYTHING = {"examples", "bench", "tests"}
# Includes that cross the layers on purpose: (file, header as written, why).
# The check fails when one is no longer in the tree, so the list stays true.
LAYER_EXCEPTIONS = [
    ("tools/verb_fleet.c", "daemon/fleet/trust/remote_trust.h",
     "pcachectl fleet keygen writes the key files with the daemon's own reader and writer "
     "(daemon/fleet/trust/CMakeLists.txt: pcached_fleet_trust, a library of its own)"),
]
# Where a quoted include is looked for after the including file's folder:
# the include directories the targets set (the tree's top, include/ and
# proto/, PUBLIC for pcache_proto); a file of daemon/ also finds the
# headers of the daemon's rooms (ROOMS below: each room's target makes its
# folder a PUBLIC include directory), before proto/ as CMake orders them.
INCLUDE_PATH = ["", "include", "proto"]

# The daemon's rooms (docs/architecture.md "The daemon's rooms"): each
# folder of daemon/ and the CMake target it builds. The rooms check reads
# each room's CMakeLists.txt: a file of a room may include a header of its
# own room, or of a room whose target its room's target links by name
# (target_link_libraries); the links go round in no circle; and the
# libraries of ROOM_ONLY are linked, and their headers included, by their
# room alone.
ROOMS = {
    "daemon/store": "pcached_store",
    "daemon/fleet/trust": "pcached_fleet_trust",
    "daemon/fleet/pack": "pcached_fleet_pack",
    "daemon/jobs": "pcached_jobs",
    "daemon/net": "pcached_net",
    "daemon/fleet": "pcached_fleet",
    "daemon/reads": "pcached_reads",
    "daemon/replay": "pcached_replay",
    "daemon/start": "pcached_core",
}
# What only one room may link, and the headers that come with it.
ROOM_ONLY = {
    "PkgConfig::LMDB": ("daemon/store", "lmdb.h"),
    "PkgConfig::HIREDIS": ("daemon/fleet", "hiredis/"),
    "PkgConfig::SODIUM": ("daemon/fleet/trust", "sodium.h"),
}

DOC_FILES_GLOBS = ["README.md", "CONTRIBUTING.md", "docs", "bench"]


def rel(root, path):
    return os.path.relpath(path, root)


def code_files(root, exts):
    for top in CODE_DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(files):
                if name.endswith(exts):
                    yield os.path.join(dirpath, name)


def markdown_files(root):
    out = [os.path.join(root, "README.md"), os.path.join(root, "CONTRIBUTING.md")]
    out += sorted(os.path.join(root, "docs", n) for n in os.listdir(os.path.join(root, "docs"))
                  if n.endswith(".md"))
    for dirpath, dirnames, files in os.walk(os.path.join(root, "bench")):
        dirnames.sort()
        out += [os.path.join(dirpath, n) for n in sorted(files) if n.endswith(".md")]
    return out


def check_links(root):
    broken, checked, cache = [], 0, {}
    files = markdown_files(root)
    for path in files:
        b, n = doc_links.broken_links(path, root, cache)
        broken += b
        checked += n
    for b in broken:
        print(f"broken link: {b}")
    if broken:
        print(f"{len(broken)} broken link(s): point each at a file that exists, or at a heading "
              "of it as GitHub makes its anchor (lower case, punctuation dropped, spaces to '-'); "
              "a moved section keeps its heading, so only the file part changes")
        return 1
    print(f"links: {checked} relative links in {len(files)} files, all resolve")
    return 0


def opening_comment(path):
    """The file's first comment block: a /* */ block or a run of // lines."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    text = text.lstrip()
    if text.startswith("/*"):
        end = text.find("*/")
        return text[: end if end >= 0 else len(text)]
    lines = []
    for line in text.splitlines():
        if not line.lstrip().startswith("//"):
            break
        lines.append(line)
    return "\n".join(lines)


def read_oversize(root):
    allowed = {}
    with open(os.path.join(root, OVERSIZE), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            path, _, why = line.partition(" ")
            allowed[path] = (number, why.strip())
    return allowed


def check_sizes(root):
    allowed = read_oversize(root)
    bad, long_ok, seen, count = [], [], set(), 0
    for path in code_files(root, (".c", ".h")):
        count += 1
        name = rel(root, path)
        with open(path, encoding="utf-8", errors="replace") as f:
            n = sum(1 for _ in f)
        if n <= LIMIT:
            continue
        if re.search(r"^\W*Over 600 lines:\s*\S", opening_comment(path), re.M):
            long_ok.append(name)
        elif name in allowed:
            seen.add(name)
        else:
            bad.append(f"{name}: {n} lines, over {LIMIT}")
    stale = [f"tests/docs/oversize.txt:{line}: {p} is {LIMIT} lines or fewer now, or gone: "
             "remove its line" for p, (line, _) in sorted(allowed.items()) if p not in seen]
    for b in bad:
        print(b)
    for s in stale:
        print(s)
    if bad:
        print(f"split each file above into files of one concern each, at most {LIMIT} lines "
              "(docs/architecture.md says where each concern lives); a file that must stay long "
              "says why on a line 'Over 600 lines: WHY' in its opening comment")
    if bad or stale:
        return 1
    print(f"sizes: {count} files, {len(seen)} over {LIMIT} on tests/docs/oversize.txt, "
          f"{len(long_ok)} with an 'Over 600 lines:' reason")
    return 0


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(root, path):
    """The top folder of a path inside the tree, or None outside it."""
    r = rel(root, path)
    if r.startswith(".."):
        return None
    return r.split(os.sep)[0]


def resolve(root, src, header, quoted):
    """The file a #include names, looked for as the compiler would: a
    quoted one first beside the including file, then (from daemon/) in
    the rooms' folders, then on INCLUDE_PATH."""
    path = INCLUDE_PATH
    if folder_of(root, src) == "daemon":
        path = INCLUDE_PATH[:2] + list(ROOMS) + INCLUDE_PATH[2:]
    dirs = ([os.path.dirname(src)] if quoted else []) + [os.path.join(root, d) for d in path]
    for d in dirs:
        p = os.path.normpath(os.path.join(d, header))
        if os.path.isfile(p):
            return p
    return None  # a system or generated header


def check_layering(root):
    exceptions = {(f, h): why for f, h, why in LAYER_EXCEPTIONS}
    used, bad, count = set(), [], 0
    tops = sorted(set(LAYERS) | INCLUDE_ANYTHING)
    for top in tops:
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                src = os.path.join(dirpath, name)
                with open(src, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, src, m.group(2), m.group(1) == '"')
                        if target is None:
                            continue
                        count += 1
                        a, b = top, folder_of(root, target)
                        if a in INCLUDE_ANYTHING or a == b or b not in LAYERS:
                            continue
                        if b in INCLUDE_ANYTHING:
                            why = f"{a}/ may not include from {b}/ (tests, benchmarks and examples are above every layer)"
                        elif LAYERS[b] > LAYERS[a]:
                            why = f"{b}/ is above {a}/"
                        elif LAYERS[b] == LAYERS[a]:
                            why = f"{a}/ and {b}/ are beside each other"
                        else:
                            continue
                        key = (rel(root, src), m.group(2))
                        if key in exceptions:
                            used.add(key)
                            continue
                        bad.append(f"{rel(root, src)}:{number}: includes {m.group(2)}: {why}")
    stale = [f"tests/docs/check_docs.py LAYER_EXCEPTIONS: {f} no longer includes {h}: "
             "remove or correct its entry" for f, h in exceptions if (f, h) not in used]
    for b in bad:
        print(b)
    for s in stale:
        print(s)
    if bad:
        print("the layers (docs/architecture.md \"The layers\"): include < common < proto < "
              "client, daemon, tools < layer, replay. Move what both sides need down into "
              "common/ or proto/, or pass it up through a callback; an include that must cross "
              "goes in LAYER_EXCEPTIONS in tests/docs/check_docs.py with its reason")
    if bad or stale:
        return 1
    print(f"layering: {count} includes of the tree's own headers, "
          f"{len(used)} crossing on purpose (LAYER_EXCEPTIONS)")
    return 0


CMAKE_CALL = re.compile(r"\b(add_library|add_executable|target_link_libraries)\s*\(([^)]*)\)", re.S)


def room_links(root, room):
    """The targets a room's CMakeLists.txt defines, and every name its
    target_link_libraries calls name (keywords and all)."""
    path = os.path.join(root, room, "CMakeLists.txt")
    if not os.path.isfile(path):
        return None, None
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"#[^\n]*", "", f.read())
    targets, links = set(), set()
    for call, args in CMAKE_CALL.findall(text):
        words = args.split()
        if call == "target_link_libraries":
            links.update(words[1:])
        elif words:
            targets.add(words[0])
    return targets, links


def room_of_path(root, path):
    """The room a file of daemon/ is in: its folder, when that is a room."""
    d = rel(root, os.path.dirname(path))
    return d if d in ROOMS else None


def check_rooms(root):
    bad, links, count = [], {}, 0
    targets = {t: r for r, t in ROOMS.items()}
    for room, target in ROOMS.items():
        defined, named = room_links(root, room)
        if defined is None:
            bad.append(f"{room}/CMakeLists.txt: missing (every room builds its target there)")
            continue
        if target not in defined:
            bad.append(f"{room}/CMakeLists.txt defines no {target} (ROOMS in tests/docs/check_docs.py)")
        links[room] = {targets[n] for n in named if n in targets and targets[n] != room}
        for lib, (only, _) in ROOM_ONLY.items():
            if lib in named and room != only:
                bad.append(f"{room}/CMakeLists.txt links {lib}: only {only} may")
            if lib not in named and room == only:
                bad.append(f"{room}/CMakeLists.txt links no {lib}: correct ROOM_ONLY")
    for dirpath, dirnames, files in os.walk(os.path.join(root, "daemon")):
        dirnames.sort()
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            src = os.path.join(dirpath, name)
            room = room_of_path(root, src)
            if room is None:
                bad.append(f"{rel(root, src)}: in no room (a folder of ROOMS in tests/docs/check_docs.py)")
                continue
            with open(src, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    header = m.group(2)
                    for lib, (only, prefix) in ROOM_ONLY.items():
                        if header.startswith(prefix) and room != only:
                            bad.append(f"{rel(root, src)}:{number}: includes <{header}>: only {only} "
                                       f"uses {lib}")
                    target = resolve(root, src, header, m.group(1) == '"')
                    there = room_of_path(root, target) if target else None
                    if there is None:
                        continue
                    count += 1
                    if there != room and there not in links.get(room, ()):
                        bad.append(f"{rel(root, src)}:{number}: includes {header} of {there}, "
                                   f"which {ROOMS[room]} does not link")
    # A circle of static libraries links by luck of order, if at all.
    state = {}

    def visit(room, path):
        state[room] = 1
        for nxt in sorted(links.get(room, ())):
            if state.get(nxt) == 1:
                bad.append("rooms linked in a circle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[room] = 2

    for room in ROOMS:
        if room not in state:
            visit(room, [room])
    for b in bad:
        print(b)
    if bad:
        print("the daemon's rooms (docs/architecture.md \"The daemon's rooms\"): a room uses another "
              "only by linking its target in its CMakeLists.txt, and never so that the links go round; "
              "what a room would need from one above it, it gets through a callback the room above "
              "installs; only daemon/store links LMDB, only daemon/fleet hiredis")
        return 1
    arrows = sum(len(v) for v in links.values())
    print(f"rooms: {len(ROOMS)} rooms, {arrows} links between them, no circle; {count} includes "
          "of room headers, each of its own room or of one it links")
    return 0


def check_sources(root):
    doc = os.path.join(root, "docs", "architecture.md")
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    files = [rel(root, p) for p in code_files(root, (".c",))]
    names = {}
    for p in files:
        names.setdefault(os.path.basename(p), []).append(p)
    missing = []
    for p in files:
        if re.search(r"(?<![\w./-])" + re.escape(p) + r"(?![\w])", text):
            continue
        base = os.path.basename(p)
        # A bare file name counts only where no other code folder has one of
        # that name, and not as the tail of another path.
        if len(names[base]) == 1 and re.search(r"(?<![\w./-])" + re.escape(base) + r"(?![\w])", text):
            continue
        missing.append(p)
    for p in missing:
        print(f"docs/architecture.md does not name {p}")
    if missing:
        print(f"{len(missing)} source file(s) unnamed: add each to docs/architecture.md "
              "\"Concerns, by name\" with what it holds (its opening comment says), by its path "
              "(a bare file name is enough only when no other folder has one of that name)")
        return 1
    print(f"sources: docs/architecture.md names all {len(files)} .c files")
    return 0


ENV_NOT_DOCS = {os.path.join("bench", "HISTORY.md"), os.path.join("bench", "RESULTS.md"),
                os.path.join("bench", "results", "README.md")}
ENV_READ = re.compile(r'\b\w*env\w*\s*\(\s*"(PCACHE_[A-Z0-9_]+)"')


def check_env(root):
    read = {}
    for path in code_files(root, (".c", ".h")):
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                for m in ENV_READ.finditer(line):
                    read.setdefault(m.group(1), f"{rel(root, path)}:{number}")
    # The docs a reader looks in for a variable: not the benchmark history
    # or the log index, where a name is a record of a run, not a manual.
    docs = [p for p in markdown_files(root) if rel(root, p) not in ENV_NOT_DOCS]
    docs += [os.path.join(root, "docs", n) for n in ("pcachectl.1", "pcached.8", "pcache-replay.8")]
    text = ""
    for d in docs:
        if os.path.exists(d):
            with open(d, encoding="utf-8") as f:
                text += f.read()
    missing = [(v, w) for v, w in sorted(read.items())
               if not re.search(r"(?<![A-Z0-9_])" + v + r"(?![A-Z0-9_])", text)]
    for v, w in missing:
        print(f"{v} (read at {w}) is in no doc")
    if missing:
        print("document each variable above where its readers are described: README.md's "
              "\"Environment variables\" for a user's, docs/replay.md for the replayer's, "
              "bench/README.md for the benchmarks'")
        return 1
    print(f"env: all {len(read)} PCACHE_* variables the code reads are documented")
    return 0


def check_logs(root):
    sys.path.insert(0, os.path.join(root, "bench"))
    index = __import__("index-results")
    bench = os.path.join(root, "bench")
    named, missing = index.where_named(bench)
    for m in missing:
        print(f"{m}: no such log in bench/results/: correct the name, or add the log")
    readme = os.path.join(bench, "results", "README.md")
    stale = False
    if not os.path.exists(readme):
        stale = True
    else:
        with open(readme, encoding="utf-8") as f:
            stale = f.read() != index.index(bench)
    if stale:
        print("bench/results/README.md is not what bench/index-results.py makes of the logs: "
              "run bench/index-results.py and commit its output")
    if missing or stale:
        return 1
    print(f"logs: {len(named)} logs named in bench/RESULTS.md and bench/HISTORY.md, all there; "
          "bench/results/README.md up to date")
    return 0


CHECKS = {"links": check_links, "sizes": check_sizes, "layering": check_layering,
          "rooms": check_rooms, "sources": check_sources, "env": check_env, "logs": check_logs}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in CHECKS:
        print(__doc__)
        return 2
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "..")
    return CHECKS[sys.argv[1]](os.path.abspath(root))


if __name__ == "__main__":
    sys.exit(main())
