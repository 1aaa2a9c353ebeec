#!/bin/bash
# Run each libFuzzer harness for SECONDS on a scratch copy of its committed
# seed corpus (the corpus in git is not changed), print one line per harness
# (executions, coverage, corpus size) and a closing "N passed, N failed".
# Usage: run-fuzz.sh SECONDS CORPUS_DIR HARNESS[@SECONDS]...
# (HARNESS@N runs that harness N seconds instead of SECONDS)
# FUZZ_JOBS (default 1): harnesses run at a time (each libFuzzer process is
# single-threaded, so on N cores N of them get as many executions each as
# one alone); the results print in the order given.
all_secs=$1 corpus=$2
shift 2
jobs=${FUZZ_JOBS:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fuzz_one() { # fuzz_one HARNESS SECONDS: the result in $work/NAME.result, status in NAME.rc
    local h=$1 secs=$2 name log runs cov a
    name=$(basename "$h")
    mkdir -p "$work/$name" "$work/$name.crash"
    [ -d "$corpus/$name" ] && cp "$corpus/$name"/* "$work/$name/" 2>/dev/null
    log="$work/$name.log"
    if "$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/$name.crash/" "$work/$name" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
        echo "PASS: $name: ${runs:-?} executions in ${secs} s, ${cov:-cov: ?}, corpus $(ls "$work/$name" | wc -l) inputs"
        echo 0 >"$work/$name.rc"
    else
        echo "FAIL: $name: (log follows)"
        tail -40 "$log"
        for a in "$work/$name.crash"/*; do
            [ -f "$a" ] && { echo "input that failed ($a):"; od -A d -t x1 "$a" | head -20; }
        done
        echo 1 >"$work/$name.rc"
    fi >"$work/$name.result"
}

running=0
for arg in "$@"; do
    h=${arg%@*} secs=$all_secs
    [ "$h" != "$arg" ] && secs=${arg##*@}
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    fuzz_one "$h" "$secs" &
    running=$((running + 1))
done
wait
passed=0 failed=0
for arg in "$@"; do
    name=$(basename "${arg%@*}")
    cat "$work/$name.result"
    if [ "$(cat "$work/$name.rc" 2>/dev/null)" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
