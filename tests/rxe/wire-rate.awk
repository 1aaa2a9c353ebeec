# wire-rate.awk: bench.sh's wire_gbps figure, from its samples of the veth
# pair ("TIME BYTES" lines, both veths' transmitted bytes every 0.2 s): the
# rate in Gb/s (1e9 bit/s) over the time between 5 % and 95 % of the run's
# bytes (interpolated), so that a tool's start-up, connection setup and its
# own timing are out of it. 0 when the run failed:
#  - own (the tool's own figure, as bench.sh's functions print it) is the
#    bare "0" (or empty): the tool gave no figure, e.g. it exited early;
#  - own is a figure that reads zero (perftest's "0.000000": its client
#    printed its result row, so it ran every iteration, but its own clock
#    broke) and the pair carried fewer than want bytes (the run's payload,
#    count x size): then nothing shows that the data crossed;
#  - fewer than 64 KiB crossed at all.
# Used by bench.sh; tested by test-wire-rate.sh.
{ t[NR] = $1; b[NR] = $2 }
END {
	tot = NR ? b[NR] - b[1] : 0
	if (own == "" || own == "0" || tot < 65536 || (own + 0 <= 0 && tot < want + 0)) { print 0; exit }
	for (k = 0; k < 2; k++) {
		w = b[1] + (k ? 0.95 : 0.05) * tot
		for (i = 2; i <= NR && b[i] < w; i++);
		x[k] = t[i - 1] + (t[i] - t[i - 1]) * (w - b[i - 1]) / (b[i] - b[i - 1])
	}
	printf "%.4f\n", (x[1] > x[0] ? 0.9 * tot * 8 / 1e9 / (x[1] - x[0]) : 0)
}
