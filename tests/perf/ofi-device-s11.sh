#!/bin/bash
# ofi-device-s11.sh DEBS_DIR: session 11's one device call (results/ofi/s11-README.md):
# ofi-device.sh's build and benchmarks with perf_ofi's send's parts (raw
# send, the rendezvous built from raw operations, uccl's send) on shm and
# tcp;ofi_rxm, then shm's send and parts again with UCCL_OFI_TAGGED=1.
# Run from the source root; $OUT receives everything.
set -u
debs=${1:?usage: ofi-device-s11.sh DEBS_DIR}
OUT=${OUT:-/tmp/uccl-ofi-out}
export OUT
OFI_PERF_UCCL_PERF=0 OFI_PERF_REPEAT=${OFI_PERF_REPEAT:-5} \
    OFI_PERF_OPS=${OFI_PERF_OPS:-write,read,send,seed,scatter,parts} \
    bash tests/perf/ofi-device.sh "$debs"
lib=$PWD/.fab/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$PWD/.fab/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT/tagged"
OFI_PERF_UCCL_PERF=0 OFI_PERF_REPEAT=${OFI_PERF_REPEAT:-5} OFI_PERF_OPS=send,parts \
    OFI_PERF_PROVIDERS=shm OFI_PERF_VARIANTS=UCCL_OFI_TAGGED=1 \
    bash tests/perf/ofi-perf.sh build-ofi "$OUT/tagged" 2>&1 | tee -a "$OUT/ofi-device.log"
uptime | tee -a "$OUT/ofi-device.log"
