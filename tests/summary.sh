#!/bin/sh
# Summarize 'make check' runs from the .trs files automake's parallel test
# harness leaves in build trees: one line per test that did not pass (its log
# named, then the log's last SUMMARY_LOG_LINES lines, 25), one per case skipped
# (tests/driver.sh: a test skipped whole, or a "SKIP: " line of one that ran),
# then "N passed, N failed, N skipped" over all. Exit 1 when anything failed or
# a build dir holds no results, 2 on bad usage.
# Usage: tests/summary.sh BUILD_DIR...
set -u

if [ $# -eq 0 ]; then
    echo "usage: $0 BUILD_DIR..." >&2
    exit 2
fi

passed=0 failed=0 skipped=0 tail_lines=${SUMMARY_LOG_LINES:-25}
for dir in "$@"; do
    list=$(find "$dir" -name '*.trs' -type f 2>/dev/null | sort)
    if [ -z "$list" ]; then
        echo "ERROR: no test results (*.trs) under $dir: was 'make check' run there?"
        failed=$((failed + 1))
        continue
    fi
    while IFS= read -r trs; do
        # A test script may report several results (TAP); count each one.
        results=$(sed -n 's/^:test-result:[[:space:]]*\([A-Z]*\).*/\1/p' "$trs")
        sed -n "s|^:test-result:[[:space:]]*SKIP[[:space:]]*\(.*\)|SKIP: ${trs%.trs}: \1|p" "$trs"
        [ -n "$results" ] || results=ERROR # no result: the harness was interrupted
        for r in $results; do
            case $r in
            PASS | XFAIL) passed=$((passed + 1)) ;;
            SKIP) skipped=$((skipped + 1)) ;;
            *) # FAIL, XPASS (an expected failure that passed), ERROR
                failed=$((failed + 1))
                echo "$r: ${trs%.trs} (log: ${trs%.trs}.log)"
                # its log's end, so that a run whose tree is gone (CI) still says why
                [ -f "${trs%.trs}.log" ] && tail -n "$tail_lines" "${trs%.trs}.log" | sed 's/^/  | /' ;;
            esac
        done
    done <<EOF_LIST
$list
EOF_LIST
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
