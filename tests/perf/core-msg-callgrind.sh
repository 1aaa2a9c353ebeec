#!/bin/sh
# Instructions per message of the core's two-sided path (tests/perf/b_core_msg.c)
# under callgrind, per function; and its wall time per message without it.
#   tests/perf/core-msg-callgrind.sh BUILD_DIR OUT_DIR [TRANSPORT]
# Writes OUT_DIR/{bin,cg.BYTES.W.out,annotate.BYTES.W.txt,summary.txt}.
set -eu
build=$(cd "$1" && pwd)
out=$2
tp=${3:-shm}
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
cc -O2 -g -I"$src/include" -I"$build" "$src/tests/perf/b_core_msg.c" \
    -L"$build/.libs" -luccl -lpthread -Wl,-rpath,"$build/.libs" -o "$out/b_core_msg"
: >"$out/summary.txt"
for case in "8 1" "8 16" "4096 1" "4096 16" "65536 1" "65536 16"; do
    set -- $case
    msgs=4000
    UCCL_TIMEOUT_MS=60000 valgrind --tool=callgrind --toggle-collect=core_msg_windows \
        --callgrind-out-file="$out/cg.$1.$2.out" "$out/b_core_msg" "$1" "$2" "$msgs" "$tp" \
        >/dev/null 2>"$out/vg.$1.$2.log"
    callgrind_annotate --inclusive=no "$out/cg.$1.$2.out" >"$out/annotate.$1.$2.txt"
    callgrind_annotate --inclusive=yes "$out/cg.$1.$2.out" >"$out/annotate-incl.$1.$2.txt"
    total=$(grep -m1 "PROGRAM TOTALS" "$out/annotate.$1.$2.txt" | awk '{gsub(",","",$1); print $1}')
    # the warm-up's 10 windows ran inside the toggle too
    echo "bytes $1 window $2: $(( total / (msgs / $2 * $2 + 10 * $2) )) instructions/message" \
        | tee -a "$out/summary.txt"
done
