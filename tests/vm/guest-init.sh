#!/bin/busybox sh
# shellcheck shell=dash
# tests/vm/guest-init.sh: the guest's /init (busybox sh, PID 1), copied into
# the initramfs by lib.sh. Loads the modules, mounts the host's root
# read-only over 9p (with tmpfs on /tmp, /run, /root, /var/tmp) and the shared
# work directories read-write at their own paths, sets up the network and the
# Soft-RoCE devices as /ctl/config says, and runs /ctl/cmd.sh under bash
# chrooted into the host's root, writing its status to /ctl/rc.
# /ctl/config (written by run.sh or cluster.sh) sets:
#   VM_MODE=pair  one VM: rxe0 and rxe1 on the two ends of a veth pair, and
#                 a second rail: rxe2 and rxe3 on a second veth pair
#   VM_MODE=node  one node of a cluster (cluster.sh): VM_HOSTNAME, VM_IP on
#                 the virtio NIC eth0 (MTU VM_MTU) with rxe0 on it, /ctl/hosts as
#                 /etc/hosts, /ctl/hostfile for mpirun, dropbear with the keys
#                 /ctl/host_key, /ctl/id{,.pub} for the launch agent VM_AGENT;
#                 VM_MAIN=1 runs the command once every host in VM_PEERS
#                 answers the agent, the other nodes only serve
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo @@uccl-vm@@
die() { echo "uccl-vm guest: $*"; [ -d /ctl/. ] && echo 125 >/ctl/rc; poweroff -f; }
while read -r m; do
	insmod "/lib/modules/$m" || echo "uccl-vm guest: insmod $m failed"
done </lib/modules/order
o=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o $o ctl /ctl || die "cannot mount the control share"
# shellcheck disable=SC1091 # written by the host
. /ctl/config
R=/newroot
mount -t 9p -o $o,ro,cache=loose hostroot $R || die "cannot mount the host root"
for d in tmp run var/tmp; do mount -t tmpfs tmpfs $R/$d; done
mount -t tmpfs -o mode=0700 tmpfs $R/root # dropbear wants a private home
mount -t proc proc $R/proc
mount -t sysfs sys $R/sys
mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/pts $R/dev/shm $R/run/uccl-vm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
i=0
while read -r d; do
	mkdir -p "$R$d" 2>/dev/null
	mount -t 9p -o $o "share$i" "$R$d" || die "cannot mount the work directory $d"
	i=$((i + 1))
done </ctl/shares
hostname "$VM_HOSTNAME"
C="chroot $R /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin"
$C sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
	net.ipv4.conf.all.accept_local=1 net.ipv6.conf.default.disable_ipv6=1 \
	net.ipv6.conf.all.disable_ipv6=1
$C ip link set lo up
E=$R/run/uccl-vm/env

pair_net() { # rxe0 on veth0 (192.0.2.1), rxe1 on veth1 (192.0.2.2)
	$C ip link add veth0 type veth peer name veth1 || die "cannot create the veth pair"
	$C ip addr add 192.0.2.1/24 dev veth0
	$C ip addr add 192.0.2.2/24 dev veth1
	for i in veth0 veth1; do
		$C sysctl -qw net.ipv4.conf.$i.rp_filter=0 net.ipv4.conf.$i.accept_local=1
		$C ip link set $i up
	done
	# Each address is local, so the kernel would loop traffic between them
	# through lo, where rxe does not listen: route locally sent packets out
	# the veth instead.
	$C ip rule add pref 100 lookup local
	$C ip rule del pref 0
	$C ip rule add pref 10 iif lo to 192.0.2.2 lookup 12
	$C ip rule add pref 11 iif lo to 192.0.2.1 lookup 11
	$C ip route add 192.0.2.2 dev veth0 src 192.0.2.1 table 12
	$C ip route add 192.0.2.1 dev veth1 src 192.0.2.2 table 11
	# A veth hands each packet to the peer's backlog (1000 by default): rxe's
	# bursts overflowed it (softnet drops, the responder's ACKs dropped at
	# veth TX, each loss an RC timeout); every command here gets a deep one,
	# not only check.sh and the benches
	$C sysctl -qw net.core.netdev_max_backlog=100000
	$C rdma link add rxe0 type rxe netdev veth0 || die "cannot add rxe0"
	$C rdma link add rxe1 type rxe netdev veth1 || die "cannot add rxe1"
	{
		echo "export RXE_DEV=rxe0 RXE_IP=192.0.2.1 RXE_DEV2=rxe1 RXE_IP2=192.0.2.2"
		# rail 0 (the control rail) down and up, as RXE_RAIL_DOWN/UP for rail 1
		echo "export RXE_RAIL0_DOWN='ip link set veth0 down'"
		echo "export RXE_RAIL0_UP='ip link set veth0 up && ip route replace 192.0.2.2 dev veth0 src 192.0.2.1 table 12 && ip route replace 192.0.2.1 dev veth1 src 192.0.2.2 table 11'"
	} >$E
	rail_net
}

