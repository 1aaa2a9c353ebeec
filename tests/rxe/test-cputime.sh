#!/bin/sh
# test-cputime.sh: cputime.sh logs a program's CPU seconds under its label
# (with "-RANK" under mpirun), its children's included, and passes the
# program's output and exit status through. No VM needed.
here=$(dirname "$0")
log=$(mktemp) && out=$(mktemp) || exit 1
trap 'rm -f "$log" "$out"' EXIT
fail=0
check() { # check NAME CONDITION...
	n=$1; shift
	if "$@"; then echo "PASS: $n"; else echo "FAIL: $n (log: $(paste -sd'|' "$log"), output: $(paste -sd'|' "$out"))"; fail=1; fi
}
# about 0.1-0.5 s of user time in a grandchild (sh -c under timeout), as
# bench.sh runs its tools
spin='i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done; echo out; echo err >&2; exit 3'
"$here/cputime.sh" "$log" srv timeout 60 sh -c "$spin" >"$out" 2>&1
rc=$?
check "exit status passed through" [ "$rc" = 3 ]
check "stdout and stderr passed through" [ "$(sort "$out" | paste -sd' ')" = "err out" ]
check "one line, the label first" [ "$(wc -l <"$log")" = 1 ] && [ "$(cut -d' ' -f1 "$log")" = srv ]
check "the grandchild's user time counted (> 0.05 s)" awk '{ exit !($2 > 0.05 && NF == 3) }' "$log"
: >"$log"
OMPI_COMM_WORLD_RANK=1 "$here/cputime.sh" "$log" uccl true
check "the MPI rank appended to the label" [ "$(cut -d' ' -f1 "$log")" = uccl-1 ]
"$here/cputime.sh" >/dev/null 2>&1
check "no arguments: refused" [ $? != 0 ]
exit $fail
