"""gpu_ipc's profile per engine of py17's --engine-per-loop jobs:
python3 prof.py prof-send.log ... Each '# uccl.bench engine NAME LOOP rank R
pid P closing' line names the engine whose 'gpu_ipc prof pid P' rows follow
(from that pid). Prints per variant, loop and rank the calls of the rows
that tell how a window went, per window (WINDOWS: the windows each loop ran,
warmup included; default 4 rounds x 300 + 2)."""
import os
import re
import sys

ROWS = ("progress call", "sm batch launch", "sm batch(per copy)", "batch(per copy)",
        "stream query busy", "stream query done", "quiet record", "event record",
        "event query busy", "event query done", "flag write", "message in")
windows = int(os.environ.get("WINDOWS", 4 * 300 + 2))
mark = re.compile(r"# uccl.bench engine (\S+) (\S+) rank (\d) pid (\d+) closing")
row = re.compile(r"gpu_ipc prof pid (\d+): (.+?)\s+(\d+)\s+(\d+)\s+(\d+)$")
for path in sys.argv[1:]:
    owner, prof = {}, {}
    for line in open(path, errors="replace"):
        m = mark.search(line)
        if m:
            owner[m.group(4)] = (m.group(1), m.group(2), int(m.group(3)))
            continue
        m = row.search(line.rstrip())
        if m and m.group(1) in owner:
            key = owner[m.group(1)]
            prof.setdefault(key, {})[m.group(2).strip()] = (int(m.group(3)), int(m.group(4)))
    print("# %s: per window (%d windows a loop), calls (ns/call)" % (path, windows))
    print("%-14s" % "engine" + "".join("%20s" % r[:19] for r in ROWS))
    for key in sorted(prof):
        p = prof[key]
        print("%-14s" % ("%s %s r%d" % key) + "".join(
            "%20s" % ("%.2f (%d)" % (p[r][0] / windows, p[r][1]) if r in p else "-")
            for r in ROWS))
