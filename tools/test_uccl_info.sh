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
# the configuration through the public uccl_config_dump: an unknown variable
# is listed with the closest legal name, a malformed value keeps the default
UCCL_TIMEOUT_MX=7 UCCL_RCACHE=maybe "$info" -c >"$tmp/config-env.txt"
grep -q '^UCCL_TIMEOUT_MX=7$' "$tmp/config-env.txt"
grep -q 'did you mean UCCL_TIMEOUT_MS?' "$tmp/config-env.txt"
grep -q "invalid value 'maybe' ignored" "$tmp/config-env.txt"
UCCL_TIMEOUT_MX=7 UCCL_TIMEOUT_MS=1234 "$info" -c --json >"$tmp/config.json"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/config.json" <<'PY'
import json, sys
cfg = {c["name"]: c for c in json.load(open(sys.argv[1]))["config"]}
assert cfg["UCCL_TIMEOUT_MS"]["value"] == "1234" and cfg["UCCL_TIMEOUT_MS"]["state"] == "env", cfg["UCCL_TIMEOUT_MS"]
assert cfg["UCCL_TIMEOUT_MX"]["state"] == "unknown", cfg["UCCL_TIMEOUT_MX"]
assert cfg["UCCL_TIMEOUT_MX"]["hint"] == "UCCL_TIMEOUT_MS", cfg["UCCL_TIMEOUT_MX"]
assert cfg["UCCL_LOG_LEVEL"]["state"] == "default", cfg["UCCL_LOG_LEVEL"]
PY
fi
# every variable of the README's Configuration section is one the registry
# knows (uccl_info -c documents it, and setting it warns of nothing)
readme=${top_srcdir:-.}/README.md
if [ -r "$readme" ] && command -v python3 >/dev/null 2>&1; then
    "$info" -c --json >"$tmp/known.json"
    python3 - "$readme" "$tmp/known.json" <<'PY'
import json, re, sys
section = open(sys.argv[1]).read().split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
doc = set(re.findall(r"^\| `(UCCL_[A-Z0-9_]+)`", section, re.M))
known = {c["name"] for c in json.load(open(sys.argv[2]))["config"] if c["state"] != "unknown"}
assert len(doc) > 10 and not doc - known, "README variables uccl_info -c does not know: %s" % sorted(doc - known)
PY
    # and every UCCL_* variable the library, the collectives and the Python
    # binding read with getenv (the registry warns of any it does not know)
    for d in src coll python/src; do
        grep -rhoE 'getenv\("UCCL_[A-Z0-9_]+"' "${top_srcdir:-.}/$d" --include='*.c' || true
    done | sed 's/getenv("//; s/"$//' | sort -u >"$tmp/getenv.txt"
    python3 - "$tmp/getenv.txt" "$tmp/known.json" <<'PY'
import json, sys
read = set(open(sys.argv[1]).read().split())
known = {c["name"] for c in json.load(open(sys.argv[2]))["config"] if c["state"] != "unknown"}
assert len(read) > 10 and not read - known, "variables read that uccl_info -c does not know: %s" % sorted(read - known)
PY
    UCCL_COLL_STREAM_CACHE=0 "$info" -c >"$tmp/cache.txt"
    grep -A1 '^UCCL_COLL_STREAM_CACHE=0$' "$tmp/cache.txt" | grep -q 'plan cache' ||
        { grep -A1 COLL_STREAM_CACHE "$tmp/cache.txt"; echo "UCCL_COLL_STREAM_CACHE=0 not known"; exit 1; }
fi
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
# a stray argument is named, not just answered with the usage
if "$info" extra >"$tmp/extra.txt" 2>&1; then
    echo "uccl_info accepted a stray argument"; exit 1
fi
grep -q "unexpected argument 'extra'" "$tmp/extra.txt" ||
    { cat "$tmp/extra.txt"; echo "uccl_info extra: the argument is not named"; exit 1; }
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
