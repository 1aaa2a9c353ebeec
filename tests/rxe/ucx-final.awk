# ucx-final.awk: ucx_perftest's (UCX 1.13, no -f) bandwidth as Gb/s (1e9
# bit/s), or 0 without a "Final:" line (the run failed). Its columns there:
# iterations, latency typical / average / overall (us), bandwidth average /
# overall (MiB/s), message rate average / overall. The figure is column 7, the
# overall bandwidth: every byte over the whole timed run, as uccl_perf and
# perftest count. Column 6, the "average", is the last report interval only
# (since the last once-a-second progress line): in a run longer than a second
# it is the run's tail, e.g. 8.26 MiB/s in a 256 KiB ucp_put_bw run that
# moved 29.93 MiB/s overall (tests/perf/results/cluster/vm14/).
# Used by bench.sh and bench-cluster.sh; tested by test-ucx-final.sh.
$1 == "Final:" { printf "%.4f\n", $7 * 1048576 * 8 / 1e9; ok = 1 }
END { if (!ok) print 0 }
