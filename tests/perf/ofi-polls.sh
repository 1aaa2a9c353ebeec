#!/bin/bash
# ofi-polls.sh: how often each rank looks at libfabric's completion queue
# per operation, raw and uccl, for each of VARIANTS (run in the layout of
# ofi-device-ab-prep.sh, after run.sh unpacked libfabric into .fab): one job
# per variant and op (write, read), 64 KiB, --repeat 3 (4 x 1024 operations
# a side). Raw: raw_wait's fi_cq_read calls (PERF_OFI_POLLS); uccl: the ofi
# transport's progress calls (UCCL_LOG_LEVEL=debug, the whole process's life:
# setup adds a few hundred; branch ofi21-poll also prints its polls between
# them). Results: tests/perf/results/ofi/ofi21-H200host/README.md.
cd "$(dirname "$0")" || exit 1
fab=$PWD/.fab
fablib=$fab/usr/lib/x86_64-linux-gnu:$fab/lib/x86_64-linux-gnu
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for v in ${VARIANTS:-main}; do
    for op in write read; do
        echo "### $v $op"
        LD_LIBRARY_PATH=$PWD/bin/$v/lib:$fablib PERF_OFI_POLLS=1 UCCL_LOG_LEVEL=debug \
            timeout 30 mpirun $root --bind-to core -np 2 -x LD_LIBRARY_PATH -x PERF_OFI_POLLS \
            -x UCCL_LOG_LEVEL bin/perf_ofi --provider shm --ops "$op" --sizes 65536 --repeat 3 \
            </dev/null 2>&1 | grep -E "^$op |#polls|progress calls"
    done
done
