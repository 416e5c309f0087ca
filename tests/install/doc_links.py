#!/usr/bin/env python3
"""doc_links.py DIR: every relative link in the Markdown files under DIR
resolves there: the file (or directory) it names exists, and an anchor into
a Markdown file names one of its headings (GitHub's rule: lower case,
punctuation but '-' and '_' dropped, spaces to '-', a repeat gets -1, -2...).
Links with a scheme (https:, mailto:, file:) are not checked. Prints each
broken link and exits 1 if there is one."""
import os
import re
import sys

INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(path):
    """The lines outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = re.match(r"^\s{0,3}(`{3,}|~{3,})", line)
            if m:
                if fence is None:
                    fence = m.group(1)[0] * len(m.group(1))
                elif m.group(1).startswith(fence):
                    fence = None
                continue
            if fence is None:
                yield number, line


def anchors(path):
    seen, out = {}, set()
    for _, line in prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2)).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(path, root, cache):
    """The broken relative links of one Markdown file, each as
    'PATH:LINE: TARGET: why' (PATH relative to ROOT), and how many were
    checked. CACHE maps a file to its anchors; tests/docs/check_docs.py
    shares it."""
    broken, checked = [], 0
    dirpath = os.path.dirname(path)
    for number, line in prose_lines(path):
        line = re.sub(r"`+[^`]*`+", "", line)  # code, not links
        targets = [m.group(1) for m in INLINE.finditer(line)]
        m = REFDEF.match(line)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if not target or SCHEME.match(target):
                continue
            checked += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(dirpath, file_part)) if file_part else path
            where = f"{os.path.relpath(path, root)}:{number}: {target}"
            if not os.path.exists(dest):
                broken.append(f"{where}: no {os.path.relpath(dest, root)}")
            elif anchor and dest.endswith(".md"):
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor.lower() not in cache[dest]:
                    broken.append(f"{where}: no heading #{anchor}")
    return broken, checked


def main():
    root = sys.argv[1]
    broken, checked, cache = [], 0, {}
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            b, n = broken_links(os.path.join(dirpath, name), root, cache)
            broken += b
            checked += n
    for b in broken:
        print(f"doc_links: broken link: {b}")
    print(f"doc_links: {checked} relative links checked, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
