#!/bin/bash
# hang-dump.sh SECONDS COMMAND...: run COMMAND; if it is still running after
# SECONDS, print where every python3 process under it stands (the Python
# stacks through faulthandler on SIGUSR1, python/tests/conftest.py registers
# it; then the C stacks of every thread through cuda-gdb, the device image
# has no gdb), then end those processes by their ids. Exit code: COMMAND's,
# or 124 after a hang.
secs=$1
shift
"$@" &
pid=$!
tree() { for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$c"; tree "$c"; done; }
for ((i = 0; i < secs; i++)); do
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"
        exit $?
    fi
    sleep 1
done
echo "HANG: $* still running after $secs s"
procs="$pid $(tree "$pid")"
for p in $procs; do
    case "$(ps -o comm= -p "$p" 2>/dev/null)" in python*) ;; *) continue ;; esac
    echo "=== python3 pid $p: Python stacks (faulthandler)"
    kill -USR1 "$p"
    sleep 2
    echo "=== python3 pid $p: C stacks (cuda-gdb)"
    timeout 60 cuda-gdb -batch -nx -p "$p" -ex "set auto-solib-add off" \
        -ex "sharedlibrary uccl" -ex "sharedlibrary libcuda" -ex "sharedlibrary libcudart" \
        -ex "thread apply all bt 30" 2>&1 | grep -v "^\[New LWP\|^warning:" | head -150
done
for p in $procs; do kill -9 "$p" 2>/dev/null; done
wait "$pid" 2>/dev/null
exit 124
