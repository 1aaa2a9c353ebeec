#!/bin/bash
# The include rules of docs/LAYERS.md, checked: every #include of src/, coll/,
# tools/, examples/ and include/ must point at a layer its folder may use,
# and vendor headers (verbs, libfabric, hwloc, CUDA/HIP, MPI) may appear only
# in the folder that owns them. tests/ is exempt (unit tests reach internals).
# Usage: scripts/check-layers.sh [TOP]   check the tree at TOP (default: this one)
#        scripts/check-layers.sh --self-test   plant violations in a scratch tree
# Also run by 'make check' (with top_srcdir set), where it self-tests first.
set -u

# Layer of a repository path (what it is part of).
layer_of() {
    case $1 in
    include/uccl/*) echo public ;;
    src/util/*) echo util ;;
    src/gpu/*) echo gpu ;;
    src/topo/*) echo topo ;;
    src/core/*) echo core ;;
    src/tp/common/* | src/tp/staging.[ch]) echo tp-common ;;
    src/tp/*/*) local t=${1#src/tp/}; echo "tp:${t%%/*}" ;;
    src/tp/*) echo tp-registry ;;
    src/mpi/*) echo mpi ;;
    src/proxy/*) echo proxy ;;
    coll/*) echo coll ;;
    python/*) echo python ;;
    tools/*) echo tools ;;
    examples/*) echo examples ;;
    *) echo other ;;
    esac
}

# May a file of layer $1 (path $3) include our header of layer $2 (path $4)?
allowed() {
    local from=$1 to=$2 file=$3 hdr=$4
    [ "$to" = public ] && return 0
    [ "$from" = "$to" ] && return 0 # a folder's own headers
    case $from in
    util | public | mpi | coll | python | examples) return 1 ;;
    gpu | topo) [ "$to" = util ] ;;
    core) case $to in util | gpu | topo) return 0 ;; esac; return 1 ;;
    # transports see the core only through its SPI header; core.h is private
    tp-common) case $to in util | gpu | topo) return 0 ;; core) [ "$hdr" = src/core/tp_api.h ] ;;
        *) return 1 ;; esac ;;
    tp:*) case $to in util | gpu | topo | tp-common) return 0 ;; core) [ "$hdr" = src/core/tp_api.h ] ;;
        *) return 1 ;; esac ;;
    tp-registry) case $to in util) return 0 ;; core) [ "$hdr" = src/core/tp_api.h ] ;;
        *) return 1 ;; esac ;;
    proxy) case $to in util | gpu) return 0 ;; esac; return 1 ;; # public API + gpu + util
    tools) # public API only, but for what no public call reports yet
        case "$file:$hdr" in
        tools/uccl_info.c:src/core/tp_api.h | tools/uccl_info.c:src/core/core_config.h | \
            tools/uccl_info.c:src/gpu/gpu.h | tools/uccl_info.c:src/topo/topo.h | \
            tools/perf_cuda.c:src/gpu/gpu.h | tools/perf_coll_gpu.c:src/gpu/gpu.h) return 0 ;;
        esac
        return 1 ;;
    *) return 1 ;;
    esac
}

# Vendor (system) headers that only their owner may include.
vendor_ok() {
    local from=$1 hdr=$2 file=$3
    case $hdr in
    infiniband/* | rdma/rdma_*) [ "$from" = tp:verbs ] ;;
    rdma/*) [ "$from" = tp:ofi ] || case $file in tools/perf_ofi.c | tools/perf_ofi_raw.c | tools/perf_ofi.h) true ;; *) false ;; esac ;; # its raw reference
    hwloc.h | hwloc/*) [ "$from" = topo ] ;;
    cuda.h | cuda_runtime*.h | cuda/* | hip/* | nvml.h | cuda_runtime_api.h)
        [ "$from" = gpu ] && return 0
        # the device API is compiled by hipcc into the caller's kernels
        [ "$file:$hdr" = include/uccl/uccl_device.cuh:hip/hip_runtime.h ] ;;
    mpi.h) case $from in mpi) return 0 ;; esac
        case $file in include/uccl/uccl_mpi.h | tools/uccl_perf.c | tools/perf_opts.c | tools/perf_p2p.c | tools/perf_p2p.h | tools/perf_coll.c | tools/perf_coll_gpu.c | tools/perf_ofi.c | tools/perf_ofi_raw.c | tools/perf_ofi.h) return 0 ;; esac
        return 1 ;;
    CUnit/*) return 1 ;;
    *) return 0 ;;
    esac
}

# Resolve a quoted include of file $2 (tree $1) to a repository path.
resolve() {
    local top=$1 file=$2 hdr=$3 dir
    dir=$(dirname "$file")
    if [ -f "$top/$dir/$hdr" ]; then
        realpath -m --relative-to="$top" "$top/$dir/$hdr"
    elif [ -f "$top/src/$hdr" ]; then
        echo "src/$hdr"
    elif [ -f "$top/include/$hdr" ]; then
        echo "include/$hdr"
    elif [ "$hdr" = uccl_build.h ]; then
        echo generated
    else
        echo unresolved
    fi
}

# Check the tree at $1; prints violations, returns their count (capped).
check_tree() {
    local top=$1 bad=0 files=0 incs=0 file from line hdr kind target to
    while IFS= read -r file; do
        files=$((files + 1))
        from=$(layer_of "$file")
        while IFS= read -r line; do
            incs=$((incs + 1))
            kind=${line:0:1}
            hdr=${line:1:${#line}-2}
            if [ "$kind" = '<' ]; then
                case $hdr in
                uccl/*) continue ;;
                esac
                vendor_ok "$from" "$hdr" "$file" && continue
                echo "$file: <$hdr>: vendor header outside its owner ($from)"
                bad=$((bad + 1))
                continue
            fi
            target=$(resolve "$top" "$file" "$hdr")
            case $target in
            generated) continue ;;
            unresolved) echo "$file: \"$hdr\": not found in the tree"; bad=$((bad + 1)); continue ;;
            esac
            to=$(layer_of "$target")
            if ! allowed "$from" "$to" "$file" "$target"; then
                echo "$file: \"$hdr\": $from may not include $to ($target)"
                bad=$((bad + 1))
            fi
        done < <(sed -n -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"][^>"]+[>"]).*/\1/p' \
            "$top/$file")
    done < <(cd "$top" && find src coll tools examples include python \
        \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inc' \
        -o -name '*.cc' -o -name '*.cpp' \) -type f 2>/dev/null | sort)
    echo "check-layers: $files files, $incs includes, $bad violations" >&2
    [ "$bad" -lt 250 ] || bad=250
    return "$bad"
}

# Plant one violation per rule in a scratch tree and expect each caught.
self_test() {
    local tmp caught=0 planted=0
    tmp=$(mktemp -d) || return 1
    mkdir -p "$tmp"/{src/util,src/gpu,src/topo,src/core,src/tp/tcp,src/tp/shm,src/tp/verbs,src/proxy,coll,tools,include/uccl}
    touch "$tmp"/include/uccl/uccl.h "$tmp"/src/util/log.h "$tmp"/src/gpu/gpu.h \
        "$tmp"/src/topo/topo.h "$tmp"/src/core/core.h "$tmp"/src/core/tp_api.h \
        "$tmp"/src/tp/tcp/tcp.h "$tmp"/src/tp/shm/shm.h
    printf '#include <uccl/uccl.h>\n#include "util/log.h"\n#include <stdio.h>\n' >"$tmp/src/util/ok.c"
    printf '#include "util/log.h"\n#include "tcp.h"\n#include "core/tp_api.h"\n' >"$tmp/src/tp/tcp/ok.c"
    printf '#include "core/tp_api.h"\n#include <infiniband/verbs.h>\n' >"$tmp/src/tp/verbs/ok.c"
    printf '#include "core/tp_api.h"\n#include "core/core.h"\n' >"$tmp/src/core/ok.c"
    printf '#include "util/log.h"\n#include <cuda_runtime_api.h>\n' >"$tmp/src/gpu/ok.c"
    if ! out=$(check_tree "$tmp" 2>/dev/null); then
        echo "self-test: a clean tree was refused:"; echo "$out"; rm -rf "$tmp"; return 1
    fi
    plant() { # plant FILE LINE: the tree must then fail naming FILE
        planted=$((planted + 1))
        printf '%s\n' "$2" >"$tmp/$1"
        if out=$(check_tree "$tmp" 2>/dev/null) || ! grep -q "^$1:" <<<"$out"; then
            echo "self-test: not caught: $1: $2"
        else
            caught=$((caught + 1))
        fi
        rm -f "$tmp/$1"
    }
    plant src/util/bad.c '#include "core/core.h"'
    plant src/util/bad2.c '#include "gpu/gpu.h"'
    plant src/gpu/bad.c '#include "core/core.h"'
    plant src/topo/bad.c '#include "gpu/gpu.h"'
    plant src/core/bad.c '#include "tp/tcp/tcp.h"'
    plant src/tp/tcp/bad.c '#include "tp/shm/shm.h"'
    plant src/tp/tcp/bad2.c '#include "../shm/shm.h"'
    plant src/tp/tcp/bad4.c '#include "core/core.h"'
    plant src/tp/tcp/bad5.c '#include "../../core/core.h"'
    mkdir -p "$tmp/src/tp/common"
    plant src/tp/common/bad.c '#include "core/core.h"'
    plant src/tp/bad.c '#include "core/core.h"'
    plant coll/bad.c '#include "core/core.h"'
    plant tools/bad.c '#include "core/core.h"'
    plant src/core/bad2.c '#include <infiniband/verbs.h>'
    plant src/tp/tcp/bad3.c '#include <cuda_runtime_api.h>'
    plant src/core/bad3.c '#include <hwloc.h>'
    plant coll/bad2.c '#include <mpi.h>'
    plant src/util/bad3.c '#include "nowhere.h"'
    plant src/proxy/bad.c '#include "core/core.h"'
    plant src/proxy/bad2.c '#include "tp/tcp/tcp.h"'
    plant src/proxy/bad3.c '#include <cuda_runtime_api.h>'
    rm -rf "$tmp"
    echo "check-layers self-test: $caught of $planted planted violations caught" >&2
    [ "$caught" -eq "$planted" ]
}

case ${1:-} in
--self-test) self_test; exit ;;
-h | --help) sed -n '2,8p' "$0"; exit 0 ;;
esac
top=${1:-${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}}
rc=0
if [ -n "${top_srcdir:-}" ] && [ $# -eq 0 ]; then # under make check: prove it can fail
    self_test || rc=1
fi
check_tree "$top" || rc=1
exit $rc
