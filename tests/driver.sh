#!/bin/sh
# tests/driver.sh: the automake test driver of every test (LOG_DRIVER). As
# automake's own test-driver: exit 0 PASS, 77 SKIP, 99 ERROR, else FAIL. In
# addition, a test that ran but could not run some of its cases here says so
# with one line per case starting "SKIP: " (unit.h's UNIT_SKIP, the shell
# tests' "SKIP: " lines): each becomes a SKIP result of its own, so that the
# automake summary and tests/summary.sh count it as skipped, never as passed.
# Usage (by automake): driver.sh --test-name N --log-file F --trs-file F
#   [--color-tests yes|no] [--expect-failure yes|no] [--enable-hard-errors yes|no] -- CMD...
set -u
name= log= trs= color=no xfail=no hard=yes
while [ $# -gt 0 ]; do
    case $1 in
    --test-name) name=$2; shift ;;
    --log-file) log=$2; shift ;;
    --trs-file) trs=$2; shift ;;
    --color-tests) color=$2; shift ;;
    --expect-failure) xfail=$2; shift ;;
    --enable-hard-errors) hard=$2; shift ;;
    --) shift; break ;;
    -*) echo "$0: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
if [ -z "$name" ] || [ -z "$log" ] || [ -z "$trs" ] || [ $# -eq 0 ]; then
    echo "usage: $0 --test-name N --log-file F --trs-file F [--...] -- CMD..." >&2
    exit 2
fi
red= grn= blu= mgn= std=
if [ "$color" = yes ]; then
    red='[0;31m' grn='[0;32m' blu='[1;34m' mgn='[0;35m' std='[m'
fi
trap 'rm -f "$log" "$trs"; exit 129' 1
trap 'rm -f "$log" "$trs"; exit 130' 2
trap 'rm -f "$log" "$trs"; exit 143' 15

t0=$(date +%s)
"$@" >"$log" 2>&1
st=$?
echo "# test time: $(($(date +%s) - t0)) s: $name" >>"$log" # scripts/test-all.sh lists the slowest
[ "$hard" = no ] && [ $st -eq 99 ] && st=1
case $st:$xfail in
0:yes) col=$red res=XPASS recheck=yes ;;
0:*) col=$grn res=PASS recheck=no ;;
77:*) col=$blu res=SKIP recheck=no ;;
99:*) col=$mgn res=ERROR recheck=yes ;;
*:yes) col=$grn res=XFAIL recheck=no ;;
*) col=$red res=FAIL recheck=yes ;;
esac
echo "$res $name (exit status: $st)" >>"$log"
echo "${col}${res}${std}: $name"
{
    if [ "$res" = SKIP ]; then # one result, with the first line that says why
        echo ":test-result: SKIP whole test: $(grep -i -m1 'skip' "$log" | sed 's/^SKIP: //')"
    else # and the cases skipped inside a test that ran
        echo ":test-result: $res"
        sed -n 's/^SKIP: \(.*\)/:test-result: SKIP \1/p' "$log"
    fi
    echo ":global-test-result: $res"
    echo ":recheck: $recheck"
    echo ":copy-in-global-log: $([ "$res" = PASS ] && echo no || echo yes)"
} >"$trs"
if [ "$res" != SKIP ]; then
    sed -n "s/^SKIP: \(.*\)/${blu}SKIP${std}: $(printf '%s' "$name" | sed 's/[\/&]/\\&/g'): \1/p" "$log"
fi
exit 0
