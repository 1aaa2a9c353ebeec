#!/bin/bash
# include/uccl/uccl_device.cuh compiles everywhere it is meant to: as C11 and
# C++17 on the host (host threads standing in for kernels), as CUDA with nvcc
# (when found: $NVCC, or nvcc on PATH or in /usr/local/cuda) and as HIP with
# clang -x hip on the HIP headers (when /usr/include/hip or $ROCM_PATH has
# them; device code checked for gfx90a without the device libraries). Each
# compiler that is missing is a SKIP, never a pass.
set -u
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
body='
static int use_all(uccl_devq_handle_t q)
{
    uint64_t t = 0;
    int e = uccl_devq_put(&q, 0, 0, 0, 0, 8, UCCL_DEVQ_CMD_NOTIFY, UCCL_DEVQ_NOTIF(1, 2), &t);
    if (e == 0) e = uccl_devq_wait_done(&q, t + 1);
    if (e == 0) e = uccl_devq_wait_counter(&q, 0, 1);
    if (e == 0) { uccl_devq_reserve(&q, 2, &t); uccl_devq_write(&q, t, 0, 0, 0, 0, 1, 0, 0);
                  uccl_devq_publish(&q, t); }
    return e + uccl_devq_error(&q);
}'
run() { # run NAME CMD...: compile, count
    local name=$1; shift
    if "$@" >"$tmp/out" 2>&1; then
        echo "PASS: uccl_device.cuh compiles as $name"; pass=$((pass + 1))
    else
        echo "FAIL: uccl_device.cuh does not compile as $name:"; head -30 "$tmp/out"; fail=$((fail + 1))
    fi
}
printf '#include <uccl/uccl_device.cuh>\n%s\nint main(int argc, char **argv) { static uccl_devq_handle_t q; (void)argv; return argc > 9 ? use_all(q) : 0; }\n' \
    "$body" >"$tmp/h.c"
cp "$tmp/h.c" "$tmp/h.cc"
run "C11 (host threads)" ${CC:-cc} -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -I"$top/include" \
    -c "$tmp/h.c" -o "$tmp/h.o"
run "C++17 (host threads)" ${CXX:-c++} -std=c++17 -Wall -Wextra -Werror -I"$top/include" -c "$tmp/h.cc" -o "$tmp/hh.o"
printf '#include <uccl/uccl_device.cuh>\n__device__ %s\n__global__ void k(uccl_devq_handle_t q, int *r) {
    uint64_t t; *r = use_all(q) + uccl_devq_put_warp(&q, 0, 0, 0, 0, 8, 0, 0, &t); }\n' \
    "$(printf '%s' "$body" | sed 's/^static int/int/')" >"$tmp/k.cu"
nvcc=${NVCC:-$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })}
if [ -n "$nvcc" ]; then
    run "CUDA ($nvcc)" "$nvcc" -std=c++17 -arch=${NVCC_CHECK_ARCH:-sm_80} -Xcompiler -Wall,-Werror -I"$top/include" -c "$tmp/k.cu" \
        -o "$tmp/k.o"
else
    echo "SKIP: uccl_device.cuh as CUDA: no nvcc"
fi
hipinc=
for d in "${ROCM_PATH:-/opt/rocm}/include" /usr/include; do
    [ -f "$d/hip/hip_runtime.h" ] && { hipinc=$d; break; }
done
clangxx=$(command -v clang++ || true)
if [ -n "$hipinc" ] && [ -n "$clangxx" ]; then
    printf '#include <uccl/uccl_device.cuh>\n__device__ %s\n%s\n' "$body" \
        '__global__ void k(uccl_devq_handle_t q, int *r) { *r = use_all(q); }' >"$tmp/k.hip"
    run "HIP (clang -x hip, $hipinc)" "$clangxx" -x hip --offload-arch=gfx90a -nogpulib -nogpuinc \
        -D__HIP_PLATFORM_AMD__ ${hipinc:+$([ "$hipinc" != /usr/include ] && echo "-isystem $hipinc")} -I"$top/include" -std=c++17 -Wall -Werror \
        -Wno-unused-command-line-argument -fsyntax-only "$tmp/k.hip"
else
    echo "SKIP: uccl_device.cuh as HIP: no HIP headers or no clang++"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
