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

# nf_veth NS_PREFIX: two network namespaces joined by a veth pair: $ns_here
# (the client's side: end $ha, address $ip_here) and $ns (the server's: end
# $hb, $ip_ns). The addresses are loopback ones, 127.231.X.1 and .2 on a /30,
# which route_localnet lets leave lo in those two namespaces only: nothing is
# added to this machine's own network namespace, so no address ever reaches a
# real network and two runs side by side (make check -j) never meet. Run the
# client side with nf_here. SKIP where namespaces or veth pairs are not permitted.
nf_veth() {
    [ "$(id -u)" = 0 ] || nf_skip "needs root to create a network namespace"
    command -v ip >/dev/null 2>&1 || nf_skip "no ip command (iproute2)"
    ns_here=$1-$$-a ns=$1-$$-b ha=unf$$a hb=unf$$b x=$(($$ % 250 + 1))
    ip netns add "$ns_here" 2>/dev/null || { ns_here='' ns=''; nf_skip "ip netns add is not permitted here"; }
    ip netns add "$ns" 2>/dev/null || { nf_veth_cleanup; nf_skip "ip netns add is not permitted here"; }
    ip -n "$ns_here" link add "$ha" type veth peer name "$hb" netns "$ns" 2>/dev/null || {
        nf_veth_cleanup
        nf_skip "cannot create a veth pair"
    }
    ip_here=127.231.$x.1 ip_ns=127.231.$x.2
    nf_veth_end "$ns_here" "$ha" "$ip_here" && nf_veth_end "$ns" "$hb" "$ip_ns" ||
        { echo "FAIL: setting up the veth pair"; exit 1; }
}

# nf_veth_end NS DEV ADDR: lo and DEV up in NS, DEV with the loopback ADDR/30
nf_veth_end() {
    ip -n "$1" link set lo up &&
        ip netns exec "$1" sysctl -qw net.ipv4.conf.all.route_localnet=1 \
            "net.ipv4.conf.$2.route_localnet=1" &&
        ip -n "$1" addr add "$3/30" dev "$2" && ip -n "$1" link set "$2" up
}

nf_here() { ip netns exec "$ns_here" "$@"; }

nf_veth_cleanup() {
    [ -n "${ns_here:-}" ] && ip netns del "$ns_here" 2>/dev/null # the pair goes with it
    [ -n "${ns:-}" ] && ip netns del "$ns" 2>/dev/null
    return 0
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
