#!/bin/bash
# ofi-perf.sh BUILD_DIR [OUT_DIR]: issue [G]'s benchmark. For each provider
# in OFI_PERF_PROVIDERS (default "shm tcp;ofi_rxm"): tools/perf_ofi (raw
# libfabric next to libuccl over ofi in the same job, op rows the median of
# OFI_PERF_REPEAT alternated runs, default 7; the seed's iov pattern, adjacent
# and scattered; send's parts; OFI_PERF_OPS picks perf_ofi's --ops), for
# each variant in OFI_PERF_VARIANTS (space-separated, "-" = the defaults or
# VAR=VAL[,VAR=VAL...] exported to both ranks); then uccl_perf p2p
# --transport ofi for write, read and send (libuccl next to Open MPI).
# Tables to stdout and OUT_DIR/perf_ofi-*.txt, JSON in OUT_DIR.
set -u
build=${1:?usage: ofi-perf.sh BUILD_DIR [OUT_DIR]}
out=${2:-.}
mkdir -p "$out"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
bind=--bind-to\ core
[ "$(nproc)" -lt 4 ] && bind="--oversubscribe --bind-to none"
repeat=${OFI_PERF_REPEAT:-7}
ops=${OFI_PERF_OPS:-write,read,send,seed,scatter,local}
rc=0

# perf_ofi's table (stdin) as JSON: op rows, seed rows, local-pieces rows, send's parts
to_json() { # PROVIDER VARIANT
    awk -v prov="$1" -v var="$2" -v host="$(hostname)" -v nproc="$(nproc)" -v rep="$repeat" '
        BEGIN { printf "{\"tool\": \"perf_ofi\", \"provider\": \"%s\", \"variant\": \"%s\", " \
                       "\"host\": \"%s\", \"cpus\": %s, \"repeat\": %s, \"unit\": \"GB/s\", " \
                       "\"rows\": [", prov, var, host, nproc, rep; sect = "op"; n = 0 }
        /^# seed pattern/ { sect = "seed" } /^# scattered/ { sect = "scatter" }
        /^# seed bytes from n local/ { sect = "local" } /^# send.s parts/ { sect = "parts" }
        /^#/ || $2 == "size" || $1 == "size" || $1 == "pieces" || $1 == "lpieces" { next }
        NF >= 4 { printf "%s{\"kind\": \"%s\", ", n++ ? ", " : "", sect
            if (sect == "parts") printf "\"size\": %s, \"raw_send\": %s, \"raw_rts_send\": %s, " \
                                        "\"raw_rts_send_ratio\": %s, \"raw_rts_cts_write\": %s, " \
                                        "\"raw_rts_cts_write_ratio\": %s, \"uccl\": %s, " \
                                        "\"uccl_ratio\": %s, \"us_per_msg\": [%s, %s, %s, %s], " \
                                        "\"raw_rts_send_late\": %s, \"raw_rts_send_late_ratio\": %s, " \
                                        "\"raw_rts_send_late_us\": %s}", \
                                        $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                                        (NF >= 15 ? $13 : "null"), (NF >= 15 ? $14 : "null"), \
                                        (NF >= 15 ? $15 : "null")
            else if (sect == "op") printf "\"op\": \"%s\", \"size\": %s, \"raw\": %s, \"uccl\": %s, " \
                                     "\"ratio\": %s, \"pair_ratio\": %s, \"pair_q1\": %s, " \
                                     "\"pair_q3\": %s}", $1, $2, $3, $4, $5, (NF >= 8 ? $6 : "null"), \
                                     (NF >= 8 ? $7 : "null"), (NF >= 8 ? $8 : "null")
            else printf "\"pieces\": %s, \"raw\": %s, \"uccl\": %s, \"ratio\": %s, " \
                        "\"uccl_vs_1piece\": %s, \"vs_1piece_min\": %s, \"vs_1piece_max\": %s}", \
                        $1, $2, $3, $4, $5, (NF >= 7 ? $6 : "null"), (NF >= 7 ? $7 : "null") }
        END { print "]}" }'
}

for prov in ${OFI_PERF_PROVIDERS:-shm tcp\;ofi_rxm}; do
    tag=$(echo "$prov" | tr ';' '_')
    for var in ${OFI_PERF_VARIANTS:--}; do
        vtag=$( [ "$var" = - ] && echo default || echo "$var" | tr ',=' '__')
        envs=()
        [ "$var" != - ] && for kv in ${var//,/ }; do envs+=(-x "$kv"); done
        echo "### perf_ofi $prov, variant $var, repeat $repeat (load: $(cut -d' ' -f1-3 /proc/loadavg))"
        timeout 300 mpirun $root $bind -np 2 "${envs[@]}" "$build/tools/perf_ofi" --provider "$prov" \
            --repeat "$repeat" --ops "$ops" 2>&1 | grep -v '^\[uccl' |
            tee "$out/perf_ofi-$tag-$vtag.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
        to_json "$prov" "$var" <"$out/perf_ofi-$tag-$vtag.txt" >"$out/perf_ofi-$tag-$vtag.json"
    done
    [ "${OFI_PERF_UCCL_PERF:-1}" = 1 ] || continue
    for op in write read send; do
        echo "### uccl_perf p2p --transport ofi ($prov) --op $op"
        osc=$( [ "$op" = send ] || echo "--mca osc pt2pt")
        UCCL_OFI_PROVIDER=$prov timeout 300 mpirun $root $bind -np 2 -x UCCL_OFI_PROVIDER $osc \
            "$build/tools/uccl_perf" p2p --transport ofi --op "$op" --min 64K --max 4M \
            --json "$out/uccl_perf-ofi-$tag-$op.json" 2>&1 | grep -v '^\[uccl'
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    done
done
exit $rc
