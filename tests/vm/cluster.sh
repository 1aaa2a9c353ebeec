#!/bin/bash
# tests/vm/cluster.sh CMD [ARG...]: run CMD on node0 of a cluster of two QEMU
# VMs, node0 (192.0.2.11) and node1 (192.0.2.12): each its own kernel,
# hostname, virtio NIC eth0 and Soft-RoCE device rxe0 on it, the two NICs
# joined by a private link (QEMU dgram netdevs over unix sockets: no traffic
# leaves this machine). mpirun on node0 starts ranks on both through
# tests/vm/agent.sh (dropbear): `mpirun --hostfile "$VM_HOSTFILE" -np 4`
# puts ranks 0-1 on node0, 2-3 on node1. Both VMs see this machine's file
# system as run.sh does (read-only, the current directory, tests/vm and each
# directory in RXE_VM_SHARE read-write).
#   tests/vm/cluster.sh --check   exit 0 when this machine can boot it, else
#                                 print why and exit 1
# In CMD's environment (and, through the agent, the ranks'): RXE_DEV=rxe0,
#   RXE_IP (the node's address), RXE_GID_INDEX, VM_NODE (node0 or node1),
#   VM_HOSTFILE (2 slots per node), OMPI_MCA_plm_rsh_agent, HOME, TMPDIR,
#   OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1
# Settings: as run.sh (RXE_VM_MEM and RXE_VM_CPUS per VM); RXE_VM_MTU (eth0's
#   MTU on both nodes, default 9000).
# Faults: CMD may ask for the node1 VM to be killed, or the link between the
#   nodes taken down and up (QEMU's set_link), with tests/vm/fault.sh.
# Exit status: CMD's own; 124 on timeout; 125 when the cluster could not be
# set up. See tests/vm/README.md.
set -uo pipefail
VM_NAME=cluster.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$(readlink -f "$0")")/lib.sh"

case ${1:-} in
"" | -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 125 ;;
--check) vm_preflight cluster; exit ;;
esac
# eth0's MTU on both nodes (rxe's RoCE MTU follows it: 1024 at 1500, 4096 from
# 4200 up; 4 times fewer packets to emulate, send, acknowledge and retry)
VM_MTU=${RXE_VM_MTU:-9000}
reason=$(vm_preflight cluster) || vm_fail "$reason"
initrd=$(vm_initrd) || exit 125

dir=$(mktemp -d /tmp/uccl-cluster.XXXXXX) || vm_fail "mktemp"
# shellcheck disable=SC2317 # called by the trap
stop_nodes() {
	local p
	for p in "$dir"/node*/qemu.pid "$dir"/*.pid; do [ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
	wait
	rm -rf "$dir"
}
trap stop_nodes EXIT
if ! dropbearkey -t ed25519 -f "$dir/host_key" >/dev/null 2>&1 ||
	! dropbearkey -t ed25519 -f "$dir/id" >/dev/null 2>&1 ||
	! dropbearkey -y -f "$dir/id" | grep '^ssh-' >"$dir/id.pub"; then
	vm_fail "dropbearkey failed"
fi
printf '192.0.2.%d node%d\n' 11 0 12 1 >"$dir/hosts"
printf 'node%d slots=2\n' 0 1 >"$dir/hostfile"
IFS=: read -ra extra <<<"${RXE_VM_SHARE:-}"

node_ctl() { # node_ctl I: the control directory of node I (0 runs CMD)
	local ctl=$dir/node$1
	mkdir "$ctl" || vm_fail "cannot create $ctl"
	cp "$dir"/{host_key,id,id.pub,hosts,hostfile} "$ctl/" || vm_fail "cannot set up $ctl"
	{
		echo "VM_MODE=node VM_HOSTNAME=node$1 VM_IP=192.0.2.$((11 + $1)) VM_MTU=$VM_MTU"
		printf 'VM_AGENT=%q VM_MAIN=%d VM_PEERS=%s\n' "$VM_DIR/agent.sh" $(($1 == 0)) \
			"$([ "$1" = 0 ] && echo node1)"
	} >"$ctl/config"
	vm_shares "$PWD" "$VM_DIR" "${extra[@]}" >"$ctl/shares"
}

node_qemu() { # node_qemu I: boot node I, its NIC linked to the other node's
	vm_qemu "$dir/node$1" "$initrd" -pidfile "$dir/node$1/qemu.pid" \
		-chardev "pipe,id=mon,path=$dir/mon$1" -mon chardev=mon,mode=readline \
		-netdev "dgram,id=n0,local.type=unix,local.path=$dir/sock$1,remote.type=unix,remote.path=$dir/sock$((1 - $1))" \
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:00:02:1$1"
}

# fault_server: runs the faults node0's command asks for (tests/vm/fault.sh
# writes node0/fault.req, one line: "kill node1", "link off" or "link on";
# the answer goes to node0/fault.ack). The link is taken down on both ends
# through each QEMU's monitor (a pipe chardev).
fault_server() {
	local req rc i
	for i in 0 1; do cat "$dir/mon$i.out" >/dev/null 2>&1 & done
	while sleep 0.2; do
		[ -s "$dir/node0/fault.req" ] || continue
		req=$(cat "$dir/node0/fault.req")
		rm -f "$dir/node0/fault.req"
		case $req in
		"kill node1") kill -9 "$(cat "$dir/node1/qemu.pid")"; rc=$? ;;
		"link off" | "link on")
			rc=0
			for i in 0 1; do
				# shellcheck disable=SC2016 # expanded by that sh
				timeout 5 sh -c 'echo "set_link n0 $1" >"$2"' sh "${req#link }" "$dir/mon$i.in" || rc=1
			done ;;
		*) rc=2 ;;
		esac
		echo "$req: $rc" >"$dir/node0/fault.ack"
	done
}

node_ctl 0
node_ctl 1
mkfifo "$dir"/mon{0,1}.{in,out} || vm_fail "mkfifo"
fault_server &
echo $! >"$dir/fault_server.pid"
vm_write_cmd "$dir/node0" "$@"
node_qemu 1 >"$dir/node1.log" 2>&1 &
node_qemu 0
qrc=$?
[ "$qrc" = 124 ] && { echo "$VM_NAME: timed out after ${VM_TIMEOUT}s" >&2; exit 124; }
if [ ! -s "$dir/node0/rc" ]; then
	echo "$VM_NAME: node1's console:" >&2
	tail -20 "$dir/node1.log" >&2
	vm_fail "node0 stopped before the command finished (qemu status $qrc; RXE_VM_VERBOSE=1 shows why)"
fi
rc=$(cat "$dir/node0/rc")
[ "$rc" = 125 ] && { echo "$VM_NAME: node1's console:" >&2; tail -20 "$dir/node1.log" >&2; }
exit "$rc"
