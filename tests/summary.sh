#!/bin/sh
# Summarize a 'make check' run from the .trs files automake's parallel test
# harness leaves in the build tree: one line per test that did not pass (with
# its log), then "N passed, N failed, N skipped". Exit 1 when anything failed.
# Usage: tests/summary.sh BUILD_DIR
set -u

dir=${1:-}
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi

list=$(find "$dir" -name '*.trs' -type f | sort)
if [ -z "$list" ]; then
    echo "no test results (*.trs) under $dir: run 'make check' there first" >&2
    echo "0 passed, 0 failed, 0 skipped"
    exit 1
fi

passed=0 failed=0 skipped=0
while IFS= read -r trs; do
    log=${trs%.trs}.log
    name=${trs#"$dir"/}
    name=${name%.trs}
    # A test script may report several results (TAP); count each one.
    results=$(sed -n 's/^:test-result:[[:space:]]*\([A-Z]*\).*/\1/p' "$trs")
    if [ -z "$results" ]; then
        results=ERROR # a .trs without a result: the harness was interrupted
    fi
    for r in $results; do
        case $r in
        PASS | XFAIL) passed=$((passed + 1)) ;;
        SKIP) skipped=$((skipped + 1)) ;;
        *) # FAIL, XPASS (an expected failure that passed), ERROR
            failed=$((failed + 1))
            echo "$r: $name (log: $log)" ;;
        esac
    done
done <<EOF_LIST
$list
EOF_LIST

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
