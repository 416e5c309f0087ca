#!/usr/bin/env python3
"""call-cycles.py - checks that no two source files call each other in a loop
(CONTRIBUTING.md, docs/architecture.md "The layers").

    scripts/call-cycles.py [--edges] [BUILD_DIR] [DIR...]

Reads the object files of a configured and built tree (BUILD_DIR, default
build-test) with nm: each object's defined global symbols and the symbols it
leaves undefined. A file refers to another when it uses a symbol the other
defines (a call, or the address of a function or table). Over the sources
under DIR... (default: common proto client daemon tools replay) it prints
each loop of files that refer to each other, directly or around a longer
loop (a strongly connected component of more than one file), and exits 1
when there is one; 0 and a one-line count when there is none.

--edges also prints every file's references, one line a file.

What it cannot see: static inline functions in headers (they are not in
any object's symbol table) and calls through function pointers (a callback
installed by a higher layer is the sanctioned way up, and is not a
reference by name).
"""
import os
import subprocess
import sys

DEFAULT_DIRS = ["common", "proto", "client", "layer", "daemon", "tools", "replay"]


def source_of(build, obj):
    """Maps BUILD/<dir>/CMakeFiles/<target>.dir/<path>.o to <dir>/<path>."""
    rel = os.path.relpath(obj, build)
    parts = rel.split(os.sep)
    if "CMakeFiles" not in parts:
        return None
    i = parts.index("CMakeFiles")
    top = parts[:i]
    rest = parts[i + 2:]  # past CMakeFiles/<target>.dir
    if not rest or not rest[-1].endswith(".o"):
        return None
    rest[-1] = rest[-1][:-2]
    # Sources outside the target's directory are written with __ for ..
    path = os.path.normpath(os.path.join(*(top + [".." if p == "__" else p for p in rest])))
    return path


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRCGSVWiu":  # global definitions (upper case, weak, unique)
            defined.add(name)
    return defined, undefined


def sccs(nodes, edges):
    """Tarjan's algorithm, iterative: the strongly connected components."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main(argv):
    show_edges = "--edges" in argv
    args = [a for a in argv if a != "--edges"]
    if any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0
    build = args[0] if args else "build-test"
    dirs = args[1:] or DEFAULT_DIRS
    if not os.path.isdir(build):
        print(f"call-cycles: no build directory {build} (build the tree first)", file=sys.stderr)
        return 2
    files = {}  # source -> (defined, undefined)
    for top, _, names in os.walk(build):
        for n in names:
            if not n.endswith(".o"):
                continue
            obj = os.path.join(top, n)
            src = source_of(build, obj)
            if not src or src.split(os.sep)[0] not in dirs or src in files:
                continue
            files[src] = symbols(obj)
    if not files:
        print(f"call-cycles: no object files of {' '.join(dirs)} under {build}", file=sys.stderr)
        return 2
    owner = {}
    for src, (defined, _) in files.items():
        for s in defined:
            owner.setdefault(s, src)
    edges = {}
    for src, (_, undefined) in files.items():
        edges[src] = {owner[s] for s in undefined if s in owner and owner[s] != src}
    if show_edges:
        for src in sorted(edges):
            print(f"{src} -> {' '.join(sorted(edges[src])) or '(nothing)'}")
    loops = [c for c in sccs(set(files), edges) if len(c) > 1]
    n_edges = sum(len(e) for e in edges.values())
    if not loops:
        print(f"call-cycles: no loops among {len(files)} files ({n_edges} references) "
              f"in {' '.join(dirs)}")
        return 0
    for c in loops:
        print(f"loop of {len(c)} files:")
        for src in c:
            inside = sorted(edges[src] & set(c))
            print(f"  {src} -> {' '.join(inside)}")
    print(f"call-cycles: {len(loops)} loop(s) among {len(files)} files")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
