#!/bin/sh
# summary.sh FILE...: ab.sh's output as a table: per size and tool setting,
# the medians (min-max) over rounds 1..N of the wire figure and of the tool's
# own (ucx: its overall bandwidth, the Final: line's column 7, not bench.sh's column 6), then uccl / ucx: ratio of
# the medians and the min-max of the per-round ratios (runs of one round).
awk '
function med(a, n,   t, i, j, v) { for (i = 1; i <= n; i++) t[i] = a[i]
	for (i = 2; i <= n; i++) for (j = i; j > 1 && t[j - 1] > t[j]; j--) { v = t[j]; t[j] = t[j - 1]; t[j - 1] = v }
	lo = t[1]; hi = t[n]; return n % 2 ? t[(n + 1) / 2] : (t[n / 2] + t[n / 2 + 1]) / 2 }
/^[0-9]/ && $1 > 0 && $5 > 0 {
	k = $2 " " $4; if (!(k in n)) order[++nk] = k
	i = ++n[k]; w[k, i] = $5; own = $3 == "ucx" ? $8 * 1048576 * 8 / 1e9 : $6; o[k, i] = own
	rw[k, $1] = $5; ro[k, $1] = own }
END {
	printf "%-8s %-22s %3s %24s %24s %24s %24s\n", "size", "tool", "n", "wire Gb/s [min-max]", "own Gb/s [min-max]", "x ucx wire [per round]", "x ucx own [per round]"
	for (q = 1; q <= nk; q++) { k = order[q]; split(k, f, " "); m = n[k]
		for (i = 1; i <= m; i++) { a[i] = w[k, i]; b[i] = o[k, i] }
		mw = med(a, m); sw = sprintf("%.3f [%.3f-%.3f]", mw, lo, hi)
		mo = med(b, m); so = sprintf("%.3f [%.3f-%.3f]", mo, lo, hi)
		xw = xo = "-"
		u = f[1] " ucx"
		if (f[2] != "ucx" && (u in n)) {
			for (i = 1; i <= m; i++) { a[i] = w[u, i]; b[i] = o[u, i] }
			uw = med(a, n[u]); uo = med(b, n[u]); c = 0
			for (kr in rw) { split(kr, g, SUBSEP); if (g[1] == k && ((u, g[2]) in rw)) { c++; ra[c] = rw[kr] / rw[u, g[2]]; rb[c] = ro[kr] / ro[u, g[2]] } }
			med(ra, c); xw = sprintf("%.2f [%.2f-%.2f]", mw / uw, lo, hi)
			med(rb, c); xo = sprintf("%.2f [%.2f-%.2f]", mo / uo, lo, hi) }
		printf "%-8s %-22s %3d %24s %24s %24s %24s\n", f[1], f[2], m, sw, so, xw, xo } }' "$@"
