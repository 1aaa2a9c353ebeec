#!/bin/sh
# make check: packets dropped over tcp. Client and server run in two network
# namespaces this script creates, joined by a veth pair (loopback addresses
# 127.231.X.1/.2 on the pair only: tests/fault/lib.sh); nftables rules in the
# server's namespace drop packets both ways:
#  1. NETLOSS_PCT % (default 5) at random, for the whole connection: every
#     transfer (8 MiB written and read back, 1 MiB sent and echoed, 4 rounds)
#     must complete byte for byte (tcp retransmits), and the rules' counters
#     must show that packets were dropped;
#  2. all of them, mid-transfer: the client's operation must end with
#     UCCL_ERR_TIMEOUT within UCCL_TIMEOUT_MS (1500), its close must be clean
#     and its fds back to their count; once the rules are gone a new
#     connection must move bytes intact.
# SKIP (exit 77) where namespaces are not permitted or nft (Debian package
# nftables, scripts/install-deps.sh) is missing.
prog=${top_builddir:-.}/tests/fault/t_netfault name=netloss
. "$(dirname "$0")/lib.sh"
command -v nft >/dev/null 2>&1 || nf_skip "no nft command (Debian package nftables)"
nf_begin
nf_cleanup_extra() { nf_veth_cleanup; }
nf_veth uccl-nl
nft_ns() { ip netns exec "$ns" nft "$@"; }
nft_ns add table inet uccl_loss 2>/dev/null &&
    nft_ns add chain inet uccl_loss in '{ type filter hook input priority 0; }' &&
    nft_ns add chain inet uccl_loss out '{ type filter hook output priority 0; }' ||
    nf_skip "nftables cannot filter in a network namespace here"
# drop EXPR: every packet in and out of the namespace that EXPR selects
drop() {
    nft_ns flush chain inet uccl_loss in && nft_ns flush chain inet uccl_loss out &&
        nft_ns add rule inet uccl_loss in "$@" counter drop &&
        nft_ns add rule inet uccl_loss out "$@" counter drop
}
dropped() { # packets the rules dropped so far
    nft_ns list table inet uccl_loss | sed -n 's/.*counter packets \([0-9]*\).*/\1/p' |
        awk '{ n += $1 } END { print n + 0 }'
}
pct=${NETLOSS_PCT:-5}
UCCL_TRANSPORTS=tcp
export UCCL_TRANSPORTS
echo "# veth $ha ($ip_here, namespace $ns_here) <-> $hb ($ip_ns, namespace $ns, nftables there)"

nf_server() { UCCL_TIMEOUT_MS=5000 UCCL_OOB_IFADDR=$ip_ns ip netns exec "$ns" "$prog" server "$dir" & }
nf_server
spid=$!
wait_for addr 30
drop numgen random mod 100 '<' "$pct" || { echo "FAIL: installing the loss rules"; exit 1; }
echo "# $pct % of the packets dropped both ways at random"
# a lost SYN or tail costs a retransmission timeout (200 ms, doubling): the
# bound on each wait is generous here, the transfers must simply complete
UCCL_TIMEOUT_MS=30000 UCCL_OOB_IFADDR=$ip_here nf_here "$prog" client-lossy "$dir" ||
    { echo "FAIL: transfers under $pct % loss"; exit 1; }
n=$(dropped)
echo "# the rules dropped $n packets"
[ "$n" -gt 0 ] || { echo "FAIL: no packet was dropped: the loss never hit the transfers"; exit 1; }
nft_ns flush chain inet uccl_loss in && nft_ns flush chain inet uccl_loss out

UCCL_TIMEOUT_MS=1500 NETFAULT_EXPECT=timeout
export UCCL_TIMEOUT_MS NETFAULT_EXPECT
nf_client() { UCCL_OOB_IFADDR=$ip_here nf_here "$prog" client "$dir" & }
nf_fault() { drop meta l4proto tcp && echo "# every tcp packet dropped mid-transfer"; }
nf_restore() {
    echo "# the rules dropped $(dropped) packets; rules removed"
    nft_ns flush chain inet uccl_loss in && nft_ns flush chain inet uccl_loss out
}
nf_run $((UCCL_TIMEOUT_MS / 1000 + 20)) || exit 1
echo "PASS: netloss: $pct % loss -> transfers intact; all dropped -> TIMEOUT, clean close, fds back, new connection works"
