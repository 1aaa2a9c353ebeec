#!/bin/bash
# ofi-device-s12.sh DEBS_DIR BIN_DIR: session 12's one device call
# (results/ofi/s12-README.md). BIN_DIR holds perf_ofi (this branch's, built
# --without-cuda on Debian 12) and two libuccl builds, base/ (main before
# the branch) and mine/ (this branch). perf_ofi --ops send,parts on shm and
# tcp;ofi_rxm, the same tool with either library (LD_LIBRARY_PATH), each
# variant one job, raw libfabric alternated with uccl inside every job; libfabric
# from DEBS_DIR unpacked as ofi-device.sh does. $OUT receives everything.
set -u
debs=${1:?usage: ofi-device-s12.sh DEBS_DIR BIN_DIR}
bin=$(cd "${2:?usage: ofi-device-s12.sh DEBS_DIR BIN_DIR}" && pwd)
OUT=${OUT:-/tmp/uccl-ofi-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/ofi-device.log") 2>&1
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
lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"
uptime
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
# provider|library|env (- = none)|name
while IFS='|' read -r prov which env name; do
    [ -n "$prov" ] || continue
    envs=(-x LD_LIBRARY_PATH)
    [ "$env" != - ] && envs+=(-x "$env")
    echo "### $name: perf_ofi $prov, libuccl $which, ${env} ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))"
    LD_LIBRARY_PATH=$bin/$which:$fablib timeout 12 mpirun $root --bind-to core -np 2 "${envs[@]}" \
        "$bin/perf_ofi" --provider "$prov" --repeat 5 --ops send,parts </dev/null 2>&1 | grep -v '^\[uccl' |
        tee "$OUT/$name.txt"
done <<'EOF'
shm|base|-|shm-main-default
shm|mine|-|shm-mine-default
shm|base|UCCL_OFI_TAGGED=1|shm-main-tagged
shm|mine|UCCL_OFI_TAGGED=0|shm-mine-push
tcp;ofi_rxm|base|-|tcp-main-default
tcp;ofi_rxm|mine|-|tcp-mine-default
tcp;ofi_rxm|mine|UCCL_OFI_TAGGED=1|tcp-mine-tagged
EOF
uptime
