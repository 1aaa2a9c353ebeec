# shellcheck shell=sh
# tests/fault/lib.sh: what the network fault scripts share (netfault.sh,
# netloss.sh, tests/rxe/netfault-verbs.sh), sourced by them. t_netfault's
# server and client coordinate through files in $dir (see t_netfault.c).
#
# The caller sets prog (t_netfault), name (for SKIP/PASS lines), defines
#   nf_server / nf_client  start t_netfault server/client in the background
#                          ("$prog" server "$dir" &, with its environment)
#   nf_fault / nf_restore  inject the fault mid-transfer / take it back
#   nf_cleanup_extra       (optional) undo its own setup (links, namespace)
# and calls nf_begin, then nf_run SECONDS (the time allowed for the fault to
# show, from go), which exits with the verdict.

nf_skip() { echo "SKIP: $name: $*"; exit 77; }

nf_cleanup() {
    touch "$dir/quit"
    [ -n "$cpid" ] && kill -9 "$cpid" 2>/dev/null
    [ -n "$spid" ] && { sleep 0.3; kill -9 "$spid" 2>/dev/null; }
    command -v nf_cleanup_extra >/dev/null 2>&1 && nf_cleanup_extra
    rm -rf "$dir"
}

nf_begin() {
    cpid='' spid=''
    dir=$(mktemp -d)
    trap nf_cleanup EXIT
}

# wait_for FILE SECONDS: until $dir/FILE exists; FAIL (exit 1) after SECONDS
wait_for() {
    n=0
    while [ ! -e "$dir/$1" ]; do
        n=$((n + 1))
        [ $n -gt $(($2 * 10)) ] && { echo "FAIL: no $1 within $2 s"; exit 1; }
        sleep 0.1
    done
}

# nf_veth NS_PREFIX: a network namespace with one end of a veth pair in it,
# private addresses 10.231.X.1 (here, $ha) and 10.231.X.2 (in $ns, $hb) on
# the pair only. SKIP where namespaces or veth pairs are not permitted.
nf_veth() {
    [ "$(id -u)" = 0 ] || nf_skip "needs root to create a network namespace"
    command -v ip >/dev/null 2>&1 || nf_skip "no ip command (iproute2)"
    ns=$1-$$ ha=unf$$a hb=unf$$b x=$(($$ % 250 + 1))
    ip netns add "$ns" 2>/dev/null || { ns=; nf_skip "ip netns add is not permitted here"; }
    ip link add "$ha" type veth peer name "$hb" 2>/dev/null || {
        nf_veth_cleanup
        nf_skip "cannot create a veth pair"
    }
    ip link set "$hb" netns "$ns" &&
        ip addr add "10.231.$x.1/30" dev "$ha" && ip link set "$ha" up &&
        ip -n "$ns" addr add "10.231.$x.2/30" dev "$hb" && ip -n "$ns" link set "$hb" up &&
        ip -n "$ns" link set lo up || { echo "FAIL: setting up the veth pair"; exit 1; }
    ip_here=10.231.$x.1 ip_ns=10.231.$x.2
}

nf_veth_cleanup() {
    [ -n "${ns:-}" ] || return 0
    ip link del "$ha" 2>/dev/null
    ip netns del "$ns" 2>/dev/null
}

# nf_run SECONDS: server, client, the fault once the client's first operation
# is done (go), its restoration once the client saw the error (failed, within
# SECONDS), then both must end with 0.
nf_run() {
    [ -n "$spid" ] || { nf_server; spid=$!; } # a caller may have started it already
    wait_for addr 30
    nf_client
    cpid=$!
    wait_for go 60
    nf_fault
    wait_for failed "$1"
    nf_restore
    touch "$dir/up"
    wait "$cpid"
    rc=$?
    cpid=
    touch "$dir/quit"
    wait "$spid"
    src=$?
    spid=
    [ $rc = 0 ] || echo "FAIL: the client exited with $rc"
    [ $src = 0 ] || { echo "FAIL: the server exited with $src"; rc=1; }
    return $rc
}