rail_net() { # a second rail, its own network: rxe2 on veth2 (198.51.100.1), rxe3 on veth3 (.2)
	$C ip link add veth2 type veth peer name veth3 || die "cannot create the second veth pair"
	$C ip addr add 198.51.100.1/24 dev veth2
	$C ip addr add 198.51.100.2/24 dev veth3
	for i in veth2 veth3; do
		$C sysctl -qw net.ipv4.conf.$i.rp_filter=0 net.ipv4.conf.$i.accept_local=1
		$C ip link set $i up
	done
	$C ip rule add pref 12 iif lo to 198.51.100.2 lookup 14
	$C ip rule add pref 13 iif lo to 198.51.100.1 lookup 13
	$C ip route add 198.51.100.2 dev veth2 src 198.51.100.1 table 14
	$C ip route add 198.51.100.1 dev veth3 src 198.51.100.2 table 13
	$C rdma link add rxe2 type rxe netdev veth2 || die "cannot add rxe2"
	$C rdma link add rxe3 type rxe netdev veth3 || die "cannot add rxe3"
	{
		echo "export RXE_RAIL_DEV=rxe2 RXE_RAIL_DEV2=rxe3 RXE_RAIL_IP=198.51.100.1 RXE_RAIL_IP2=198.51.100.2"
		# taking the rail's link down drops its routes: up puts them back
		echo "export RXE_RAIL_DOWN='ip link set veth2 down'"
		echo "export RXE_RAIL_UP='ip link set veth2 up && ip route replace 198.51.100.2 dev veth2 src 198.51.100.1 table 14 && ip route replace 198.51.100.1 dev veth3 src 198.51.100.2 table 13'"
	} >>$E
}

node_net() { # rxe0 on eth0 ($VM_IP), /etc/hosts, dropbear on port 22
	$C ip link set eth0 mtu "${VM_MTU:-1500}" || die "eth0 refuses mtu ${VM_MTU:-1500}"
	$C ip link set eth0 up || die "no eth0 (virtio NIC)"
	$C ip addr add "$VM_IP/24" dev eth0
	$C rdma link add rxe0 type rxe netdev eth0 || die "cannot add rxe0"
	# as check.sh: a deep backlog keeps the emulated CPU from dropping bursts
	$C sysctl -qw net.core.netdev_max_backlog=100000
	# the command asks the host for faults (tests/vm/fault.sh) through /ctl
	mkdir -p $R/run/uccl-vm/ctl && mount -o bind /ctl $R/run/uccl-vm/ctl
	{ echo "127.0.0.1 localhost"; cat /ctl/hosts; } >$R/run/uccl-vm/hosts
	mount -o bind $R/run/uccl-vm/hosts $R/etc/hosts || die "cannot bind /etc/hosts"
	cp /ctl/hostfile $R/run/uccl-vm/hostfile
	cp /ctl/host_key /ctl/id $R/run/uccl-vm/ && chmod 600 $R/run/uccl-vm/host_key $R/run/uccl-vm/id
	mkdir -m 700 $R/root/.ssh
	cp /ctl/id.pub $R/root/.ssh/authorized_keys
	$C dropbear -r /run/uccl-vm/host_key -s -j -k -p 22 -P /run/uccl-vm/dropbear.pid ||
		die "cannot start dropbear"
	{
		echo "export RXE_DEV=rxe0 RXE_IP=$VM_IP VM_NODE=$VM_HOSTNAME VM_HOSTFILE=/run/uccl-vm/hostfile"
		echo "export OMPI_MCA_plm_rsh_agent=$VM_AGENT"
	} >$E
}

case $VM_MODE in
pair) pair_net ;;
node) node_net ;;
*) die "unknown VM_MODE '$VM_MODE'" ;;
esac
gid=""
for n in 0 1 2 3 4 5 6 7; do
	g=$(cat /sys/class/infiniband/rxe0/ports/1/gids/$n 2>/dev/null)
	case $g in 0000:0000:0000:0000:0000:ffff:*) gid=$n; break ;; esac
done
[ -n "$gid" ] || die "rxe0 has no IPv4 GID"
{
	echo "export RXE_GID_INDEX=$gid HOME=/tmp/rxe-home TMPDIR=/tmp"
	echo "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
	echo "mkdir -p \$HOME"
} >>$E
if [ "${VM_MAIN:-1}" != 1 ]; then # a serving node: up until the host stops it
	echo ready >/ctl/ready
	while :; do sleep 3600; done
fi
for h in ${VM_PEERS:-}; do # every peer answers the launch agent before the command runs
	n=0
	until $C /bin/bash -c ". /run/uccl-vm/env; $VM_AGENT $h true" >$R/tmp/.agent.out 2>&1; do
		n=$((n + 1))
		[ $n -lt 300 ] || die "$h does not answer the launch agent: $(cat $R/tmp/.agent.out)"
		[ $((n % 30)) = 0 ] && echo "uccl-vm guest: waiting for $h: $(cat $R/tmp/.agent.out)"
		sleep 1
	done
done
cat $E /ctl/cmd.sh >$R/tmp/.uccl-vm-cmd.sh
$C /bin/bash /tmp/.uccl-vm-cmd.sh </dev/null
echo $? >/ctl/rc
sync
poweroff -f
