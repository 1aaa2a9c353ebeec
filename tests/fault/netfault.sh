#!/bin/sh
# make check: a network fault over tcp. The server runs in a network
# namespace behind a veth pair this script creates (private addresses
# 10.231.X.1/.2 on the pair only); mid-transfer the link goes down: the
# client's operation must fail with TIMEOUT (or PEER_FAILED) within
# UCCL_TIMEOUT_MS, its close must be clean (within UCCL_TIMEOUT_MS), and once the link is
# back a new connection must move bytes intact. SKIP (exit 77) where network
# namespaces are not permitted (not root, no ip, a container without them).
prog=${top_builddir:-.}/tests/fault/t_netfault
skip() { echo "SKIP: netfault: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create a network namespace"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
ns=uccl-nf-$$ ha=unf$$a hb=unf$$b x=$(( $$ % 250 + 1 ))
ip netns add "$ns" 2>/dev/null || skip "ip netns add is not permitted here"
dir=$(mktemp -d)
cleanup() {
    touch "$dir/quit"
    [ -n "$cpid" ] && kill -9 "$cpid" 2>/dev/null
    [ -n "$spid" ] && { sleep 0.3; kill -9 "$spid" 2>/dev/null; }
    ip link del "$ha" 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
ip link add "$ha" type veth peer name "$hb" 2>/dev/null || skip "cannot create a veth pair"
ip link set "$hb" netns "$ns" &&
    ip addr add "10.231.$x.1/30" dev "$ha" && ip link set "$ha" up &&
    ip -n "$ns" addr add "10.231.$x.2/30" dev "$hb" && ip -n "$ns" link set "$hb" up &&
    ip -n "$ns" link set lo up || { echo "FAIL: setting up the veth pair"; exit 1; }
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-1500}
export UCCL_TIMEOUT_MS
echo "# veth $ha (10.231.$x.1) <-> $hb (10.231.$x.2, namespace $ns), UCCL_TIMEOUT_MS=$UCCL_TIMEOUT_MS"
# wait_for FILE SECONDS
wait_for() {
    n=0
    while [ ! -e "$dir/$1" ]; do
        n=$((n + 1))
        [ $n -gt $(( $2 * 10 )) ] && { echo "FAIL: no $1 within $2 s"; exit 1; }
        sleep 0.1
    done
}
UCCL_TRANSPORTS=tcp UCCL_OOB_IFADDR=10.231.$x.2 ip netns exec "$ns" "$prog" server "$dir" &
spid=$!
wait_for addr 20
UCCL_TRANSPORTS=tcp UCCL_OOB_IFADDR=10.231.$x.1 "$prog" client "$dir" &
cpid=$!
wait_for go 30
ip link set "$ha" down && echo "# link $ha down mid-transfer"
wait_for failed $(( UCCL_TIMEOUT_MS / 1000 + 20 ))
ip link set "$ha" up && echo "# link $ha up again"
touch "$dir/up"
wait "$cpid"
rc=$?
cpid=
touch "$dir/quit"
wait "$spid"
src=$?
spid=
[ $src = 0 ] || { echo "FAIL: the server exited with $src"; rc=1; }
[ $rc = 0 ] && echo "PASS: netfault: link down -> timeout error, clean close, new connection works"
exit $rc
