#!/bin/bash
# ofi-device.sh DEBS_DIR: the ofi benchmarks (tests/perf/ofi-perf.sh) on a
# machine without libfabric (the device machine: Ubuntu 24.04, 16 cores, no
# network). DEBS_DIR holds Debian 12's libfabric1 and libfabric-dev and the
# shared libraries libfabric1 needs (fetched on a Debian 12 box with
# `apt-get download libfabric1 libfabric-dev ibverbs-providers libibverbs1
# librdmacm1 libpsm-infinipath1 libpsm2-2 libnl-3-200 libnl-route-3-200
# libnuma1 libatomic1 libuuid1`). They are unpacked with dpkg -x into .fab
# (nothing is installed); a library the system already has is taken from the
# system (FAB_KEEP_ALL=1 keeps every unpacked one, to test the recipe on a
# box that has libfabric). Then a CPU-only build in build-ofi against .fab,
# and the benchmarks, tables and JSON in $OUT. Run from the source root.
set -u
debs=${1:?usage: ofi-device.sh DEBS_DIR}
OUT=${OUT:-/tmp/uccl-ofi-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/ofi-device.log") 2>&1
step() { echo "=== $* ($(date +%T))"; }
src=$PWD fab=$PWD/.fab
lib=$fab/usr/lib/x86_64-linux-gnu

step "libfabric from $debs into $fab"
rm -rf "$fab" && mkdir -p "$fab" || exit 1
for d in "$debs"/*.deb; do dpkg -x "$d" "$fab" || exit 1; done
# Debian reaches libpsm_infinipath.so.1 through an alternatives link that is
# not in the package: make it here
ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$lib/libpsm_infinipath.so.1"
if [ "${FAB_KEEP_ALL:-0}" != 1 ]; then
    for f in "$lib"/lib*.so.* "$fab"/lib/x86_64-linux-gnu/lib*.so.*; do
        so=$(basename "$f")
        case $so in libfabric.so.*) continue ;; esac
        # keep only the sonames the system lacks (a newer system copy wins)
        if ldconfig -p | grep -q " $so "; then rm -f "$f"; else echo "using unpacked $so"; fi
    done
fi
sed -i "s|^prefix=.*|prefix=$fab/usr|" "$lib/pkgconfig/libfabric.pc"
export PKG_CONFIG_PATH=$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=$lib:$fab/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CPPFLAGS="-I$fab/usr/include ${CPPFLAGS:-}" LDFLAGS="-L$lib -Wl,-rpath-link,$lib ${LDFLAGS:-}"
lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"
uptime

step "build (CPU only, ofi from .fab)"
# the configure that came with the tree (made by ./autogen.sh where the
# autotools are), or OFI_AUTOGEN=1 / none there: autogen here
if [ "${OFI_AUTOGEN:-0}" = 1 ] || [ ! -x configure ]; then
    ./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
fi
[ -x configure ] || { echo "no configure and no autotools"; exit 1; }
mkdir -p build-ofi && cd build-ofi || exit 1
../configure --without-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
grep -E "^ *ofi *:" configure.log
grep -q "^OFI_CFLAGS = -I$fab" Makefile || { echo "OFI_CFLAGS not from $fab:"; grep "^OFI_" Makefile; exit 1; }
make -j"$(nproc)" libuccl.la tools/perf_ofi tools/uccl_perf >make.log 2>&1 ||
    { grep -E "error|Error" make.log | head -40; exit 1; }
ldd tools/.libs/perf_ofi 2>/dev/null | grep -E "fabric|psm|verbs" || ldd tools/perf_ofi | grep -E "fabric"

step "benchmarks"
bash "$src/tests/perf/ofi-perf.sh" . "$OUT"
echo "ofi-perf exit code: $?"
step "done"
