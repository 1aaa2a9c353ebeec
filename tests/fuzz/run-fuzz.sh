#!/bin/sh
# Run each libFuzzer harness for SECONDS on a scratch copy of its committed
# seed corpus (the corpus in git is not changed), print one line per harness
# (executions, coverage, corpus size) and a closing "N passed, N failed".
# Usage: run-fuzz.sh SECONDS CORPUS_DIR HARNESS[@SECONDS]...
# (HARNESS@N runs that harness N seconds instead of SECONDS)
all_secs=$1 corpus=$2
shift 2
passed=0 failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for arg in "$@"; do
    h=${arg%@*} secs=$all_secs
    [ "$h" != "$arg" ] && secs=${arg##*@}
    name=$(basename "$h")
    mkdir -p "$work/$name" "$work/$name.crash"
    [ -d "$corpus/$name" ] && cp "$corpus/$name"/* "$work/$name/" 2>/dev/null
    log="$work/$name.log"
    if "$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/$name.crash/" "$work/$name" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
        echo "PASS: $name: ${runs:-?} executions in ${secs} s, ${cov:-cov: ?}, corpus $(ls "$work/$name" | wc -l) inputs"
        passed=$((passed + 1))
    else
        echo "FAIL: $name: (log follows)"
        tail -40 "$log"
        for a in "$work/$name.crash"/*; do
            [ -f "$a" ] && { echo "input that failed ($a):"; od -A d -t x1 "$a" | head -20; }
        done
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
