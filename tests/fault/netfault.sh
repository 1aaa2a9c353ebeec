#!/bin/sh
# make check: a network fault over tcp. Client and server run in two network
# namespaces this script creates, joined by a veth pair (loopback addresses
# 127.231.X.1/.2 on the pair only: tests/fault/lib.sh); mid-transfer the link goes down: the
# client's operation must fail with TIMEOUT (or PEER_FAILED) within
# UCCL_TIMEOUT_MS, its close must be clean (within UCCL_TIMEOUT_MS), its fds
# must be back to what they were, and once the link is back a new
# connection must move bytes intact. SKIP (exit 77) where network
# namespaces are not permitted (not root, no ip, a container without them).
prog=${top_builddir:-.}/tests/fault/t_netfault name=netfault
. "$(dirname "$0")/lib.sh"
nf_begin
nf_cleanup_extra() { nf_veth_cleanup; }
nf_veth uccl-nf
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-1500} UCCL_TRANSPORTS=tcp
export UCCL_TIMEOUT_MS UCCL_TRANSPORTS
echo "# veth $ha ($ip_here, namespace $ns_here) <-> $hb ($ip_ns, namespace $ns), UCCL_TIMEOUT_MS=$UCCL_TIMEOUT_MS"
nf_server() { UCCL_OOB_IFADDR=$ip_ns ip netns exec "$ns" "$prog" server "$dir" & }
nf_client() { UCCL_OOB_IFADDR=$ip_here nf_here "$prog" client "$dir" & }
nf_fault() { ip -n "$ns_here" link set "$ha" down && echo "# link $ha down mid-transfer"; }
nf_restore() { ip -n "$ns_here" link set "$ha" up && echo "# link $ha up again"; }
nf_run $((UCCL_TIMEOUT_MS / 1000 + 20)) || exit 1
echo "PASS: netfault: link down -> timeout error, clean close, new connection works"
