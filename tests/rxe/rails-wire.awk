# rails-wire.awk: for bench-rails-ctl.sh. Input: lines "TIME RAIL0 RAIL1",
# each rail's transmitted bytes (both veths of the pair) so far, sampled a
# few times a second. Each rail that carried at least 1 MiB is active; for
# each, the times it reached 5 % and 95 % of its bytes (interpolated). Over
# the common time (the latest 5 % to the earliest 95 %), prints the rate of
# both rails together in Gb/s, the overlap (the common time over the time
# from the earliest 5 % to the latest 95 %: 1 when the rails ran together)
# and each rail's rate over the common time, then the rate of both over the
# union (the earliest 5 % to the latest 95 %). The common figures are 0 when
# the rails did not overlap; all are 0 when no rail was active.
# -v part=F: only the first F of each rail's bytes count (default 1). For
# uccl_perf with --iters 1, 0.5: after its timed window it moves one more,
# untimed, to verify the data (tools/uccl_perf.c, verify()).
function when(k, want,   i) { # the time rail k's count reached want
	for (i = 2; i < NR && c[k, i] < want; i++);
	if (c[k, i] == c[k, i - 1]) return t[i]
	return t[i - 1] + (t[i] - t[i - 1]) * (want - c[k, i - 1]) / (c[k, i] - c[k, i - 1])
}
function at(k, x,   i) { # rail k's count at time x
	for (i = 2; i < NR && t[i] < x; i++);
	if (t[i] == t[i - 1]) return c[k, i]
	return c[k, i - 1] + (c[k, i] - c[k, i - 1]) * (x - t[i - 1]) / (t[i] - t[i - 1])
}
{ t[NR] = $1; c[0, NR] = $2; c[1, NR] = $3 }
END {
	lo = 0; hi = 1e300; first = 1e300; last = 0; act = 0
	if (part <= 0 || part > 1) part = 1
	for (k = 0; k < 2 && NR >= 2; k++) {
		tot = part * (c[k, NR] - c[k, 1])
		if (tot < 1048576) continue
		act++
		s = when(k, c[k, 1] + 0.05 * tot); e = when(k, c[k, 1] + 0.95 * tot)
		if (s > lo) lo = s
		if (e < hi) hi = e
		if (s < first) first = s
		if (e > last) last = e
	}
	if (act == 0) { print "0 0 0 0 0"; exit }
	u = 0
	for (k = 0; k < 2; k++) u += (at(k, last) - at(k, first)) * 8 / 1e9 / (last - first)
	if (hi <= lo) { printf "0 0 0 0 %.4f\n", u; exit }
	for (k = 0; k < 2; k++) r[k] = (at(k, hi) - at(k, lo)) * 8 / 1e9 / (hi - lo)
	printf "%.4f %.2f %.4f %.4f %.4f\n", r[0] + r[1], (hi - lo) / (last - first), r[0], r[1], u
}
