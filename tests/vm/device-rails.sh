#!/bin/bash
# tests/vm/device-rails.sh BUILDDIR BUNDLE.tar.xz [OUTDIR]: one rail against
# two in the project's Soft-RoCE VM on a machine without QEMU or a Debian
# kernel (the GPU device machine: Ubuntu, 16 cores), from a bundle made by
# tests/vm/bundle.sh and a build of uccl_perf that runs there (static
# libuccl: configure --disable-shared). The VM gets RXE_VM_CPUS vCPUs
# (default 8) under multi-threaded TCG (RXE_VM_ACCEL=kvm to try KVM), so that
# each rail's emulated devices and each rank have host cores of their own;
# then tests/rxe/bench-device.sh: bench.sh's uccl / perftest / UCX row
# (BENCH_REF_SIZES) and bench-rails.sh (rounds interleaved), one boot. Prints
# the host, the accelerator and the benches' tables; logs go to OUTDIR.
#   BENCH_*: as bench-device.sh, bench-rails.sh
#   DEVICE_BENCH: the script of tests/rxe to run instead of bench-device.sh
#     (e.g. bench-rails-ctl.sh)
#   DEVICE_RAILS_BUDGET: seconds the VM may run (default 300)
#   DEPS: a directory with uccl_perf's shared libraries, for those this root lacks
set -u
builddir=$(cd "${1:?usage: device-rails.sh BUILDDIR BUNDLE [OUTDIR]}" && pwd)
bundle=$(readlink -f "${2:?usage: device-rails.sh BUILDDIR BUNDLE [OUTDIR]}")
out=${3:-/tmp/device-rails}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
mkdir -p "$out"
exec > >(tee -a "$out/device-rails.log") 2>&1
echo "# $(date -u +%FT%TZ) $(uname -r); $(. /etc/os-release && echo "$PRETTY_NAME"); $(nproc) cores;" \
	"load $(cut -d' ' -f1-3 /proc/loadavg)"
lscpu | grep -E "Model name" | sed 's/^/# /'
# the bundle inside the tree: the guest sees it (shared), /tmp it would not
rm -rf "$top/.vmb" && mkdir -p "$top/.vmb" && tar xJf "$bundle" -C "$top/.vmb" || exit 1
# shellcheck source=/dev/null
. "$top/.vmb/vm/env.sh"
for t in ip rdma sysctl mpirun python3; do echo "# $t: $(command -v $t || echo missing)"; done
echo "# LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} RDMAV_DRIVERS=${RDMAV_DRIVERS:-}"
# multi-threaded TCG unless RXE_VM_ACCEL says otherwise: on the GPU device
# machine (Ubuntu 24.04 in a Firecracker VM, kernel 6.18.44-fc) /dev/kvm
# opens, but a VM booted with -accel kvm printed nothing in 220 s
# (tests/perf/results/cluster/rails/README.md)
kvm=no # does QEMU start with KVM? (still up after 2 s: timeout's 124; it never outlives this)
if [ -e /dev/kvm ]; then
	timeout -k 1 2 "$RXE_VM_QEMU" -accel kvm -machine none -S -display none </dev/null >/dev/null \
		2>"$out/kvm.err"
	[ $? = 124 ] && kvm=opens
fi
echo "# /dev/kvm: $(ls -la /dev/kvm 2>&1); KVM $kvm; accel ${RXE_VM_ACCEL:-tcg,thread=multi}"
# libraries uccl_perf needs and this root lacks: from DEPS (uccl_perf's own, carried), if given
if [ -n "${DEPS:-}" ] && ldd "$builddir/tools/uccl_perf" | grep -q "not found"; then
	mkdir -p "$top/.vmb/deps"
	for l in $(ldd "$builddir/tools/uccl_perf" | awk '$3 == "not" { print $1 }'); do
		cp -L "$DEPS/$l" "$top/.vmb/deps/" && echo "# $l: carried"
	done
	export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$top/.vmb/deps
fi
ldd "$builddir/tools/uccl_perf" | grep -E "not found|mpi|verbs" | sed 's/^/# /'
export RXE_VM_CPUS=${RXE_VM_CPUS:-8} RXE_VM_ACCEL=${RXE_VM_ACCEL:-tcg,thread=multi} RXE_VM_MEM=${RXE_VM_MEM:-4G}
export RXE_VM_TIMEOUT=${DEVICE_RAILS_BUDGET:-300}
bench=${DEVICE_BENCH:-bench-device.sh}
cd "$builddir" && top_builddir=$builddir bash "$top/tests/rxe/$bench"
echo "# ${bench%.sh} exit $? at $(date -u +%T)"
