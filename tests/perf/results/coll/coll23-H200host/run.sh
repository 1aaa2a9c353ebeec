#!/bin/bash
# coll23's device call (kind nvidia-h200, host cores only), run from
# .dev/coll23 (this branch at 2cb733f: coll/ = main + variants.patch, the
# POLL_ALL_LINES knob and the reader's prefetch cap on small slots, both
# no-ops as built; to rerun on a later tree: git apply variants.patch)
# beside .dev/coll23-base (git archive of main 9e08ac6).
# Up to 6 rounds (none started after 80 s) of base (main), l74 (SMALL_LINES 74: per-line flags up to
# 4144 B), l38 (SMALL_LINES 38: up to 2128 B) and l74p (l74, and a reader
# that waits again looks at the last line's flag first: POLL_ALL_LINES 8),
# order rotated per round; np 2 and 4, allgather / bcast / gather /
# scatter, 256 B .. 4 KiB, ob1 and ucx in every job.
set -u
OUT=${OUT:?}
{ date -u; nvidia-smi -L; nproc; lscpu | grep -E "Model name|NUMA node\(s\)"
  echo "base: main $(cat ../coll23-base/COMMIT 2>/dev/null); mine: coll23"; } >"$OUT/info.txt" 2>&1
S='s/^#define SMALL_LINES 6 /#define SMALL_LINES'
AB_STOP_AT=$(($(date +%s) + ${AB_ROUNDS_FOR:-80})) AB_BASE=../coll23-base AB_ROUNDS=${AB_ROUNDS:-6} AB_UCX=every AB_TABLE="base l74 l38 l74p" \
    AB_NP=${AB_NP:-2 4} AB_OPS=${AB_OPS:-allgather bcast gather scatter} AB_MIN=${AB_MIN:-256} \
    AB_VARIANTS="l74=$S 74 /
l38=$S 38 /
l74p=$S 74 /;s/^#define POLL_ALL_LINES 0/#define POLL_ALL_LINES 8/" \
    timeout ${AB_TIMEOUT:-104} bash tests/perf/coll-ab-device.sh >"$OUT/log.txt" 2>&1
echo "rc $?" >>"$OUT/info.txt"
[ -f "$OUT/coll-ab.tgz" ] || tar czf "$OUT/coll-ab.tgz" -C /tmp/coll-ab .
date -u >>"$OUT/info.txt"
