#!/bin/bash
# coll21's device call (kind nvidia-h200, host cores only), run from
# .dev/coll21 (this branch: main ca4b8da's library + tests/perf scripts)
# beside .dev/coll21-base (git archive ad47cc8: main before coll19's merge
# 2b73b38). Table: 5 rounds, base and mine, ob1 and ucx in every job;
# focus: allgather np 4, 128 B .. 4 KiB, 10 rounds of base, mine and
# nofast (mine with coll19's blocking MAPPED short path switched off).
set -u
OUT=${OUT:?}
{ date -u; nvidia-smi -L; nproc; lscpu | grep -E "Model name|NUMA node\(s\)"
  echo "base: ad47cc8 (.dev/coll21-base); mine: coll21 = main ca4b8da's library"; } >"$OUT/info.txt" 2>&1
AB_BASE=../coll21-base AB_ROUNDS=5 AB_UCX=every AB_TABLE="base mine" \
    AB_FOCUS="allgather 4 128 10" \
    AB_VARIANTS='nofast=s/if (s != NULL \&\& s->pinned \&\& !cs->trace/if (0 \&\& s != NULL \&\& s->pinned \&\& !cs->trace/' \
    timeout 520 bash tests/perf/coll-ab-device.sh >"$OUT/log.txt" 2>&1
echo "rc $?" >>"$OUT/info.txt"
date -u >>"$OUT/info.txt"
