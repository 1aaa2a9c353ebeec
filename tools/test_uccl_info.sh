#!/bin/sh
# uccl_info runs on this machine and on a recorded topology, and its --json
# output parses and names the NIC each GPU of that topology would use.
set -e
info=${top_builddir:-.}/tools/uccl_info
data=${top_srcdir:-.}/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$info" >"$tmp/live.txt"
grep -q '^libuccl ' "$tmp/live.txt"
grep -q 'transports (compiled in)' "$tmp/live.txt"
"$info" -c >"$tmp/config.txt"
grep -q '^UCCL_NET_DEVICES=' "$tmp/config.txt"
"$info" --json >"$tmp/live.json"
if grep -q '"topology":{"status":"UCCL_ERR_UNSUPPORTED"' "$tmp/live.json"; then
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/live.json"
    else
        echo "SKIP: uccl_info --json parses: python3 not installed"
    fi
    echo "SKIP: uccl_info topology checks: built without hwloc"
    exit 0
fi
"$info" --topo-xml "$data/synth-dgx-h100.xml" --json >"$tmp/dgx.json"
if "$info" --topo-xml "$data/does-not-exist.xml" >"$tmp/missing.txt" 2>&1; then
    echo "uccl_info accepted a missing XML file"; exit 1
fi
grep -q 'not available' "$tmp/missing.txt"
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: uccl_info --json contents: python3 not installed"
else
    python3 - "$tmp/live.json" "$tmp/dgx.json" <<'PY'
import json, sys
json.load(open(sys.argv[1]))
dgx = json.load(open(sys.argv[2]))
topo = dgx["topology"]
assert len(topo["gpus"]) == 8, topo["gpus"]
rdma = [c for c in topo["choices"] if c["for"].startswith("GPU") and not c["for"].endswith("tcp")]
got = [c["nics"][0]["name"] for c in rdma]
assert got == ["mlx5_%d" % i for i in range(8)], got
assert all(c["dist"] == "PIX" for c in rdma), rdma
PY
fi
echo "uccl_info: 1 passed, 0 failed"
