#!/bin/sh
# ofi16c: perf_ofi send and sendv rows over shm, main's libuccl and the
# branch's alternated job by job (the same perf_ofi binary, LD_LIBRARY_PATH):
# sh ab.sh PERF_OFI MAIN_LIB_DIR BRANCH_LIB_DIR JOBS
perf=$1 libm=$2 libb=$3 jobs=${4:-3}
for j in $(seq "$jobs"); do
    for v in main branch; do
        [ $v = main ] && lib=$libm || lib=$libb
        echo "## job $j, $v"
        LD_LIBRARY_PATH=$lib timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none \
            -np 2 -x LD_LIBRARY_PATH "$perf" --provider shm --ops send,sendv \
            --sizes 65536,262144 --repeat 5 2>&1 | grep -E '^(op|send|sendv) '
    done
done
