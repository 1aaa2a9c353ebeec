#!/bin/bash
# host-load.sh RESULTS VMSTAT: for each run of a bench-send.sh log (RESULTS), the host's mean run
# queue and idle % over the run's time (its end and its seconds), from `vmstat -t 2` (VMSTAT)
awk 'FNR == NR { if ($1 ~ /^[0-9]+$/ && NF >= 19) { split($19, t, ":"); s = t[1] * 3600 + t[2] * 60 + t[3]; r[s] = $1; id[s] = $15 }; next }
/ round [0-9]+ / { split($2, t, ":"); e = t[1] * 3600 + t[2] * 60 + t[3]; for (i = 1; i <= NF; i++) if ($i == "s," && $(i - 1) ~ /^[0-9.]+$/ && $(i-2) !~ /stall/) d = $(i - 1)
	n = 0; sr = 0; si = 0; for (x = int(e - d); x <= e; x++) if (x in r) { n++; sr += r[x]; si += id[x] }
	col = $7; sub(":", "", col); printf "%s round %s %-8s %s Gb/s  host r %5.1f idle %3.0f%% (%d samples)\n", $2, $6, col, $8, n ? sr / n : -1, n ? si / n : -1, n }' "$2" "$1"
