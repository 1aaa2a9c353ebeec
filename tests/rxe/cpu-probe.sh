# shellcheck shell=bash
# Sourced by tests/rxe/bench-rails.sh (in the Soft-RoCE VM).
# cpu_probe CMD [ARG...]: run CMD and print where the guest's CPU time went
# while it ran: per vCPU the share of user, system and softirq time (rxe's
# packet work runs in softirq, on the vCPU whose backlog took the packet) and
# the NET_RX softirqs it handled, then the 8 threads with the most CPU time
# (their last vCPU, their name; threads are sampled every 2 s, so that those
# which end with CMD count too, up to their last sample; the sampler's own
# cat, awk and sleep are left out). CMD's output is printed first.
cpu_stat() { # per vCPU: name user+nice system softirq total NET_RX
	awk 'FNR == NR && /^cpu[0-9]/ { u[$1] = $2 + $3; s[$1] = $4 + $7; q[$1] = $8
		t[$1] = $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; n++; next }
		FNR != NR && $1 == "NET_RX:" { for (i = 0; i < n; i++) x["cpu" i] = $(i + 2) }
		END { for (i = 0; i < n; i++) { c = "cpu" i; print c, u[c], s[c], q[c], t[c], x[c] } }' \
		/proc/stat /proc/softirqs
}
cpu_threads() { # per thread: tid ticks last-vCPU name (the name may hold spaces: last)
	cat /proc/[0-9]*/task/[0-9]*/stat 2>/dev/null | awk '{
		i = index($0, " ("); j = 0
		for (k = length($0); k > i; k--) if (substr($0, k, 1) == ")") { j = k; break }
		if (!i || !j) next
		split(substr($0, j + 2), f, " ")
		print substr($0, 1, i - 1), f[12] + f[13], f[37], substr($0, i + 2, j - i - 2) }'
}
cpu_probe() {
	local a b t0=$EPOCHREALTIME sampler
	a=$(cpu_stat)
	cpu_threads >/tmp/probe.0
	: >/tmp/probe.1
	(while :; do sleep 2; cpu_threads >>/tmp/probe.1; done) &
	sampler=$!
	"$@"
	b=$(cpu_stat)
	kill "$sampler"; wait "$sampler" 2>/dev/null
	cpu_threads >>/tmp/probe.1
	echo "# CPU probe: $* ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s)"
	echo "#   vCPU  user%  sys%  softirq%  idle%  NET_RX"
	printf '%s\n--\n%s\n' "$a" "$b" | awk '$1 == "--" { d = 1; next }
		!d { u[$1] = $2; s[$1] = $3; q[$1] = $4; t[$1] = $5; x[$1] = $6; next }
		{ dt = $5 - t[$1]; if (dt <= 0) dt = 1
		  printf "#   %-5s %5.0f %5.0f %9.0f %6.0f  %6d\n", $1, 100 * ($2 - u[$1]) / dt, 100 * ($3 - s[$1]) / dt,
			100 * ($4 - q[$1]) / dt, 100 * (dt - ($2 - u[$1]) - ($3 - s[$1]) - ($4 - q[$1])) / dt, $6 - x[$1] }'
	echo "#   busiest threads (CPU ticks of $(getconf CLK_TCK)/s during the run, last vCPU, tid, name):"
	awk 'FNR == NR { t0[$1] = $2; next }
		{ k = $1; v = $2 - t0[k]; c = $3; $1 = $2 = $3 = ""; sub(/^ +/, "")
		  if ($0 ~ /^(cat|awk|mawk|gawk|sleep)$/) next
		  if (!(k in tk) || v > tk[k]) { tk[k] = v; cpu[k] = c; nm[k] = $0 } }
		END { for (k in tk) if (tk[k] > 0) print tk[k], cpu[k], k, nm[k] }' /tmp/probe.0 /tmp/probe.1 |
		sort -rn | head -8 | sed 's/^/#     /'
}
