#!/bin/sh
# netfault-verbs.sh: a network fault over verbs, inside the Soft-RoCE VM
# (tests/rxe/check.sh runs it there). t_netfault's server runs on $RXE_DEV2
# (veth1), its client on $RXE_DEV (veth0); mid-transfer veth1 goes down (no
# nftables in the VM: the link itself is taken down, which drops every RoCE
# packet both ways). The client's write or read must fail with TIMEOUT (or
# PEER_FAILED) within UCCL_TIMEOUT_MS, its close must be clean; once the
# link is back a new connection must move bytes intact. Exit 77 outside the VM.
prog=${top_builddir:-.}/tests/fault/t_netfault name=netfault-verbs
. "$(dirname "$0")/../fault/lib.sh"
[ -n "${RXE_DEV:-}" ] && [ -n "${RXE_IP2:-}" ] && ip link show veth1 >/dev/null 2>&1 ||
    nf_skip "only inside the Soft-RoCE VM (tests/vm/run.sh)"
nf_begin
link_up() { # the routes through the veth pair go with the link: put them back
    ip link set veth1 up
    ip route replace 192.0.2.2 dev veth0 src 192.0.2.1 table 12 2>/dev/null
    ip route replace 192.0.2.1 dev veth1 src 192.0.2.2 table 11 2>/dev/null
}
nf_cleanup_extra() { link_up; }
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-3000}
UCCL_TRANSPORTS=verbs
# the allowance past the timeout counts from the first operation's end; in the
# emulated VM on a busy 2-core host the link goes down seconds after it (seen:
# TIMEOUT 5.7 s after it with UCCL_TIMEOUT_MS=3000), as in the cluster suite
NETFAULT_SLACK_MS=${NETFAULT_SLACK_MS:-15000}
export UCCL_TIMEOUT_MS UCCL_TRANSPORTS NETFAULT_SLACK_MS
echo "# verbs: client on $RXE_DEV ($RXE_IP), server on $RXE_DEV2 ($RXE_IP2, veth1), UCCL_TIMEOUT_MS=$UCCL_TIMEOUT_MS"
nf_server() { UCCL_NET_DEVICES=$RXE_DEV2 UCCL_OOB_IFADDR=$RXE_IP2 "$prog" server "$dir" & }
nf_client() { UCCL_NET_DEVICES=$RXE_DEV UCCL_OOB_IFADDR=$RXE_IP "$prog" client "$dir" & }
nf_fault() { ip link set veth1 down && echo "# link veth1 ($RXE_DEV2) down mid-transfer"; }
nf_restore() { link_up && echo "# link veth1 up again"; }
nf_run $((2 * UCCL_TIMEOUT_MS / 1000 + 30)) || exit 1
echo "PASS: netfault-verbs: link down -> timeout error, clean close, new connection works"
