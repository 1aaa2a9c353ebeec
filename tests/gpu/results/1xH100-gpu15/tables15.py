#!/usr/bin/env python3
"""Per size: uccl/copy us and x copy for each side, median over the rounds
(alternations) of flag-done-device.sh's JSON, with each round's ratio.
usage: tables15.py DIR SIDE,SIDE OP[,OP] WINDOW"""
import glob, json, re, statistics, sys

d, sides, ops, w = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4]
def size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
for op in ops:
    data = {}
    for s in sides:
        for f in sorted(glob.glob(f"{d}/perf_{op}_w{w}_{s}[0-9]*.json")):
            r = int(re.search(r"(\d+)\.json$", f).group(1))
            for row in json.load(open(f))["rows"]:
                data.setdefault(row["size"], {}).setdefault(s, []).append((r, row))
    ack = op == "send"
    print(f"\n**{op}, window {w}** (median over the rounds; rounds in brackets; "
          "each round the median of 3 uccl/copy pairs in one job)\n")
    hdr = "| size |" + "".join(f" {s}: uccl / copy us | {s}: x copy (rounds) |" + (f" {s}: x copy+ack |" if ack else "")
                              for s in sides)
    print(hdr)
    print("|" + "---|" * (1 + len(sides) * (3 if ack else 2)))
    for n in sorted(data):
        line = f"| {size(n)} |"
        for s in sides:
            rows = [row for _, row in sorted(data[n].get(s, []), key=lambda t: t[0])]
            if not rows:
                line += " - | - |" + (" - |" if ack else "")
                continue
            med = lambda k: statistics.median(r[k] for r in rows)
            line += (f" {med('uccl_us'):.2f} / {med('copy_us'):.2f} | {med('ratio_copy'):.3f} ("
                     + " ".join(f"{r['ratio_copy']:.2f}" for r in rows) + ") |")
            if ack:
                line += f" {med('ratio_copy_ack'):.3f} |"
        print(line)
