#!/usr/bin/env python3
"""test_check_docs.py: each check of check_docs.py fails on a small tree
made to break it, and says what it found. Without this, a check that
looked at nothing (a wrong folder, a regular expression that never
matches) would pass for ever on the real tree."""
import contextlib
import io
import os
import shutil
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_docs  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def write(root, path, text):
    path = os.path.join(root, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def broken_tree(root):
    """One fault for each check, and otherwise a tree that passes."""
    write(root, "README.md", "# Top\n\n[there](docs/gone.md), [a heading](CONTRIBUTING.md#no-such)\n"
                             "[fine](CONTRIBUTING.md#rules)\n")
    write(root, "CONTRIBUTING.md", "# Contributing\n\n## Rules\n")
    write(root, "docs/architecture.md", "# Architecture\n\n`common/env.c`, `client/big.c`\n")
    write(root, "tests/docs/oversize.txt", "# allow-list\nclient/split.c  split already\n")
    write(root, "client/big.c", "/* A file with no reason to be long. */\n" + "int x;\n" * 600)
    write(root, "client/split.c", "int y;\n")
    write(root, "client/long_ok.c", "/* A table.\n * Over 600 lines: generated data. */\n" + "int t;\n" * 600)
    write(root, "client/uses_daemon.c", '#include "daemon/store.h"\n#include "common/env.h"\n')
    write(root, "daemon/store.h", "int z;\n")
    # Rooms (check_docs.ROOMS is set to these in main): jobs links the
    # store, and LMDB, which only the store may; net links jobs only, yet
    # includes the store's header; store links net, a circle.
    write(root, "daemon/store/CMakeLists.txt",
          "add_library(pcached_store STATIC store.c)\n"
          "target_link_libraries(pcached_store PUBLIC pcached_net PRIVATE PkgConfig::LMDB)\n")
    write(root, "daemon/store/store_db.h", "int s;\n")
    write(root, "daemon/jobs/CMakeLists.txt",
          "add_library(pcached_jobs STATIC writer.c)\n"
          "target_link_libraries(pcached_jobs PUBLIC pcached_store  # the writer's transactions\n"
          "                      PkgConfig::LMDB)\n")
    write(root, "daemon/jobs/writer.c", '#include "store_db.h"\n#include <lmdb.h>\n')
    write(root, "daemon/net/CMakeLists.txt",
          "add_library(pcached_net STATIC conn.c)\n"
          "target_link_libraries(pcached_net PUBLIC pcached_jobs)\n")
    write(root, "daemon/net/conn.c", '#include "store_db.h"\n')
    write(root, "common/env.h", "int w;\n")
    write(root, "common/env.c", 'const char *v(void) { return getenv("PCACHE_NOWHERE"); }\n')
    write(root, "bench/RESULTS.md", "# Results\n\nlog `results/2026-01-01-h1-gone.log`\n")
    write(root, "bench/results/2026-01-01-h1-warm.log", "x=1\n")
    shutil.copy(os.path.join(ROOT, "bench", "index-results.py"), os.path.join(root, "bench"))


# check: the lines its output must have on the broken tree
EXPECT = {
    "links": ["README.md:3: docs/gone.md: no docs/gone.md",
              "README.md:3: CONTRIBUTING.md#no-such: no heading #no-such"],
    "sizes": ["client/big.c: 601 lines, over 600",
              "tests/docs/oversize.txt:2: client/split.c is 600 lines or fewer now"],
    "layering": ["client/uses_daemon.c:1: includes daemon/store.h: client/ and daemon/ are beside each other"],
    "rooms": ["daemon/store.h: in no room",
              "daemon/jobs/CMakeLists.txt links PkgConfig::LMDB: only daemon/store may",
              "daemon/jobs/writer.c:2: includes <lmdb.h>: only daemon/store uses PkgConfig::LMDB",
              "daemon/net/conn.c:1: includes store_db.h of daemon/store, which pcached_net does not link",
              "rooms linked in a circle: daemon/store -> daemon/net -> daemon/jobs -> daemon/store"],
    "sources": ["docs/architecture.md does not name client/split.c",
                "docs/architecture.md does not name client/uses_daemon.c"],
    "env": ["PCACHE_NOWHERE (read at common/env.c:1) is in no doc"],
    "logs": ["bench/RESULTS.md:3: results/2026-01-01-h1-gone.log: no such log",
             "bench/results/README.md is not what bench/index-results.py makes"],
}
# Lines that must not be there: what the broken tree does right.
NOT_EXPECT = {
    "links": ["#rules"],
    "sizes": ["long_ok.c"],
    "layering": ["common/env.h"],
    "rooms": ["writer.c:1"],
    "sources": ["client/big.c", "common/env.c"],
}


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as root:
        broken_tree(root)
        # The one crossing include of the real tree is not in this one.
        check_docs.LAYER_EXCEPTIONS[:] = []
        # Three rooms of this tree's own; only LMDB is kept to one.
        check_docs.ROOMS.clear()
        check_docs.ROOMS.update({"daemon/store": "pcached_store", "daemon/jobs": "pcached_jobs",
                                 "daemon/net": "pcached_net"})
        check_docs.ROOM_ONLY.clear()
        check_docs.ROOM_ONLY["PkgConfig::LMDB"] = ("daemon/store", "lmdb.h")
        for name, check in check_docs.CHECKS.items():
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = check(root)
            text = out.getvalue()
            missing = [e for e in EXPECT[name] if e not in text]
            wrong = [e for e in NOT_EXPECT.get(name, []) if e in text]
            if rc != 1 or missing or wrong:
                failures += 1
                print(f"FAIL {name}: rc {rc} (want 1); missing {missing}; should not name {wrong}; "
                      f"its output:\n{text}")
            else:
                print(f"ok {name}: fails on the broken tree, as it should")
    if failures:
        print(f"{failures} check(s) of tests/docs/check_docs.py did not catch their fault: "
              "fix the check, not this test")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
