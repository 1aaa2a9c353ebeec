#!/usr/bin/env python3
"""Session 15's tables from perf_ofi --dump jobs (ofi-device-s15.jobs).

ofi-pairs.py DIR: DIR holds VARIANT-PAIR.txt (variant base or new, pair a..j),
each perf_ofi's op rows and its "#pair op size k raw_s uccl_s ratio" lines.
Per op and size: each job's raw GB/s (median run), its ratio of medians
(the old estimator, uccl / raw), the median of its pairs' own ratios with
quartiles (the new one); then, per variant, the spread of each estimator
across jobs, and the old estimator on the first 7 pairs only (what a
--repeat 7 job of session 14 saw, though its order was not flipped)."""
import glob
import os
import re
import statistics as st
import sys


def load(path):
    pairs = {}
    for line in open(path):
        m = re.match(r"#pair (\w+) (\d+) (\d+) (\S+) (\S+) (\S+)", line)
        if m:
            key = (m.group(1), int(m.group(2)))
            pairs.setdefault(key, []).append((float(m.group(4)), float(m.group(5))))
    return pairs


def q(v, p):
    v = sorted(v)
    pos = p * (len(v) - 1)
    i = int(pos)
    return v[i] + (pos - i) * (v[i + 1] - v[i]) if i + 1 < len(v) else v[-1]


def summarize(runs, window=16, ops=64):
    raw = [r for r, _ in runs]
    ucc = [u for _, u in runs]
    ratios = [r / u for r, u in runs]
    return st.median(raw) / st.median(ucc), st.median(ratios), q(ratios, .25), q(ratios, .75), raw


def main():
    d = sys.argv[1]
    jobs = {}
    for f in sorted(glob.glob(os.path.join(d, "*-?.txt"))):
        name = os.path.basename(f)[:-4]
        var, pair = name.rsplit("-", 1)
        jobs[(var, pair)] = load(f)
    keys = sorted({k for j in jobs.values() for k in j}, key=lambda k: (["write", "read", "send"].index(k[0]), k[1]))
    pairs = sorted({p for _, p in jobs})
    for op, size in keys:
        nbytes = size * 16 * int((64 << 20) / (size * 16))
        print(f"\n### {op} {size // 1024} KiB: uccl / raw per job (ratio of medians | median of pair ratios [q1-q3]); raw GB/s")
        print("| pair | main: raw GB/s | main: medians | main: pairs [q1-q3] | branch: raw GB/s | branch: medians | branch: pairs [q1-q3] |")
        print("|---|---|---|---|---|---|---|")
        col = {"base": {"old": [], "new": [], "old7": [], "raw": [], "iqr": []},
               "new": {"old": [], "new": [], "old7": [], "raw": [], "iqr": []}}
        for p in pairs:
            cells = []
            for var in ("base", "new"):
                runs = jobs.get((var, p), {}).get((op, size))
                if not runs:
                    cells += ["-", "-", "-"]
                    continue
                old, new, q1, q3, raw = summarize(runs)
                old7 = st.median([r for r, _ in runs[:7]]) / st.median([u for _, u in runs[:7]])
                gbs = nbytes / st.median(raw) / 1e9
                c = col[var]
                c["old"].append(old); c["new"].append(new); c["old7"].append(old7)
                c["raw"].append(gbs); c["iqr"].append(q3 - q1)
                cells += [f"{gbs:.2f}", f"{old:.3f}", f"**{new:.3f}** [{q1:.3f}-{q3:.3f}]"]
            print(f"| {p} | " + " | ".join(cells) + " |")
        for var, label in (("base", "main"), ("new", "branch")):
            c = col[var]
            if not c["new"]:
                continue
            print(f"- {label}: raw {min(c['raw']):.2f}-{max(c['raw']):.2f} GB/s across jobs; "
                  f"median of pair ratios: median {st.median(c['new']):.3f} ({min(c['new']):.3f}-{max(c['new']):.3f}), "
                  f">= 0.95 in {sum(x >= 0.95 for x in c['new'])} of {len(c['new'])} jobs, "
                  f"IQR within a job median {st.median(c['iqr']):.3f}; "
                  f"ratio of medians (21 pairs): {st.median(c['old']):.3f} ({min(c['old']):.3f}-{max(c['old']):.3f}); "
                  f"first 7 pairs only: {st.median(c['old7']):.3f} ({min(c['old7']):.3f}-{max(c['old7']):.3f})")
        b, n = col["base"]["new"], col["new"]["new"]
        if b and n and len(b) == len(n):
            better = sum(y > x for x, y in zip(b, n)); same = sum(y == x for x, y in zip(b, n))
            print(f"- pairs of jobs, branch's median of pair ratios above / equal / below main's: "
                  f"{better} / {same} / {len(b) - better - same}; all pairs of runs pooled: main "
                  f"{st.median([r / u for p in pairs for r, u in jobs.get(('base', p), {}).get((op, size), [])]):.3f}, branch "
                  f"{st.median([r / u for p in pairs for r, u in jobs.get(('new', p), {}).get((op, size), [])]):.3f}")


main()
