# rails-trace.awk: for bench-rails-ctl.sh's BENCH_TRACE=1. Input: the ftrace
# function tracer's output for rxe_requester (one call per packet Soft-RoCE
# builds and sends, plus one that finds nothing to do). Prints the calls and
# their shares by context: the benchmark's own threads (uccl_perf,
# ib_write_bw: rxe_post_send runs the requester in the thread that posts
# for a user QP) in process context or in a softirq they ran, ksoftirqd,
# kworkers, the idle task and others; and how many distinct tool threads
# (pids) made calls. Lost events (a full buffer) are reported.
/^ *#/ { if ($0 ~ /entries-in-buffer/) head = $0; next }
/LOST .* EVENTS/ { lost++ }
match($0, /^ *.*-[0-9]+ +(\([^)]*\) +)?\[[0-9]+\] [^ ]+ /) {
	split(substr($0, RSTART, RLENGTH), f, " ")
	task = f[1]; flags = f[length(f)]
	n = split(task, p, "-"); pid = p[n]; comm = substr(task, 1, length(task) - length(pid) - 1)
	soft = substr(flags, 3, 1) ~ /[sH]/
	if (comm ~ /^(uccl_perf|ib_write_bw)/) { c = soft ? "tool-softirq" : "tool"; tools[comm "-" pid] = 1 }
	else if (comm ~ /^ksoftirqd/) c = "ksoftirqd"
	else if (comm ~ /^kworker/) c = "kworker"
	else if (comm ~ /^<idle>|^swapper/) c = "idle-softirq"
	else c = soft ? "other-softirq" : "other"
	k[c]++; tot++
}
END {
	nt = 0
	for (t in tools) nt++
	printf "%d calls", tot
	split("tool tool-softirq ksoftirqd kworker idle-softirq other-softirq other", o, " ")
	for (i = 1; i <= 7; i++) if (k[o[i]]) printf "; %s %.0f%%", o[i], 100 * k[o[i]] / tot
	printf "; %d tool threads", nt
	if (lost) printf "; %d LOST-event marks", lost
	printf "\n"
}
