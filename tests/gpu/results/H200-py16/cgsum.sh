#!/bin/bash
# py16: per window, the instructions in python3.11 and _uccl.so (exclusive) and in
# uccl_req_bytes, from cg.sh's callgrind files: cgsum.sh FILE.out.2... (ITERS: windows, 500)
n=${ITERS:-500}
for f in "$@"; do
  callgrind_annotate --threshold=100 --inclusive=no $f 2>/dev/null | tr -d , | grep -v "100.0%" |
  awk -v n=$n -v f=$(basename $f) '$1 ~ /^[0-9]+$/ && /\[/ {if ($0 ~ /python3|_uccl.so/) p+=$1; if ($0 ~ /req.c:uccl_req_bytes \[/) b+=$1}
     END {printf "%-28s python+extension %5d, uccl_req_bytes %4d, sum %5d\n", f, p/n, b/n, (p+b)/n}'
done
