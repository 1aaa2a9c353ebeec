#!/bin/bash
# ofi-device-s13.sh DEBS_DIR BIN_DIR: session 13's one device call
# (results/ofi/s13-README.md). BIN_DIR holds perf_ofi and lib/ with the
# libuccl it runs (this branch, built --without-cuda on the Debian 12 box).
# Direct sends (UCCL_OFI_DIRECT=1) against the rendezvous (=0, push), A/B
# alternated as whole jobs on shm, once on tcp;ofi_rxm, each job raw
# libfabric alternated with uccl inside (--ops send,parts); then write,
# read, the seed's pattern and the scattered write on both providers.
# libfabric from DEBS_DIR (Debian 12's) unpacked as ofi-device.sh does.
# JOBS_FILE (third argument, optional) replaces the job list below; a job's
# sixth field names a folder of BIN_DIR whose lib/ it runs (A/B of libuccl);
# a seventh, more perf_ofi arguments (session 15: --sizes, --dump).
set -u
debs=${1:?usage: ofi-device-s13.sh DEBS_DIR BIN_DIR}
bin=$(cd "${2:?usage: ofi-device-s13.sh DEBS_DIR BIN_DIR}" && pwd)
jobs=${3:-}
OUT=${OUT:-/tmp/uccl-ofi-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/ofi-device.log") 2>&1
echo "### libfabric on this machine before unpacking:"
ldconfig -p | grep -E "libfabric" || echo "none in ldconfig"
dpkg -l 2>/dev/null | grep -iE "fabric" || echo "no libfabric package"
grep PRETTY_NAME /etc/os-release
fab=$PWD/.fab
lib=$fab/usr/lib/x86_64-linux-gnu
rm -rf "$fab" && mkdir -p "$fab" || exit 1
for d in "$debs"/*.deb; do dpkg -x "$d" "$fab" || exit 1; done
ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$lib/libpsm_infinipath.so.1"
for f in "$lib"/lib*.so.* "$fab"/lib/x86_64-linux-gnu/lib*.so.*; do
    so=$(basename "$f")
    case $so in libfabric.so.*) continue ;; esac
    if ldconfig -p | grep -q " $so "; then rm -f "$f"; fi
done
fablib=$lib:$fab/lib/x86_64-linux-gnu
LD_LIBRARY_PATH=$bin/lib:$fablib ldd "$bin/perf_ofi" | grep -E "fabric|uccl|mpi.so|not found"
lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"
uptime
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
# provider|env (- = none)|ops|repeat|name[|bin dir, relative to BIN_DIR: its lib/ instead
# [|more perf_ofi arguments]]
while IFS='|' read -r prov env ops rep name jbin jargs; do
    [ -n "$prov" ] || continue
    jlib=$bin/lib
    [ -n "$jbin" ] && jlib=$bin/$jbin/lib
    envs=(-x LD_LIBRARY_PATH)
    [ "$env" != - ] && for e in $env; do envs+=(-x "$e"); done
    echo "### $name: perf_ofi $prov, ${env}, --ops $ops ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))"
    LD_LIBRARY_PATH=$jlib:$fablib timeout 20 mpirun $root --bind-to core -np 2 "${envs[@]}" \
        "$bin/perf_ofi" --provider "$prov" --repeat "$rep" --ops "$ops" $jargs </dev/null 2>&1 |
        grep -v '^\[uccl' | tee "$OUT/$name.txt"
done < <(if [ -n "$jobs" ]; then cat "$jobs"; else cat <<'JOBS'
shm|UCCL_OFI_DIRECT=0|send,parts|5|shm-push-a
shm|UCCL_OFI_DIRECT=1|send,parts|5|shm-direct-a
shm|UCCL_OFI_DIRECT=0|send,parts|5|shm-push-b
shm|UCCL_OFI_DIRECT=1|send,parts|5|shm-direct-b
tcp;ofi_rxm|UCCL_OFI_DIRECT=0|send,parts|5|tcp-push
tcp;ofi_rxm|UCCL_OFI_DIRECT=1|send,parts|5|tcp-direct
shm|-|write,read,seed,scatter|3|shm-rma
tcp;ofi_rxm|-|write,read,seed,scatter|3|tcp-rma
JOBS
fi)
uptime
