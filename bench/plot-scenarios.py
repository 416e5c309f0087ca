#!/usr/bin/env python3
"""plot-scenarios.py LOG [REPLAY_LOG] OUT.svg - bench/run-scenarios.sh's
ratios (and run-replay.sh --self-detect's first launch after a driver
update) as one bar chart: for each scenario, the time through pcache over
the time of the same program with no pcache and the driver's disk cache at
its defaults, on a log scale (below 1: pcache is faster). No third-party
modules: it writes the SVG itself."""
import math
import re
import sys


def read_kv(path):
    kv = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_]+)=([-0-9.eE]+)\s*$", line)
            if m:
                kv[m.group(1)] = float(m.group(2))
    return kv


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: plot-scenarios.py SCENARIO_LOG [REPLAY_LOG] OUT.svg")
    kv = read_kv(sys.argv[1])
    replay = read_kv(sys.argv[2]) if len(sys.argv) == 4 else {}
    out = sys.argv[-1]
    series = [("layer", "heavy", "#1f77b4"), ("layer", "light", "#aec7e8"),
              ("lib", "heavy", "#d62728"), ("lib", "light", "#ff9896")]
    groups = [("first run|ever", lambda c, s: kv.get(f"scen_{s}_{c}_ratio_first")),
              ("first run after|enabling pcache", lambda c, s: kv.get(f"scen_{s}_{c}_ratio_enabled")),
              ("warm", lambda c, s: kv.get(f"scen_{s}_{c}_ratio_warm")),
              ("driver cache|emptied",
               lambda c, s: 1 / kv[f"scen_{s}_{c}_speedup_emptied"]
               if kv.get(f"scen_{s}_{c}_speedup_emptied") else None),
              ("fleet, 2nd machine|(launch / warm)",
               lambda c, s: kv.get(f"scen_{s}_{c}_ratio_fleet_launch"))]
    if replay.get("replay_ratio_first_over_warm_default_launch"):
        r = replay["replay_ratio_first_over_warm_default_launch"]
        groups.append(("after a driver update|(launch / warm)",
                       lambda c, s: r if (c, s) == ("lib", "heavy") else None))
    lo, hi = 0.01, 10.0
    w, h, left, top, bottom = 980, 440, 70, 50, 110
    pw, ph = w - left - 20, h - top - bottom
    y = lambda v: top + ph * (math.log10(hi) - math.log10(max(lo, min(hi, v)))) / \
        (math.log10(hi) - math.log10(lo))
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="16" font-size="14">pcache on an NVIDIA H200 (driver '
           f'580.159.04): time through pcache / the same program alone,</text>',
           f'<text x="{left}" y="32" font-size="14">the driver\'s disk cache at its '
           f'defaults on both sides (log scale; below 1: pcache is faster)</text>']
    for v in (0.01, 0.1, 1, 10):
        svg.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="{"#000" if v == 1 else "#ddd"}"/>')
        svg.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    gw = pw / len(groups)
    bw = gw / (len(series) + 1)
    for gi, (name, get) in enumerate(groups):
        x0 = left + gi * gw + bw / 2
        for si, (c, s, color) in enumerate(series):
            v = get(c, s)
            if v is None:
                continue
            x = x0 + si * bw
            y1, y0 = y(v), y(1)
            svg.append(f'<rect x="{x:.1f}" y="{min(y0, y1):.1f}" width="{bw - 2:.1f}" '
                       f'height="{abs(y0 - y1):.1f}" fill="{color}"/>')
            svg.append(f'<text x="{x + (bw - 2) / 2:.1f}" y="{(min(y0, y1) - 3):.1f}" '
                       f'text-anchor="middle" font-size="10">{v:.2g}</text>')
        for li, part in enumerate(name.split("|")):
            svg.append(f'<text x="{left + gi * gw + gw / 2:.1f}" y="{h - bottom + 18 + 14 * li}" '
                       f'text-anchor="middle">{part}</text>')
    for si, (c, s, color) in enumerate(series):
        lx = left + si * 150
        svg.append(f'<rect x="{lx}" y="{h - 40}" width="12" height="12" fill="{color}"/>')
        svg.append(f'<text x="{lx + 16}" y="{h - 30}">{"layer" if c == "layer" else "libpcache"}, '
                   f'{s} set</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
